"""One reader per app, any number of subscribers: :meth:`Runner.subscribe`.

A subscriber behind the kept batches catches up from the scheduler up to the first kept
one; a cursor the feed cannot place gets its own stream; a full buffer is cut off.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import NamedTuple, Protocol

import anyio
import attrs
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from asynctorchx.errors import AsyncTorchXError
from asynctorchx.runner._events import AppEvent, Cursor, EventStream, LogEvent, LogMark, StateEvent
from asynctorchx.schedulers.toolkit import LogPosition, background_tasks
from asynctorchx.specs.api import is_terminal

#: The most events a feed keeps for subscribers that join behind its live end.
HISTORY_EVENTS = 65536
#: Batches a subscriber's buffer holds by default before it is cut off.
SUBSCRIBER_BUFFER = 64
#: Lines the feed's cursors count from one position: a resume skips at most this many.
FEED_ANCHOR_LINES = 1024


class OpenEvents(Protocol):
    """Opens the app's :meth:`Runner.events` stream from a cursor."""

    def __call__(
        self,
        cursor: Cursor | None,
        *,
        anchor_lines: int | None = 0,
        limits: Sequence[int] | None = None,
    ) -> AbstractAsyncContextManager[EventStream]: ...


class SubscriberCutOff(AsyncTorchXError):
    """The subscriber's buffer was full when the feed had more: it was cut off.

    Args:
        cursor: the last event's cursor received; subscribe from it to resume, nothing lost.
    """

    def __init__(self, cursor: str | None) -> None:
        super().__init__(
            "this subscriber did not keep up with the app's events and was cut off:"
            f" subscribe again with cursor={cursor!r} to resume after its last event"
        )
        self.cursor = cursor


def sse_frame(event: AppEvent) -> bytes:
    """The Server-Sent Event of ``event``: its kind, cursor (``id``) and JSON, UTF-8."""
    data = json.dumps(event.to_json(), separators=(",", ":"))
    return f"event: {event.kind}\nid: {event.cursor}\ndata: {data}\n\n".encode()


@attrs.define(eq=False)
class _Shared:
    """A batch of the feed and its frames, made once for every subscriber."""

    events: tuple[AppEvent, ...]
    first: int
    frames: tuple[bytes, ...] | None = None
    joined: bytes | None = None

    def sse(self, start: int) -> bytes:
        if self.frames is None:
            self.frames = tuple(map(sse_frame, self.events))
        if start:
            return b"".join(self.frames[start:])
        if self.joined is None:
            self.joined = b"".join(self.frames)
        return self.joined


class FeedBatch(NamedTuple):
    """Events ready together: what a subscription yields, shared by its subscribers.

    Args:
        shared: the feed's batch.
        start: the index of this subscriber's first event in it.
    """

    shared: _Shared
    start: int = 0

    @property
    def events(self) -> Sequence[AppEvent]:
        """The events, in order."""
        return self.shared.events[self.start :] if self.start else self.shared.events

    @property
    def cursor(self) -> str:
        """The last event's cursor."""
        return self.shared.events[-1].cursor

    def sse(self) -> bytes:
        """The events as Server-Sent Events frames, made once for every subscriber."""
        return self.shared.sse(self.start)


@attrs.define(eq=False)
class _Subscriber:
    send: MemoryObjectSendStream[FeedBatch]
    last: str | None
    cut_off: bool = False


