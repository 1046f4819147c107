"""``local_docker``'s decision tables, without an engine: container records in, states out.

The records are shaped as the Docker Engine API returns them (a container inspect, whose
``State`` varies, or a listing entry) and read as the engine's answers are
(``Container.from_inspect``, ``Container.from_listing``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from asynctorchx.schedulers.docker._engine import Container, Event
from asynctorchx.schedulers.docker._request import LABEL_REPLICA_ID, LABEL_ROLE_NAME
from asynctorchx.schedulers.docker._state import describe_from, replica_state, stopped_by_die
from asynctorchx.schedulers.toolkit import format_rfc3339_ns as rfc3339
from asynctorchx.schedulers.toolkit import parse_rfc3339_ns as parse_ts_ns
from asynctorchx.specs.api import AppState

#: 2024-05-01T12:00:00Z in ns since the epoch: when the replicas below finish or die.
T0 = 1_714_564_800 * 1_000_000_000
S = 1_000_000_000  # one second in ns


def finished(
    status: str, exit_code: int, at_ns: int | None = T0, error: str = ""
) -> dict[str, Any]:
    return {
        "Status": status,
        "ExitCode": exit_code,
        "Error": error,
        "FinishedAt": rfc3339(at_ns) if at_ns is not None else "0001-01-01T00:00:00Z",
    }


def container(k: int, state: dict[str, Any], role: str = "r") -> Container:
    """Replica ``k`` of ``role`` in ``state``, read from its inspect as the engine returns it."""
    return Container.from_inspect(
        {
            "Id": f"c{k}",
            "Name": f"/app-{role}-{k}",
            "Config": {
                "Image": "img",
                "Hostname": f"app-{role}-{k}",
                "Labels": {LABEL_ROLE_NAME: role, LABEL_REPLICA_ID: str(k)},
            },
            "State": state,
            "RestartCount": 0,
        }
    )


# --------------------------------------------------------------------------- replica state


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("created", AppState.SUBMITTED),
        ("running", AppState.RUNNING),
        ("restarting", AppState.PENDING),
        ("paused", AppState.PENDING),
        ("removing", AppState.PENDING),
    ],
)
def test_a_live_container_is_a_live_replica_without_exit_code(
    status: str, expected: AppState
) -> None:
    assert replica_state(container(0, {"Status": status, "ExitCode": 0}), None) == (expected, None)


def test_an_exit_0_succeeds_and_any_other_exit_fails_with_its_code() -> None:
    assert replica_state(container(0, finished("exited", 0)), None) == (AppState.SUCCEEDED, 0)
    assert replica_state(container(0, finished("exited", 7)), None) == (AppState.FAILED, 7)
    assert replica_state(container(0, finished("exited", 137)), None) == (AppState.FAILED, 137)


def test_a_dead_container_failed_even_with_exit_code_0() -> None:
    assert replica_state(container(0, finished("dead", 0)), None) == (AppState.FAILED, 0)


def test_a_container_the_engine_could_not_start_failed() -> None:
    # e.g. its bind mount's source is gone: the engine leaves it `created` with an Error
    state = finished("created", 127, error="no such file or directory")
    assert replica_state(container(0, state), None) == (AppState.FAILED, 127)
    # it failed before a later cancel: the cancel did not end it
    assert replica_state(container(0, state), T0 + S) == (AppState.FAILED, 127)


def test_a_never_started_container_of_a_cancelled_app_is_cancelled() -> None:
    # nothing will start it any more, so the app can still end
    assert replica_state(container(0, {"Status": "created", "ExitCode": 0}), T0) == (
        AppState.CANCELLED,
        None,
    )


def test_a_replica_that_finished_before_the_cancel_keeps_its_result() -> None:
    cancelled_at = T0 + S
    assert replica_state(container(0, finished("exited", 0)), cancelled_at) == (
        AppState.SUCCEEDED,
        0,
    )
    assert replica_state(container(0, finished("exited", 3)), cancelled_at) == (AppState.FAILED, 3)


def test_a_replica_that_finished_at_or_after_the_cancel_is_cancelled_whatever_its_code() -> None:
    # a program that exits 0 on the stop signal was still ended by the cancel
    assert replica_state(container(0, finished("exited", 0)), T0) == (AppState.CANCELLED, 0)
    assert replica_state(container(0, finished("exited", 143)), T0 - S) == (AppState.CANCELLED, 143)
    assert replica_state(container(0, finished("exited", 1, at_ns=None)), T0) == (
        AppState.CANCELLED,
        1,
    )


def test_an_unknown_engine_state_is_unknown() -> None:
    assert replica_state(container(0, {"Status": "frozen"}), None) == (AppState.UNKNOWN, None)


def test_a_listing_entry_reads_the_exit_code_from_the_status_text() -> None:
    def listed(state: str, status: str) -> AppState:
        entry = {"Id": "c0", "Names": ["/c0"], "Labels": {}, "State": state, "Status": status}
        return replica_state(Container.from_listing(entry), None)[0]

    assert listed("exited", "Exited (0) 2 seconds ago") == AppState.SUCCEEDED
    assert listed("exited", "Exited (3) 1 minute ago") == AppState.FAILED
    assert listed("dead", "Dead") == AppState.FAILED
    assert listed("running", "Up 3 seconds") == AppState.RUNNING


def test_a_container_reads_its_creation_from_a_listing_and_an_inspect() -> None:
    entry = {"Id": "c0", "Names": ["/c0"], "Labels": {}, "State": "exited", "Created": 1714564800}
    assert Container.from_listing(entry).created_ns == T0  # the listing's: whole seconds
    assert Container.from_listing({"Id": "c0"}).created_ns is None
    info = {"Id": "c0", "Config": {}, "State": {}, "Created": rfc3339(T0 + 42)}
    assert Container.from_inspect(info).created_ns == T0 + 42
    assert container(0, {"Status": "running"}).created_ns is None


def test_engine_times_parse_to_the_nanosecond() -> None:
    assert parse_ts_ns("2024-05-01T12:00:00.123456789Z") == T0 + 123_456_789
    assert parse_ts_ns("2024-05-01T14:00:00.5+02:00") == T0 + S // 2
    assert parse_ts_ns("0001-01-01T00:00:00Z") is None  # the engine's "never"
    assert parse_ts_ns(rfc3339(T0 + 42)) == T0 + 42


# --------------------------------------------------------------------------- app state


def app_of(*states: dict[str, Any], cancelled_at_ns: int | None = None) -> AppState:
    """The app's state ``describe`` reports for replicas 0, 1... in ``states``."""
    inspected = [container(k, state) for k, state in enumerate(states)]
    return describe_from("app", inspected, cancelled_at_ns).state


