"""States and statuses: :class:`AppState`, :func:`is_terminal`, :class:`AppStatus` and friends.

Names, values and fields follow ``torchx.specs.api`` (TorchX 0.7.0);
:attr:`ReplicaStatus.exit_code` is an asynctorchx addition. Re-exported by
:mod:`asynctorchx.specs.api` and :mod:`asynctorchx.specs`.
"""

from __future__ import annotations

import enum

import attrs

from asynctorchx.specs._resource import NONE


class AppState(int, enum.Enum):
    """The state of an app (``torchx.specs.api.AppState``).

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
