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
#: A value that could not be determined, e.g. an image a backend cannot read back.
UNKNOWN: str = "<UNKNOWN>"
#: The scheduler name that stands for every scheduler (TorchX's ``ALL``).
ALL: str = "all"


def TORCHX_HOME(*subdir_paths: str) -> pathlib.Path:
    """Return ``$TORCHX_HOME`` (or ``~/.torchx``) joined with ``subdir_paths``, created if missing.

    Raises:
        OSError: the directory cannot be created.
    """
    home = pathlib.Path(os.environ.get("TORCHX_HOME", pathlib.Path.home() / ".torchx"))
    path = home.joinpath(*subdir_paths)
    path.mkdir(parents=True, exist_ok=True)
    return path


class resource_tags:
    """The well-known keys of :attr:`Resource.tags` (``torchx.plugins.resource_tags``)."""

    #: The registered name the resource was looked up by.
    RESOURCE_NAME: str = "torchx/named_resources.name"
    #: True when the resource is a fractional slice of a larger host.
    IS_FRACTIONAL: str = "torchx/named_resources.is_fractional"


def _check_figure(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        example = {"cpu": "cpu=2", "gpu": "gpu=1", "memMB": "memMB=4096"}[attribute.name]
        fix = f"give a number, e.g. {example} (-1 leaves it unset); for a named host type"
        fix += " use specs.resource(h=...) or the component's -h"
        raise InvalidResourceError(attribute.name, value, fix)


_DICT_FIXES = {
    "capabilities": 'give a dict, e.g. capabilities={"node.kubernetes.io/instance-type": "p4d"}',
    "devices": 'give a dict of device name to count, e.g. devices={"vpc.amazonaws.com/efa": 1}',
    "tags": 'give a dict, e.g. tags={"team": "ml"}',
}


def _check_dict(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, dict):
        raise InvalidResourceError(attribute.name, value, _DICT_FIXES[attribute.name])


def _check_devices(_: object, attribute: attrs.Attribute[Any], value: dict[Any, Any]) -> None:
    fix = _DICT_FIXES["devices"]
    for name, count in value.items():
        if not isinstance(name, str):
            raise InvalidResourceError(attribute.name, name, f"a device name is a str: {fix}")
        if not isinstance(count, int) or isinstance(count, bool):
            raise InvalidResourceError(
                attribute.name, count, f"the count of {name!r} is an int: {fix}"
            )


@attrs.define
class Resource:
    """Resource requirements of one replica (``torchx.specs.api.Resource``).

    Args:
        cpu: logical CPU cores (``-1``: unset).
        gpu: GPUs (``-1``: unset).
        memMB: memory in MB (``-1``: unset).
        capabilities: extra hardware specs, read by the scheduler.
        devices: device name to count, e.g. ``{"vpc.amazonaws.com/efa": 1}``.
        tags: metadata about the resource; :class:`resource_tags` names TorchX's keys.

    Raises:
        InvalidResourceError: a field, given or assigned, has the wrong type.
    """

    cpu: int = attrs.field(validator=_check_figure)
    gpu: int = attrs.field(validator=_check_figure)
    memMB: int = attrs.field(validator=_check_figure)
    capabilities: dict[str, Any] = attrs.field(factory=dict, validator=_check_dict)
    devices: dict[str, int] = attrs.field(factory=dict, validator=[_check_dict, _check_devices])
    tags: dict[str, object] = attrs.field(factory=dict, validator=_check_dict)

    def is_fractional(self) -> bool:
        """True when the tag :attr:`resource_tags.IS_FRACTIONAL` is true."""
        return bool(self.tags.get(resource_tags.IS_FRACTIONAL, False))

    def get_resource_name(self) -> str | None:
        """Return the name this was looked up by, ``None`` for raw figures."""
        name = self.tags.get(resource_tags.RESOURCE_NAME)
        return None if name is None else str(name)

    @staticmethod
    def copy(original: Resource, **capabilities: Any) -> Resource:
        """Return a copy of ``original`` with ``capabilities`` merged over its own."""
        return attrs.evolve(
            original,
            capabilities={**original.capabilities, **capabilities},
            devices=dict(original.devices),
            tags=dict(original.tags),
        )


#: The "no requirement" resource: every figure ``-1``.
NULL_RESOURCE: Resource = Resource(cpu=-1, gpu=-1, memMB=-1)


class macros:
    """Placeholders substituted per replica in args, env and metadata (``torchx.specs.api``)."""

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
            """A copy of ``role``, macros substituted (never in the entrypoint or image)."""
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
            """Substitute the macros in ``arg``; unknown ``${...}`` are kept."""
            return string.Template(arg).safe_substitute(attrs.asdict(self))
