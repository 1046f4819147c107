"""One ordered, resumable stream of an app's events: :meth:`Runner.events`.

TorchX has no such stream: ``torchx.runner.api.Runner`` offers ``status``/``wait`` and
``log_lines`` one replica at a time. A web service that shows a job live needs both
in one ordered stream it can send as Server-Sent Events and resume after a reconnect,
from the ``Last-Event-ID`` the browser sends back. This module builds that stream on the
Scheduler interface only (``describe``, ``wait_for_state_change``, ``log_iter``), with
the task-group machinery of :mod:`asynctorchx.runner._logs` (:func:`fan_in`).

Events: a :class:`StateEvent` for the current state at once and at each change
(``Scheduler.wait_for_state_change``, as ``Runner.watch``), a :class:`LogEvent` for each
line of each log stream of each replica; the terminal state comes last, once every log
reader has ended. Each event carries a cursor: its sequence number, zero-padded, then
the resume position (lines delivered per role, replica and stream, and the last state
delivered), compressed and base64url-encoded. Cursors of one stream sort as its events.

Resuming re-reads each log stream from its start and skips the lines already delivered
(the Scheduler interface has no offsets): the cost is reading the logs again (a local
file, a Docker engine's or the kubelet's log, a Slurm file over the shared filesystem),
not sending them again. A backend that drops lines meanwhile (a purged log, a retried
replica whose new container or pod starts a new log) makes the count skip lines the
client did not see; the local schedulers append every attempt to the same files.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import hashlib
import json
import zlib
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import aclosing, asynccontextmanager
from datetime import datetime, timezone
from typing import Any, ClassVar

import anyio
import attrs
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from asynctorchx.errors import InvalidCursorError, UnknownAppException
from asynctorchx.runner._logs import Producer, _Reader, deliver, fan_in
from asynctorchx.schedulers.api import DescribeAppResponse, Scheduler, Stream
from asynctorchx.specs.api import AppState, AppStatus

#: Events buffered between the readers and the consumer; past it, readers wait.
EVENTS_BUFFER_SIZE = 1024

#: Digits of the sequence number that starts every cursor (string order == event order).
_SEQUENCE_DIGITS = 12
#: Longest cursor accepted, and largest decoded position (bytes): a cursor comes from
#: an HTTP header, so a forged one must not cost more than that to refuse.
_MAX_CURSOR = 64 * 1024
_MAX_POSITION = 1024 * 1024
_CURSOR_VERSION = 1

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
class LogEvent:
    """One log line of one stream of one replica.

    Args:
        cursor: pass it back to :meth:`Runner.events` to resume after this event.
        role: the role's name.
        replica_id: the replica's id ``k`` (0-based).
        stream: ``"stdout"`` or ``"stderr"`` when the scheduler keeps them apart
            (``Scheduler.supported_log_streams``), else ``"combined"``.
        line: the text, with its trailing ``\\n`` when the replica wrote one.
        timestamp: when the line was read (UTC).
    """

    #: The SSE ``event:`` name of this kind of event (also ``"type"`` in :meth:`to_dict`).
    kind: ClassVar[str] = "log"

    cursor: str
    role: str
    replica_id: int
    stream: str
    line: str
    timestamp: datetime

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


#: An event of :meth:`Runner.events`.
AppEvent = StateEvent | LogEvent


def app_digest(backend: str, app_id: str) -> str:
    """A short fingerprint of an app, kept in its cursors to refuse another app's.

    The session name is left out: any handle of the app resumes its stream.

    Args:
        backend: the scheduler's name.
        app_id: the app's id on it.
    """
    return hashlib.sha256(f"{backend}/{app_id}".encode()).hexdigest()[:16]


@attrs.define
class Position:
    """How far a stream went: events sent, lines sent per log stream, the last state.

    Args:
        app: :func:`app_digest` of the app.
        sequence: the number of the last event sent (0: none).
        state: the last state sent, ``None`` before the first.
        lines: lines sent per ``(role, replica id, stream)``; absent means 0.
    """

    app: str
    sequence: int = 0
    state: AppState | None = None
    lines: dict[StreamKey, int] = attrs.field(factory=dict)

    def cursor(self) -> str:
        """Encode the position as a cursor: the zero-padded sequence, ``.``, the rest."""
        body = {
            "v": _CURSOR_VERSION,
            "app": self.app,
            "state": None if self.state is None else self.state.name,
            "lines": [[*key, count] for key, count in sorted(self.lines.items())],
        }
        packed = zlib.compress(json.dumps(body, separators=(",", ":")).encode())
        encoded = base64.urlsafe_b64encode(packed).rstrip(b"=").decode()
        return f"{self.sequence:0{_SEQUENCE_DIGITS}d}.{encoded}"

    @classmethod
    def from_cursor(cls, cursor: str, app: str, app_handle: str) -> Position:
        """Decode a cursor of :meth:`cursor` made for the app ``app``.

        Args:
            cursor: the cursor.
            app: :func:`app_digest` of the app it must belong to.
            app_handle: the app's handle (for the error message).

        Raises:
            InvalidCursorError: the cursor is malformed or belongs to another app.
        """

        def invalid(reason: str) -> InvalidCursorError:
            return InvalidCursorError(cursor, app_handle, reason)

        if not isinstance(cursor, str) or len(cursor) > _MAX_CURSOR:
            raise invalid(f"a cursor is a str of at most {_MAX_CURSOR} characters")
        sequence, dot, encoded = cursor.partition(".")
        digits = sequence.isascii() and sequence.isdigit()
        if not dot or len(sequence) != _SEQUENCE_DIGITS or not digits:
            raise invalid(f"it does not start with {_SEQUENCE_DIGITS} digits and a '.'")
        inflate = zlib.decompressobj()
        try:
            padded = encoded + "=" * (-len(encoded) % 4)
            packed = base64.urlsafe_b64decode(padded.encode("ascii"))
            text = inflate.decompress(packed, _MAX_POSITION)
        except (binascii.Error, UnicodeError, zlib.error) as exc:
            raise invalid(f"its position does not decode ({exc})") from None
        if inflate.unconsumed_tail or not inflate.eof:
            raise invalid("its position is cut or too large")
        try:
            body = json.loads(text)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            raise invalid(f"its position does not decode ({exc})") from None
        position = _position_of(body, int(sequence))
        if position is None:
            raise invalid("its position is not one that Runner.events writes")
        if position.app != app:
            raise invalid("it was made by the event stream of another app")
        return position


def _position_of(body: object, sequence: int) -> Position | None:
    """The :class:`Position` that a decoded cursor body describes, ``None`` if none."""
    if not isinstance(body, dict) or body.get("v") != _CURSOR_VERSION:
        return None
    app, state, lines = body.get("app"), body.get("state"), body.get("lines")
    if not isinstance(app, str) or not isinstance(lines, list):
        return None
    if state is not None and state not in AppState.__members__:
        return None
    counts: dict[StreamKey, int] = {}
    for entry in lines:
        match entry:
            case [str(role), int(k), str(stream), int(count)] if k >= 0 and count > 0:
                counts[(role, k, stream)] = count
            case _:
                return None
    return Position(app, sequence, None if state is None else AppState[state], counts)


class _Sequencer:
    """Numbers the events and sends them one at a time, so cursors follow the stream.

    One lock covers numbering and sending: the event numbered ``n`` is the ``n``-th to
    enter the stream, and its cursor counts exactly the events before it and itself.
    """

    def __init__(self, position: Position) -> None:
        self.position = position
        self._lock = anyio.Lock()

    async def send_line(
        self, send: MemoryObjectSendStream[AppEvent], key: StreamKey, line: str
    ) -> bool:
        """Send one line of stream ``key``; ``False`` once the consumer left."""
        async with self._lock:
            position = self.position
            position.sequence += 1
            position.lines[key] = position.lines.get(key, 0) + 1
            role, k, stream = key
            now = datetime.now(timezone.utc)
            event = LogEvent(position.cursor(), role, k, stream, line, now)
            return await deliver(send, event)

    async def send_state(self, send: MemoryObjectSendStream[AppEvent], status: AppStatus) -> bool:
        """Send ``status`` unless its state is the last one sent; ``False``: consumer left."""
        async with self._lock:
            position = self.position
            if position.state == status.state:
                return True
            position.sequence += 1
            position.state = status.state
            return await deliver(send, StateEvent(position.cursor(), status.state, status))


@attrs.define
class _AppEvents:
    """The producers of one app's event stream and what they share."""

    sched: Scheduler[Any]
    app_id: str
    app_handle: str
    first: AppStatus
    status_of: Callable[[DescribeAppResponse | None], AppStatus | None]
    sequencer: _Sequencer
    readers_left: int = 0
    readers_done: anyio.Event = attrs.field(factory=anyio.Event)
    first_sent: anyio.Event = attrs.field(factory=anyio.Event)

    async def follow_state(self, send: MemoryObjectSendStream[AppEvent]) -> None:
        """Send the current state, then each change; the terminal one after every line."""
        status = self.first
        if not status.is_terminal() and not await self.sequencer.send_state(send, status):
            return
        self.first_sent.set()
        while not status.is_terminal():
            desc = await self.sched.wait_for_state_change(self.app_id, status.state)
            next_status = self.status_of(desc)
            if next_status is None:
                raise UnknownAppException(self.app_handle)
            status = next_status
            if not status.is_terminal() and not await self.sequencer.send_state(send, status):
                return
        if self.readers_left:
            await self.readers_done.wait()
        await self.sequencer.send_state(send, status)

    def log_reader(self, key: StreamKey, skip: int) -> Producer[AppEvent]:
        """The producer that follows log stream ``key``, skipping its first ``skip`` lines."""
        role, k, stream = key
        reader = _Reader(self.sched, self.app_id, role, k, None, True, Stream(stream))
        self.readers_left += 1

        async def follow(send: MemoryObjectSendStream[AppEvent]) -> None:
            await self.first_sent.wait()
            iterator = reader.lines()
            async with aclosing(iterator):  # type: ignore[type-var]
                skipped = 0
                async for line in iterator:
                    if skipped < skip:
                        skipped += 1
                    elif not await self.sequencer.send_line(send, key, line):
                        return
            self.readers_left -= 1
            if not self.readers_left:
                self.readers_done.set()

        return follow


