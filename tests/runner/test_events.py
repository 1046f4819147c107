"""``Runner.events``: one ordered, resumable stream of an app's states and log lines.

Against the real ``local_cwd`` scheduler (real processes writing real log files), one
``local_docker`` case, and an in-memory scheduler for what a real one cannot be made to
do on demand (a state change while the logs lag, an app that disappears).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from asynctorchx.errors import InvalidCursorError, UnknownAppException
from asynctorchx.runner import AppEvent, LogEvent, Runner, StateEvent, get_runner
from asynctorchx.runner._events import EVENTS_BUFFER_SIZE, EVENTS_PER_BATCH
from asynctorchx.schedulers.api import (
    Capabilities,
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
)
from asynctorchx.schedulers.slurm._scheduler import log_file_name as slurm_log_file_name
from asynctorchx.schedulers.toolkit import LogBlock, LogQuery
from asynctorchx.specs.api import (
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    Role,
    is_terminal,
    macros,
)
from tests.isolation import isolate_from_user_config

SCHED = "local_cwd"
LIMIT = 30  # seconds: a safety bound, never a timing guess

#: A stream's identity in these tests: (role, replica id, stream name).
Key = tuple[str, int, str]


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user .torchxconfig, no TORCHX_* from the outer environment."""
    isolate_from_user_config(tmp_path, monkeypatch)


def _sh(script: str, name: str = "sh", replicas: int = 1) -> AppDef:
    role = Role(name=name, image=".", entrypoint="sh", args=["-c", script], num_replicas=replicas)
    return AppDef(name=name, roles=[role])


# Each replica writes 3 lines to stdout and 3 to stderr, interleaved, then waits for the
# file `go` (the test's signal), then writes one more line to each and exits 0.
BEFORE_GO = 12  # lines of 2 replicas before `go`
TWO_PHASES = (
    f"for i in 1 2 3; do echo out {macros.replica_id} $$i; echo err {macros.replica_id} $$i >&2;"
    " done; while [ ! -e go ]; do sleep 0.05; done;"
    f" echo out {macros.replica_id} after; echo err {macros.replica_id} after >&2"
)


async def _read(runner: Runner, handle: str, cursor: str | None = None) -> list[AppEvent]:
    """Every event of the stream, to its end."""
    with anyio.fail_after(LIMIT):
        async with runner.events(handle, cursor=cursor) as events:
            return [event async for event in events]


async def _read_lines(
    runner: Runner, handle: str, count: int, cursor: str | None = None
) -> list[AppEvent]:
    """The events up to and including the ``count``-th log line; then leave the stream."""
    got: list[AppEvent] = []
    lines = 0
    if count == 0:
        return got
    with anyio.fail_after(LIMIT):
        async with runner.events(handle, cursor=cursor) as events:
            async for event in events:
                got.append(event)
                lines += isinstance(event, LogEvent)
                if lines == count:
                    break
    return got


def _per_stream(events: Sequence[AppEvent]) -> dict[Key, list[str]]:
    """The lines of each log stream, in the order the events gave them."""
    streams: dict[Key, list[str]] = defaultdict(list)
    for event in events:
        if isinstance(event, LogEvent):
            streams[(event.role, event.replica_id, event.stream)].append(event.line)
    return dict(streams)


def _concat(*parts: Mapping[Key, list[str]]) -> dict[Key, list[str]]:
    joined: dict[Key, list[str]] = defaultdict(list)
    for part in parts:
        for key, lines in part.items():
            joined[key].extend(lines)
    return dict(joined)


def _states(events: Sequence[AppEvent]) -> list[AppState]:
    return [event.state for event in events if isinstance(event, StateEvent)]


def _assert_well_ordered(events: Sequence[AppEvent]) -> None:
    """Cursors increase strictly; exactly one terminal state, the last event."""
    cursors = [event.cursor for event in events]
    assert cursors == sorted(cursors)
    assert len(set(cursors)) == len(cursors)
    assert isinstance(events[-1], StateEvent)
    assert is_terminal(events[-1].state)
    assert [s for s in _states(events) if is_terminal(s)] == [events[-1].state]


def _expected_lines(replicas: int, *, after: bool = True) -> dict[Key, list[str]]:
    tail = ["after"] if after else []
    return {
        ("sh", k, stream): [f"{name} {k} {i}\n" for i in [1, 2, 3, *tail]]
        for k in range(replicas)
        for stream, name in (("stdout", "out"), ("stderr", "err"))
    }


