"""One ordered, resumable stream of an app's events: :meth:`Runner.events` (not in TorchX).

A resume skips the lines delivered since a log position; a scheduler without positions
counts from the log's start, so a log that lost lines meanwhile makes it skip unseen ones.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import json
import re
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager
from datetime import UTC, datetime
from itertools import count, repeat
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
from asynctorchx.schedulers.toolkit import LogPosition, LogQuery, format_position, parse_position
from asynctorchx.specs.api import AppState, AppStatus

#: Batches of events buffered between the readers and the consumer.
EVENTS_BUFFER_SIZE = 16
#: The most log events in one batch.
EVENTS_PER_BATCH = 1024

_SEQUENCE_DIGITS = 12
#: A cursor comes from an HTTP header: refusing a forged one must cost little.
_MAX_CURSOR = 64 * 1024
_DIGEST_HEX = 8
_CURSOR = re.compile(r"(\d{12})\.([0-9a-f]{8})([0-9a-f]{8})\.([A-Z_]+|-)\.([\w.,:-]*)", re.ASCII)
_LINES = re.compile(r"[1-9]\d{0,19}", re.ASCII)

#: A log stream of an app: (role, replica id, stream name).
StreamKey = tuple[str, int, str]


class LogMark(NamedTuple):
    """How far one log stream went: ``lines`` delivered from block position ``at``."""

    at: LogPosition
    lines: int


_LOG_START = LogMark(0, 0)


def _part(mark: LogMark) -> str:
    return f"{format_position(mark.at)}:{mark.lines}" if mark.lines else ""


@attrs.frozen
class Cursor:
    """Where an event stream resumes: the typed form of an event's ``cursor`` text.

    The text is ``{sequence}.{app}{layout}.{state}.{log}-{log}-...``, the sequence zero-padded
    so that cursors sort as events; ``logs`` follow sorted ``(role, replica id, stream)``.
    """

    sequence: int
    app: str
    layout: str
    state: AppState | None
    logs: tuple[LogMark, ...]

    def head(self) -> str:
        """The text between the sequence number and the log parts."""
        return f".{self.app}{self.layout}.{'-' if self.state is None else self.state.name}."

    def __str__(self) -> str:
        parts = "-".join(map(_part, self.logs))
        return f"{self.sequence:0{_SEQUENCE_DIGITS}d}{self.head()}{parts}"

    @classmethod
    def parse(cls, text: str, app_handle: str) -> Cursor:
        """The cursor ``text`` says; ``InvalidCursorError`` if it is not a cursor's form."""

        def invalid(reason: str) -> InvalidCursorError:
            return InvalidCursorError(text, app_handle, reason)

        match = None
        if isinstance(text, str) and len(text) <= _MAX_CURSOR:
            match = _CURSOR.fullmatch(text)
        if match is None:
            raise invalid(
                f"it is not {_SEQUENCE_DIGITS} digits, '.', {2 * _DIGEST_HEX} hexadecimal"
                " digits, '.', a state's name or '-', '.', and log parts"
                " ('position:lines', or nothing) joined by '-'"
            )
        sequence, app, layout, state, logs = match.groups()
        if state != "-" and state not in AppState.__members__:
            raise invalid(f"{state!r} is not a state name")
        marks = []
        for part in logs.split("-"):
            at, _, lines = part.rpartition(":")
            if not part:
                marks.append(_LOG_START)
                continue
            if not _LINES.fullmatch(lines):
                raise invalid(f"its log part {part!r} is not 'position:lines' with lines over 0")
            try:
                marks.append(LogMark(parse_position(at), int(lines)))
            except ValueError as error:
                raise invalid(str(error)) from None
        cursor = cls(
            int(sequence), app, layout, None if state == "-" else AppState[state], tuple(marks)
        )
        if str(cursor) != text:  # leading zeros: not one the stream made
            raise invalid("its numbers are not written as the event stream writes them")
        return cursor


def parse_cursor(text: str | None, app_handle: str) -> Cursor | None:
    """:meth:`Cursor.parse`, ``None`` for ``None`` (the stream's start)."""
    return None if text is None else Cursor.parse(text, app_handle)


@attrs.frozen
class StateEvent:
    """The app's state: the current one first, then each change of its state or of its
    ``status.pending_reason``, the terminal one last.

    Args:
        cursor: pass it back to :meth:`Runner.events` to resume after this event.
        state: the app's state (``status.state``).
        status: the app's whole status when the state was seen.
    """

    #: The SSE ``event:`` name (``"type"`` in :meth:`to_json`).
    kind: ClassVar[str] = "state"

    cursor: str
    state: AppState
    status: AppStatus

    def to_json(self) -> dict[str, Any]:
        """Return ``type``, ``cursor``, ``state`` (name) and ``status`` (``AppStatus.to_json``),
        JSON-able data as TorchX's ``AppStatus.to_json`` returns."""
        return {
            "type": self.kind,
            "cursor": self.cursor,
            "state": self.state.name,
            "status": self.status.to_json(),
        }


