"""``local_docker``'s replica logs: the engine's log frames as lines, read or followed.

A position is a :class:`~asynctorchx.schedulers.toolkit.StampSkip` over the frame stamp:
the engine's ``since`` is inclusive, so a read skips the lines counted at that stamp.
"""

from __future__ import annotations

import contextlib
import functools
import math
import struct
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping

import anyio

from asynctorchx.errors import UnknownAppException
from asynctorchx.schedulers.api import Stream
from asynctorchx.schedulers.docker._containers import find_container
from asynctorchx.schedulers.docker._engine import Engine, EngineEvents, StreamBody, ns_to_engine
from asynctorchx.schedulers.docker._errors import DockerEngineError, DockerEngineUnreachableError
from asynctorchx.schedulers.docker._state import STATE_EVENTS, STOP_EVENTS
from asynctorchx.schedulers.toolkit import (
    MAX_LINE_BYTES,
    STAMPED_START,
    LineAssembler,
    LogBlock,
    LogPosition,
    LogQuery,
    Stamped,
    StampedPair,
    StampSkip,
    format_rfc3339_ns,
    parse_rfc3339_ns,
    position_of,
    race,
)

STDOUT, STDERR = 1, 2

_HEADER = struct.Struct(">B3xL")

#: A follow resumes no earlier than this (ns) before its newest frame: the engine stamps a
#: frame when it reads the pipe, so an unconsumed frame is stamped at most that much earlier.
REREAD_NS = 1_000_000_000

#: Seconds without data after which a follow the engine keeps open past the stop is closed.
DRAIN_QUIET_SECONDS = 0.1

#: A container removed (404) or being removed or dead (409): its log is gone, the read ends.
GONE = frozenset({404, 409})


def _text(ns: int) -> bytes:
    """``ns`` as the engine stamps a frame (fixed width: text order is time order)."""
    return format_rfc3339_ns(ns).encode()


def _ns(stamp: bytes | bytearray) -> int:
    return parse_rfc3339_ns(stamp.decode()) or 0


def _tty_frames(body: bytearray, at_eof: bool) -> bytearray:
    """The whole lines (at its end, all) of a TTY container's raw ``body`` as stdout frames."""
    end = len(body) if at_eof else body.rfind(b"\n") + 1
    framed = bytearray()
    start = 0
    while start < end:  # "\r" (a terminal's "\r\n") stays in the line
        stop = body.find(b"\n", start, end) + 1 or end
        framed += _HEADER.pack(STDOUT, stop - start) + body[start:stop]
        start = stop
    del body[:end]
    return framed


def _stamp(body: bytearray, start: int, end: int) -> tuple[bytes | bytearray, int]:
    """The stamp of frame ``body[start:end]`` (``b""``: none) and where its payload starts."""
    # the engine's own form, 30 bytes then "Z ", told by three bytes: this runs for every
    # frame (benchmark 7 logs, the re-read and follow rows)
    fast = end - start > 30 and body[start + 29] == 0x5A and body[start + 30] == 0x20
    if fast and body[start] != 0x30:  # "0001-01-01...": the zero time
        return body[start : start + 30], start + 31
    space = body.find(b" ", start, min(start + 40, end))
    text = bytes(body[start:space]).decode("ascii", "replace") if space > 0 else ""
    if text.startswith("0001-01-01"):
        return b"", space + 1
    ns = parse_rfc3339_ns(text)
    return (b"", start) if ns is None else (_text(ns), space + 1)


class _Stream(StampSkip[bytes | bytearray]):
    """One stream of a read: its position, its line assembler and the line going on."""

    __slots__ = ("assembler", "fed", "part", "skip_bytes")

    def __init__(self, position: Stamped) -> None:
        super().__init__(_text(position.ns) if position.ns else b"", position.lines)
        self.assembler = LineAssembler(MAX_LINE_BYTES)
        #: Bytes of the line going on consumed, and their stamp.
        self.fed = 0
        self.part: bytes | bytearray = b""
        #: Bytes of the line going on that the current request sends again.
        self.skip_bytes = 0

    def delivered_bytes(self, stamp: bytes | bytearray, ends_line: bool, size: int) -> int:
        """How many of a frame's ``size`` payload bytes came before; moves past the line it ends."""
        if not stamp:  # nothing to place it by: new, and the position stays
            return 0
        if self.repeats(stamp, ends_line):
            return size
        if stamp != self.floor or not self.skip_bytes:
            return 0
        dropped = min(self.skip_bytes, size)
        self.skip_bytes -= dropped
        return dropped


def _position(marks: list[tuple[bytes | bytearray, int]]) -> Stamped | StampedPair:
    stamped = [Stamped(_ns(mark), count) if mark else STAMPED_START for mark, count in marks]
    return StampedPair(*stamped) if len(stamped) == 2 else stamped[0]