async def test_a_live_app_streams_its_state_then_lines_then_the_terminal_state_last() -> None:
    async with get_runner() as runner:
        handle = await runner.run(_sh(TWO_PHASES, replicas=2), SCHED)
        events: list[AppEvent] = []
        with anyio.fail_after(LIMIT):
            async with runner.events(handle) as stream:
                async for event in stream:
                    events.append(event)
                    if sum(isinstance(e, LogEvent) for e in events) == BEFORE_GO:
                        Path("go").touch()  # every line before `go` came first
        assert isinstance(events[0], StateEvent)  # the current state at once
        assert events[0].state == AppState.RUNNING
        assert events[0].status.state == AppState.RUNNING
        _assert_well_ordered(events)
        assert events[-1].state == AppState.SUCCEEDED
        assert _per_stream(events) == _expected_lines(2)  # each stream's order kept
        for event in events:
            if isinstance(event, LogEvent):
                assert event.timestamp.utcoffset() is not None
                assert event.timestamp.utcoffset().total_seconds() == 0  # type: ignore[union-attr]


async def test_a_viewer_of_a_finished_app_gets_every_line_then_the_terminal_state() -> None:
    async with get_runner() as runner:
        handle = await runner.run(_sh("echo one; echo two >&2; echo three; exit 3"), SCHED)
        with anyio.fail_after(LIMIT):
            await runner.wait(handle)
        events = await _read(runner, handle)
        _assert_well_ordered(events)
        assert _states(events) == [AppState.FAILED]  # no state before: it is terminal
        assert _per_stream(events) == {
            ("sh", 0, "stdout"): ["one\n", "three\n"],
            ("sh", 0, "stderr"): ["two\n"],
        }
        final = events[-1]
        assert isinstance(final, StateEvent)
        assert final.status.roles[0].replicas[0].exit_code == 3


async def test_every_event_and_status_to_json_is_the_same_kind_of_data() -> None:
    async with get_runner() as runner:
        handle = await runner.run(_sh("echo one"), SCHED)
        with anyio.fail_after(LIMIT):
            status = await runner.wait(handle)
        events = await _read(runner, handle)
    assert status is not None
    assert isinstance(status.to_json(), dict)  # TorchX's AppStatus.to_json
    log, final = events[0], events[-1]
    assert isinstance(log, LogEvent)
    assert log.to_json() == {
        "type": "log",
        "cursor": log.cursor,
        "role": "sh",
        "replica_id": 0,
        "stream": "stdout",
        "line": "one\n",
        "timestamp": log.timestamp.isoformat(),
    }
    assert isinstance(final, StateEvent)
    assert final.to_json()["status"] == status.to_json()


async def test_resuming_a_finished_apps_stream_from_any_cursor_gives_exactly_the_rest() -> None:
    async with get_runner() as runner:
        handle = await runner.run(_sh(TWO_PHASES, replicas=2), SCHED)
        Path("go").touch()
        with anyio.fail_after(LIMIT):
            await runner.wait(handle)
        events = await _read(runner, handle)
        assert _per_stream(events) == _expected_lines(2)
        for index, event in enumerate(events):
            rest = await _read(runner, handle, cursor=event.cursor)
            if index == len(events) - 1:
                assert rest == []  # the terminal state was delivered: nothing is left
                continue
            assert all(later.cursor > event.cursor for later in rest)
            _assert_well_ordered(rest)
            assert _per_stream(rest) == _per_stream(events[index + 1 :])
            assert _states(rest) == [AppState.SUCCEEDED]


async def test_resuming_while_the_app_runs_then_after_it_ended_has_no_gap_or_duplicate() -> None:
    async with get_runner() as runner:
        handle = await runner.run(_sh(TWO_PHASES, replicas=2), SCHED)
        first = await _read_lines(runner, handle, BEFORE_GO)  # left while the app runs
        assert _states(first) == [AppState.RUNNING]
        for index in (0, 1, 5, len(first) - 1):  # the state, the first line, mid, last
            delivered = first[: index + 1]
            remaining = BEFORE_GO - sum(isinstance(e, LogEvent) for e in delivered)
            resumed = await _read_lines(runner, handle, remaining, cursor=first[index].cursor)
            assert _states(resumed) == []  # RUNNING was delivered and has not changed
            assert _concat(_per_stream(delivered), _per_stream(resumed)) == _expected_lines(
                2, after=False
            )
        status = await runner.status(handle)
        assert status is not None
        assert status.state == AppState.RUNNING
        Path("go").touch()
        middle = first[4].cursor
        after_middle = await _read(runner, handle, cursor=middle)
        _assert_well_ordered(after_middle)
        assert _concat(_per_stream(first[:5]), _per_stream(after_middle)) == _expected_lines(2)
        last_of_first = first[-1].cursor
        rest = await _read(runner, handle, cursor=last_of_first)
        assert _per_stream(rest) == {
            ("sh", k, stream): [f"{name} {k} after\n"]
            for k in range(2)
            for stream, name in (("stdout", "out"), ("stderr", "err"))
        }
        assert _states(rest) == [AppState.SUCCEEDED]