@attrs.frozen
class BatchCursor:
    """The cursor a batch of one log stream's events share, but for the sequence number.

    ``head`` and ``tail`` are the text around the stream's count, ``delta`` that count minus
    the sequence number.
    """

    head: str
    tail: str
    delta: int
    index: int
    at: LogPosition

    def at_sequence(self, sequence: int) -> str:
        return f"{sequence:0{_SEQUENCE_DIGITS}d}{self.head}{sequence + self.delta}{self.tail}"


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
        stream: ``"stdout"`` or ``"stderr"`` where kept apart, else ``"combined"``.
        line: the text, with its trailing ``\\n`` when the replica wrote one.
        timestamp: when the line was read (UTC).
        sequence: the event's number in the stream (1: the first event).
        batch: the cursor its batch of events shares.
    """

    __slots__ = ()

    #: The SSE ``event:`` name (``"type"`` in :meth:`to_json`).
    kind: ClassVar[str] = "log"

    @property
    def cursor(self) -> str:
        """Pass it back to :meth:`Runner.events` to resume after this event."""
        return self.batch.at_sequence(self.sequence)

    def __repr__(self) -> str:
        return (
            f"LogEvent(cursor={self.cursor!r}, role={self.role!r}, replica_id={self.replica_id},"
            f" stream={self.stream!r}, line={self.line!r}, timestamp={self.timestamp!r})"
        )

    def to_json(self) -> dict[str, Any]:
        """Return its fields as JSON-able data, ``type`` and ``cursor`` included (the shape
        of :meth:`StateEvent.to_json`)."""
        return {
            "type": self.kind,
            "cursor": self.cursor,
            "role": self.role,
            "replica_id": self.replica_id,
            "stream": self.stream,
            "line": self.line,
            "timestamp": self.timestamp.isoformat(),
        }


def _log_events(
    key: tuple[str, int, str], lines: Sequence[str], first: int, batch: BatchCursor
) -> Iterable[LogEvent]:
    """The events of ``lines``, numbered from ``first``, each made as the consumer takes it.

    The one fast path of the events, for benchmark 5's ``runner_events`` row:
    ``tuple.__new__`` over ``zip`` makes each event in C, where
    ``LogEvent(...)`` runs a Python ``__new__`` per line; made as taken, each is usually
    freed before the next, so a read's events never reach the garbage collector's passes.
    """
    role, k, stream = key
    now = datetime.now(UTC)
    fields = zip(
        repeat(role), repeat(k), repeat(stream), lines, repeat(now), count(first), repeat(batch)
    )
    return map(tuple.__new__, repeat(LogEvent), fields)


#: An event of :meth:`Runner.events`.
AppEvent = StateEvent | LogEvent


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_DIGEST_HEX]


class EventStream:
    """The events of :meth:`Runner.events`, in order: iterate it, or :meth:`receive` each.

    For one task at a time; a received batch's events come without an await.

    Args:
        batches: the receiving end the readers send batches of events to.
        start: the cursor the stream starts after.
    """

    def __init__(
        self, batches: MemoryObjectReceiveStream[Iterable[AppEvent]], start: Cursor
    ) -> None:
        self._batches = batches
        self.start = start
        # one iterator that iteration and receive() both take from, so mixing them keeps order
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
        """Return the rest of the current batch, else the next; empty once the stream ended."""
        events = list(self._current)
        while not events:
            try:
                events = list(await self._batches.receive())
            except anyio.EndOfStream:
                return events
        return events

    def statistics(self) -> MemoryObjectStreamStatistics:
        """anyio's statistics of the buffer of batches (:data:`EVENTS_BUFFER_SIZE`)."""
        return self._batches.statistics()