SUBMITTED = {"Status": "created", "ExitCode": 0}
PENDING = {"Status": "restarting", "ExitCode": 0}
RUNNING = {"Status": "running", "ExitCode": 0}


def test_a_live_app_is_at_its_most_advanced_live_replica() -> None:
    assert app_of(SUBMITTED, PENDING, RUNNING) == AppState.RUNNING
    assert app_of(SUBMITTED, PENDING) == AppState.PENDING
    assert app_of(SUBMITTED, SUBMITTED) == AppState.SUBMITTED
    # one replica done, one still running: the app is running, not done
    assert app_of(finished("exited", 0), RUNNING) == AppState.RUNNING
    assert app_of(finished("exited", 1), PENDING) == AppState.PENDING


def test_an_app_succeeds_only_when_every_replica_succeeded() -> None:
    assert app_of(*[finished("exited", 0)] * 3) == AppState.SUCCEEDED
    assert app_of(finished("exited", 0), finished("exited", 1)) == AppState.FAILED
    # a cancel that came after every replica succeeded does not undo the success
    after = T0 + S
    assert app_of(*[finished("exited", 0)] * 2, cancelled_at_ns=after) == AppState.SUCCEEDED


def test_a_cancelled_app_that_ended_otherwise_than_all_succeeded_is_cancelled() -> None:
    # succeeded and failed before the cancel, the third ended by it
    replicas = (
        finished("exited", 0, at_ns=T0 - 2 * S),
        finished("exited", 143, at_ns=T0),
        finished("exited", 3, at_ns=T0 - S),
    )
    cancelled = describe_from(
        "app", [container(k, state) for k, state in enumerate(replicas)], T0 - S // 2
    )
    assert [r.state for r in cancelled.roles_statuses[0].replicas] == [
        AppState.SUCCEEDED,
        AppState.CANCELLED,
        AppState.FAILED,
    ]
    assert cancelled.state == AppState.CANCELLED
    assert cancelled.msg == "cancelled; r/2 failed with exit code 3"
    assert app_of(*replicas) == AppState.FAILED


def test_an_app_without_replicas_is_unknown() -> None:
    assert describe_from("app", [], None).state == AppState.UNKNOWN


# --------------------------------------------------------------------------- exit for good


# --------------------------------------------------------------------------- die events