class FrameParser:
    """Whole log lines from the engine's frames of one container, over several requests."""

    def __init__(self, since_ns: int | None, tty: bool, streams: tuple[int, ...]) -> None:
        self.tty = tty
        self.streams = streams
        self._since = b"" if since_ns is None else _text(since_ns)
        self._state = [_Stream(STAMPED_START) for _ in range(3)]  # by header number
        self._newest: bytes | bytearray = b""
        #: Each stream's (stamp text, count) where the last take's lines start.
        self._block = self._marks()

    def _marks(self) -> list[tuple[bytes | bytearray, int]]:
        return [(self._state[kind].mark, self._state[kind].count) for kind in self.streams]

    def position(self) -> Stamped | StampedPair:
        """Where reading again gives the lines after those taken."""
        return _position(self._marks())

    @property
    def block_position(self) -> Stamped | StampedPair:
        """The :meth:`position` before the last :meth:`take` or :meth:`flush`."""
        return _position(self._block)

    def resume_at(self, start: LogPosition) -> None:
        """Start reading after ``start``: 0, or a :meth:`position` of a read of these streams."""
        given: Stamped | StampedPair | None
        if len(self.streams) == 2:
            given = position_of(start, StampedPair, "local_docker combined")
        else:
            given = position_of(start, Stamped, "local_docker")
        if given is not None:
            each = given if isinstance(given, StampedPair) else [given]
            for stream, stamped in zip(self.streams, each, strict=True):
                self._state[stream] = _Stream(stamped)
            self._block = self._marks()

    def begin_request(self) -> int | None:
        """Start the next request; return its ``since`` (ns), or ``None``: the log's start."""
        recent = _text(max(_ns(self._newest) - REREAD_NS, 0)) if self._newest else b""
        floors = []
        for kind in self.streams:
            state = self._state[kind]
            going_on = state.part if state.fed else b""
            state.begin(max(going_on or max(state.mark, recent), self._since))
            state.skip_bytes = state.fed
            floors.append(state.floor)
        return _ns(min(floors)) if all(floors) else None

    def take(self, body: bytearray, at_eof: bool) -> list[str]:
        """Consume the whole frames at the start of ``body``; return the lines they end."""
        self._start_block()
        if self.tty:
            body = _tty_frames(body, at_eof)
        lines: list[str] = []
        run: list[bytearray] = []  # payloads of consecutive frames of one stream, fed at once
        state = run_state = self._state[STDOUT]
        pos, size = 0, len(body)
        while size - pos >= 8:
            kind, length = _HEADER.unpack_from(body, pos)
            start, end = pos + 8, pos + 8 + length
            if end > size:
                break
            pos = end
            state = self._state[STDERR if kind == STDERR else STDOUT]
            if state is not run_state:
                if run:
                    lines += run_state.assembler.feed(b"".join(run))
                    run = []
                run_state = state
            stamp, begin = _stamp(body, start, end)
            ends_line = body[end - 1] == 0x0A
            begin += state.delivered_bytes(stamp, ends_line, end - begin)
            if begin == end:
                continue
            if ends_line:
                state.fed = 0
            else:
                state.fed += end - begin
                state.part = stamp
            run.append(body[begin:end])
        del body[:pos]
        for kind in self.streams:  # the newest stamp consumed: a line ended or going on
            self._newest = max(self._newest, self._state[kind].mark, self._state[kind].part)
        return lines + run_state.assembler.feed(b"".join(run)) if run else lines

    def _start_block(self) -> None:
        """The lines taken next start at the position, unless a stream is inside a cut line."""
        states = [self._state[kind] for kind in self.streams]
        if all(state.fed <= state.assembler.pending_bytes for state in states):
            self._block = self._marks()

    def flush(self) -> list[str]:
        """Return each stream's unfinished line (a run's end); the position moves past it."""
        self._start_block()
        lines: list[str] = []
        for kind in self.streams:
            state = self._state[kind]
            if last := state.assembler.flush():
                lines += last
                state.delivered(state.part)
                state.fed = 0
        return lines


async def log_blocks(
    engine: Engine, app_id: str, handle: str, query: LogQuery, start: LogPosition = 0
) -> AsyncGenerator[LogBlock, None]:
    """Stream the log of a replica's container as whole lines, a received chunk's at a time."""
    container = await find_container(engine, app_id, query)
    if container is None:
        raise UnknownAppException(handle)
    stream = query.stream_or(Stream.COMBINED)
    kinds = {Stream.STDOUT: (STDOUT,), Stream.STDERR: (STDERR,)}.get(stream, (STDOUT, STDERR))
    params = {"stdout": str(int(STDOUT in kinds)), "stderr": str(int(STDERR in kinds))}
    params["timestamps"] = "1"
    if query.until is not None:  # datetime.timestamp reads a naive one as local time
        params["until"] = ns_to_engine(round(query.until.timestamp() * 1_000_000) * 1000)
    since = query.since
    since_ns = int(since.timestamp() * 1_000_000) * 1000 if since is not None else None
    lines = FrameParser(since_ns, container.tty, kinds)
    lines.resume_at(start)
    if query.should_tail:
        deadline = math.inf  # the follow's end in anyio's clock
        if query.until is not None:
            deadline = anyio.current_time() + (query.until.timestamp() - time.time())
        source = _tail(engine, container.id, lines, params, deadline)
    else:
        source = _read(engine, container.id, lines, params)
    pattern = query.pattern
    async with contextlib.aclosing(source) as produced:
        async for block in produced:
            if pattern is not None:
                block = [line for line in block if pattern.search(line) is not None]
            yield LogBlock(lines.block_position, block)


