"""Resources, macros and placeholders (``torchx.specs.api``)."""

from __future__ import annotations

import copy
import os
import pathlib
import string
from typing import TYPE_CHECKING, Any

import attrs

from asynctorchx.errors import InvalidResourceError

if TYPE_CHECKING:
    from asynctorchx.specs._app import Role


#: Placeholder for a value a component must fill in (TorchX's ``MISSING``).
MISSING: str = "<MISSING>"
#: Placeholder for "no value" in status messages (TorchX's ``NONE``).
NONE: str = "<NONE>"
#: A value that could not be determined, e.g. an image a backend cannot read back
#: (TorchX's ``UNKNOWN``); unlike :data:`MISSING` it does not claim the value was unset.
UNKNOWN: str = "<UNKNOWN>"
#: The scheduler name that stands for every scheduler (TorchX's ``ALL``).
ALL: str = "all"


def TORCHX_HOME(*subdir_paths: str) -> pathlib.Path:
    """Return TorchX's dot-directory, or a directory under it, creating it if missing.

    The directory is ``$TORCHX_HOME``, or ``~/.torchx`` when that variable is unset,
    as ``torchx.specs.TORCHX_HOME``.

    Args:
        subdir_paths: path parts joined under the dot-directory, e.g. ``"conda-pack-out"``.

    Raises:
        OSError: the directory cannot be created.
    """
    home = pathlib.Path(os.environ.get("TORCHX_HOME", pathlib.Path.home() / ".torchx"))
    path = home.joinpath(*subdir_paths)
    path.mkdir(parents=True, exist_ok=True)
    return path


class resource_tags:
    """The well-known keys of :attr:`Resource.tags` (``torchx.plugins.resource_tags``).

    Every resource looked up in :data:`~asynctorchx.specs.named_resources` carries
    :attr:`RESOURCE_NAME`; read both through :meth:`Resource.get_resource_name` and
    :meth:`Resource.is_fractional`.
    """

    #: The registered name the resource was looked up by.
    RESOURCE_NAME: str = "torchx/named_resources.name"
    #: True when the resource is a fractional slice of a larger host.
    IS_FRACTIONAL: str = "torchx/named_resources.is_fractional"


# --------------------------------------------------------------------------- resources