async def test_a_malformed_or_foreign_cursor_is_a_typed_error_naming_it() -> None:
    async with get_runner() as runner:
        handle = await runner.run(_sh("echo mine"), SCHED)
        other = await runner.run(_sh("echo theirs"), SCHED)
        with anyio.fail_after(LIMIT):
            await runner.wait(handle)
            await runner.wait(other)
        good = (await _read(runner, handle))[0].cursor
        foreign = (await _read(runner, other))[0].cursor
        sequence, digests, state, counts = good.split(".")
        bad = {
            "garbage": "garbage",
            "empty": "",
            "not digits": f"x{good[1:]}",
            "cut": good[: good.rindex(".")],
            "not hexadecimal": f"{sequence}.{'z' * len(digests)}.{state}.{counts}",
            "foreign": foreign,
            "other streams": f"{sequence}.{digests[:8]}{'0' * 8}.{state}.{counts}",
            "no such state": f"{sequence}.{digests}.DONE.{counts}",
            "too few counts": f"{sequence}.{digests}.{state}.1",
            "not a count": f"{sequence}.{digests}.{state}.1-x",
            "not ASCII": f"{sequence}.{digests}.{state}.1-\u0661",
            # a byte offset as earlier versions wrote every position: one number
            "packed": re.sub(r"o(\d+):", r"\1:", (await _read(runner, handle))[-1].cursor),
        }
        messages = {}
        for why, cursor in bad.items():
            with pytest.raises(InvalidCursorError) as caught:
                async with runner.events(handle, cursor=cursor):
                    raise AssertionError(f"a {why} cursor was accepted")
            assert isinstance(caught.value, ValueError)
            assert caught.value.cursor == cursor
            messages[why] = str(caught.value)
            shown = cursor if len(cursor) <= 80 else cursor[:77] + "..."
            assert repr(shown) in messages[why]
            assert "Last-Event-ID" in messages[why]
            assert "None" in messages[why]
        assert "another app" in messages["foreign"]
        assert "other log streams" in messages["other streams"]
        assert "'o' and an offset" in messages["packed"]  # the forms a position has


async def test_a_slow_consumer_keeps_the_buffer_bounded_and_the_replica_finishes() -> None:
    lines = 3 * EVENTS_BUFFER_SIZE * EVENTS_PER_BATCH  # more batches than the buffer holds
    async with get_runner() as runner:
        handle = await runner.run(_sh(f"seq 1 {lines}"), SCHED)
        with anyio.fail_after(LIMIT):
            async with runner.events(handle) as events:
                first = await events.receive()
                assert isinstance(first, StateEvent)
                final = await runner.wait(handle)  # the replica ends while nothing is read
                assert final is not None
                assert final.state == AppState.SUCCEEDED
                while events.statistics().tasks_waiting_send < 1:
                    await anyio.sleep(0.01)  # await a reader blocked on the full buffer
                statistics = events.statistics()
                assert statistics.max_buffer_size == EVENTS_BUFFER_SIZE  # bounded
                assert statistics.current_buffer_used == EVENTS_BUFFER_SIZE  # back-pressure
                rest = [event async for event in events]
        assert _per_stream(rest) == {("sh", 0, "stdout"): [f"{i}\n" for i in range(1, lines + 1)]}
        _assert_well_ordered([first, *rest])


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_leaving_or_cancelling_the_consumer_leaves_the_app_running_and_leaks_nothing() -> (
    None
):
    async with get_runner() as runner:
        handle = await runner.run(_sh(TWO_PHASES, replicas=2), SCHED)
        await _read_lines(runner, handle, BEFORE_GO)  # every reader opened once, then left
        fds, tasks = _open_fds(), len(asyncio.all_tasks())

        await _read_lines(runner, handle, 1)  # leaving the block
        assert (_open_fds(), len(asyncio.all_tasks())) == (fds, tasks)

        seen: list[AppEvent] = []
        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as consumers:

                async def consume() -> None:
                    async with runner.events(handle) as events:
                        async for event in events:
                            seen.append(event)
                            if len(seen) == 3:
                                consumers.cancel_scope.cancel()  # a client disconnects

                consumers.start_soon(consume)
        # the events of a batch already received come without an await, so the
        # cancellation ends the stream at its next await: within what was written
        assert 3 <= len(seen) <= 1 + BEFORE_GO
        assert (_open_fds(), len(asyncio.all_tasks())) == (fds, tasks)

        status = await runner.status(handle)
        assert status is not None
        assert status.state == AppState.RUNNING
        Path("go").touch()
        with anyio.fail_after(LIMIT):
            final = await runner.wait(handle)
        assert final is not None
        assert final.state == AppState.SUCCEEDED


