"""The application model: :class:`AppDef`, :class:`Role`, :class:`Resource` and friends.

Names, fields, defaults and positional order follow ``torchx.specs`` (TorchX 0.7.0,
seed ``002``), so TorchX code ports by changing the import. The classes are attrs
classes with validators at the boundary: a bad replica count or a wrong type fails
where the object is built, with a message that names the value.
"""

from __future__ import annotations

import copy
import enum
import json
import os
import re
import string
import typing
from collections.abc import Callable, Mapping
from typing import Any, Generic, NamedTuple, TypeVar, Union

import attrs

from asynctorchx.errors import (
    InvalidRunConfigException,
    MalformedAppHandleException,
)

#: Placeholder for a value a component must fill in (TorchX's ``MISSING``).
MISSING: str = "<MISSING>"
#: Placeholder for "no value" in status messages (TorchX's ``NONE``).
NONE: str = "<NONE>"
#: The scheduler name that stands for every scheduler (TorchX's ``ALL``).
ALL: str = "all"

#: A value a scheduler run option may take (TorchX 0.7.0's set, ``dict[str, str]`` included).
CfgVal = Union[str, int, float, bool, list[str], dict[str, str], None]

#: An app handle: ``{scheduler}://{session_name}/{app_id}``.
AppHandle = str

T = TypeVar("T")


