"""The app model: :class:`RetryPolicy`, :class:`Role`, :class:`AppDef` (``torchx.specs.api``)."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

import attrs

from asynctorchx.specs._mounts import Mount
from asynctorchx.specs._resource import MISSING, Resource
from asynctorchx.specs._workspace import Workspace

if TYPE_CHECKING:
    from asynctorchx.specs._dryrun import AppDryRunInfo


class RetryPolicy(str, enum.Enum):
    """What is restarted when a replica fails (``torchx.specs.api.RetryPolicy``).

    - ``REPLICA`` replaces the failed replica only; the others keep running.
    - ``APPLICATION`` restarts every replica of the app. Every scheduler supports it.
    - ``ROLE`` (added after TorchX 0.7.0) restarts every replica of the failed
      replica's role; the other roles keep running.

    ``max_retries`` bounds the restarts. What each backend does with each policy:

    - ``local_cwd``, ``local_dir``: ``REPLICA`` and ``APPLICATION`` as above
      (:mod:`asynctorchx.schedulers.local`); ``ROLE`` is refused.
    - ``local_docker``: whatever the policy, Docker's ``on-failure`` restart policy
      restarts the failed container alone (TorchX's
      ``torchx.schedulers.docker_scheduler`` does the same); ``ROLE`` is refused.
    - ``slurm``: whatever the policy, the whole job requeues itself (as an
      ``APPLICATION`` retry); ``ROLE`` is refused.
    - ``kubernetes``: ``REPLICA`` lets Volcano restart the failed pod, ``APPLICATION``
      restarts the Volcano job; ``ROLE`` is refused (Volcano's ``RestartTask`` action,
      which restarts one task, i.e. one role, could honour it).

    Refused means: the dry-run raises ``ValueError`` naming the role and the policies
    the backend supports, so an app never runs with a retry policy it does not get.
    """

    REPLICA = "REPLICA"
    APPLICATION = "APPLICATION"
    ROLE = "ROLE"


def _int_replicas(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{attribute.name} must be an int, got {value!r}")


def _non_negative(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{attribute.name} must be an int >= 0, got {value!r}")


def _null_resource() -> Resource:
    return Resource(cpu=-1, gpu=-1, memMB=-1)


@attrs.define
class Role:
    """A set of identical replicas that perform one duty in an :class:`AppDef`.

    Args:
        name: the role's name, unique in its app.
        image: the software bundle the replicas run in: a directory for ``local_dir``,
            a Docker image for ``local_docker``, ignored by ``local_cwd``.
        min_replicas: the fewest replicas an elastic job may run with (``None``: all).
        base_image: deprecated, kept for TorchX compatibility.
        entrypoint: the command to run (never macro-substituted).
        args: its arguments; macros are substituted per replica.
        env: environment variables added to each replica's; macros substituted.
        num_replicas: how many replicas to run. ``dryrun`` rejects values below 1.
        max_retries: how many times a failed replica (or app) is restarted.
        retry_policy: what is restarted, see :class:`RetryPolicy`.
        resource: what one replica needs, see :class:`Resource`.
        port_map: port name to port number, e.g. ``{"tensorboard": 6006}``.
        metadata: free-form, keyed ``$scheduler.$key``.
        mounts: bind, volume and device mounts (see :func:`parse_mounts`).
        workspace: local projects built into this role's image when the app is
            submitted (added after TorchX 0.7.0; see :class:`Workspace`). ``None``: the
            image as it is. For role 0, a ``workspace`` given to ``Runner.run`` wins.
    """

    name: str
    image: str
    min_replicas: int | None = None
    base_image: str | None = None
    entrypoint: str = MISSING
    args: list[str] = attrs.field(factory=list)
    env: dict[str, str] = attrs.field(factory=dict)
    num_replicas: int = attrs.field(default=1, validator=_int_replicas)
    max_retries: int = attrs.field(default=0, validator=_non_negative)
    retry_policy: RetryPolicy = RetryPolicy.APPLICATION
    resource: Resource = attrs.field(factory=_null_resource)
    port_map: dict[str, int] = attrs.field(factory=dict)
    metadata: dict[str, Any] = attrs.field(factory=dict)
    mounts: list[Mount] = attrs.field(factory=list)
    workspace: Workspace | None = None

    def pre_proc(self, scheduler: str, dryrun_info: AppDryRunInfo[Any]) -> AppDryRunInfo[Any]:
        """Modify the scheduler request for this role; the default changes nothing.

        Called by ``submit_dryrun`` once per role, in the order of ``AppDef.roles``.
        """
        return dryrun_info


@attrs.define
class AppDef:
    """A distributed application: a name, its roles and free-form metadata.

    Args:
        name: the app's name; schedulers derive the app id from it.
        roles: the roles, each run as ``num_replicas`` replicas.
        metadata: free-form, treated by each scheduler as it sees fit.
    """

    name: str
    roles: list[Role] = attrs.field(factory=list)
    metadata: dict[str, str] = attrs.field(factory=dict)