async def test_an_unknown_app_raises_on_entering_and_cancel_stays_a_no_op() -> None:
    async with get_runner() as runner:
        handle = f"{SCHED}://{runner.name()}/never-submitted-0"
        with pytest.raises(UnknownAppException):
            async with runner.events(handle):
                raise AssertionError("entered the events of an unknown app")
        await runner.cancel(handle)  # TorchX's no-op: not an error
        assert await runner.status(handle) is None  # how a caller tells "unknown" (404)


def test_each_backend_says_which_log_streams_it_can_read() -> None:
    runner = get_runner()  # scheduler_capabilities needs no entered runner
    every = frozenset(Stream)
    declared = {
        name: runner.scheduler_capabilities(name).log_streams
        for name in ("local_cwd", "local_dir", "local_docker", "slurm", "kubernetes")
    }
    assert declared == {
        "local_cwd": every,
        "local_dir": every,
        "local_docker": every,
        "slurm": frozenset({Stream.STDOUT, Stream.STDERR}),  # .out and .err, no combined
        "kubernetes": frozenset({Stream.COMBINED}),  # one log per container
    }
    with pytest.raises(ValueError, match="separate"):
        slurm_log_file_name("1", "r", 0, Stream.COMBINED)


# ----------------------------------------------------------------- an in-memory scheduler


class ScriptedScheduler(Scheduler[AppDef]):
    """Apps whose state and log lines the test sets, one combined log per replica."""

    capabilities = Capabilities(log_streams=frozenset({Stream.COMBINED}))

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__("scripted", session_name)
        self.states: dict[str, AppState] = {}
        self.reasons: dict[str, str] = {}  # a PENDING app's pending_reason
        self.logs: dict[str, list[str]] = {}
        self.changed = anyio.Event()
        self.log_error: Exception | None = None

    def set(self, app_id: str, state: AppState | None = None, *lines: str) -> None:
        if state is None:
            self.states.pop(app_id)
        else:
            self.states[app_id] = state
        self.logs[app_id].extend(lines)
        self.changed.set()
        self.changed = anyio.Event()

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[AppDef]:
        return AppDryRunInfo(app, repr)

    async def schedule(self, dryrun_info: AppDryRunInfo[AppDef]) -> str:
        app_id = f"app-{len(self.logs)}"
        self.states[app_id] = AppState.PENDING
        self.logs[app_id] = []
        return app_id

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        if app_id not in self.states:
            return None
        state = self.states[app_id]
        return DescribeAppResponse(
            app_id=app_id, state=state, pending_reason=self.reasons.get(app_id)
        )

    async def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        return [ListAppResponse(app_id=a, state=s) for a, s in self.states.items()]

    async def _cancel_existing(self, app_id: str) -> None:
        self.set(app_id, AppState.CANCELLED)

    async def _wait_until(
        self, app_id: str, done: Callable[[DescribeAppResponse], bool], timeout: float | None
    ) -> DescribeAppResponse | None:
        while (now := await self.describe(app_id)) is not None and not done(now):
            await self.changed.wait()
        return now

    async def _log_blocks(
        self, app_id: str, query: LogQuery, start: int
    ) -> AsyncIterator[LogBlock]:
        assert query.streams == Stream.COMBINED
        sent = start  # a position is the number of lines before a block
        while True:
            if self.log_error is not None:
                raise self.log_error
            lines = self.logs[app_id]
            while sent < len(lines):
                sent += 1
                yield sent - 1, (lines[sent - 1],)
            if app_id not in self.states or is_terminal(self.states[app_id]):
                return
            await self.changed.wait()


@asynccontextmanager
async def scripted_runner() -> AsyncIterator[tuple[Runner, ScriptedScheduler]]:
    """A runner whose ``scripted`` scheduler is the test's :class:`ScriptedScheduler`."""
    sched = ScriptedScheduler("test")

    def factory(session_name: str, **kwargs: Any) -> ScriptedScheduler:
        return sched

    async with Runner("test", {"scripted": factory}, handle_signals=False) as runner:
        yield runner, sched


