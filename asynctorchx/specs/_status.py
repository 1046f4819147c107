"""States and statuses (``torchx.specs.api``); ``ReplicaStatus.exit_code`` is ours."""

from __future__ import annotations

import contextlib
import enum
import json
from datetime import datetime
from typing import Any

import attrs

from asynctorchx.specs._resource import NONE


class AppState(int, enum.Enum):
    """The state of an app (``torchx.specs.api``); ``UNKNOWN``: the scheduler cannot tell."""

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


class EndCause(enum.Enum):
    """Why an app (or replica) ended, as its backend says; ``None`` where it does not say.

    ``EXITED``: its own processes exited (``ReplicaStatus.exit_code`` has the code), the one
    cause of ``SUCCEEDED``. ``CANCELLED``: a user cancelled it (``cancel``, ``scancel``).
    ``PREEMPTED``: higher-priority work took its resources. ``EVICTED``: the cluster removed
    it (the Kubernetes Eviction API, node pressure). ``NODE_LOST``: its node failed.
    ``OUT_OF_MEMORY``: killed at its memory limit. ``TIMED_OUT``: its time limit passed
    (Slurm's ``--time``). ``IMAGE_PULL_FAILED``: its image could not be pulled.
    ``ENGINE_RESTARTED``: the engine's restart stopped it. The mapping of each backend is in
    ``docs/schedulers/``.
    """

    EXITED = "exited"
    CANCELLED = "cancelled"
    PREEMPTED = "preempted"
    EVICTED = "evicted"
    NODE_LOST = "node_lost"
    OUT_OF_MEMORY = "out_of_memory"
    TIMED_OUT = "timed_out"
    IMAGE_PULL_FAILED = "image_pull_failed"
    ENGINE_RESTARTED = "engine_restarted"

    def __str__(self) -> str:
        return self.name


#: A replica's state uses the app's states (TorchX's alias).
ReplicaState = AppState

_TERMINAL_STATES = frozenset({AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED})


def is_terminal(state: AppState) -> bool:
    """Return True for ``SUCCEEDED``, ``FAILED`` and ``CANCELLED``."""
    return state in _TERMINAL_STATES


def is_started(state: AppState) -> bool:
    """Return True once the app has run: ``RUNNING`` or a terminal state (TorchX's)."""
    return state is AppState.RUNNING or state in _TERMINAL_STATES


@attrs.define
class ReplicaStatus:
    """The status of one replica.

    Args:
        id: the replica id (0..num_replicas-1).
        state: its state.
        role: the role's name.
        hostname: where it runs (``localhost``, or the container name for ``local_docker``).
        structured_error_msg: the JSON error it left (TorchElastic error file), or ``<NONE>``.
        exit_code: its exit code once it exited, else ``None``.
        hostaddr: its IP address where the scheduler knows it, else ``None``; keyword-only.
        started: when its (latest) run started, an aware UTC ``datetime``; ``None``: not
            started, or the scheduler does not say; keyword-only.
        ended: when that run ended, likewise; ``None`` also while it runs; keyword-only.
    """

    id: int
    state: AppState
    role: str
    hostname: str
    structured_error_msg: str = NONE
    exit_code: int | None = None
    hostaddr: str | None = attrs.field(default=None, kw_only=True)
    started: datetime | None = attrs.field(default=None, kw_only=True)
    ended: datetime | None = attrs.field(default=None, kw_only=True)

    def to_json(self) -> dict[str, Any]:
        """Return the replica as a JSON-able dict; an unset value is ``None``."""
        return {
            "id": self.id,
            "state": self.state.name,
            "role": self.role,
            "hostname": self.hostname,
            "hostaddr": self.hostaddr,
            "structured_error_msg": _or_null(self.structured_error_msg),
            "exit_code": self.exit_code,
            "started": _iso(self.started),
            "ended": _iso(self.ended),
        }


