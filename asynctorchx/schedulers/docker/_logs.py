"""Replica logs of ``local_docker``: the engine's log frames as lines, read or followed.

The engine serves a container's log (``GET /containers/{id}/logs``, Docker Engine API)
as frames: an 8-byte header (stream, 0, 0, 0, big-endian size) unless the container has
a TTY, then, with ``timestamps=1``, the engine's stamp of the frame (RFC 3339 in UTC with
9 fraction digits, Docker's ``RFC3339NanoFixed``), a space and the payload. The engine
makes a frame of each line, or of each 16 KiB of a longer line, stamped alike.

:class:`FrameParser` turns the frames of one or several requests into whole lines per
stream (the toolkit's line rule) and keeps, per stream, a position (a
:class:`~asynctorchx.schedulers.toolkit.Stamped`: the stamp of the last line ended and how
many lines ended with it; a combined read's is a
:class:`~asynctorchx.schedulers.toolkit.StampedPair`). A stream's stamps never go back, so
a request from that stamp (``since``, inclusive) that drops that many lines there
(:class:`~asynctorchx.schedulers.toolkit.StampSkip`) goes on exactly after them: a
follower's next request and a reader resumed from a block's position (in this process or
another) read no line twice and lose none, and the engine sends only the log after the
position. :func:`log_blocks` makes the requests: one read, or a follow across
the restarts of the container's restart policy (TorchX 0.7.0's
``torchx.schedulers.docker_scheduler`` follows one run only), woken by the engine's events.
"""

from __future__ import annotations

import contextlib
import functools
import math
import struct
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from datetime import datetime

import anyio

from asynctorchx.errors import UnknownAppException
from asynctorchx.schedulers.api import Stream
from asynctorchx.schedulers.docker._containers import find_container
from asynctorchx.schedulers.docker._engine import (
    Engine,
    EngineEvents,
    StreamBody,
    ns_to_engine,
)
from asynctorchx.schedulers.docker._errors import DockerEngineError
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

#: The stream numbers of the engine's frame header.
STDOUT, STDERR = 1, 2

#: A frame's header: its stream, three zero bytes and its payload's size (big-endian).
_HEADER = struct.Struct(">B3xL")

#: A follower's next request starts for a stream without a line going on no earlier than
#: this long (ns) before the newest frame it consumed. Positions alone are exact, but
#: would read again from a quiet stream's last line (or the log's start when it wrote
#: none), however much the other stream wrote since. The engine stamps a frame when it
#: reads it from the container's pipe and writes the two streams' frames to one log in
#: turn, so a frame not consumed yet is written after the newest one consumed and stamped
#: at most moments before it.
REREAD_NS = 1_000_000_000

#: How many frames of the log's end a read from a position asks for first (``tail``):
#: when they reach back to the position, they are the rest of the log (:func:`_open`).
#: More than the lines of an engine's chunk (~500 of 100 B), so a resume from a block's
#: position near the end is served from the tail.
TAIL_FRAMES = 1024

#: Seconds without data after which a follow read on after the container stopped is
#: closed; a choice of speed, never of lines (benchmark 7 logs, the follow row).
DRAIN_QUIET_SECONDS = 0.1

#: While a followed log flows, how long one read of it waits alone (seconds) before the
#: follower awaits the engine's events beside it (a race, whose task group costs more
#: than the frames of a chunk), and how often, at most, the events the engine has
#: already sent are taken meanwhile; a choice of speed, never of lines (benchmark 7 logs,
#: the follow row).
FLOWING_SECONDS = 0.05

#: The engine's answers to a log request for a container that is removed (404) or being
#: removed or dead (409: "can not get logs from container which is dead or marked for
#: removal"): its log is gone, so a read or a follow ends there.
GONE = frozenset({404, 409})


def _text(ns: int) -> bytes:
    """``ns`` since the epoch as the engine stamps a frame (fixed width: text order is
    time order)."""
    return format_rfc3339_ns(ns).encode()


def _ns(stamp: bytes | bytearray) -> int:
    """The ns since the epoch of a stamp as :func:`_text` writes it."""
    return parse_rfc3339_ns(stamp.decode()) or 0