@attrs.define
class _AppEvents:
    """The producers of one app's event stream and how far it went.

    One lock covers numbering and sending, so event ``n`` is the ``n``-th to enter the stream.
    """

    sched: Scheduler[Any]
    app_id: str
    app_handle: str
    statuses: AsyncIterator[AppStatus]
    streams: tuple[StreamKey, ...]
    follow: bool
    anchor_lines: int | None
    limits: Sequence[int] | None
    sequence: int = 0
    state: AppState | None = None
    reason: str | None = None  # the last sent status's pending_reason
    reason_known: bool = True  # False after a resume: a cursor holds no reason
    logs: builtins.list[LogMark] = attrs.field(init=False)
    app: str = attrs.field(init=False)
    layout: str = attrs.field(init=False)
    readers_left: int = 0
    readers_done: anyio.Event = attrs.field(factory=anyio.Event)
    first_sent: anyio.Event = attrs.field(factory=anyio.Event)
    _lock: anyio.Lock = attrs.field(factory=functools.partial(anyio.Lock, fast_acquire=True))

    def __attrs_post_init__(self) -> None:
        self.logs = [_LOG_START] * len(self.streams)
        self.app = _digest(f"{self.sched.backend}/{self.app_id}")
        self.layout = _digest(json.dumps(self.streams))

    def cursor(self) -> Cursor:
        return Cursor(self.sequence, self.app, self.layout, self.state, tuple(self.logs))

    def resume(self, cursor: Cursor) -> None:
        """Move to ``cursor``; ``InvalidCursorError`` if another app's or streams'."""

        def invalid(reason: str) -> InvalidCursorError:
            return InvalidCursorError(str(cursor), self.app_handle, reason)

        if cursor.app != self.app:
            raise invalid("it was made by the event stream of another app")
        if cursor.layout != self.layout:
            raise invalid(
                "it holds the positions of other log streams than this app's"
                f" ({len(self.streams)} streams now)"
            )
        if len(cursor.logs) != len(self.streams):
            raise invalid(
                f"it has {len(cursor.logs)} log parts joined by '-', not {len(self.streams)}"
            )
        self.sequence, self.state, self.logs = cursor.sequence, cursor.state, list(cursor.logs)
        self.reason_known = False

    async def send_lines(
        self,
        send: MemoryObjectSendStream[Iterable[AppEvent]],
        index: int,
        at: LogPosition,
        before: int,
        lines: Sequence[str],
    ) -> bool:
        """Send lines of stream ``index`` read from ``at``; ``False`` once the consumer left."""
        async with self._lock:
            parts = [_part(mark) for mark in self.logs]
            head = self.cursor().head() + "".join(part + "-" for part in parts[:index])
            tail = "".join("-" + part for part in parts[index + 1 :])
            first = self.sequence + 1
            batch = BatchCursor(
                f"{head}{format_position(at)}:", tail, before + 1 - first, index, at
            )
            events = _log_events(self.streams[index], lines, first, batch)
            self.sequence += len(lines)
            self.logs[index] = LogMark(at, before + len(lines))
            return await deliver(send, events)

    async def send_state(
        self, send: MemoryObjectSendStream[Iterable[AppEvent]], status: AppStatus
    ) -> bool:
        """Send ``status`` unless its state and pending reason are the last ones sent (after a
        resume, its state); ``False``: consumer left."""
        async with self._lock:
            same = status.pending_reason == self.reason or not self.reason_known
            self.reason, self.reason_known = status.pending_reason, True
            if self.state == status.state and same:
                return True
            self.sequence += 1
            self.state = status.state
            return await deliver(send, [StateEvent(str(self.cursor()), status.state, status)])

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
        role, k, stream = self.streams[index]
        start, skip = self.logs[index]
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
                    # count from a new position once enough are counted from the current one
                    if block_at != at and anchor_lines is not None and before >= anchor_lines:
                        at, before = block_at, 0
                    lines = list(block)
                    skipped = min(left, len(lines))
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
    cursor: Cursor | None,
    follow: bool = True,
    anchor_lines: int | None = 0,
    limits: Sequence[int] | None = None,
) -> AsyncIterator[EventStream]:
    """Stream the events of app ``app_id`` (see :meth:`Runner.events`).

    ``anchor_lines``: count a stream's lines from a new block position once this many are
    counted (0: each block's; ``None``: never). ``limits``: lines per stream, no states.
    """
    kinds = [Stream.STDOUT, Stream.STDERR]
    if not all(kind in sched.capabilities.log_streams for kind in kinds):
        kinds = [Stream.COMBINED]
    streams = sorted(
        (role, k, kind.value) for role, ids in replicas.items() for k in ids for kind in kinds
    )
    app = _AppEvents(
        sched, app_id, app_handle, statuses, tuple(streams), follow, anchor_lines, limits
    )
    if cursor is not None:
        app.resume(cursor)
    start = app.cursor()
    producers = [app.log_reader(index) for index in range(len(streams))]
    if limits is None:
        producers.insert(0, app.follow_state)
    else:
        app.first_sent.set()
    async with fan_in(producers, EVENTS_BUFFER_SIZE) as batches:
        yield EventStream(batches, start)