@attrs.define(eq=False)
class _Feed:
    """One app's reader and its subscribers."""

    open_events: OpenEvents
    start: Cursor | None
    subscribers: set[_Subscriber] = attrs.field(factory=set)
    history: deque[_Shared] = attrs.field(factory=deque)
    kept: int = 0
    #: ``base*``: just before the first kept batch; line counts are from the feed's start
    base: str | None = None
    base_state: StateEvent | None = None
    base_lines: list[int] = attrs.field(factory=list)
    #: per log stream, its lines before each position its cursors count from
    anchors: list[dict[LogPosition, int]] = attrs.field(factory=list)
    counts: list[int] = attrs.field(factory=list)
    done: bool = False
    error: Exception | None = None
    scope: anyio.CancelScope = attrs.field(factory=anyio.CancelScope)
    ready: anyio.Event = attrs.field(factory=anyio.Event)

    async def run(self, *, task_status: TaskStatus[None]) -> None:
        """Read the app's events from :attr:`start` and publish them."""
        self.base = None if self.start is None else str(self.start)
        started = False
        with self.scope:
            try:
                async with self.open_events(self.start, anchor_lines=FEED_ANCHOR_LINES) as events:
                    logs = events.start.logs
                    self.anchors = [{at: -lines} for at, lines in logs]
                    self.counts, self.base_lines = [0] * len(logs), [0] * len(logs)
                    task_status.started()
                    started = True
                    while batch := await events.receive_batch():
                        self._publish(tuple(batch))
            except Exception as error:
                if not started:  # an unknown app, an invalid cursor: to the subscriber
                    raise
                self.error = error
            finally:
                self.done = True
                for sub in self.subscribers:
                    sub.send.close()

    def _publish(self, events: tuple[AppEvent, ...]) -> None:
        head = events[0]
        if isinstance(head, LogEvent):
            index, at = head.batch.index, head.batch.at
            before = head.sequence + head.batch.delta - 1  # its lines counted from `at`
            self.anchors[index].setdefault(at, self.counts[index] - before)
            self.counts[index] += len(events)
        last = self.history[-1] if self.history else None
        if last is not None:
            first = last.first + len(last.events)
        else:
            first = (0 if self.start is None else self.start.sequence) + 1
        shared = _Shared(events, first)
        self.history.append(shared)
        self.kept += len(events)
        while self.kept > HISTORY_EVENTS and len(self.history) > 1:
            dropped = self.history.popleft().events
            self.kept -= len(dropped)
            self.base = dropped[-1].cursor
            if isinstance(dropped[-1], StateEvent):
                self.base_state = dropped[-1]
            else:
                self.base_lines[dropped[-1].batch.index] += len(dropped)
        batch = FeedBatch(shared)
        for sub in list(self.subscribers):
            try:
                sub.send.send_nowait(batch)
            except anyio.WouldBlock:
                sub.cut_off = True
                sub.send.close()
                self.subscribers.discard(sub)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self.subscribers.discard(sub)
            else:
                sub.last = batch.cursor

    def _backlog(self, cursor: Cursor | None, text: str | None) -> list[FeedBatch] | None:
        """The kept batches after the event of ``cursor``; ``None``: not a kept cursor."""
        if text == self.base:
            return [FeedBatch(shared) for shared in self.history]
        sequence = 0 if cursor is None else cursor.sequence
        for index, shared in enumerate(self.history):
            at = sequence - shared.first
            if 0 <= at < len(shared.events):
                if shared.events[at].cursor != text:
                    return None
                after = [FeedBatch(shared, at + 1)] if at + 1 < len(shared.events) else []
                after.extend(FeedBatch(later) for later in list(self.history)[index + 1 :])
                return after
        return None

    def _lines(self, logs: tuple[LogMark, ...]) -> list[int] | None:
        """Per log stream, the lines before ``logs``; ``None``: a position it does not know."""
        if len(logs) != len(self.anchors):
            return None
        lines = []
        for table, (at, delivered) in zip(self.anchors, logs, strict=True):
            before = table.get(at)
            if before is None:
                return None
            lines.append(before + delivered)
        return lines

    def join(self, cursor: Cursor | None, text: str | None) -> _Join | None:
        """How a subscriber from ``cursor`` joins the feed; ``None``: it cannot."""
        backlog = self._backlog(cursor, text)
        return _Join(None, backlog) if backlog is not None else self._catch_up(cursor)

    def _catch_up(self, cursor: Cursor | None) -> _Join | None:
        if self.base is None:
            return None
        state = None if cursor is None else cursor.state
        if state is not None and is_terminal(state):
            return None  # its own stream, which has nothing after it
        old = self._lines((LogMark(0, 0),) * len(self.anchors) if cursor is None else cursor.logs)
        base = self.base_lines
        if old is None or any(map(int.__gt__, old, base)):
            return None
        backlog = [FeedBatch(shared) for shared in self.history]
        base_state = self.start.state if self.start is not None else None
        if self.base_state is not None:
            base_state = self.base_state.state
        if state != base_state:
            if self.base_state is None:  # the feed's start cursor said it: no status to show
                return None
            event = StateEvent(self.base, self.base_state.state, self.base_state.status)
            backlog.insert(0, FeedBatch(_Shared((event,), 0)))
        return _Join(tuple(map(int.__sub__, base, old)), backlog)


class _Join(NamedTuple):
    """A subscriber's way in: ``limits`` lines per stream from the scheduler, then ``backlog``."""

    limits: tuple[int, ...] | None
    backlog: list[FeedBatch]