def _tty_frames(body: bytearray, at_eof: bool) -> bytearray:
    """Take the whole lines (at its end, all) of a TTY container's raw log ``body`` as
    stdout frames of the multiplexed body."""
    end = len(body) if at_eof else body.rfind(b"\n") + 1
    framed = bytearray()
    start = 0
    while start < end:  # "\r" (a terminal's "\r\n") stays in the line
        stop = body.find(b"\n", start, end) + 1 or end
        framed += bytes([STDOUT, 0, 0, 0]) + (stop - start).to_bytes(4, "big") + body[start:stop]
        start = stop
    del body[:end]
    return framed


def _stamp(body: bytes | bytearray, start: int, end: int) -> tuple[bytes, int]:
    """The stamp of the frame ``body[start:end]`` as :func:`_text` writes it, and where its
    payload starts. A stamp in another RFC 3339 form (an offset, fewer digits) is written
    so; the engine's zero time is no stamp (b""), nor is a frame without one (its whole
    text is the payload). :meth:`FrameParser.take` recognises the engine's own form first.
    """
    space = body.find(b" ", start, min(start + 40, end))
    text = bytes(body[start:space]).decode("ascii", "replace") if space > 0 else ""
    if text.startswith("0001-01-01"):
        return b"", space + 1
    ns = parse_rfc3339_ns(text)
    return (b"", start) if ns is None else (_text(ns), space + 1)


class _Stream(StampSkip[bytes | bytearray]):
    """One stream's state in a read: its position and the current request's start (the
    toolkit's resume-and-skip, over stamps as the engine writes them), its line splitter,
    and the line going on.

    Args:
        position: where its lines stopped: the stamp of the last line ended, and how many
            lines ended with it.
    """

    __slots__ = ("assembler", "fed", "part", "skip_bytes")

    def __init__(self, position: Stamped) -> None:
        super().__init__(_text(position.ns) if position.ns else b"", position.lines)
        self.assembler = LineAssembler(MAX_LINE_BYTES)
        #: Bytes of the line going on consumed, and their stamp.
        self.fed = 0
        self.part: bytes | bytearray = b""
        #: Bytes of the line going on that the current request sends again, to drop.
        self.skip_bytes = 0

    def repeated(self, stamp: bytes | bytearray, ends_line: bool, size: int) -> int | None:
        """Of a frame stamped at or before the current request's start (:attr:`floor`),
        how many payload bytes were delivered before (to drop); ``None``: all of it.

        Moves the position past the frame's line when the frame ends one not delivered.

        Args:
            stamp: the frame's stamp.
            ends_line: the frame ends its line.
            size: the frame's payload size (bytes).
        """
        if self.repeats(stamp, ends_line):
            return None  # before this request's start, or delivered before it
        if not self.skip_bytes:
            return 0
        dropped = min(self.skip_bytes, size)  # the start of the line going on
        self.skip_bytes -= dropped
        return None if dropped == size else dropped


def _position(marks: list[tuple[bytes | bytearray, int]]) -> Stamped | StampedPair:
    """The position of the streams' (stamp text, count) marks, one or both streams'."""
    stamped = [Stamped(_ns(mark), count) if mark else STAMPED_START for mark, count in marks]
    return StampedPair(*stamped) if len(stamped) == 2 else stamped[0]


