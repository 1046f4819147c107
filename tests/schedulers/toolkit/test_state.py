"""The one replica-to-app state rule and the DescribeAppResponse builder."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from asynctorchx.schedulers.toolkit import app_state, describe_app, role_statuses
from asynctorchx.schedulers.toolkit._state import earliest_error
from asynctorchx.specs import NONE, AppState, AppStatus, ReplicaStatus, RoleStatus

S, F, C = AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED
R, P, SUB, U = AppState.RUNNING, AppState.PENDING, AppState.SUBMITTED, AppState.UNKNOWN


@pytest.mark.parametrize(
    ("states", "cancelled", "expected"),
    [
        ([], False, U),
        ([S, R, P], False, R),  # the app runs while any replica runs
        ([S, P, SUB], False, P),
        ([SUB, S], False, SUB),
        ([U, S], False, U),
        ([F, R], False, R),  # a failed replica does not end an app another still runs
        ([S, S], False, S),
        ([S, S], True, S),  # cancelled after every replica succeeded: nothing was cancelled
        ([S, C], True, C),
        ([F, C], True, C),  # a cancel wins over a replica that failed meanwhile
        ([S, F], True, C),
        ([S, F], False, F),
        ([S, C], False, C),  # a replica cancelled on its own (a stopped container)
    ],
)
def test_app_state_from_replica_states(
    states: list[AppState], cancelled: bool, expected: AppState
) -> None:
    assert app_state(states, cancelled=cancelled) == expected


def _error(timestamp: int | None) -> str:
    extra = {} if timestamp is None else {"timestamp": str(timestamp)}
    return json.dumps({"message": {"message": f"at {timestamp}", "extraInfo": extra}})


def test_the_earliest_error_file_is_the_root_cause() -> None:
    assert earliest_error([_error(30), _error(10), _error(None), NONE, ""]) == _error(10)
    assert earliest_error([NONE, "", _error(None)]) == _error(None)
    assert earliest_error([]) == NONE


def test_describe_app_fills_state_error_and_message_from_replicas() -> None:
    replicas = [
        ReplicaStatus(1, F, "trainer", "h1", structured_error_msg=_error(20), exit_code=1),
        ReplicaStatus(0, F, "trainer", "h0", structured_error_msg=_error(5), exit_code=2),
        ReplicaStatus(0, S, "reader", "h2", exit_code=0),
    ]
    statuses = role_statuses(replicas, ["reader", "trainer", "idle"])
    assert [(role.role, [r.id for r in role.replicas]) for role in statuses] == [
        ("reader", [0]),
        ("trainer", [0, 1]),
        ("idle", []),
    ]
    failed = describe_app("app-1", statuses, num_restarts=0, ui_url="file:///logs")
    assert (failed.state, failed.msg, failed.structured_error_msg) == (F, NONE, _error(5))
    assert failed.ui_url == "file:///logs"
    cancelled = describe_app("app-1", statuses, cancelled=True)
    assert (cancelled.state, cancelled.msg, cancelled.structured_error_msg) == (
        C,
        "cancelled",
        NONE,
    )
    queued = describe_app("app-1", [], state=AppState.PENDING)
    assert queued.state == AppState.PENDING


def test_describe_app_times_from_replicas_and_reason_only_while_pending() -> None:
    at = [datetime(2026, 1, 1, 0, minute, tzinfo=UTC) for minute in range(4)]
    replicas = [
        ReplicaStatus(0, S, "a", "h", started=at[2], ended=at[3]),
        ReplicaStatus(1, S, "a", "h", started=at[1], ended=at[2]),
    ]
    done = describe_app("x", role_statuses(replicas, ["a"]), submitted=at[0], pending_reason="P")
    assert (done.submitted, done.started, done.ended, done.pending_reason) == (
        at[0],
        at[1],
        at[3],  # the last replica's end
        None,  # not PENDING
    )
    running = [ReplicaStatus(0, AppState.RUNNING, "a", "h", started=at[1]), replicas[0]]
    live = describe_app("x", role_statuses(running, ["a"]))
    assert (live.started, live.ended) == (at[1], None)
    queued = describe_app("x", [], state=AppState.PENDING, pending_reason="Priority")
    assert queued.pending_reason == "Priority"


def test_status_times_in_json_not_in_torchx_repr() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    replica = ReplicaStatus(0, S, "a", "h", started=at, ended=at)
    status = AppStatus(
        AppState.PENDING,
        pending_reason="Resources",
        submitted=at,
        roles=[RoleStatus("a", [replica])],
    )
    data = status.to_json()
    assert (data["pending_reason"], data["submitted"], data["started"], data["ended"]) == (
        "Resources",
        "2026-01-01T00:00:00+00:00",
        None,
        None,
    )
    assert data["roles"][0]["replicas"][0]["started"] == "2026-01-01T00:00:00+00:00"
    assert "Resources" not in repr(status)
    assert "started" not in repr(status)