@contextlib.asynccontextmanager
async def _request(
    engine: Engine, cid: str, lines: FrameParser, params: Mapping[str, str], follow: bool
) -> AsyncIterator[StreamBody]:
    """The next log request of ``lines``, from its position."""
    query = dict(params, follow=str(int(follow)))
    if (since := lines.begin_request()) is not None:
        query["since"] = ns_to_engine(since)
    async with engine.stream(f"containers/{cid}/logs", query) as body:
        yield body


async def _read(
    engine: Engine, cid: str, lines: FrameParser, params: Mapping[str, str], request: bool = True
) -> AsyncGenerator[list[str], None]:
    """Yield the lines the engine has (asked again only if ``request``), then the unfinished."""
    try:
        if request:
            async with _request(engine, cid, lines, params, follow=False) as body:
                while not body.eof:
                    await body.fill()
                    if block := lines.take(body.buffer, body.eof):
                        yield block
    except DockerEngineError as err:
        if err.status not in GONE:
            raise
    if last := lines.flush():
        yield last


async def _tail(
    engine: Engine, cid: str, lines: FrameParser, params: Mapping[str, str], deadline: float
) -> AsyncGenerator[list[str], None]:
    """Follow the container's log across restarts until it stopped for good."""
    filters = {"type": ["container"], "container": [cid], "event": list(STATE_EVENTS)}
    followed_run: int | None = None  # the restart count of the run a follow gave whole
    async with engine.events(filters) as events:
        while anyio.current_time() < deadline:
            events.resumed = False
            try:
                found = await engine.inspect(cid)
                if found is None or found.status == "removing":
                    break
                if found.status in ("running", "paused"):
                    followed_run = None
                    try:
                        async with _request(engine, cid, lines, params, follow=True) as body:
                            async for block in _follow(body, lines, events, deadline):
                                yield block
                    except DockerEngineError as err:
                        if err.status not in GONE:
                            raise
                        continue  # the next inspect sees it gone
                    # the engine ends a follow once the run's log is sent; its restart cuts it
                    if body.eof and not events.resumed:
                        followed_run = found.restart_count
                    continue
                whole = found.restart_count == followed_run
                async for block in _read(engine, cid, lines, params, request=not whole):
                    yield block
                if found.status not in ("restarting", "created"):
                    return
                await _next_event(engine, cid, events, deadline, found.status == "restarting")
            except DockerEngineUnreachableError:  # from the position, once it answers again
                await engine.answering()
    # until passed, or the container is being removed: the lines the engine still serves
    async for block in _read(engine, cid, lines, params):
        yield block


async def _next_event(
    engine: Engine, cid: str, events: EngineEvents, deadline: float, restarting: bool
) -> None:
    """Await the container's next event (each only prompts the next inspect) or ``deadline``."""
    waits: list[Callable[[], Awaitable[object]]] = [events.fill]
    waits.append(functools.partial(anyio.sleep_until, deadline))
    if restarting:  # a failed restart logs no event
        waits.append(functools.partial(engine.wait_stopped, cid))
    await race(waits)
    events.pop()


async def _follow(
    body: StreamBody, lines: FrameParser, events: EngineEvents, deadline: float
) -> AsyncGenerator[list[str], None]:
    """Yield the lines of a followed log, a chunk's at a time, until the engine ends it,
    ``deadline``, or the container stopped (its event) and nothing came for
    :data:`DRAIN_QUIET_SECONDS`."""
    stopped = False
    while True:
        if block := lines.take(body.buffer, body.eof):
            yield block
        stopped = stopped or any(event.action in STOP_EVENTS for event in events.pop())
        if body.eof or anyio.current_time() >= deadline:
            break
        if stopped:
            with anyio.move_on_after(DRAIN_QUIET_SECONDS) as quiet:
                await body.fill()
            if quiet.cancelled_caught:
                return
        else:
            await race([body.fill, events.fill, functools.partial(anyio.sleep_until, deadline)])
    if body.eof and not stopped:
        # the engine ends the follow as the process exits, before it logs the die event:
        # awaited, the next inspect sees the run's end instead of following again
        with anyio.move_on_after(max(deadline - anyio.current_time(), 0.0)):
            while not any(e.action in STOP_EVENTS for e in events.pop()) and not events.resumed:
                await events.fill()