class Subscription:
    """A subscriber's events, batch by batch: iterate it, or :meth:`receive` each batch.

    For one task at a time. ``shared``: it reads the app's feed, not its own stream.
    """

    def __init__(
        self,
        backlog: list[FeedBatch],
        receive: MemoryObjectReceiveStream[FeedBatch] | EventStream,
        sub: _Subscriber | None,
        feed: _Feed | None,
        catch_up: EventStream | None = None,
    ) -> None:
        self._catch_up = catch_up
        self._backlog = deque(backlog)
        self._receive = receive
        self._sub = sub
        self._feed = feed
        self._closed = False
        self._waiting = anyio.CancelScope()
        self.shared = feed is not None
        #: the last event's cursor received
        self.cursor: str | None = None

    def __aiter__(self) -> AsyncIterator[FeedBatch]:
        """The batches, to the stream's end (or :meth:`close`)."""
        return self._batches()

    async def _batches(self) -> AsyncIterator[FeedBatch]:
        while True:
            try:
                yield await self.receive()
            except anyio.EndOfStream:
                return

    async def receive(self) -> FeedBatch:
        """Return the next batch of events.

        Raises:
            anyio.EndOfStream: the stream ended, or :meth:`close` was called.
            SubscriberCutOff: it did not keep up.
            Exception: the error that ended the app's event stream.
        """
        batch = self._ready()  # ready: no await, no cancel scope (benchmark 12's rows)
        if batch is None:
            with anyio.CancelScope() as self._waiting:
                if self._closed:
                    raise anyio.EndOfStream
                batch = await self._next()
        if batch is None:  # close() was called meanwhile
            raise anyio.EndOfStream
        self.cursor = batch.cursor
        return batch

    def _ready(self) -> FeedBatch | None:
        """The feed's next batch if ready, else ``None``."""
        if self._closed or self._catch_up is not None or isinstance(self._receive, EventStream):
            return None
        if self._backlog:
            return self._backlog.popleft()
        try:
            return self._receive.receive_nowait()
        except (anyio.WouldBlock, anyio.EndOfStream):  # its end: for the awaiting receive
            return None

    async def _next(self) -> FeedBatch:
        if self._catch_up is not None:
            if events := await self._catch_up.receive_batch():
                return FeedBatch(_Shared(tuple(events), 0))
            self._catch_up = None
        if self._backlog:
            return self._backlog.popleft()
        if isinstance(self._receive, EventStream):
            events = await self._receive.receive_batch()
            if not events:
                raise anyio.EndOfStream
            return FeedBatch(_Shared(tuple(events), 0))
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            self._end()
            raise

    def take_ready(self) -> list[FeedBatch]:
        """Take the batches ready now, without waiting, so that they go out in one write."""
        ready = []
        while (batch := self._ready()) is not None:
            ready.append(batch)
        if ready:
            self.cursor = ready[-1].cursor
        return ready

    def _end(self) -> None:
        if self._sub is not None and self._sub.cut_off:
            raise SubscriberCutOff(self.cursor if self.cursor is not None else self._sub.last)
        if self._feed is not None and self._feed.error is not None:
            raise self._feed.error

    def close(self) -> None:
        """End the iteration, at once in a task waiting in :meth:`receive`."""
        self._closed = True
        self._backlog.clear()
        self._waiting.cancel()


class Fanout(anyio.AsyncContextManagerMixin):
    """The feeds of a runner, one per app followed."""

    def __init__(self) -> None:
        self._feeds: dict[str, _Feed] = {}
        self._task_group: TaskGroup | None = None

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[Fanout]:
        async with background_tasks() as self._task_group:
            try:
                yield self
            finally:
                self._task_group = None

    async def _feed(self, key: str, open_events: OpenEvents, cursor: Cursor | None) -> _Feed:
        if self._task_group is None:
            raise RuntimeError("the fan-out is not entered")
        while (feed := self._feeds.get(key)) and not (feed.done or feed.ready.is_set()):
            await feed.ready.wait()  # another subscriber is starting it
        if feed is not None and not feed.done:
            return feed
        feed = self._feeds[key] = _Feed(open_events, cursor)
        try:
            await self._task_group.start(feed.run)
        except BaseException:
            if self._feeds.get(key) is feed:
                del self._feeds[key]
            raise
        finally:
            feed.ready.set()
        return feed

    @asynccontextmanager
    async def subscribe(
        self, key: str, open_events: OpenEvents, cursor: Cursor | None, max_buffer: int
    ) -> AsyncIterator[Subscription]:
        if max_buffer < 1:
            raise ValueError(f"max_buffer={max_buffer} must be at least 1 (batches)")
        feed = await self._feed(key, open_events, cursor)
        # from here to the subscriber's registration, no await: nothing is published between
        text = None if cursor is None else str(cursor)
        join = feed.join(cursor, text)
        if join is None:
            async with open_events(cursor) as events:
                yield Subscription([], events, None, None)
            return
        backlog = join.backlog
        send, receive = anyio.create_memory_object_stream[FeedBatch](max_buffer)
        sub = _Subscriber(send, backlog[-1].cursor if backlog else text)
        if feed.done:  # it ended (and kept every batch) before this subscriber came
            send.close()
        else:
            feed.subscribers.add(sub)
        try:
            async with AsyncExitStack() as stack:
                stack.enter_context(receive)
                catch_up: EventStream | None = None
                if join.limits is not None:
                    catch_up = await stack.enter_async_context(
                        open_events(cursor, anchor_lines=None, limits=join.limits)
                    )
                yield Subscription(backlog, receive, sub, feed, catch_up)
        finally:
            feed.subscribers.discard(sub)
            send.close()
            if not feed.subscribers:
                feed.scope.cancel()
                if self._feeds.get(key) is feed:
                    del self._feeds[key]