class FrameParser:
    """Whole log lines from the engine's multiplexed frames of one container, over several
    requests.

    Each stream's frames go to its own
    :class:`~asynctorchx.schedulers.toolkit.LineAssembler`, so a line the engine split
    into 16 KiB frames comes whole, and one over
    :data:`~asynctorchx.schedulers.toolkit.MAX_LINE_BYTES` (4 MiB) comes in pieces, each
    but the last without its ``\\n``, no byte added or lost. Per stream it keeps where its
    lines stopped (a :class:`~asynctorchx.schedulers.toolkit.Stamped`: the stamp of the
    last line ended and how many lines ended with it) and the bytes of the line going on;
    :meth:`begin_request` starts the next request there, and the frames it sends again
    are dropped, so memory is bounded by a read and a line.

    Args:
        since_ns: drop frames stamped before this (ns since the epoch), or ``None``.
        tty: the container has a TTY: the body is raw text, a frame a line, all stdout.
        streams: the streams read (:data:`STDOUT`, :data:`STDERR` or both).
    """

    def __init__(self, since_ns: int | None, tty: bool, streams: tuple[int, ...]) -> None:
        self.tty = tty
        self.streams = streams
        self._since = b"" if since_ns is None else _text(since_ns)
        #: Indexed by the stream's number in the frame header (0 unused).
        self._state = [_Stream(STAMPED_START) for _ in range(3)]
        self._newest: bytes | bytearray = b""
        #: The frames consumed are the log's first, in its order, none left out by
        #: ``since`` (see :meth:`reaches_back`).
        self._in_order = since_ns is None
        #: Each stream's (stamp text, count) where the lines of the last :meth:`take` or
        #: :meth:`flush` start, made a position only when asked for (once per block, not
        #: per take): see :attr:`block_position`.
        self._block = self._marks()

    def _marks(self) -> list[tuple[bytes | bytearray, int]]:
        return [(self._state[kind].mark, self._state[kind].count) for kind in self.streams]

    def position(self) -> Stamped | StampedPair:
        """Where reading again gives the lines after those taken so far: a
        :class:`~asynctorchx.schedulers.toolkit.Stamped` for one stream, a
        :class:`~asynctorchx.schedulers.toolkit.StampedPair` for both."""
        return _position(self._marks())

    @property
    def block_position(self) -> Stamped | StampedPair:
        """Where the lines of the last :meth:`take` or :meth:`flush` start: the
        :meth:`position` before them, or the block before's while a stream is in a line
        cut at the 4 MiB bound (a position falls only between lines)."""
        return _position(self._block)

    def resume_at(self, start: LogPosition) -> None:
        """Start reading after ``start``: 0, or a :meth:`position` of a read of these streams.

        Raises:
            ValueError: ``start`` is not 0 or a position of a read of these streams.
        """
        given: Stamped | StampedPair | None
        if len(self.streams) == 2:
            given = position_of(start, StampedPair, "local_docker combined")
        else:
            given = position_of(start, Stamped, "local_docker")
        if given is None:
            return
        each = given if isinstance(given, StampedPair) else [given]
        for stream, stamped in zip(self.streams, each, strict=True):
            self._state[stream] = _Stream(stamped)
        self._in_order = self._in_order and not any(self._state[k].mark for k in self.streams)
        self._block = self._marks()

    def begin_request(self) -> int | None:
        """Set where the next request starts; return its ``since`` (ns), or ``None``.

        Per stream: at the line going on, else at the last line ended (no earlier than
        :data:`REREAD_NS` before the newest frame consumed), else at ``since_ns``.
        """
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
        """Consume the whole frames at the start of ``body``; return the lines they end.

        Consecutive payloads of one stream go to its assembler at once (the same lines as
        frame by frame), so a read of 100-byte lines is decoded once, not once a line;
        stamps are compared as the engine writes them. The work is per frame (benchmark 7
        logs).

        Args:
            body: the response body read so far; the frames consumed are removed from it.
            at_eof: the body is complete (a TTY body's last text is then a frame).
        """
        self._start_block()
        if self.tty:  # raw text, a frame a line: framed as the multiplexed body is
            body = _tty_frames(body, at_eof)
        run: list[bytearray] = []  # payloads of consecutive frames of one stream
        lines: list[str] = []
        run_kind = -1
        state = self._state[STDOUT]
        pos, size = 0, len(body)
        while size - pos >= 8:
            kind, length = _HEADER.unpack_from(body, pos)
            start = pos + 8
            end = start + length
            if end > size:
                break
            pos = end
            if kind != run_kind:  # another stream: the run so far goes to its assembler
                if run:
                    lines += state.assembler.feed(b"".join(run))
                    run = []
                run_kind = kind
                state = self._state[STDERR if kind == STDERR else STDOUT]
            # the fast path of every frame (benchmark 7 logs, the follow and re-read rows):
            # the engine's own form, "<stamp>Z " of 31 bytes, not its zero time
            # ("0001-..."), recognised by three bytes without a call (any other goes to
            # _stamp); a frame stamped after the request's start is new, and one ending a
            # line moves the position here (StampSkip.delivered inlined); only one at or
            # before the start can repeat what was delivered (_Stream.repeated)
            stamp: bytes | bytearray
            if (
                length > 30
                and body[start + 29] == 0x5A
                and body[start + 30] == 0x20
                and body[start] != 0x30
            ):
                stamp, begin = body[start : start + 30], start + 31
            else:
                stamp, begin = _stamp(body, start, end)
            ends_line = body[end - 1] == 0x0A
            if stamp > state.floor:
                if ends_line:
                    state.count = state.count + 1 if stamp == state.mark else 1
                    state.mark = stamp
            elif stamp:
                dropped = state.repeated(stamp, ends_line, end - begin)
                if dropped is None:
                    continue
                begin += dropped
            if ends_line:
                state.fed = 0
            else:
                state.fed += end - begin
                state.part = stamp
            run.append(body[begin:end])
        del body[:pos]
        # the newest stamp consumed: each stream's last line ended or going on
        marks = [(self._state[kind].mark, self._state[kind].part) for kind in self.streams]
        self._newest = max(self._newest, *(stamp for pair in marks for stamp in pair))
        return lines + state.assembler.feed(b"".join(run)) if run else lines

    def _start_block(self) -> None:
        """Set :attr:`block_position` for the lines taken next: the position, unless a
        stream is in a line cut at the 4 MiB bound (a piece of it taken)."""
        states = [self._state[kind] for kind in self.streams]
        if all(state.fed <= state.assembler.pending_bytes for state in states):
            self._block = self._marks()

    def flush(self) -> list[str]:
        """Return each stream's unfinished line as it is (a run's end), and forget it.

        The line ends there: its stream's position moves past it.
        """
        self._start_block()
        lines: list[str] = []
        for kind in self.streams:
            state = self._state[kind]
            if last := state.assembler.flush():
                lines += last
                state.delivered(state.part)
                state.fed = 0
        return lines

    def reaches_back(self, tail: bytes | bytearray, at_eof: bool) -> bool | None:
        """Whether ``tail``, the start of a body of the log's last frames (the engine's
        ``tail``), holds all the log after the position, so :meth:`take` of it gives the
        rest; ``None``: undecided until more of it comes.

        Its first frame decides: one stamped before its stream's floor
        (:meth:`begin_request`) was consumed already, and what was consumed is the log's
        first frames in order (the log of one stream, or a combined log read from its
        start without ``since``), so every frame not consumed is after it. For a combined
        read resumed from a position, False: each stream's frames were consumed apart.

        Args:
            tail: the body read so far.
            at_eof: the body is complete.
        """
        if not (len(self.streams) == 1 or self._in_order):
            return False
        end = 8 + int.from_bytes(tail[4:8], "big") if len(tail) >= 8 else len(tail) + 1
        if end > len(tail):
            return False if at_eof else None
        stamp, _ = _stamp(tail, 8, end)
        return bool(stamp) and stamp < self._state[STDERR if tail[0] == STDERR else STDOUT].floor


