"""One rule from replica states to the app's state, and one ``DescribeAppResponse`` builder.

Every backend reports its replicas' states (a process's exit, a container's ``State``,
a Slurm job step, a pod phase) and leaves the app's state and the response's shape to
these functions, so ``describe`` means the same on every backend.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from asynctorchx.schedulers._responses import DescribeAppResponse
from asynctorchx.specs.api import NONE, AppState, ReplicaStatus, Role, RoleStatus, is_terminal

#: While any replica is live, the app takes the first of these its replicas are in.
LIVE_PRECEDENCE = (AppState.RUNNING, AppState.PENDING, AppState.SUBMITTED)


def app_state(replica_states: Iterable[AppState], *, cancelled: bool = False) -> AppState:
    """Return the app's state from its replicas' states.

    - no replica: ``UNKNOWN``;
    - some replica not terminal: the first of ``RUNNING``, ``PENDING``, ``SUBMITTED``
      that some replica is in, else ``UNKNOWN`` (the app is not over while any replica
      may still run);
    - every replica ``SUCCEEDED``: ``SUCCEEDED`` (even if a cancel came after the last
      exit: there was nothing left to cancel);
    - else ``CANCELLED`` if the app was cancelled or a replica was, else ``FAILED``.

    Args:
        replica_states: the state of every replica of every role (of the latest attempt).
        cancelled: the app was cancelled (``cancel`` was called before it ended).
    """
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
    """Return the error that happened first among TorchElastic error-file texts, or ``<NONE>``.

    TorchX's rule (``torchx.schedulers.local_scheduler``): each text is the JSON an
    elastic agent writes to ``TORCHELASTIC_ERROR_FILE``; the one whose
    ``message.extraInfo.timestamp`` is smallest is the root cause. Texts without a
    timestamp come after those with one; ``<NONE>`` and empty texts are skipped.

    Args:
        errors: error-file texts, one per failed replica.
    """
    texts = [text for text in errors if text and text != NONE]
    return min(texts, key=_error_timestamp) if texts else NONE


def role_statuses(replicas: Iterable[ReplicaStatus], role_names: Sequence[str]) -> list[RoleStatus]:
    """Group replica statuses by role, roles in ``role_names`` order, replicas by id.

    Args:
        replicas: every replica's status; ``ReplicaStatus.role`` names its role.
        role_names: the app's roles in submission order; a role with no replica status
            gets an empty :class:`RoleStatus`, a status of a role not listed is appended
            after them.
    """
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
) -> DescribeAppResponse:
    """Build the ``DescribeAppResponse`` of an app from its replicas' statuses.

    The state is :func:`app_state` of the replicas (unless given); a ``FAILED`` app's
    ``structured_error_msg`` is :func:`earliest_error` of its failed replicas' errors;
    a cancelled app's ``msg`` is ``cancelled`` unless one is given.

    Args:
        app_id: the app's id on its scheduler.
        roles_statuses: the replicas' statuses, role by role (see :func:`role_statuses`).
        cancelled: the app was cancelled.
        num_restarts: restarts so far (app and replicas together); ``-1``: unknown.
        msg: a free-form message; ``None``: ``cancelled`` for a cancelled app, else ``<NONE>``.
        ui_url: where to look at the app (a ``file://`` log directory, a web UI), if any.
        roles: the app's roles as submitted, when the backend still has them.
        state: the app's state when the backend knows it better than its replicas do
            (a job still queued with no replica yet); ``None``: from the replicas.
    """
    replicas = [replica for role in roles_statuses for replica in role.replicas]
    if state is None:
        state = app_state((replica.state for replica in replicas), cancelled=cancelled)
    failed = (r.structured_error_msg for r in replicas if r.state == AppState.FAILED)
    return DescribeAppResponse(
        app_id=app_id,
        state=state,
        num_restarts=num_restarts,
        msg=msg if msg is not None else ("cancelled" if cancelled else NONE),
        structured_error_msg=earliest_error(failed) if state == AppState.FAILED else NONE,
        ui_url=ui_url,
        roles_statuses=roles_statuses,
        roles=list(roles),
    )