def running(policy: str | None, started_ns: int = T0 - S) -> Container:
    """A running replica started at ``started_ns``, inspected with restart policy ``policy``
    (``None``: an inspect without ``HostConfig``, as an older engine's)."""
    info: dict[str, Any] = {
        "Id": "c0",
        "Name": "/app-r-0",
        "Config": {"Image": "img", "Labels": {LABEL_ROLE_NAME: "r", LABEL_REPLICA_ID: "0"}},
        "State": {"Status": "running", "ExitCode": 0, "StartedAt": rfc3339(started_ns)},
        "RestartCount": 0,
    }
    if policy is not None:
        info["HostConfig"] = {"RestartPolicy": {"Name": policy, "MaximumRetryCount": 3}}
    return Container.from_inspect(info)


def die(exit_code: int | None, at_ns: int = T0) -> Event:
    """A ``die`` event as the engine's events stream carries it."""
    attributes = {"name": "app-r-0"} | ({} if exit_code is None else {"exitCode": str(exit_code)})
    return Event.parse(
        {
            "Type": "container",
            "Action": "die",
            "Actor": {"ID": "c0", "Attributes": attributes},
            "time": at_ns // S,
            "timeNano": at_ns,
        }
    )


@pytest.mark.parametrize(
    ("policy", "exit_code", "expected"),
    [
        ("", 0, AppState.SUCCEEDED),
        ("no", 3, AppState.FAILED),
        (None, 0, AppState.SUCCEEDED),
        ("on-failure", 0, AppState.SUCCEEDED),
    ],
)
def test_a_die_no_restart_can_follow_says_the_replica_stopped(
    policy: str | None, exit_code: int, expected: AppState
) -> None:
    after = stopped_by_die(running(policy), die(exit_code))
    assert after is not None
    assert (after.status, after.finished_ns) == ("exited", T0)
    assert replica_state(after, None) == (expected, exit_code)


@pytest.mark.parametrize(
    ("policy", "exit_code"), [("on-failure", 1), ("always", 0), ("unless-stopped", 0)]
)
def test_a_die_its_restart_policy_may_follow_by_a_restart_needs_an_inspect(
    policy: str, exit_code: int
) -> None:
    assert stopped_by_die(running(policy), die(exit_code)) is None


def test_a_die_of_an_earlier_run_or_without_exit_code_needs_an_inspect() -> None:
    assert stopped_by_die(running("", started_ns=T0 + S), die(0, at_ns=T0)) is None
    assert stopped_by_die(running(""), die(None)) is None
    start = Event.parse({"Action": "start", "Actor": {"ID": "c0"}, "timeNano": T0})
    assert stopped_by_die(running(""), start) is None


# --------------------------------------------------------------------------- times


def _timed(k: int, status: str, started: str, finished: str) -> Container:
    info = {
        "Id": f"c{k}",
        "Name": f"/app-r-{k}",
        "Created": f"2026-01-01T00:00:0{k}.5Z",
        "Config": {"Image": "img", "Labels": {LABEL_ROLE_NAME: "r", LABEL_REPLICA_ID: str(k)}},
        "State": {"Status": status, "ExitCode": 0, "StartedAt": started, "FinishedAt": finished},
    }
    return Container.from_inspect(info)


def test_describe_reads_created_started_and_finished_and_zero_times_are_none() -> None:
    zero = "0001-01-01T00:00:00Z"
    at = [datetime(2026, 1, 1, 0, 0, s, 500_000, tzinfo=UTC) for s in range(6)]
    done = describe_from(
        "app",
        [
            _timed(0, "exited", "2026-01-01T00:00:02.5Z", "2026-01-01T00:00:05.5Z"),
            _timed(1, "exited", "2026-01-01T00:00:03.5Z", "2026-01-01T00:00:04.5Z"),
        ],
        None,
    )
    assert (done.submitted, done.started, done.ended) == (at[0], at[2], at[5])
    assert [(r.started, r.ended) for r in done.roles_statuses[0].replicas] == [
        (at[2], at[5]),
        (at[3], at[4]),
    ]
    # the engine stamps a run of a few microseconds' start after its end: its end bounds it
    (short,) = (
        describe_from(
            "app", [_timed(0, "exited", "2026-01-01T00:00:03.5Z", "2026-01-01T00:00:02.5Z")], None
        )
        .roles_statuses[0]
        .replicas
    )
    assert (short.started, short.ended) == (at[2], at[2])
    # a restarted container's FinishedAt is its last run's: no end while it runs again
    live = describe_from(
        "app",
        [
            _timed(0, "running", "2026-01-01T00:00:03.5Z", "2026-01-01T00:00:02.5Z"),
            _timed(1, "created", zero, zero),
        ],
        None,
    )
    assert (live.submitted, live.started, live.ended, live.pending_reason) == (
        at[0],
        at[3],
        None,
        None,
    )
    assert [(r.started, r.ended) for r in live.roles_statuses[0].replicas] == [
        (at[3], None),
        (None, None),
    ]