def log_streams(sched: Scheduler[Any]) -> builtins.list[Stream]:
    """The streams to read per replica: stdout and stderr apart if ``sched`` can, else combined.

    Args:
        sched: the scheduler (its ``supported_log_streams``).
    """
    split = [Stream.STDOUT, Stream.STDERR]
    if all(stream in sched.supported_log_streams for stream in split):
        return split
    return [Stream.COMBINED]


@asynccontextmanager
async def app_event_stream(
    sched: Scheduler[Any],
    app_id: str,
    app_handle: str,
    replicas: Mapping[str, builtins.list[int]],
    first: AppStatus,
    status_of: Callable[[DescribeAppResponse | None], AppStatus | None],
    cursor: str | None,
) -> AsyncIterator[MemoryObjectReceiveStream[AppEvent]]:
    """Stream the events of app ``app_id`` (see :meth:`Runner.events`).

    Args:
        sched: the scheduler that runs the app.
        app_id: the app's id on ``sched``.
        app_handle: the app's handle (for error messages).
        replicas: ``{role: [k, ...]}`` whose logs are read.
        first: the app's status now.
        status_of: turns a ``describe`` answer into a status (``None``: unknown app).
        cursor: resume after the event that carried it; ``None``: from the start.

    Raises:
        InvalidCursorError: ``cursor`` is malformed, of another app, or names a log
            stream this app's stream does not have.
        UnknownAppException: (when read) the app disappeared while followed.
        Exception: (when read) the first error of a log reader, as itself.
    """
    digest = app_digest(sched.backend, app_id)
    position = (
        Position(digest) if cursor is None else Position.from_cursor(cursor, digest, app_handle)
    )
    keys = [
        (role, k, stream.value)
        for role, ids in replicas.items()
        for k in ids
        for stream in log_streams(sched)
    ]
    unknown = sorted(set(position.lines) - set(keys))
    if cursor is not None and unknown:
        role, k, stream = unknown[0]
        reason = f"it counts lines of {role}/{k} {stream}, a log stream this app's events lack"
        raise InvalidCursorError(cursor, app_handle, reason)
    app = _AppEvents(sched, app_id, app_handle, first, status_of, _Sequencer(position))
    readers = [app.log_reader(key, position.lines.get(key, 0)) for key in keys]
    async with fan_in([app.follow_state, *readers], EVENTS_BUFFER_SIZE) as events:
        yield events
