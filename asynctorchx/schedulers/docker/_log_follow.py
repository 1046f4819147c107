"""Replica logs of ``local_docker``: a container's log read, or followed across restarts.

:func:`log_blocks` makes the engine's log requests (``GET /containers/{id}/logs``, Docker
Engine API) for one replica: a single read, or a follow across the restarts of its
restart policy until it stopped for good (TorchX 0.7.0's
``torchx.schedulers.docker_scheduler`` follows one run only), awaiting the engine's
events. The frames become whole lines in
:class:`~asynctorchx.schedulers.docker._log_frames.LogLines`.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

import anyio

from asynctorchx.errors import DockerEngineError
from asynctorchx.schedulers.api import Stream
from asynctorchx.schedulers.docker._engine import Engine, EventStream, StreamBody
from asynctorchx.schedulers.docker._log_frames import LogLines
from asynctorchx.schedulers.docker._state import (
    STATE_EVENTS,
    STOP_EVENTS,
    engine_time,
    event_action,
    ns_to_engine,
)
from asynctorchx.schedulers.toolkit import LogBlock, LogQuery, race

#: How many of the last frames a follower compares with the log's end (:func:`_caught_up`).
CAUGHT_UP_FRAMES = 32

#: Seconds without data after which a follow read on after the container stopped is
#: closed (see :meth:`LogLines.worth_draining`); a choice of speed, never of lines.
DRAIN_QUIET_SECONDS = 0.1

#: While a followed log flows, how long one read of it waits alone (seconds) before the
#: follower awaits the engine's events beside it (a race, whose task group costs ~0.1 ms:
#: more than the frames of a chunk), and how often, at most, the events the engine has
#: already sent are taken meanwhile; a choice of speed, never of lines.
FLOWING_SECONDS = 0.05

#: The engine's answers to a log request for a container that is removed (404) or being
#: removed or dead (409: "can not get logs from container which is dead or marked for
#: removal"): its log is gone, so a read or a follow ends there.
GONE = frozenset({404, 409})


async def log_blocks(
    engine: Engine, info: Mapping[str, Any], query: LogQuery, start: int = 0
) -> AsyncGenerator[LogBlock, None]:
    """Stream a container's log from the engine as whole lines, a received chunk's at a
    time (an async generator of ``toolkit.LogBlock``).

    Lines keep their ``\\n`` (frames are reassembled per stream; a last line without one
    is yielded as it is when its run ends). Of ``query``: ``since`` keeps the lines the
    engine stamped at or after it (a naive ``datetime`` is local time); ``until`` the
    lines stamped at or before it, and a follow stops then; ``should_tail`` follows the
    container, across restarts by its restart policy, until it has stopped for good (or
    is removed) and every line was yielded, awaiting the engine's events (no polling);
    ``streams`` picks stdout, stderr or combined (the default); ``regex`` filters.

    A block's position, for stdout or stderr, is :meth:`LogLines.position` before it: the
    engine's stamp of the last line delivered and how many lines had that stamp, so a
    resume asks the engine for the log from that stamp and drops that many lines: its
    cost does not grow with the log. The two streams' stamps can interleave out of order
    in the combined log, so a combined read's position is the number of lines before
    the block, and its resume reads the log again and skips them.

    Args:
        engine: the engine.
        info: the container's inspect.
        query: what to read (its role and replica are the container's).
        start: 0, or a block's position given before.
    """
    stream = query.stream_or(Stream.COMBINED)
    params = {
        "stdout": "1" if stream != Stream.STDERR else "0",
        "stderr": "1" if stream != Stream.STDOUT else "0",
        "timestamps": "1",
    }
    if query.until is not None:
        params["until"] = engine_time(query.until)
    since = query.since
    since_ns = int(since.timestamp() * 1_000_000) * 1000 if since is not None else None
    lines = LogLines(since_ns, bool(info["Config"].get("Tty")), rereads=query.should_tail)
    counted = stream == Stream.COMBINED
    if start and not counted:
        lines.resume_at(start)
    cid = info["Id"]
    if query.should_tail:
        source = _tail(engine, cid, lines, params, query.until)
    else:
        source = _read_logs(engine, cid, lines, params, final=True)
    pattern = query.pattern
    index = 0  # a combined read: lines kept before this block
    async with contextlib.aclosing(source) as produced:
        async for block in produced:
            if pattern is not None:
                block = [line for line in block if pattern.search(line) is not None]
            if not counted:
                yield lines.block_position, block
            elif index + len(block) > start:
                skipped = max(start - index, 0)
                yield index + skipped, block[skipped:] if skipped else block
            index += len(block)


async def _read_logs(
    engine: Engine, cid: str, lines: LogLines, params: Mapping[str, str], final: bool
) -> AsyncGenerator[list[str], None]:
    """Yield the lines the engine has now (one ``GET /containers/{id}/logs``), a block
    at a time (the lines of a chunk received: one yield each, not one a line).

    ``final``: the container's run is over, so an unfinished last line is yielded. A
    container removed (or being removed) meanwhile has no log any more: the read ends
    with the lines it got (the engine's 404 or 409, see :data:`GONE`).
    """
    if await _caught_up(engine, cid, lines, params):
        if final and (last := lines.flush()):
            yield last
        return
    query = dict(params, follow="0")
    resume = lines.begin_request()
    if resume is not None:
        query["since"] = ns_to_engine(max(resume, 0))
    try:
        async with engine.stream(f"containers/{cid}/logs", query) as body:
            while not body.eof:
                await body.fill()
                if block := lines.take(body.buffer, body.eof):
                    yield block
    except DockerEngineError as err:
        if err.status not in GONE:
            raise
        # removed (`docker rm -f`) meanwhile: its log went with it; the lines read are kept
    if final and (last := lines.flush()):
        yield last


async def _caught_up(engine: Engine, cid: str, lines: LogLines, params: Mapping[str, str]) -> bool:
    """Whether a follower has consumed the container's whole log as it is now.

    A follower's frames are the log's first frames in its order: when the log's last
    :data:`CAUGHT_UP_FRAMES` frames (the engine's ``tail``) are the last it consumed, stamp,
    stream and bytes alike, nothing is after them and the re-read of the last ``REREAD_NS``
    (for a burst, up to 65,536 frames served again) is not needed. False for a single
    read, a TTY container or nothing consumed: the caller re-reads.
    """
    if not lines.rereads or lines.tty:
        return False
    expected = lines.last_keys(CAUGHT_UP_FRAMES)
    if not expected:
        return False
    query = dict(params, follow="0", tail=str(len(expected)))
    try:
        async with engine.stream(f"containers/{cid}/logs", query) as body:
            while not body.eof:
                await body.fill()
            return lines.frame_keys(body.buffer) == expected
    except DockerEngineError as err:
        if err.status not in GONE:
            raise
        return False  # removed meanwhile: the caller's read ends the same way


async def _tail(
    engine: Engine, cid: str, lines: LogLines, params: Mapping[str, str], until: datetime | None
) -> AsyncGenerator[list[str], None]:
    """Follow the container's log across restarts until it stopped for good (blocks of lines).

    Subscribes to the container's events first, then loops: inspect; a running
    container's log is followed until a ``die``/``stop``/``destroy`` event (the engine
    may keep a follow open after the exit, or end it before the last lines: the next
    read picks up from the last frame seen); a stopped one's log is read to its end;
    a restarting (or not yet started) one is awaited on its next event. Ends when the
    container is stopped for good, removed (also by ``docker rm -f`` in the middle of a
    read: the engine's 404 or 409 ends it, never raised), or ``until`` passed.
    """
    deadline = math.inf
    if until is not None:
        deadline = anyio.current_time() + (until.timestamp() - time.time())
    filters = {"type": ["container"], "container": [cid], "event": list(STATE_EVENTS)}
    async with engine.events(filters) as events:
        while anyio.current_time() < deadline:
            status = await _container_status(engine, cid)
            if status in (None, "removing"):
                break  # removed (`docker rm -f`), or being removed: its log goes with it
            if status in ("running", "paused"):
                async for block in _follow(engine, cid, lines, params, events, deadline):
                    yield block
                continue
            async for block in _read_logs(engine, cid, lines, params, final=True):
                yield block
            if status not in ("restarting", "created"):
                return  # exited or dead: stopped for good, every line yielded
            waits: list[Callable[[], Awaitable[Any]]] = [events.fill]
            if status == "restarting":  # a failed restart logs no event
                waits.append(functools.partial(engine.wait_stopped, cid))
            if deadline < math.inf:
                waits.append(functools.partial(anyio.sleep_until, deadline))
            await race(waits)
            events.pop()  # each event only prompts the next inspect
    # until passed while following (the lines stamped up to it), or the container is
    # being removed (the lines the engine still serves, if any)
    async for block in _read_logs(engine, cid, lines, params, final=True):
        yield block


async def _more(body: StreamBody, events: EventStream, deadline: float, stopped: bool) -> bool:
    """Await more of a followed log, an event or ``deadline``; False: stop following
    (once ``stopped``, nothing came for :data:`DRAIN_QUIET_SECONDS`).

    While the log flows its next chunk is awaited alone (for up to
    :data:`FLOWING_SECONDS`); only a log that pauses is raced with the events.
    """
    if stopped:  # read what the engine still sends, while it sends
        with anyio.move_on_after(DRAIN_QUIET_SECONDS):
            await body.fill()
            return True
        return False
    with anyio.move_on_after(min(FLOWING_SECONDS, deadline - anyio.current_time())):
        await body.fill()
        return True
    waits: list[Callable[[], Awaitable[Any]]] = [body.fill, events.fill]
    if deadline < math.inf:
        waits.append(functools.partial(anyio.sleep_until, deadline))
    await race(waits)
    return True


async def _sent_events(events: EventStream) -> None:
    """Take in the events the engine has already sent, without awaiting more."""
    with anyio.move_on_after(0):  # cancels the read only if it would wait
        await events.fill()


async def _container_status(engine: Engine, cid: str) -> str | None:
    """The container's ``State.Status`` (``running``, ``exited``...); ``None``: removed."""
    try:
        info = await engine.json(f"containers/{cid}/json")
    except DockerEngineError as err:
        if err.status == 404:
            return None
        raise
    return str(info["State"].get("Status"))


async def _follow(
    engine: Engine,
    cid: str,
    lines: LogLines,
    params: Mapping[str, str],
    events: EventStream,
    deadline: float,
) -> AsyncIterator[list[str]]:
    """Follow a running container's log until it stops (an event) or ``deadline``, yielding
    the lines of each chunk received as a block.

    Once it stopped, a follower near the log's end (:meth:`LogLines.worth_draining`) reads
    on while the engine sends, so the next read finds the log consumed (:func:`_caught_up`);
    one far behind stops at once and the next read gets the rest.

    Returns at once when the engine refuses the follow because the container is removed
    or being removed (:data:`GONE`); the caller's next inspect sees it gone.
    """
    query = dict(params, follow="1")
    resume = lines.begin_request()
    if resume is not None:
        query["since"] = ns_to_engine(max(resume, 0))
    stopped = False
    next_events = anyio.current_time() + FLOWING_SECONDS
    try:
        async with engine.stream(f"containers/{cid}/logs", query) as body:
            while True:
                if block := lines.take(body.buffer, body.eof):
                    yield block
                if not stopped:
                    if anyio.current_time() >= next_events:
                        await _sent_events(events)
                        next_events = anyio.current_time() + FLOWING_SECONDS
                    stops = [e for e in events.pop() if event_action(e) in STOP_EVENTS]
                    stopped = bool(stops)
                    if stopped and not lines.worth_draining(int(stops[0].get("timeNano") or 0)):
                        break
                if body.eof or anyio.current_time() >= deadline:
                    break
                if not await _more(body, events, deadline, stopped):
                    break
    except DockerEngineError as err:
        if err.status not in GONE:
            raise
        return  # removed (or being removed) before the follow opened: the caller inspects
    if body.eof and not stopped:
        await _stop_event(events, deadline)


async def _stop_event(events: EventStream, deadline: float) -> None:
    """Await the container's stop event (or ``deadline``) after the engine ended a follow.

    The engine ends the follow when the process is exiting, and its die event is on its
    way (the engine logs it once the exit is recorded): awaiting it lets the next inspect
    see the run's end instead of reopening the follow in a busy loop.
    """
    with anyio.move_on_after(max(deadline - anyio.current_time(), 0.0)):
        while not any(event_action(event) in STOP_EVENTS for event in await events.next_batch()):
            pass