@attrs.define
class RoleStatus:
    """The replicas' statuses of one role."""

    role: str
    replicas: list[ReplicaStatus] = attrs.field(factory=list)

    def to_json(self) -> dict[str, Any]:
        """Return ``{"role": ..., "replicas": [...]}``."""
        return {"role": self.role, "replicas": [r.to_json() for r in self.replicas]}


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
        cause: why the app ended, once terminal (``None``: not ended, or not said).
        pending_reason: why it waits, in the backend's own words (Slurm's ``Reason``,
            Kubernetes' ``Unschedulable`` message), while ``PENDING``; else ``None``.
        submitted: when the app was submitted, an aware UTC ``datetime``; ``None``: not said.
        started: when its first replica (of the latest attempt) started, likewise.
        ended: when its last replica ended, once terminal, likewise.
    """

    state: AppState
    num_restarts: int = 0
    msg: str = ""
    structured_error_msg: str = NONE
    ui_url: str | None = None
    roles: list[RoleStatus] = attrs.field(factory=list)
    cause: EndCause | None = None
    pending_reason: str | None = None
    submitted: datetime | None = None
    started: datetime | None = None
    ended: datetime | None = None

    def is_terminal(self) -> bool:
        """Return True once the app reached a terminal state."""
        return is_terminal(self.state)

    def raise_for_status(self) -> None:
        """Raise :class:`AppStatusError` unless the state is ``SUCCEEDED``."""
        if self.state != AppState.SUCCEEDED:
            raise AppStatusError(self, f"job did not succeed: {self}")

    def to_json(self, filter_roles: list[str] | None = None) -> dict[str, Any]:
        """Return the status as ``status --json`` prints it; unset messages are ``None``.

        Args:
            filter_roles: keep only these roles (``None`` or empty: every role).
        """
        return {
            "state": self.state.name,
            "num_restarts": self.num_restarts,
            "roles": [role.to_json() for role in self._roles(filter_roles)],
            "msg": _or_null(self.msg),
            "structured_error_msg": _or_null(self.structured_error_msg),
            "url": self.ui_url,
            "cause": self.cause.name if self.cause is not None else None,
            "pending_reason": self.pending_reason,
            "submitted": _iso(self.submitted),
            "started": _iso(self.started),
            "ended": _iso(self.ended),
        }

    def _roles(self, filter_roles: list[str] | None) -> list[RoleStatus]:
        return [role for role in self.roles if not filter_roles or role.role in filter_roles]

    def format(self, filter_roles: list[str] | None = None) -> str:
        """Return the status in ``torchx.specs.api.AppStatus.format``'s layout; never raises.

        Args:
            filter_roles: keep only these roles (``None`` or empty: every role).
        """
        roles = "".join(
            _format_replica(replica)
            for role_status in self._roles(filter_roles)
            for replica in sorted(role_status.replicas, key=lambda r: r.id)
        )
        return (
            "AppStatus:\n"
            f"    State: {self.state}\n"
            f"    Num Restarts: {self.num_restarts}\n"
            f"    Roles: {roles}\n"
            f"    Msg: {self.msg}\n"
            f"    Structured Error Msg: {self.structured_error_msg}\n"
            f"    UI URL: {self.ui_url}\n"
            "    "
        )

    def __repr__(self) -> str:
        """Return the status as YAML, as ``torchx.specs.api.AppStatus`` prints it."""
        import yaml

        return yaml.dump({"AppStatus": _status_dict(self)})

    __str__ = __repr__


def _or_null(value: str) -> str | None:
    return None if value in (NONE, "") else value


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


#: The fields TorchX's YAML dump of a status lacks (of either class): asynctorchx's.
_NOT_TORCHX = ("hostaddr", "cause", "pending_reason", "submitted", "started", "ended")


def _parsed_error(structured_error_msg: str) -> Any:
    """The JSON an error message holds, else the message itself."""
    try:
        return json.loads(structured_error_msg)
    except ValueError:
        return structured_error_msg


def _status_dict(status: AppStatus) -> dict[str, Any]:
    """The status as TorchX dumps it: none of :data:`_NOT_TORCHX`, states as ``FAILED (5)``."""
    data = attrs.asdict(
        status,
        filter=attrs.filters.exclude(*_NOT_TORCHX),
        value_serializer=lambda _, __, value: repr(value) if isinstance(value, AppState) else value,
    )
    data["structured_error_msg"] = _parsed_error(status.structured_error_msg)
    return data


_ERROR_WIDTH = 80


def _wrap(message: str, header: str) -> str:
    # the text before a nested "\nException..." is the message (c10 errors nest so)
    message = message.split("\nException", 1)[0]
    lines: list[str] = []
    current = ""
    for word in message.split(" "):
        if current and len(current) >= _ERROR_WIDTH:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    lines.append(current)
    indent = " " * len(header)
    return "\n".join(f"{header if i == 0 else indent}{line}" for i, line in enumerate(lines))


def _error_lines(replica: ReplicaStatus) -> tuple[str, str]:
    """``(exit code, the lines below the replica's line)`` from its error file."""
    exit_code = "<N/A>" if replica.exit_code is None else str(replica.exit_code)
    error = _parsed_error(replica.structured_error_msg)
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(message, dict):  # not TorchElastic's error file layout
        return exit_code, "\n" + _wrap(str(message or error), "        error_msg: ")
    exit_code = str(message.get("errorCode") or exit_code)
    lines = ""
    timestamp = (message.get("extraInfo") or {}).get("timestamp")
    if timestamp is not None:
        with contextlib.suppress(ValueError, OverflowError, OSError):
            lines += f"\n        timestamp: {datetime.fromtimestamp(int(timestamp))}"
    lines += f"\n        hostname: {replica.hostname}"
    lines += "\n" + _wrap(str(message.get("message", "")), "        error_msg: ")
    return exit_code, lines


def _format_replica(replica: ReplicaStatus) -> str:
    marker = "*" if replica.id == 0 else " "
    data = str(replica.state)
    if replica.structured_error_msg != NONE:
        exit_code, below = _error_lines(replica)
        data += f" (exitcode: {exit_code}){below}"
    elif replica.exit_code is not None and replica.state != AppState.SUCCEEDED:
        data += f" (exitcode: {replica.exit_code})"
    elif replica.state in (AppState.FAILED, AppState.CANCELLED):
        data += " (no reply file)"
    return f"\n {marker}{replica.role}[{replica.id}]:{data}"
