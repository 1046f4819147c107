"""One ordered, resumable stream of an app's events: :meth:`Runner.events`.

TorchX has no such stream (``torchx.runner.api.Runner`` has ``status``/``wait`` and
``log_lines`` of one replica). A web service that shows a job live sends it as
Server-Sent Events and resumes it from the ``Last-Event-ID`` the browser sends back. It
is built on the Scheduler interface only: the states of ``Runner.watch`` (``describe``,
``wait_for_state_change``) and ``log_blocks``, with :func:`~asynctorchx.runner._logs.fan_in`.

Events: a :class:`StateEvent` for the current state and each change, a :class:`LogEvent`
per line of each log stream of each replica; the terminal state comes last, once every
log reader has ended. Each event's cursor (:class:`Position`) is its sequence number,
zero-padded (cursors sort as events), then per log stream the position its log is read
again from (a block's :data:`~asynctorchx.schedulers.toolkit.LogPosition`, as
:func:`~asynctorchx.schedulers.toolkit.format_position` writes it) and the lines
delivered from there, and the last state.

Resuming reads each stream again from its position (``Scheduler.log_blocks``: a byte
offset on the local schedulers and Slurm, a stamp and a count on Docker and Kubernetes)
and skips the lines delivered from there, at most one read's, so a resume costs the same
at the end of 1,000 or 1,000,000 lines. A scheduler without positions counts lines from
the log's start; a backend that drops lines meanwhile (a purged log, a retried replica's
new container or pod) then makes the count skip lines the client did not see (the local
schedulers append every attempt to the same files).

The readers hand the stream one batch per read (one send, one sequencing, one time, at
most :data:`EVENTS_PER_BATCH` events) and :class:`EventStream` yields its events one by
one, not a send and a receive per event (benchmark 5, ``runner_events``).
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import json
import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager
from datetime import UTC, datetime
from itertools import repeat
from typing import Any, ClassVar, NamedTuple

import anyio
import attrs
from anyio.streams.memory import (
    MemoryObjectReceiveStream,
    MemoryObjectSendStream,
    MemoryObjectStreamStatistics,
)

from asynctorchx.errors import InvalidCursorError, UnknownAppException
from asynctorchx.runner._logs import Producer, deliver, fan_in
from asynctorchx.schedulers.api import Scheduler, Stream
from asynctorchx.schedulers.toolkit import (
    LogPosition,
    LogQuery,
    format_position,
    parse_position,
)
from asynctorchx.specs.api import AppState, AppStatus

#: Batches of events buffered between the readers and the consumer; past it, readers
#: wait. A batch is a state event, or at most :data:`EVENTS_PER_BATCH` lines of one read.
EVENTS_BUFFER_SIZE = 16
#: The most log events in one batch.
EVENTS_PER_BATCH = 1024

#: Digits of the sequence number that starts every cursor (string order == event order).
_SEQUENCE_DIGITS = 12
#: Longest cursor accepted: a cursor comes from an HTTP header, so refusing a forged
#: one must cost little.
_MAX_CURSOR = 64 * 1024
#: Hexadecimal digits of each digest in a cursor (the app's, its log streams').
_DIGEST_HEX = 8
#: A cursor: sequence number (12: _SEQUENCE_DIGITS), app and log-streams digests (8 each:
#: _DIGEST_HEX), state, log parts.
_CURSOR = re.compile(r"(\d{12})\.([0-9a-f]{8})([0-9a-f]{8})\.([A-Z_]+|-)\.([\w.,:-]*)", re.ASCII)
#: A count of lines in a log part: over 0, at most 20 digits (64 bits).
_LINES = re.compile(r"[1-9]\d{0,19}", re.ASCII)

#: A log stream of an app: (role, replica id, stream name).
StreamKey = tuple[str, int, str]


@attrs.frozen
class StateEvent:
    """The app's state: the current one first, then each change, the terminal one last.

    Args:
        cursor: pass it back to :meth:`Runner.events` to resume after this event.
        state: the app's state (``status.state``).
        status: the app's whole status when the state was seen.
    """

    #: The SSE ``event:`` name of this kind of event (also ``"type"`` in :meth:`to_dict`).
    kind: ClassVar[str] = "state"

    cursor: str
    state: AppState
    status: AppStatus

    def to_dict(self) -> dict[str, Any]:
        """Return the event as a JSON-able dict.

        Keys: ``type`` (``"state"``), ``cursor``, ``state`` (its name, e.g.
        ``"RUNNING"``) and ``status`` (``AppStatus.to_json()``, what ``status --json``
        prints).
        """
        return {
            "type": self.kind,
            "cursor": self.cursor,
            "state": self.state.name,
            "status": self.status.to_json(),
        }

    def to_json(self) -> str:
        """Return :meth:`to_dict` as compact one-line JSON: an SSE ``data:`` payload."""
        return json.dumps(self.to_dict(), separators=(",", ":"))


@attrs.frozen
class BatchCursor:
    """The cursor of the events of one batch of one log stream's lines, but for each
    event's sequence number: the events of a batch differ only by it (see
    :class:`Position` for the whole cursor).

    Args:
        head: the cursor after the sequence number, up to the stream's count of lines.
        tail: the cursor after that count.
        delta: the stream's count of lines delivered minus the sequence number.
    """

    head: str
    tail: str
    delta: int

    def at(self, sequence: int) -> str:
        """The cursor of the event numbered ``sequence``.

        Args:
            sequence: the event's number in the stream.
        """
        return f"{sequence:0{_SEQUENCE_DIGITS}d}{self.head}{sequence + self.delta}{self.tail}"

    def anchor(self) -> LogAnchor:
        """The log stream of the batch's lines and the position they are counted from."""
        # head: .{digests}.{state}.{the parts before the stream's, each and '-'}{position}:
        parts = self.head.split(".", 3)[3][:-1].split("-")
        return LogAnchor(len(parts) - 1, parts[-1])