async def log_blocks(
    engine: Engine, app_id: str, handle: str, query: LogQuery, start: LogPosition = 0
) -> AsyncGenerator[LogBlock, None]:
    """Stream the log of the container of a replica of the app from the engine as whole
    lines, a received chunk's at a time (an async generator of ``toolkit.LogBlock``).

    Lines keep their ``\\n`` (a last line without one is yielded as it is when its run
    ends). Of ``query``: ``since`` keeps the lines the engine stamped at or after it (a
    naive ``datetime`` is local time); ``until`` the lines stamped at or before it, and a
    follow stops then; ``should_tail`` follows the container, across restarts by its
    restart policy, until it has stopped for good (or is removed) and every line was
    yielded, awaiting the engine's events (no polling); ``streams`` picks stdout, stderr
    or combined (the default); ``regex`` filters.

    A block's position is :meth:`FrameParser.position` before it: per stream, the
    engine's stamp of the last line delivered and how many lines had that stamp (a
    ``Stamped``; a ``StampedPair`` for a combined read). A read from ``start`` asks the
    engine for the log from those stamps and drops those lines, so its cost does not
    grow with the log.

    Args:
        engine: the engine.
        app_id: a valid app id.
        handle: the app's handle, named when the engine has no container of the app.
        query: what to read (its role and replica name the container).
        start: 0, or a block's position given before for the same ``streams``.

    Raises:
        UnknownAppException: the engine has no container of the app.
        ValueError: the app has no role ``query.role_name`` or replica ``query.k``, that
            replica's container was removed, or ``start`` is not 0 or a position of a
            read of the same streams.
    """
    container = await find_container(engine, app_id, query)
    if container is None:
        raise UnknownAppException(handle)
    stream = query.stream_or(Stream.COMBINED)
    kinds = {Stream.STDOUT: (STDOUT,), Stream.STDERR: (STDERR,)}.get(stream, (STDOUT, STDERR))
    params = {"stdout": str(int(STDOUT in kinds)), "stderr": str(int(STDERR in kinds))}
    params["timestamps"] = "1"
    if query.until is not None:
        # a naive datetime is local time (datetime.timestamp's), kept to the microsecond
        params["until"] = ns_to_engine(round(query.until.timestamp() * 1_000_000) * 1000)
    since = query.since
    since_ns = int(since.timestamp() * 1_000_000) * 1000 if since is not None else None
    lines = FrameParser(since_ns, container.tty, kinds)
    lines.resume_at(start)
    cid = container.id
    if query.should_tail:
        source = _tail(engine, cid, lines, params, query.until)
    else:
        source = _read_logs(engine, cid, lines, params)
    pattern = query.pattern
    async with contextlib.aclosing(source) as produced:
        async for block in produced:
            if pattern is not None:
                block = [line for line in block if pattern.search(line) is not None]
            yield LogBlock(lines.block_position, block)


