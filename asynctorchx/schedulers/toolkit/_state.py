"""One rule from replica states to the app's state, and one ``DescribeAppResponse`` builder."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime

from asynctorchx.schedulers._responses import DescribeAppResponse
from asynctorchx.specs.api import (
    NONE,
    AppState,
    EndCause,
    ReplicaStatus,
    Role,
    RoleStatus,
    is_terminal,
)

#: While any replica is live, the app takes the first of these its replicas are in.
LIVE_PRECEDENCE = (AppState.RUNNING, AppState.PENDING, AppState.SUBMITTED)


def app_state(replica_states: Iterable[AppState], *, cancelled: bool = False) -> AppState:
    """Return the app's state: ``UNKNOWN`` without replicas, live while any is, ``SUCCEEDED``
    if all did, else ``CANCELLED`` (``cancelled`` or a replica's) or ``FAILED``."""
    states = list(replica_states)
    if not states:
        return AppState.UNKNOWN
    if not all(is_terminal(state) for state in states):
        return next((live for live in LIVE_PRECEDENCE if live in states), AppState.UNKNOWN)
    if all(state == AppState.SUCCEEDED for state in states):
        return AppState.SUCCEEDED
    if cancelled or AppState.CANCELLED in states:
        return AppState.CANCELLED
    return AppState.FAILED


def _error_timestamp(text: str) -> float:
    try:
        return float(json.loads(text)["message"]["extraInfo"]["timestamp"])
    except (ValueError, KeyError, TypeError):
        return float("inf")


def earliest_error(errors: Iterable[str]) -> str:
    """Return the TorchElastic error-file text with the smallest timestamp, or ``<NONE>``.

    TorchX's rule (``torchx.schedulers.local_scheduler``); untimed texts come last.
    """
    texts = [text for text in errors if text and text != NONE]
    return min(texts, key=_error_timestamp) if texts else NONE


def role_statuses(replicas: Iterable[ReplicaStatus], role_names: Sequence[str]) -> list[RoleStatus]:
    """Group replica statuses by role in ``role_names`` order (unlisted roles last), by id."""
    grouped: dict[str, list[ReplicaStatus]] = {name: [] for name in role_names}
    for replica in replicas:
        grouped.setdefault(replica.role, []).append(replica)
    return [
        RoleStatus(name, sorted(statuses, key=lambda replica: replica.id))
        for name, statuses in grouped.items()
    ]


def describe_app(
    app_id: str,
    roles_statuses: list[RoleStatus],
    *,
    cancelled: bool = False,
    num_restarts: int = -1,
    msg: str | None = None,
    ui_url: str | None = None,
    roles: Sequence[Role] = (),
    state: AppState | None = None,
    cause: EndCause | None = None,
    pending_reason: str | None = None,
    submitted: datetime | None = None,
    ended: datetime | None = None,
) -> DescribeAppResponse:
    """Build an app's ``DescribeAppResponse``; a failure's error is :func:`earliest_error`.

    Args:
        app_id: the app's id on its scheduler.
        roles_statuses: the replicas' statuses, role by role (see :func:`role_statuses`).
        cancelled: the app was cancelled.
        num_restarts: restarts so far; ``-1``: unknown.
        msg: a message; ``None``: ``cancelled`` for a cancelled app, else ``<NONE>``.
        ui_url: where to look at the app, if anywhere.
        roles: the app's roles as submitted, when the backend still has them.
        state: the app's state; ``None``: :func:`app_state` of the replicas.
        cause: why a terminal app ended; ``None``: ``EXITED`` for ``SUCCEEDED``,
            ``CANCELLED`` for a cancelled app, else not said.
        pending_reason: why it waits, the backend's words; kept only while ``PENDING``.
        submitted: when it was submitted (aware UTC), if the backend says.
        ended: when it ended; ``None``: once terminal, its replicas' last ``ended`` if each
            has one. ``started`` is its replicas' first ``started``.
    """
    replicas = [replica for role in roles_statuses for replica in role.replicas]
    if state is None:
        state = app_state((replica.state for replica in replicas), cancelled=cancelled)
    failed = (r.structured_error_msg for r in replicas if r.state == AppState.FAILED)
    if not is_terminal(state):
        cause = None
    elif cause is None and (state == AppState.SUCCEEDED or cancelled):
        cause = EndCause.EXITED if state == AppState.SUCCEEDED else EndCause.CANCELLED
    ends = [replica.ended for replica in replicas if replica.ended is not None]
    if ended is None and replicas and len(ends) == len(replicas):
        ended = max(ends)
    return DescribeAppResponse(
        app_id=app_id,
        state=state,
        num_restarts=num_restarts,
        msg=msg if msg is not None else ("cancelled" if cancelled else NONE),
        structured_error_msg=earliest_error(failed) if state == AppState.FAILED else NONE,
        ui_url=ui_url,
        roles_statuses=roles_statuses,
        roles=list(roles),
        cause=cause,
        pending_reason=pending_reason if state == AppState.PENDING else None,
        submitted=submitted,
        started=min((r.started for r in replicas if r.started is not None), default=None),
        ended=ended if is_terminal(state) else None,
    )
