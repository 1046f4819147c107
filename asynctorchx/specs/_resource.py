"""Resources and macros: :class:`Resource`, :data:`NULL_RESOURCE`, :class:`macros`.

Also the placeholders :data:`MISSING`, :data:`NONE` and :data:`ALL`. Names, fields and
defaults follow ``torchx.specs.api`` (TorchX 0.7.0). Re-exported by
:mod:`asynctorchx.specs.api` and :mod:`asynctorchx.specs`.
"""

from __future__ import annotations

import copy
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
#: The scheduler name that stands for every scheduler (TorchX's ``ALL``).
ALL: str = "all"


# --------------------------------------------------------------------------- resources


def _check_figure(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """``cpu``, ``gpu``, ``memMB``: an int or a float (not a bool, a string or None).

    Only the type: the values a backend accepts (``-2``, ``nan``) are its own to check
    at dry run (``local_docker`` refuses them there, naming the role).
    """
    if not isinstance(value, int | float) or isinstance(value, bool):
        example = {"cpu": "cpu=2", "gpu": "gpu=1", "memMB": "memMB=4096"}[attribute.name]
        fix = f"give a number, e.g. {example} (-1 leaves it unset); for a named host type"
        fix += " use specs.named_resources[...] or the component's -h"
        raise InvalidResourceError(attribute.name, value, fix)


def _check_capabilities(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    fix = 'give a dict, e.g. capabilities={"node.kubernetes.io/instance-type": "p4d"}'
    if not isinstance(value, dict):
        raise InvalidResourceError(attribute.name, value, fix)


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

    @staticmethod
    def copy(original: Resource, **capabilities: Any) -> Resource:
        """Return a copy of ``original`` with ``capabilities`` merged over its own.

        A capability given here wins over the same key in ``original``.
        """
        return attrs.evolve(
            original,
            capabilities={**original.capabilities, **capabilities},
            devices=dict(original.devices),
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