@contextlib.asynccontextmanager
async def _open(
    engine: Engine,
    cid: str,
    lines: FrameParser,
    params: Mapping[str, str],
    follow: bool,
    unchunked: bool = False,
) -> AsyncIterator[StreamBody]:
    """Open the next log request of ``lines``, from its position (a followed one if
    ``follow``; ``unchunked``: see :meth:`Engine.stream`, for all but the tail).

    From a position, the log's last :data:`TAIL_FRAMES` frames are asked for first
    (``tail``): the engine reads them from the log's end, where a request from a time
    decodes the whole log to skip what is before it (``json-file``). When they reach back
    to the position (:meth:`FrameParser.reaches_back`) they hold the rest, so a follower's last
    read (benchmark 7 logs, the follow row), its follow after a restart and a resume near
    the end cost the tail only; else the log is asked for from the position (``since``).

    Raises:
        DockerEngineError: the engine refused the request (404 or 409: the container is
            removed or being removed, see :data:`GONE`).
    """
    path = f"containers/{cid}/logs"
    query = dict(params, follow="1" if follow else "0")
    since = lines.begin_request()
    if since is not None and not lines.tty:
        async with engine.stream(path, dict(query, tail=str(TAIL_FRAMES))) as body:
            while (rest := lines.reaches_back(body.buffer, body.eof)) is None:
                await body.fill()
            if rest:
                yield body
                return
    if since is not None:
        query["since"] = ns_to_engine(since)
    async with engine.stream(path, query, unchunked=unchunked) as body:
        yield body


async def _read_logs(
    engine: Engine, cid: str, lines: FrameParser, params: Mapping[str, str]
) -> AsyncGenerator[list[str], None]:
    """Yield the lines the engine has now (from the position, :func:`_open`), a block at
    a time (the lines of a chunk received), then the unfinished last lines: the
    container's run is over.

    The log is asked for unchunked (HTTP/1.0): the engine then writes no HTTP chunk per
    frame and aiohttp handles none (benchmark 7 logs, the re-read row). Such a body ends
    when the engine closes the connection, as it would by crashing in the middle, so a
    request from the position follows it, chunked: the engine marks that body's end (a
    cut one raises), and it holds the rest of a body cut short, or only frames
    delivered (usually the log's tail, :func:`_open`). A TTY container's log is asked
    for chunked at once: its position is asked for by ``since`` (no tail), which decodes
    the whole log again (``json-file``).

    A container removed (or being removed) meanwhile has no log any more: the read ends
    with the lines it got (the engine's 404 or 409, see :data:`GONE`).
    """
    unchunked = not lines.tty
    try:
        while True:
            async with _open(engine, cid, lines, params, False, unchunked=unchunked) as body:
                while True:
                    if block := lines.take(body.buffer, body.eof):
                        yield block
                    if body.eof:
                        break
                    await body.fill()
            if body.whole_at_eof:
                break
            unchunked = False
    except DockerEngineError as err:
        if err.status not in GONE:
            raise
        # removed (`docker rm -f`) meanwhile: its log went with it; the lines read are kept
    if last := lines.flush():
        yield last