class LogAnchor(NamedTuple):
    """Where a cursor's lines of one log stream are counted from.

    Args:
        stream: the log stream's index in the cursor's log part.
        at: the position's text (``format_position``).
    """

    stream: int
    at: str


class LogMarkText(NamedTuple):
    """One log stream's part of a cursor, its position kept as text.

    Args:
        at: the position's text, ``""`` before the stream's first line.
        lines: the lines delivered from it.
    """

    at: str
    lines: int


class CursorMarks(NamedTuple):
    """What a cursor says of how far its stream went (see :class:`Position`).

    Args:
        state: the last state's name, ``"-"``: none yet.
        logs: per log stream, in the cursor's order, its part.
    """

    state: str
    logs: tuple[LogMarkText, ...]


def cursor_marks(cursor: str) -> CursorMarks | None:
    """The state and log parts of ``cursor``; ``None`` when it is not a cursor's form
    (:meth:`Position.resume` says why)."""
    match = _CURSOR.fullmatch(cursor) if len(cursor) <= _MAX_CURSOR else None
    if match is None:
        return None
    logs = []
    for part in match[5].split("-"):
        at, _, lines = part.rpartition(":")
        if part and not _LINES.fullmatch(lines):
            return None
        logs.append(LogMarkText(at, int(lines)) if part else LogMarkText("", 0))
    return CursorMarks(match[4], tuple(logs))


class _LogEventFields(NamedTuple):
    role: str
    replica_id: int
    stream: str
    line: str
    timestamp: datetime
    sequence: int
    batch: BatchCursor