async def _consume_and_apply(
    runner: Runner, handle: str, sched: ScriptedScheduler, *changes: AppState | None
) -> None:
    """Read the stream; at its first event, make the changes (``None``: delete the app)."""
    app_id = handle.rsplit("/", 1)[1]
    async with runner.events(handle) as events:
        async for _ in events:
            for change in changes:
                sched.set(app_id, change)
            changes = ()


async def test_every_state_change_comes_in_order_on_a_combined_only_scheduler() -> None:
    async with scripted_runner() as (runner, sched):
        handle = await runner.run(_sh("x", replicas=1), "scripted")
        app_id = handle.rsplit("/", 1)[1]
        got: list[AppEvent] = []
        with anyio.fail_after(LIMIT):
            async with runner.events(handle) as events:
                async for event in events:
                    got.append(event)
                    if len(got) == 1:
                        sched.set(app_id, AppState.RUNNING, "a\n")
                    elif len(got) == 3:
                        sched.set(app_id, AppState.SUCCEEDED, "b\n")
        assert isinstance(got[0], StateEvent)
        assert got[0].state == AppState.PENDING
        # the change to RUNNING and the line written with it race; both come before "b"
        assert {(type(e).__name__, getattr(e, "line", None)) for e in got[1:3]} == {
            ("StateEvent", None),
            ("LogEvent", "a\n"),
        }
        assert isinstance(got[3], LogEvent)
        assert got[3].line == "b\n"
        assert _states(got) == [AppState.PENDING, AppState.RUNNING, AppState.SUCCEEDED]
        assert {e.stream for e in got if isinstance(e, LogEvent)} == {"combined"}
        _assert_well_ordered(got)


async def test_a_pending_apps_change_of_reason_is_a_state_event() -> None:
    async with scripted_runner() as (runner, sched):
        handle = await runner.run(_sh("x"), "scripted")
        app_id = handle.rsplit("/", 1)[1]
        sched.reasons[app_id] = "Priority"
        got: list[StateEvent] = []
        with anyio.fail_after(LIMIT):
            async with runner.events(handle) as events:
                async for event in events:
                    assert isinstance(event, StateEvent)
                    got.append(event)
                    if len(got) == 1:
                        sched.reasons[app_id] = "Resources"
                        sched.set(app_id, AppState.PENDING)
                    elif len(got) == 2:
                        sched.set(app_id, AppState.PENDING)  # no change: no event
                        sched.reasons.pop(app_id)
                        sched.set(app_id, AppState.SUCCEEDED)
        assert [(e.state, e.status.pending_reason) for e in got] == [
            (AppState.PENDING, "Priority"),
            (AppState.PENDING, "Resources"),
            (AppState.SUCCEEDED, None),
        ]
        assert got[1].to_json()["status"]["pending_reason"] == "Resources"
        _assert_well_ordered(list(got))
        resumed = await _read(runner, handle, cursor=got[1].cursor)
        assert [e.state for e in resumed if isinstance(e, StateEvent)] == [AppState.SUCCEEDED]


async def test_a_log_reader_error_and_a_vanished_app_come_out_as_themselves() -> None:
    async with scripted_runner() as (runner, sched):
        handle = await runner.run(_sh("x"), "scripted")
        with anyio.fail_after(LIMIT), pytest.raises(UnknownAppException):
            # deleted while followed
            await _consume_and_apply(runner, handle, sched, AppState.RUNNING, None)
        handle = await runner.run(_sh("x"), "scripted")
        sched.log_error = OSError("the log is gone")
        with anyio.fail_after(LIMIT), pytest.raises(OSError, match="the log is gone"):
            await _consume_and_apply(runner, handle, sched, AppState.RUNNING)


# ----------------------------------------------------------------- local_docker


@pytest.mark.docker
async def test_local_docker_streams_stdout_and_stderr_apart_and_resumes(
    docker_image: str,
) -> None:
    script = "echo out 1; echo err 1 >&2; echo out 2; echo err 2 >&2"
    app = AppDef("events", [Role("r", docker_image, entrypoint="sh", args=["-c", script])])
    async with get_runner(handle_signals=False) as runner:
        handle = await runner.run(app, "local_docker")
        try:
            with anyio.fail_after(120):
                await runner.wait(handle)
                events = await _read(runner, handle)
                _assert_well_ordered(events)
                assert _states(events) == [AppState.SUCCEEDED]
                assert _per_stream(events) == {
                    ("r", 0, "stdout"): ["out 1\n", "out 2\n"],
                    ("r", 0, "stderr"): ["err 1\n", "err 2\n"],
                }
                rest = await _read(runner, handle, cursor=events[1].cursor)
                assert _per_stream(rest) == _per_stream(events[2:])
                assert _states(rest) == [AppState.SUCCEEDED]
        finally:
            await runner.delete(handle)