async def _tail(
    engine: Engine, cid: str, lines: FrameParser, params: Mapping[str, str], until: datetime | None
) -> AsyncGenerator[list[str], None]:
    """Follow the container's log across restarts until it stopped for good (blocks of lines).

    Subscribes to the container's events first, then loops: inspect; a running
    container's log is followed until a ``die``/``stop``/``destroy`` event (the engine
    may keep a follow open after the exit, or end it before the last lines: the next
    read goes on from the position); a stopped one's log is read to its end; a
    restarting (or not yet started) one is awaited on its next event. Ends when the
    container is stopped for good, removed (also by ``docker rm -f`` in the middle of a
    read: the engine's 404 or 409 ends it, never raised), or ``until`` passed.
    """
    deadline = math.inf
    if until is not None:
        deadline = anyio.current_time() + (until.timestamp() - time.time())
    filters = {"type": ["container"], "container": [cid], "event": list(STATE_EVENTS)}
    async with engine.events(filters) as events:
        while anyio.current_time() < deadline:
            found = await engine.inspect(cid)
            status = None if found is None else found.status
            if status in (None, "removing"):
                break  # removed (`docker rm -f`), or being removed: its log goes with it
            if status in ("running", "paused"):
                async for block in _follow(engine, cid, lines, params, events, deadline):
                    yield block
                continue
            async for block in _read_logs(engine, cid, lines, params):
                yield block
            if status not in ("restarting", "created"):
                return  # exited or dead: stopped for good, every line yielded
            waits: list[Callable[[], Awaitable[object]]] = [events.fill]
            waits.append(functools.partial(anyio.sleep_until, deadline))
            if status == "restarting":  # a failed restart logs no event
                waits.append(functools.partial(engine.wait_stopped, cid))
            await race(waits)
            events.pop()  # each event only prompts the next inspect
    # until passed while following (the lines stamped up to it), or the container is
    # being removed (the lines the engine still serves, if any)
    async for block in _read_logs(engine, cid, lines, params):
        yield block


async def _more(body: StreamBody, events: EngineEvents, deadline: float, stopped: bool) -> bool:
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
    await race([body.fill, events.fill, functools.partial(anyio.sleep_until, deadline)])
    return True


async def _follow(
    engine: Engine,
    cid: str,
    lines: FrameParser,
    params: Mapping[str, str],
    events: EngineEvents,
    deadline: float,
) -> AsyncIterator[list[str]]:
    """Follow a running container's log until it stops (an event) or ``deadline``, yielding
    the lines of each chunk received as a block.

    Once it stopped, the follow is read on while the engine sends (the engine serves a
    log behind the writer faster on the follow it has open than on a new read), so the
    next read usually finds the rest in the log's tail (:func:`_open`). The follow is
    asked for unchunked, as :func:`_read_logs` asks (benchmark 7 logs, the follow row):
    its end ends no read, the caller's next read goes on from the position.

    Returns at once when the engine refuses the follow because the container is removed
    or being removed (:data:`GONE`); the caller's next inspect sees it gone.
    """
    stopped = False
    next_events = anyio.current_time() + FLOWING_SECONDS
    try:
        async with _open(engine, cid, lines, params, True, unchunked=not lines.tty) as body:
            while True:
                if block := lines.take(body.buffer, body.eof):
                    yield block
                if not stopped:
                    if anyio.current_time() >= next_events:
                        with anyio.move_on_after(0):  # the events already sent, no wait
                            await events.fill()
                        next_events = anyio.current_time() + FLOWING_SECONDS
                    stopped = any(e.action in STOP_EVENTS for e in events.pop())
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


async def _stop_event(events: EngineEvents, deadline: float) -> None:
    """Await the container's stop event (or ``deadline``) after the engine ended a follow.

    The engine ends the follow when the process is exiting, and its die event is on its
    way (the engine logs it once the exit is recorded): awaiting it lets the next inspect
    see the run's end instead of reopening the follow in a busy loop.
    """
    with anyio.move_on_after(max(deadline - anyio.current_time(), 0.0)):
        while not any(event.action in STOP_EVENTS for event in await events.next_batch()):
            pass