def _check_figure(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """``cpu``, ``gpu``, ``memMB``: an int or a float (not a bool, a string or None).

    Only the type: the values a backend accepts (``-2``, ``nan``) are its own to check
    at dry run (``local_docker`` refuses them there, naming the role).
    """
    if not isinstance(value, int | float) or isinstance(value, bool):
        example = {"cpu": "cpu=2", "gpu": "gpu=1", "memMB": "memMB=4096"}[attribute.name]
        fix = f"give a number, e.g. {example} (-1 leaves it unset); for a named host type"
        fix += " use specs.resource(h=...) or the component's -h"
        raise InvalidResourceError(attribute.name, value, fix)


def _check_capabilities(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    fix = 'give a dict, e.g. capabilities={"node.kubernetes.io/instance-type": "p4d"}'
    if not isinstance(value, dict):
        raise InvalidResourceError(attribute.name, value, fix)


def _check_tags(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, dict):
        raise InvalidResourceError(attribute.name, value, 'give a dict, e.g. tags={"team": "ml"}')


def _check_devices(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    fix = 'give a dict of device name to count, e.g. devices={"vpc.amazonaws.com/efa": 1}'
    if not isinstance(value, dict):
        raise InvalidResourceError(attribute.name, value, fix)
    for name, count in value.items():
        if not isinstance(name, str):
            raise InvalidResourceError(attribute.name, name, f"a device name is a str: {fix}")
        if not isinstance(count, int) or isinstance(count, bool):
            raise InvalidResourceError(
                attribute.name, count, f"the count of {name!r} is an int: {fix}"
            )


@attrs.define
class Resource:
    """Resource requirements of one replica of a :class:`Role`.

    Args:
        cpu: number of logical CPU cores (``-1``: unset). How a logical core maps to a
            physical one is the scheduler's; ``local_docker`` turns it into nano CPUs.
        gpu: number of GPUs (``-1``: unset).
        memMB: memory in MB (``-1``: unset).
        capabilities: extra hardware specs, interpreted by the scheduler.
        devices: device name to count, e.g. ``{"vpc.amazonaws.com/efa": 1}``.
        tags: metadata about the resource, keyed by name; schedulers may read it, none
            requests anything from it. :class:`resource_tags` names TorchX's keys.

    Prefer :data:`named_resources` over raw figures, as ``torchx.specs.api`` advises.

    Raises:
        InvalidResourceError: a field (given here or assigned later) has the wrong type,
            e.g. ``cpu="x"``; the message names the value and how to write it.
    """

    cpu: int = attrs.field(validator=_check_figure)
    gpu: int = attrs.field(validator=_check_figure)
    memMB: int = attrs.field(validator=_check_figure)
    capabilities: dict[str, Any] = attrs.field(factory=dict, validator=_check_capabilities)
    devices: dict[str, int] = attrs.field(factory=dict, validator=_check_devices)
    tags: dict[str, object] = attrs.field(factory=dict, validator=_check_tags)

    def is_fractional(self) -> bool:
        """Return True when the tag :attr:`resource_tags.IS_FRACTIONAL` is set and true."""
        return bool(self.tags.get(resource_tags.IS_FRACTIONAL, False))

    def get_resource_name(self) -> str | None:
        """Return the name this was looked up by in :data:`~asynctorchx.specs.named_resources`.

        Read from the tag :attr:`resource_tags.RESOURCE_NAME`; ``None`` for a resource
        built from raw figures.
        """
        name = self.tags.get(resource_tags.RESOURCE_NAME)
        return None if name is None else str(name)

    @staticmethod
    def copy(original: Resource, **capabilities: Any) -> Resource:
        """Return a copy of ``original`` with ``capabilities`` merged over its own.

        A capability given here wins over the same key in ``original``.
        """
        return attrs.evolve(
            original,
            capabilities={**original.capabilities, **capabilities},
            devices=dict(original.devices),
            tags=dict(original.tags),
        )


#: The "no requirement" resource: every figure ``-1``.
NULL_RESOURCE: Resource = Resource(cpu=-1, gpu=-1, memMB=-1)


# --------------------------------------------------------------------------- macros


class macros:
    """Placeholders substituted in :attr:`Role.args`, env values and metadata per replica.

    Available macros, as ``torchx.specs.api.macros``: ``img_root`` (root directory of
    the role's image), ``app_id`` (the id the scheduler gave the app), ``replica_id``
    (0..n-1, kept when a replica is replaced), ``rank0_env`` (name of the env var that
    holds the rank 0 host) and ``base_img_root`` (deprecated). The entrypoint and the
    image are never substituted.
    """

    img_root = "${img_root}"
    base_img_root = "${base_img_root}"
    app_id = "${app_id}"
    replica_id = "${replica_id}"
    rank0_env = "${rank0_env}"

    @attrs.define
    class Values:
        """The values a scheduler substitutes for the macros of one replica."""

        img_root: str
        app_id: str
        replica_id: str
        rank0_env: str
        base_img_root: str = "DEPRECATED"

        def apply(self, role: Role) -> Role:
            """Return a copy of ``role`` with the macros substituted.

            Substitutes in ``args``, in ``env`` values and (recursively) in string
            values of ``metadata``; never in ``entrypoint`` or ``image``.
            """
            role = copy.deepcopy(role)
            role.args = [self.substitute(arg) for arg in role.args]
            role.env = {key: self.substitute(value) for key, value in role.env.items()}
            role.metadata = self._apply_nested(role.metadata)
            return role

        def _apply_nested(self, value: Any) -> Any:
            if isinstance(value, str):
                return self.substitute(value)
            if isinstance(value, dict):
                return {key: self._apply_nested(item) for key, item in value.items()}
            if isinstance(value, list):
                return [self._apply_nested(item) for item in value]
            return value

        def substitute(self, arg: str) -> str:
            """Substitute the macros in ``arg``; unknown ``${...}`` are left as they are."""
            return string.Template(arg).safe_substitute(attrs.asdict(self))