# --------------------------------------------------------------------------- resources


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

    Prefer :data:`named_resources` over raw figures (seed 002).
    """

    cpu: int
    gpu: int
    memMB: int
    capabilities: dict[str, Any] = attrs.field(factory=dict)
    devices: dict[str, int] = attrs.field(factory=dict)

    @staticmethod
    def copy(original: Resource, **capabilities: Any) -> Resource:
        """Return a copy of ``original`` with ``capabilities`` merged over its own.

        A capability given here wins over the same key in ``original``.
        """
        merged = {**original.capabilities, **capabilities}
        return Resource(
            cpu=original.cpu,
            gpu=original.gpu,
            memMB=original.memMB,
            capabilities=merged,
            devices=dict(original.devices),
        )


#: The "no requirement" resource: every figure ``-1``.
NULL_RESOURCE: Resource = Resource(cpu=-1, gpu=-1, memMB=-1)


# --------------------------------------------------------------------------- macros


class macros:
    """Placeholders substituted in :attr:`Role.args`, env values and metadata per replica.

    Available macros (seed 002): ``img_root`` (root directory of the role's image),
    ``app_id`` (the id the scheduler gave the app), ``replica_id`` (0..n-1, kept
    when a replica is replaced), ``rank0_env`` (name of the env var that holds the
    rank 0 host) and ``base_img_root`` (deprecated). The entrypoint and the image are
    never substituted.
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


# --------------------------------------------------------------------------- mounts


class MountType(str, enum.Enum):
    """The kinds of mount a role may ask for."""

    BIND = "bind"
    VOLUME = "volume"
    DEVICE = "device"


@attrs.define
class BindMount:
    """Mount a host path into the replica.

    Args:
        src_path: the path on the host.
        dst_path: the path inside the replica.
        read_only: mount it read only.
    """

    src_path: str
    dst_path: str
    read_only: bool = False


@attrs.define
class VolumeMount:
    """Mount a named volume into the replica.

    Args:
        src: the volume's name.
        dst_path: the path inside the replica.
        read_only: mount it read only.
    """

    src: str
    dst_path: str
    read_only: bool = False


@attrs.define
class DeviceMount:
    """Expose a host device in the replica.

    Args:
        src_path: the device on the host, e.g. ``/dev/fuse``.
        dst_path: the device path inside the replica.
        permissions: cgroup permissions, a combination of ``r``, ``w`` and ``m``.
    """

    src_path: str
    dst_path: str
    permissions: str = "rwm"


Mount = Union[BindMount, VolumeMount, DeviceMount]

_MOUNT_KEYS = {
    "type": "type",
    "src": "src",
    "source": "src",
    "dst": "dst",
    "destination": "dst",
    "target": "dst",
    "readonly": "readonly",
    "read_only": "readonly",
    "perm": "perm",
    "permissions": "perm",
}


def parse_mounts(opts: list[str]) -> list[Mount]:
    """Parse Docker-style mount options into mount objects.

    ``opts`` is a list of ``key=value`` (or bare ``readonly``) items; each mount starts
    with ``type=bind|volume|device``, e.g.
    ``["type=bind", "src=/data", "dst=/data", "readonly", "type=volume", "src=v", "dst=/v"]``.
    Items may also be comma-joined: ``["type=bind,src=/data,dst=/data"]``.
    Keys: ``type``; ``src`` (``source``); ``dst`` (``destination``, ``target``);
    ``readonly`` (``read_only``); ``perm`` (``permissions``, devices only). A bind
    mount's ``src`` starting with ``~`` is expanded to the user's home directory (as
    TorchX does; the container engine would take it literally).

    Raises:
        ValueError: an item before the first ``type=``, an unknown type or key, or a
            mount without ``src`` (``dst`` defaults to ``src`` for devices only).
    """
    items = [item.strip() for opt in opts for item in opt.split(",") if item.strip()]
    groups: list[dict[str, str]] = []
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().lower()
        if key not in _MOUNT_KEYS:
            raise ValueError(
                f"unknown mount option {key!r} in {item!r}: use type, src, dst, readonly or perm"
            )
        canonical = _MOUNT_KEYS[key]
        if canonical == "type":
            groups.append({"type": value.strip()})
            continue
        if not groups:
            raise ValueError(
                f"mount option {item!r} comes before any `type=`: start each mount with"
                " type=bind, type=volume or type=device"
            )
        groups[-1][canonical] = value.strip() if sep else "true"
    mounts: list[Mount] = []
    for group in groups:
        kind = group["type"]
        if "src" not in group:
            raise ValueError(f"mount {group} has no `src=`: say what to mount")
        read_only = group.get("readonly", "false").lower() in ("true", "1", "yes", "")
        if kind == MountType.BIND.value:
            if "dst" not in group:
                raise ValueError(f"bind mount {group} has no `dst=`: say where to mount it")
            src_path = group["src"]
            if src_path.startswith("~"):
                src_path = os.path.expanduser(src_path)
            mounts.append(BindMount(src_path, group["dst"], read_only))
        elif kind == MountType.VOLUME.value:
            if "dst" not in group:
                raise ValueError(f"volume mount {group} has no `dst=`: say where to mount it")
            mounts.append(VolumeMount(group["src"], group["dst"], read_only))
        elif kind == MountType.DEVICE.value:
            perm = group.get("perm", "rwm")
            if not perm or set(perm) - set("rwm"):
                raise ValueError(f"device permissions {perm!r} must combine r, w and m")
            mounts.append(DeviceMount(group["src"], group.get("dst", group["src"]), perm))
        else:
            raise ValueError(f"unknown mount type {kind!r}: use bind, volume or device")
    return mounts


# --------------------------------------------------------------------------- roles and apps


class RetryPolicy(str, enum.Enum):
    """What is restarted when a replica fails (seed 002).

    ``REPLICA`` replaces the failed replica only; ``APPLICATION`` restarts every
    replica of the app. Every scheduler supports ``APPLICATION``.
    """

    REPLICA = "REPLICA"
    APPLICATION = "APPLICATION"


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


# --------------------------------------------------------------------------- status


class AppState(int, enum.Enum):
    """The state of an app (seed 002).

    ``UNSUBMITTED`` -> ``SUBMITTED`` -> ``PENDING`` -> ``RUNNING`` -> one of the
    terminal states ``SUCCEEDED``, ``FAILED``, ``CANCELLED``. ``UNKNOWN`` when the
    scheduler cannot tell.
    """

    UNSUBMITTED = 0
    SUBMITTED = 1
    PENDING = 2
    RUNNING = 3
    SUCCEEDED = 4
    FAILED = 5
    CANCELLED = 6
    UNKNOWN = 7

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{self.name} ({self.value})"


#: A replica's state uses the app's states (TorchX's alias).
ReplicaState = AppState

_TERMINAL_STATES = frozenset({AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED})


def is_terminal(state: AppState) -> bool:
    """Return True for ``SUCCEEDED``, ``FAILED`` and ``CANCELLED``."""
    return state in _TERMINAL_STATES


@attrs.define
class ReplicaStatus:
    """The status of one replica.

    Args:
        id: the replica id (0..num_replicas-1).
        state: its state.
        role: the role's name.
        hostname: where it runs (``localhost`` for local schedulers, the container name
            for ``local_docker``).
        structured_error_msg: the JSON error it left (TorchElastic error file), or ``<NONE>``.
        exit_code: its exit code once it exited, else ``None`` (an asynctorchx addition).
    """

    id: int
    state: AppState
    role: str
    hostname: str
    structured_error_msg: str = NONE
    exit_code: int | None = None


@attrs.define
class RoleStatus:
    """The replicas' statuses of one role."""

    role: str
    replicas: list[ReplicaStatus] = attrs.field(factory=list)


class AppStatusError(Exception):
    """Raised by :meth:`AppStatus.raise_for_status` for an app that did not succeed."""

    def __init__(self, status: AppStatus, *args: object) -> None:
        super().__init__(*args)
        self.status = status


@attrs.define
class AppStatus:
    """The runtime status of an app, as the runner reports it.

    Args:
        state: the app's state.
        num_restarts: how many times it (or a replica) was restarted; ``-1``: unknown.
        msg: a free-form message from the scheduler.
        structured_error_msg: a JSON error, or ``<NONE>``.
        ui_url: where to look at the app (``file://`` log dir for local schedulers).
        roles: the replicas' statuses, role by role (of the latest attempt).
    """

    state: AppState
    num_restarts: int = 0
    msg: str = ""
    structured_error_msg: str = NONE
    ui_url: str | None = None
    roles: list[RoleStatus] = attrs.field(factory=list)

    def is_terminal(self) -> bool:
        """Return True once the app reached ``SUCCEEDED``, ``FAILED`` or ``CANCELLED``."""
        return is_terminal(self.state)

    def raise_for_status(self) -> None:
        """Raise :class:`AppStatusError` unless the state is ``SUCCEEDED``."""
        if self.state != AppState.SUCCEEDED:
            raise AppStatusError(self, f"job did not succeed: {self}")

    def format(self, filter_roles: list[str] | None = None) -> str:
        """Return a readable, multi-line description; ``filter_roles`` keeps only those roles."""
        lines = [
            "AppStatus:",
            f"  State: {self.state.name}",
            f"  Num Restarts: {self.num_restarts}",
            f"  Msg: {self.msg or NONE}",
            f"  Structured Error Msg: {self.structured_error_msg}",
            f"  UI URL: {self.ui_url or NONE}",
            "  Roles:",
        ]
        for role_status in self.roles:
            if filter_roles and role_status.role not in filter_roles:
                continue
            lines.append(f"    {role_status.role}:")
            for replica in role_status.replicas:
                exit_code = "" if replica.exit_code is None else f" exit_code={replica.exit_code}"
                lines.append(
                    f"      {replica.role}/{replica.id} {replica.state.name} on"
                    f" {replica.hostname}{exit_code}"
                )
                if replica.structured_error_msg != NONE:
                    lines.append(f"        error: {replica.structured_error_msg}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


# --------------------------------------------------------------------------- dry run


@attrs.define
class AppDryRunInfo(Generic[T]):
    """What a scheduler would submit for an app: the request, and how to print it.

    Args:
        request: the scheduler's own request object (e.g. ``PopenRequest``, ``DockerJob``).
        fmt: turns the request into readable text; ``str(info)`` calls it.

    The runner also records the app, the cfg and the scheduler name on it
    (``_app``, ``_cfg``, ``_scheduler``) so ``Runner.schedule`` can submit it.
    """

    request: T
    fmt: Callable[[T], str] = attrs.field(default=repr)
    _app: AppDef | None = attrs.field(default=None, init=False)
    _cfg: Mapping[str, CfgVal] | None = attrs.field(default=None, init=False)
    _scheduler: str | None = attrs.field(default=None, init=False)

    def __str__(self) -> str:
        return self.fmt(self.request)


# --------------------------------------------------------------------------- handles


class ParsedAppHandle(NamedTuple):
    """The parts of an app handle ``{scheduler_backend}://{session_name}/{app_id}``.

    A named tuple, as in TorchX, so ``scheduler, session, app_id = parse_app_handle(h)``
    and ``parse_app_handle(h)[2]`` work as well as the attribute names.

    Args:
        scheduler_backend: the scheduler's name, e.g. ``local_cwd``.
        session_name: the runner session that started the app (may be empty).
        app_id: the id the scheduler gave the app.
    """

    scheduler_backend: str
    session_name: str
    app_id: str


# fullmatch, not match with `$`: `$` also matches before a trailing newline.
_APP_HANDLE = re.compile(
    r"(?P<scheduler_backend>[^:/\s]+)://(?P<session_name>[^/]*)/(?P<app_id>.+)"
)


def make_app_handle(scheduler_backend: str, session_name: str, app_id: str) -> AppHandle:
    """Return the handle ``{scheduler_backend}://{session_name}/{app_id}``."""
    return f"{scheduler_backend}://{session_name}/{app_id}"


def parse_app_handle(app_handle: AppHandle) -> ParsedAppHandle:
    """Split an app handle into its parts.

    Raises:
        MalformedAppHandleException: ``app_handle`` is not of the form
            ``{scheduler_backend}://{session_name}/{app_id}``.
    """
    match = _APP_HANDLE.fullmatch(app_handle)
    if match is None:
        raise MalformedAppHandleException(app_handle)
    return ParsedAppHandle(**match.groupdict())


# --------------------------------------------------------------------------- run options


@attrs.define
class runopt:
    """One scheduler run option: its default, type, whether it is required, and its help."""

    default: CfgVal
    opt_type: Any
    is_required: bool
    help: str


def _container_kind(tp: Any) -> str | None:
    """``"list"`` for ``list[str]``/``List[str]``/``list``, ``"dict"`` for
    ``dict[str, str]``/``Dict[str, str]``/``dict``, else ``None``.

    ``typing.List[str]`` and ``list[str]`` compare unequal and neither works with
    ``isinstance``, so run option types are compared by their origin.
    """
    origin = typing.get_origin(tp) or tp
    if origin is list:
        return "list"
    if origin is dict:
        return "dict"
    return None


def get_type_name(tp: Any) -> str:
    """Return the name of a run option type as help and errors print it.

    Args:
        tp: ``str``, ``int``, ``float``, ``bool``, a ``list[str]``/``typing.List[str]``
            or ``dict[str, str]``/``typing.Dict[str, str]`` type, or any other object.

    Returns:
        ``"str"``, ``"int"``, ... for classes, ``"List[str]"`` / ``"Dict[str, str]"``
        for the container types, ``str(tp)`` for anything else. Never raises.
    """
    kind = _container_kind(tp)
    if kind == "list":
        return "List[str]"
    if kind == "dict":
        return "Dict[str, str]"
    return getattr(tp, "__name__", str(tp))


class runopts:
    """The run options a scheduler accepts: name, type, default, required, help.

    Returned by ``Scheduler.run_opts()``; ``resolve`` checks a user's cfg against it and
    fills in the defaults; ``str(opts)`` reads like ``--help`` (seed 002).
    """

    def __init__(self) -> None:
        self._opts: dict[str, runopt] = {}

    def __iter__(self) -> Any:
        return iter(self._opts.items())

    def __len__(self) -> int:
        return len(self._opts)

    def __contains__(self, key: object) -> bool:
        return key in self._opts

    @staticmethod
    def is_type(obj: CfgVal, tp: Any) -> bool:
        """Return True if ``obj`` is of type ``tp``.

        Unlike ``isinstance`` it accepts the container types of run options:
        ``list[str]`` / ``typing.List[str]`` (a list of strings) and ``dict[str, str]`` /
        ``typing.Dict[str, str]`` (a mapping of strings to strings). ``bool`` is not
        taken for ``int``, nor ``int`` for ``bool``; an ``int`` is accepted for ``float``.

        Args:
            obj: the value to check.
            tp: ``str``, ``int``, ``float``, ``bool`` or one of the container types above.

        Returns:
            Whether ``obj`` is a valid value of an option of type ``tp``. Never raises.
        """
        kind = _container_kind(tp)
        if kind == "list":
            return isinstance(obj, list) and all(isinstance(item, str) for item in obj)
        if kind == "dict":
            return isinstance(obj, dict) and all(
                isinstance(key, str) and isinstance(value, str) for key, value in obj.items()
            )
        if tp is float:
            return isinstance(obj, (int, float)) and not isinstance(obj, bool)
        if tp is int:
            return isinstance(obj, int) and not isinstance(obj, bool)
        return isinstance(obj, tp) if isinstance(tp, type) else False

    def add(
        self,
        cfg_key: str,
        type_: Any,
        help: str,
        default: CfgVal = None,
        required: bool = False,
    ) -> None:
        """Add an option.

        Args:
            cfg_key: its name, as users write it (``log_dir``).
            type_: one of ``str``, ``int``, ``float``, ``bool``, ``list[str]`` (or
                ``typing.List[str]``), ``dict[str, str]`` (or ``typing.Dict[str, str]``).
            help: one line of help.
            default: its value when the user gives none; must be ``None`` when required.
            required: the user must give it.

        Raises:
            ValueError: a required option with a default, or a default of the wrong type.
        """
        if required and default is not None:
            raise ValueError(
                f"required option {cfg_key!r} must not have a default (got {default!r})"
            )
        if default is not None and not runopts.is_type(default, type_):
            raise TypeError(
                f"option {cfg_key!r}: default {default!r} is not of type {get_type_name(type_)}"
            )
        self._opts[cfg_key] = runopt(default, type_, required, help)

    def get(self, name: str) -> runopt | None:
        """Return the option called ``name``, or ``None``."""
        return self._opts.get(name)

    def update(self, other: runopts) -> None:
        """Add every option of ``other`` (its options win)."""
        self._opts.update(other._opts)

    def resolve(self, cfg: Mapping[str, CfgVal]) -> dict[str, CfgVal]:
        """Check ``cfg`` and return a copy with the defaults filled in.

        Unlike TorchX, ``cfg`` is not mutated and an unknown key is an error (a typo in
        a run option would otherwise be silently ignored).

        Raises:
            InvalidRunConfigException: a required key is missing, a value has the wrong
                type, or a key is not an option of this scheduler. The message names the
                key, the expected type and the accepted keys.
        """
        resolved: dict[str, CfgVal] = {}
        for key in cfg:
            if key not in self._opts:
                raise InvalidRunConfigException(
                    f"unknown run option {key!r}: {self._accepted()}", key
                )
        for key, opt in self._opts.items():
            value = cfg.get(key)
            if value is None:
                if opt.is_required:
                    raise InvalidRunConfigException(
                        f"required run option {key!r} ({get_type_name(opt.opt_type)}) is missing:"
                        f" pass it with `-cfg {key}=<value>` ({opt.help}); {self._accepted()}",
                        key,
                    )
                resolved[key] = opt.default
            elif not runopts.is_type(value, opt.opt_type):
                raise InvalidRunConfigException(
                    f"run option {key!r} must be of type {get_type_name(opt.opt_type)},"
                    f" got {value!r} ({type(value).__name__}); {self._accepted()}",
                    key,
                )
            else:
                resolved[key] = value
        return resolved

    def _accepted(self) -> str:
        """``"the scheduler accepts a (int), b (str)"``: for error messages."""
        if not self._opts:
            return "the scheduler accepts no options"
        listed = ", ".join(
            f"{key} ({get_type_name(opt.opt_type)})" for key, opt in sorted(self._opts.items())
        )
        return f"the scheduler accepts {listed}"

    def cfg_from_str(self, cfg_str: str) -> dict[str, CfgVal]:
        """Parse ``"key1=v1,key2=v2;key3=a,b"`` into a typed cfg.

        Pairs are separated by ``,`` or ``;``; a list option's items by ``,`` or ``;``
        too (a token without ``=`` belongs to the value before it). ``bool`` options
        take ``true``/``false`` (any case); ``Dict[str, str]`` options take
        ``name:value`` items (``labels=team:ml,tier:1``), as TorchX. Keys that are not
        options are kept as strings so :meth:`resolve` can name them.

        Raises:
            InvalidRunConfigException: a value does not parse as its option's type.
        """
        cfg: dict[str, CfgVal] = {}
        for key, raw in cfg_pairs(cfg_str).items():
            opt = self.get(key)
            if opt is None:
                cfg[key] = raw
                continue
            cfg[key] = _cast(key, raw, opt.opt_type)
        return cfg

    def cfg_from_json_repr(self, json_repr: str) -> dict[str, CfgVal]:
        """Parse a JSON object into a cfg; values are kept as JSON gives them.

        Unknown keys are kept too, so :meth:`resolve` names them.

        Raises:
            InvalidRunConfigException: ``json_repr`` is not JSON or not a JSON object.
        """
        try:
            loaded = json.loads(json_repr)
        except json.JSONDecodeError as exc:
            raise InvalidRunConfigException(
                f"run config {json_repr!r} is not valid JSON ({exc})"
            ) from None
        if not isinstance(loaded, dict):
            raise InvalidRunConfigException(
                f'run config {json_repr!r} is not a JSON object: write {{"key": value, ...}}'
            )
        return dict(loaded)

    def __str__(self) -> str:
        required = [(k, o) for k, o in sorted(self._opts.items()) if o.is_required]
        optional = [(k, o) for k, o in sorted(self._opts.items()) if not o.is_required]
        lines: list[str] = []
        for title, group in (("required", required), ("optional", optional)):
            if not group:
                continue
            lines.append(f"    {title}:")
            lines.append("    " + "=" * len(title))
            for key, opt in group:
                default = "" if opt.is_required else f", {opt.default}"
                lines.append(f"    {key} ({get_type_name(opt.opt_type)}){default}")
                lines.append(f"        {opt.help}")
            lines.append("")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)


def cfg_pairs(cfg_str: str) -> dict[str, str]:
    """Split ``"a=1,b=x;y,c=2"`` into ``{"a": "1", "b": "x;y", "c": "2"}``.

    A separator (``,`` or ``;``) followed by ``name=`` starts a new pair; any other
    separator is part of the value (a list's items).

    Raises:
        InvalidRunConfigException: the string does not start with ``name=``.
    """
    cfg_str = cfg_str.strip()
    if not cfg_str:
        return {}
    pieces = re.split(r"[,;](?=\s*[A-Za-z_][\w.\-]*\s*=)", cfg_str)
    pairs: dict[str, str] = {}
    for piece in pieces:
        key, sep, value = piece.partition("=")
        if not sep or not key.strip():
            raise InvalidRunConfigException(
                f"cannot parse run config {cfg_str!r} at {piece!r}: write key=value pairs"
                " separated by ',' or ';', e.g. `log_dir=/tmp/logs,prepend_cwd=true`"
            )
        pairs[key.strip()] = value.strip()
    return pairs


def _cast(key: str, raw: str, tp: Any) -> CfgVal:
    if tp is bool:
        lowered = raw.lower()
        if lowered not in ("true", "false", "1", "0", "yes", "no"):
            raise InvalidRunConfigException(
                f"run option {key!r} is a bool: write true or false, not {raw!r}", key
            )
        return lowered in ("true", "1", "yes")
    kind = _container_kind(tp)
    if kind == "list":
        return [item.strip() for item in re.split(r"[,;]", raw) if item.strip()]
    if kind == "dict":
        pairs: dict[str, str] = {}
        for item in re.split(r"[,;]", raw):
            if not item.strip():
                continue
            name, sep, item_value = item.partition(":")
            if not sep or not name.strip():
                raise InvalidRunConfigException(
                    f"run option {key!r} is a Dict[str, str]: write name:value pairs"
                    f" separated by ',' or ';' (e.g. `{key}=a:1,b:2`), not {raw!r}",
                    key,
                )
            pairs[name.strip()] = item_value.strip()
        return pairs
    try:
        value: CfgVal = tp(raw)
    except ValueError:
        raise InvalidRunConfigException(
            f"run option {key!r} must be of type {get_type_name(tp)}, got {raw!r}", key
        ) from None
    return value