class LogEvent(_LogEventFields):
    """One log line of one stream of one replica.

    Args:
        role: the role's name.
        replica_id: the replica's id ``k`` (0-based).
        stream: ``"stdout"`` or ``"stderr"`` when the scheduler keeps them apart
            (``Capabilities.log_streams``), else ``"combined"``.
        line: the text, with its trailing ``\\n`` when the replica wrote one.
        timestamp: when the line was read (UTC).
        sequence: the event's number in the stream (1: the first event).
        batch: the cursor its batch of events shares (:attr:`cursor` is made from it).
    """

    __slots__ = ()

    #: The SSE ``event:`` name of this kind of event (also ``"type"`` in :meth:`to_dict`).
    kind: ClassVar[str] = "log"

    @property
    def cursor(self) -> str:
        """Pass it back to :meth:`Runner.events` to resume after this event (made when
        asked for)."""
        return self.batch.at(self.sequence)

    def __repr__(self) -> str:
        return (
            f"LogEvent(cursor={self.cursor!r}, role={self.role!r}, replica_id={self.replica_id},"
            f" stream={self.stream!r}, line={self.line!r}, timestamp={self.timestamp!r})"
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the event as a JSON-able dict.

        Keys: ``type`` (``"log"``), ``cursor``, ``role``, ``replica_id``, ``stream``,
        ``line`` and ``timestamp`` (ISO 8601 with its UTC offset).
        """
        return {
            "type": self.kind,
            "cursor": self.cursor,
            "role": self.role,
            "replica_id": self.replica_id,
            "stream": self.stream,
            "line": self.line,
            "timestamp": self.timestamp.isoformat(),
        }

    def to_json(self) -> str:
        """Return :meth:`to_dict` as compact one-line JSON: an SSE ``data:`` payload."""
        return json.dumps(self.to_dict(), separators=(",", ":"))


def _log_events(
    key: StreamKey, lines: Sequence[str], first: int, batch: BatchCursor
) -> Iterable[LogEvent]:
    """The events of ``lines`` of the log stream ``key``, numbered from ``first``, each
    made when it is taken.

    The one fast path of the events (benchmark 5, ``runner_events``): each event is made
    by C code (``tuple.__new__`` over ``zip``; ``LogEvent(...)`` would run a Python
    ``__new__``) when the consumer takes it, and is usually freed before the next is
    made: made up front, a read's events outlive the young generation and the garbage
    collector's passes over them cost as much as the rest.
    """
    role, k, stream = key
    numbers = range(first, first + len(lines))
    now = datetime.now(UTC)
    fields = zip(
        repeat(role), repeat(k), repeat(stream), lines, repeat(now), numbers, repeat(batch)
    )
    return map(tuple.__new__, repeat(LogEvent), fields)


#: An event of :meth:`Runner.events`.
AppEvent = StateEvent | LogEvent


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_DIGEST_HEX]


class LogMark(NamedTuple):
    """How far one log stream of the event stream went.

    Args:
        at: the position of the block its last delivered line came from (0: the start).
        lines: the lines delivered from ``at`` on.
    """

    at: LogPosition
    lines: int


@attrs.define
class Position:
    """How far a stream went: events sent, each log stream's position, the last state.

    Its cursor is ``{sequence}.{app}{layout}.{state}.{log}-{log}-...``: the sequence
    number zero-padded to 12 digits (so cursors sort as events), a digest of the app
    (scheduler and app id; any handle of the app resumes its stream) and one of its log
    streams, the last state's name (``-``: none yet), and per log stream, in the order
    of ``streams``, ``{position}:{lines}`` (:class:`LogMark`: the position of a block as
    :func:`~asynctorchx.schedulers.toolkit.format_position` writes it, ``o`` and a byte
    offset, ``t`` and a stamp ``.`` a count, two of those joined by ``,``, or ``c`` and a
    container's place before the second form; and the
    lines delivered from it), or nothing before its first line. Its size grows by one
    byte per log stream (two per replica where stdout and stderr are apart) plus, once a
    stream delivered lines, its position's text and count (``docs/orchestration.md``).

    Args:
        backend: the scheduler's name.
        app_id: the app's id on it.
        streams: the app's log streams ``(role, replica id, stream)``, sorted.
        sequence: the number of the last event sent (0: none).
        state: the last state sent, ``None`` before the first.
        logs: per log stream, in the order of ``streams``, how far it went (default: the
            start, ``LogMark(0, 0)``).
    """

    backend: str
    app_id: str
    streams: tuple[StreamKey, ...]
    sequence: int = 0
    state: AppState | None = None
    logs: builtins.list[LogMark] = attrs.field()
    app: str = attrs.field(init=False)
    layout: str = attrs.field(init=False)

    @logs.default
    def _log_starts(self) -> builtins.list[LogMark]:
        return [LogMark(0, 0)] * len(self.streams)

    def __attrs_post_init__(self) -> None:
        self.app = _digest(f"{self.backend}/{self.app_id}")
        self.layout = _digest(json.dumps(self.streams))

    def head(self) -> str:
        """The cursor's part after the sequence number, up to its log part."""
        state = "-" if self.state is None else self.state.name
        return f".{self.app}{self.layout}.{state}."

    def log_parts(self) -> builtins.list[str]:
        """Each log stream's part of the cursor."""
        return [f"{format_position(at)}:{lines}" if lines else "" for at, lines in self.logs]

    def cursor(self) -> str:
        """Encode the position as a cursor (see the class docstring)."""
        return f"{self.sequence:0{_SEQUENCE_DIGITS}d}{self.head()}{'-'.join(self.log_parts())}"

    def resume(self, cursor: str, app_handle: str) -> None:
        """Move to the position ``cursor`` (a :meth:`cursor` of this app's stream) says.

        Args:
            cursor: the cursor.
            app_handle: the app's handle (for the error message).

        Raises:
            InvalidCursorError: the cursor is malformed (a log position of one number
                included: the form of earlier versions), of another app, or holds the
                positions of other log streams than the app has now.
        """

        def invalid(reason: str) -> InvalidCursorError:
            return InvalidCursorError(cursor, app_handle, reason)

        match = None
        if isinstance(cursor, str) and len(cursor) <= _MAX_CURSOR:
            match = _CURSOR.fullmatch(cursor)
        if match is None:
            raise invalid(
                f"it is not {_SEQUENCE_DIGITS} digits, '.', {2 * _DIGEST_HEX} hexadecimal"
                " digits, '.', a state's name or '-', '.', and log parts"
                " ('position:lines', or nothing) joined by '-'"
            )
        sequence, app, layout, state, logs = match.groups()
        if app != self.app:
            raise invalid("it was made by the event stream of another app")
        if layout != self.layout:
            raise invalid(
                "it holds the positions of other log streams than this app's"
                f" ({len(self.streams)} streams now)"
            )
        if state != "-" and state not in AppState.__members__:
            raise invalid(f"{state!r} is not a state name")
        parts = logs.split("-")
        if len(parts) != len(self.streams):
            raise invalid(f"it has {len(parts)} log parts joined by '-', not {len(self.streams)}")
        self.logs = [_log_mark(part, invalid) for part in parts]
        self.sequence = int(sequence)
        self.state = None if state == "-" else AppState[state]


def _log_mark(part: str, invalid: Callable[[str], InvalidCursorError]) -> LogMark:
    """The :class:`LogMark` a log part of a cursor says (see :class:`Position`).

    Raises:
        InvalidCursorError: (made by ``invalid``) the part is not ``position:lines``.
    """
    if not part:
        return LogMark(0, 0)
    text, _, lines = part.rpartition(":")
    if not _LINES.fullmatch(lines):
        raise invalid(f"its log part {part!r} is not 'position:lines' with lines over 0")
    try:
        return LogMark(parse_position(text), int(lines))
    except ValueError as error:
        raise invalid(str(error)) from None


class EventStream:
    """The events of :meth:`Runner.events`, in order: iterate it, or :meth:`receive` each.

    For one task at a time. The readers hand it batches (see the module docstring);
    the events come one by one, those of a batch already received without an await, so
    a cancellation of the consumer takes effect at its own next await or once that
    batch is consumed.

    Args:
        batches: the receiving end the readers send batches of events to.
    """

    def __init__(self, batches: MemoryObjectReceiveStream[Iterable[AppEvent]]) -> None:
        self._batches = batches
        #: The current batch's events not taken yet: one iterator that iteration and
        #: receive() both take from, so mixing them keeps the order.
        self._current: Iterator[AppEvent] = iter(())

    def __aiter__(self) -> AsyncIterator[AppEvent]:
        """The events, to the stream's end."""
        return self._events()

    async def _events(self) -> AsyncIterator[AppEvent]:
        while True:
            current = self._current
            for event in current:
                yield event
            if self._current is not current:  # receive() went on to another batch
                continue
            try:
                self._current = iter(await self._batches.receive())
            except anyio.EndOfStream:
                return

    async def receive(self) -> AppEvent:
        """Return the next event.

        Raises:
            anyio.EndOfStream: the stream ended (after the terminal state).
        """
        while (event := next(self._current, None)) is None:
            self._current = iter(await self._batches.receive())
        return event

    async def receive_batch(self) -> Sequence[AppEvent]:
        """Return the events not received yet of the current batch, else the next batch's
        (one read's); empty once the stream ended."""
        events = list(self._current)
        while not events:
            try:
                events = list(await self._batches.receive())
            except anyio.EndOfStream:
                return events
        return events

    def statistics(self) -> MemoryObjectStreamStatistics:
        """The buffer of batches between the readers and this stream (anyio's statistics):
        ``max_buffer_size`` is :data:`EVENTS_BUFFER_SIZE` batches."""
        return self._batches.statistics()


@attrs.define
class _AppEvents:
    """The producers of one app's event stream and what they share.

    They number the events and send them a batch at a time, so cursors follow the
    stream: one lock covers numbering and sending, so the event numbered ``n`` is the
    ``n``-th to enter the stream, and its cursor counts exactly the events before it and
    itself.
    """

    sched: Scheduler[Any]
    app_id: str
    app_handle: str
    statuses: AsyncIterator[AppStatus]
    position: Position
    follow: bool = True
    #: lines counted from a log position before a later block's becomes the count's
    #: origin (``None``: never)
    anchor_lines: int | None = 0
    #: per log stream, the lines to deliver before its reader ends (``None``: all)
    limits: Sequence[int] | None = None
    readers_left: int = 0
    readers_done: anyio.Event = attrs.field(factory=anyio.Event)
    first_sent: anyio.Event = attrs.field(factory=anyio.Event)
    _lock: anyio.Lock = attrs.field(factory=functools.partial(anyio.Lock, fast_acquire=True))

    async def send_lines(
        self,
        send: MemoryObjectSendStream[Iterable[AppEvent]],
        index: int,
        at: LogPosition,
        before: int,
        lines: Sequence[str],
    ) -> bool:
        """Send lines of log stream ``index``: read from position ``at``, ``before`` lines
        delivered from it already; ``False`` once the consumer left."""
        async with self._lock:
            position = self.position
            parts = position.log_parts()
            head = f"{position.head()}{''.join(part + '-' for part in parts[:index])}"
            tail = "".join("-" + part for part in parts[index + 1 :])
            first = position.sequence + 1
            batch = BatchCursor(f"{head}{format_position(at)}:", tail, before + 1 - first)
            events = _log_events(position.streams[index], lines, first, batch)
            position.sequence += len(lines)
            position.logs[index] = LogMark(at, before + len(lines))
            return await deliver(send, events)

    async def send_state(
        self, send: MemoryObjectSendStream[Iterable[AppEvent]], status: AppStatus
    ) -> bool:
        """Send ``status`` unless its state is the last one sent; ``False``: consumer left."""
        async with self._lock:
            position = self.position
            if position.state == status.state:
                return True
            position.sequence += 1
            position.state = status.state
            return await deliver(send, [StateEvent(position.cursor(), status.state, status)])

    async def follow_state(self, send: MemoryObjectSendStream[Iterable[AppEvent]]) -> None:
        """Send the current state, then each change; the terminal one after every line."""
        status: AppStatus | None = None
        async with aclosing(self.statuses) as statuses:  # type: ignore[type-var]
            async for status in statuses:
                if not status.is_terminal() and not await self.send_state(send, status):
                    return
                self.first_sent.set()
        if status is None or not status.is_terminal():  # the scheduler forgot the app
            raise UnknownAppException(self.app_handle)
        if self.readers_left:
            await self.readers_done.wait()
        await self.send_state(send, status)

    def log_reader(self, index: int) -> Producer[Iterable[AppEvent]]:
        """The producer that follows log stream ``index`` from its position."""
        role, k, stream = self.position.streams[index]
        start, skip = self.position.logs[index]
        query = LogQuery(role, k, should_tail=self.follow, streams=Stream(stream))
        anchor_lines = self.anchor_lines
        wanted = None if self.limits is None else self.limits[index]
        self.readers_left += 1

        async def follow(send: MemoryObjectSendStream[Iterable[AppEvent]]) -> None:
            await self.first_sent.wait()
            if wanted == 0:
                self._reader_done()
                return
            blocks = self.sched.log_blocks(self.app_id, query, start)
            at: LogPosition = start
            before, left, more = 0, skip, wanted
            async with aclosing(blocks):  # type: ignore[type-var]
                async for block_at, block in blocks:
                    # a new position: its lines are counted from it, once enough are
                    # counted from the current one
                    if block_at != at and anchor_lines is not None and before >= anchor_lines:
                        at, before = block_at, 0
                    lines = list(block)
                    skipped = min(left, len(lines))  # delivered before the resume
                    del lines[:skipped]
                    left -= skipped
                    before += skipped
                    if more is not None:
                        del lines[more:]
                        more -= len(lines)
                    for first in range(0, len(lines), EVENTS_PER_BATCH):
                        batch = lines[first : first + EVENTS_PER_BATCH]
                        if not await self.send_lines(send, index, at, before, batch):
                            return
                        before += len(batch)
                    if more == 0:
                        break
            self._reader_done()

        return follow

    def _reader_done(self) -> None:
        self.readers_left -= 1
        if not self.readers_left:
            self.readers_done.set()


@asynccontextmanager
async def app_event_stream(
    sched: Scheduler[Any],
    app_id: str,
    app_handle: str,
    replicas: Mapping[str, builtins.list[int]],
    statuses: AsyncIterator[AppStatus],
    cursor: str | None,
    follow: bool = True,
    anchor_lines: int | None = 0,
    limits: Sequence[int] | None = None,
) -> AsyncIterator[EventStream]:
    """Stream the events of app ``app_id`` (see :meth:`Runner.events`).

    Args:
        sched: the scheduler that runs the app.
        app_id: the app's id on ``sched``.
        app_handle: the app's handle (for error messages).
        replicas: ``{role: [k, ...]}`` whose logs are read.
        statuses: the app's status now, then at each change of state, ending at a
            terminal one or when the scheduler forgets the app (``Runner.watch``).
        cursor: resume after the event that carried it; ``None``: from the start.
        follow: ``False`` when the app was terminal already: each log is read once, as it
            is (no wait on the backend's changes; the same lines as a follow).
        anchor_lines: a cursor's lines of a log stream are counted from the position of
            the block their first came from until at least this many are, then from the
            next block's (0: from each block's, so a resume skips at most one read's
            lines); ``None``: from the position the stream starts at, to its end.
        limits: per log stream (in the order of the cursor's log parts), how many lines
            to deliver (each stream's next ones), then the stream ends, without state
            events; ``None``: every line, and the states.

    Raises:
        InvalidCursorError: ``cursor`` is malformed, of another app, or holds the
            positions of other log streams than the app has.
        UnknownAppException: (when read) the app disappeared while followed.
        Exception: (when read) the first error of a log reader, as itself.
    """
    # stdout and stderr apart where the scheduler keeps them apart, else combined
    kinds = [Stream.STDOUT, Stream.STDERR]
    if not all(kind in sched.capabilities.log_streams for kind in kinds):
        kinds = [Stream.COMBINED]
    streams = sorted(
        (role, k, kind.value) for role, ids in replicas.items() for k in ids for kind in kinds
    )
    position = Position(sched.backend, app_id, tuple(streams))
    if cursor is not None:
        position.resume(cursor, app_handle)
    app = _AppEvents(sched, app_id, app_handle, statuses, position, follow, anchor_lines, limits)
    producers = [app.log_reader(index) for index in range(len(streams))]
    if limits is None:
        producers.insert(0, app.follow_state)
    else:
        app.first_sent.set()
    async with fan_in(producers, EVENTS_BUFFER_SIZE) as batches:
        yield EventStream(batches)
