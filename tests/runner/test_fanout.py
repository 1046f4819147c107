"""``Runner.subscribe``: one reader per app, every subscriber gets every event once.

Against the real ``local_cwd`` scheduler: two replicas write numbered lines to stdout and
stderr in two phases, each phase gated by a file the test creates, so that what each
subscriber has seen when the gate opens is known without timing guesses.
"""

from __future__ import annotations

import contextlib
import json
import operator
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from asynctorchx.errors import InvalidCursorError, UnknownAppException
from asynctorchx.runner import (
    AppEvent,
    LogEvent,
    Runner,
    StateEvent,
    SubscriberCutOff,
    Subscription,
    _fanout,
    get_runner,
)
from asynctorchx.specs.api import AppDef, AppState, Role, is_terminal, macros
from tests.isolation import isolate_from_user_config

SCHED = "local_cwd"
LIMIT = 120  # seconds: a safety bound, never a timing guess
FIRST = 300  # lines per stream before the gate `end`
SUBSCRIBERS = 50

#: Waits for `go`, writes FIRST numbered lines to stdout and stderr, waits for `end`,
#: writes one more to each, exits 0.
WRITER = (
    "while [ ! -e go ]; do sleep 0.02; done;"
    f" i=0; while [ $$i -lt {FIRST} ]; do"
    f" echo out {macros.replica_id} $$i; echo err {macros.replica_id} $$i >&2; i=$$((i+1)); done;"
    f" while [ ! -e end ]; do sleep 0.02; done; echo out {macros.replica_id} end;"
    f" echo err {macros.replica_id} end >&2"
)
#: As WRITER, but FIRST lines in chunks of CHUNK, chunk `c` once the file `c{c}` exists.
CHUNK = 10
CHUNKED = (
    f"c=0; i=0; while [ $$c -lt {FIRST // CHUNK} ]; do while [ ! -e c$$c ]; do sleep 0.02; done;"
    f" j=0; while [ $$j -lt {CHUNK} ]; do echo out {macros.replica_id} $$i;"
    f" echo err {macros.replica_id} $$i >&2; i=$$((i+1)); j=$$((j+1)); done; c=$$((c+1)); done;"
    f" while [ ! -e end ]; do sleep 0.02; done; echo out {macros.replica_id} end;"
    f" echo err {macros.replica_id} end >&2"
)
Key = tuple[str, int, str]


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user .torchxconfig, no TORCHX_* from the outer environment."""
    isolate_from_user_config(tmp_path, monkeypatch)


def _app(writer: str = WRITER) -> AppDef:
    role = Role("w", image=".", entrypoint="sh", args=["-c", writer], num_replicas=2)
    return AppDef("w", roles=[role])


def _expected() -> dict[Key, list[str]]:
    return {
        ("w", k, stream): [f"{name} {k} {i}\n" for i in [*range(FIRST), "end"]]
        for k in range(2)
        for stream, name in (("stdout", "out"), ("stderr", "err"))
    }


def _per_stream(events: Sequence[AppEvent]) -> dict[Key, list[str]]:
    streams: dict[Key, list[str]] = defaultdict(list)
    for event in events:
        if isinstance(event, LogEvent):
            streams[(event.role, event.replica_id, event.stream)].append(event.line)
    return dict(streams)


def _assert_exactly_once(events: Sequence[AppEvent]) -> None:
    """Every line once, in order per stream; cursors strictly increasing; terminal last."""
    cursors = [event.cursor for event in events]
    assert cursors == sorted(set(cursors))
    assert _per_stream(events) == _expected()
    states = [event.state for event in events if isinstance(event, StateEvent)]
    assert states == [AppState.RUNNING, AppState.SUCCEEDED]
    assert isinstance(events[-1], StateEvent)


async def _lines_seen(sub: Subscription, got: list[AppEvent], count: int) -> None:
    """Receive until ``count`` log lines are in ``got``."""
    while sum(isinstance(e, LogEvent) for e in got) < count:
        got.extend((await sub.receive()).events)


async def _receive_all(sub: Subscription, got: list[AppEvent]) -> None:
    async for batch in sub:
        got.extend(batch.events)


async def test_fifty_subscribers_one_cut_off_and_resumed_each_get_every_event_once() -> None:
    with anyio.fail_after(LIMIT):
        async with get_runner() as runner:
            handle = await runner.run(_app(), SCHED)
            received: list[list[AppEvent]] = [[] for _ in range(SUBSCRIBERS)]
            first_phase = [anyio.Event() for _ in range(SUBSCRIBERS - 1)]
            subscribed = [anyio.Event() for _ in range(SUBSCRIBERS)]
            shared: list[bool] = []

            async def fast(index: int) -> None:
                async with runner.subscribe(handle, max_buffer=1024) as sub:
                    shared.append(sub.shared)
                    subscribed[index].set()
                    await _lines_seen(sub, received[index], 4 * FIRST)
                    first_phase[index].set()
                    async for batch in sub:
                        received[index].extend(batch.events)

            async def slow() -> None:
                got = received[-1]
                async with runner.subscribe(handle, max_buffer=1) as sub:
                    subscribed[-1].set()
                    for event in first_phase:  # it reads nothing while the feed goes on
                        await event.wait()
                    with pytest.raises(SubscriberCutOff) as cut:
                        await _receive_all(sub, got)
                assert cut.value.cursor == got[-1].cursor
                assert sum(isinstance(e, LogEvent) for e in got) < 4 * FIRST
                # the others still follow the app: the feed still has what it missed
                async with runner.subscribe(handle, cursor=cut.value.cursor) as sub:
                    assert sub.shared
                    await _lines_seen(sub, got, 4 * FIRST)
                    Path("end").touch()
                    async for batch in sub:
                        got.extend(batch.events)

            async with anyio.create_task_group() as tasks:
                for index in range(SUBSCRIBERS - 1):
                    tasks.start_soon(fast, index)
                tasks.start_soon(slow)
                for event in subscribed:
                    await event.wait()
                Path("go").touch()
            assert shared == [True] * (SUBSCRIBERS - 1)
            for events in received:
                _assert_exactly_once(events)
            # one reader: every fast subscriber got the very same event objects
            assert all(
                len(events) == len(received[0]) and all(map(operator.is_, events, received[0]))
                for events in received[:-1]
            )


async def _subscribe_all(runner: Runner, handle: str, cursor: str | None) -> list[AppEvent]:
    async with runner.subscribe(handle, cursor=cursor) as sub:
        return [event async for batch in sub for event in batch.events]


async def test_a_subscriber_from_an_old_cursor_gets_exactly_the_rest() -> None:
    with anyio.fail_after(LIMIT):
        async with get_runner() as runner:
            handle = await runner.run(_app(), SCHED)
            Path("go").touch()
            async with runner.subscribe(handle) as live:
                early: list[AppEvent] = []
                await _lines_seen(live, early, 4 * FIRST)
                # a cursor of the feed's, 100 events back: joins the feed where it was
                async with runner.subscribe(handle, cursor=early[-100].cursor) as behind:
                    assert behind.shared
                    # a cursor of another stream (the feed of an earlier server, say)
                    other: list[AppEvent] = []
                    async with runner.events(handle) as events:
                        async for event in events:
                            other.append(event)
                            if len(other) == 151:
                                break
                    async with runner.subscribe(handle, cursor=other[150].cursor) as foreign:
                        Path("end").touch()
                        tail = [event async for batch in foreign for event in batch.events]
                    rest = [event async for batch in behind for event in batch.events]
                _assert_exactly_once(early[:-99] + rest)
                _assert_exactly_once(other + tail)
            assert await _subscribe_all(runner, handle, tail[-1].cursor) == []


async def test_batches_carry_their_server_sent_events_frames_made_once() -> None:
    with anyio.fail_after(LIMIT):
        async with get_runner() as runner:
            handle = await runner.run(_app(), SCHED)
            Path("go").touch()
            Path("end").touch()
            async with runner.subscribe(handle) as one, runner.subscribe(handle) as two:
                first, second = await one.receive(), await two.receive()
                assert first.shared is second.shared
                assert first.sse() is second.sse()
                event = first.events[0]
                data = json.dumps(event.to_json(), separators=(",", ":"))
                frame = f"event: {event.kind}\nid: {event.cursor}\ndata: {data}\n\n"
                assert first.sse().decode().startswith(frame)


async def test_a_refused_cursor_or_unknown_app_raises_on_subscribing_and_the_feed_lives_on() -> (
    None
):
    with anyio.fail_after(LIMIT):
        async with get_runner() as runner:
            handle = await runner.run(_app(), SCHED)
            with pytest.raises(InvalidCursorError):
                async with runner.subscribe(handle, cursor="garbage"):
                    raise AssertionError("a malformed cursor was accepted")
            async with runner.subscribe(handle) as sub:
                with pytest.raises(InvalidCursorError):
                    async with runner.subscribe(handle, cursor="garbage"):
                        raise AssertionError("a malformed cursor was accepted")
                Path("go").touch()
                Path("end").touch()
                _assert_exactly_once([event async for batch in sub for event in batch.events])
            with pytest.raises(UnknownAppException):
                async with runner.subscribe(f"{SCHED}://{runner.name}/nope"):
                    raise AssertionError("an unknown app was accepted")


async def test_close_ends_a_wait_and_closing_the_runner_ends_the_apps_stream() -> None:
    with anyio.fail_after(LIMIT):
        async with get_runner() as runner:
            handle = await runner.run(_app(), SCHED)
            async with runner.subscribe(handle) as sub:
                got = [event for event in (await sub.receive()).events]
                assert [type(event) for event in got] == [StateEvent]

                async with anyio.create_task_group() as tasks:

                    async def close_soon() -> None:
                        await anyio.wait_all_tasks_blocked()
                        sub.close()

                    tasks.start_soon(close_soon)
                    with pytest.raises(anyio.EndOfStream):
                        await sub.receive()  # the app waits for `go`: nothing comes
        async with get_runner() as runner:
            handle = await runner.run(_app(), SCHED)
            async with runner.subscribe(handle) as sub:
                await sub.receive()
                await runner.close()  # ends the local replicas: the app's end comes
                rest: list[AppEvent] = []
                await _receive_all(sub, rest)
                assert isinstance(rest[-1], StateEvent)
                assert is_terminal(rest[-1].state)


async def test_a_subscriber_from_before_the_kept_batches_catches_up_then_joins_the_feed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a feed that keeps 100 events, its cursors counting from a new position every
    # CHUNK lines (each chunk is read on its own): the early cursors are long gone from
    # it, and most count from other positions than a log's start
    monkeypatch.setattr(_fanout, "HISTORY_EVENTS", 100)
    monkeypatch.setattr(_fanout, "FEED_ANCHOR_LINES", CHUNK)
    with anyio.fail_after(LIMIT):
        async with get_runner() as runner:
            handle = await runner.run(_app(CHUNKED), SCHED)
            async with runner.subscribe(handle) as live:
                early: list[AppEvent] = []
                for chunk in range(FIRST // CHUNK):
                    Path(f"c{chunk}").touch()
                    await _lines_seen(live, early, 4 * CHUNK * (chunk + 1))
                assert len(early) > 4 * 100  # the first 400 events are dropped
                assert re.search(r"o[1-9]\d*:", early[500].cursor)  # past a log's start
                starts = {"first event": 0, "mid-way": 500, "the start": None}
                async with contextlib.AsyncExitStack() as stack:
                    behind = {
                        name: await stack.enter_async_context(
                            runner.subscribe(
                                handle, cursor=None if at is None else early[at].cursor
                            )
                        )
                        for name, at in starts.items()
                    }
                    Path("end").touch()
                    rest = [event async for batch in live for event in batch.events]
                    for name, sub in behind.items():
                        assert sub.shared, name
                        got = [event async for batch in sub for event in batch.events]
                        at = starts[name]
                        before = [] if at is None else early[: at + 1]
                        _assert_exactly_once(before + got)
                        # from the scheduler up to the seam, then the very events the live
                        # subscriber had: one reader
                        shared = {id(event): index for index, event in enumerate(early + rest)}
                        seam = next(i for i, e in enumerate(got) if id(e) in shared)
                        assert 0 < seam < len(got) - len(rest), name
                        joined_at = shared[id(got[seam])]
                        assert all(map(operator.is_, got[seam:], (early + rest)[joined_at:]))
                        assert joined_at > len(before) + 100, name  # far behind, caught up


async def test_take_ready_takes_every_batch_waiting_without_waiting_for_more() -> None:
    with anyio.fail_after(LIMIT):
        async with get_runner() as runner:
            handle = await runner.run(_app(CHUNKED), SCHED)
            async with runner.subscribe(handle) as live, runner.subscribe(handle) as lazy:
                seen: list[AppEvent] = []
                for chunk in range(3):  # three chunks, each read on its own: batches
                    Path(f"c{chunk}").touch()
                    await _lines_seen(live, seen, 4 * CHUNK * (chunk + 1))
                batches = [await lazy.receive(), *lazy.take_ready()]
                assert len(batches) > 3
                got = [event for batch in batches for event in batch.events]
                assert all(map(operator.is_, got, seen))
                assert len(got) == len(seen)
                assert lazy.cursor == seen[-1].cursor
                assert lazy.take_ready() == []  # nothing more now; it does not wait
