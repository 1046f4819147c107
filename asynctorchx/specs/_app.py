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
    """What is restarted when a replica fails: it, every replica, or its role (TorchX's).

    A backend's dry-run raises ``ValueError`` naming the role for a policy it does not support.
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
    """A set of identical replicas doing one duty in an :class:`AppDef` (``torchx.specs.api.Role``).

    Args:
        name: unique in its app.
        image: a directory (``local_dir``) or Docker image (``local_docker``).
        min_replicas: the fewest replicas an elastic job runs with (``None``: all).
        base_image: deprecated.
        entrypoint: the command (never macro-substituted).
        args: its arguments; macros substituted per replica.
        env: variables added to each replica's environment; macros substituted.
        num_replicas: how many replicas; ``dryrun`` refuses fewer than 1.
        max_retries: how many times a failed replica (or app) is restarted.
        retry_policy: what is restarted, see :class:`RetryPolicy`.
        resource: what one replica needs.
        port_map: port name to number, e.g. ``{"tensorboard": 6006}``.
        metadata: free-form, keyed ``$scheduler.$key``.
        mounts: see :func:`parse_mounts`.
        workspace: local projects built into the image at submit (``None``: the image as is).
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
        """Modify the scheduler request for this role; called once per role at dry-run."""
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
