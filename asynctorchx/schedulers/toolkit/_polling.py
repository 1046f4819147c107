"""One reader, many waiters: :class:`SharedFeed`, and the batched poll built on it.

The first waiter to find nobody reading reads for everyone, so no background task is
needed and cancelling a waiter never stops the others.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Collection, Hashable, Mapping
from typing import Generic, TypeVar

import anyio
import tenacity

from asynctorchx._error_bases import SchedulerUnreachableError
from asynctorchx.schedulers.toolkit._tail import Notifier

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
T = TypeVar("T")

logger = logging.getLogger(__name__)

#: The longest wait (seconds) between two asks whether a restarting engine answers again.
RECONNECT_MAX_S = 1.0

#: Seconds between two polls while watched states change (the default tick).
DEFAULT_INTERVAL = 1.0
#: The longest tick, in seconds, reached by backing off while nothing changes.
DEFAULT_MAX_INTERVAL = 10.0
#: Seconds without any change after which the tick starts to grow (x2 per idle tick).
DEFAULT_IDLE_AFTER = 60.0


class SharedFeed:
    """A snapshot kept by one feed, and the tasks waiting on it for their conditions.

    A subclass implements :meth:`_read` (one poll or watch event) and may :meth:`_idle`
    (the last waiter left); :attr:`reads` counts the steps run.
    """

    def __init__(self) -> None:
        self.reads = 0
        self._changed = Notifier()
        self._reading = False
        self._waiters = 0
        self._failure: tuple[int, Exception] | None = None

    async def _read(self) -> None:
        """Run one step of the feed, updating the snapshot."""
        raise NotImplementedError

    async def _idle(self) -> None:
        """Called when the last waiter left (nothing to do by default)."""

    async def wait_for(self, check: Callable[[], T | None], timeout: float | None = None) -> T:
        """Return ``check()``'s first value other than ``None``, checked after every step.

        Args:
            check: reads the snapshot; ``None`` means "not yet".
            timeout: seconds to wait at most; ``None``: no limit.

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
            Exception: the error of a step this waiter awaited.
        """
        self._waiters += 1
        try:
            with anyio.fail_after(timeout):
                while True:
                    event = self._changed.event
                    found = check()
                    if found is not None:
                        return found
                    if not self._reading:
                        await self._lead()
                        continue
                    seen = self.reads
                    await event.wait()
                    if self._failure is not None and self._failure[0] > seen:
                        raise self._failure[1]
        finally:
            self._waiters -= 1
            if not self._waiters:
                await self._idle()

    async def _lead(self) -> None:
        """Run the next step for everyone, then wake every waiter (also when cancelled)."""
        self._reading = True
        try:
            await self._read()
        except Exception as error:
            self._failure = (self.reads + 1, error)
            raise
        finally:
            self.reads += 1
            self._reading = False
            self._changed.notify()


class BatchedPoller(SharedFeed, Generic[K, V]):
    """Polls every watched key with one ``fetch`` per tick (one ``squeue`` for all jobs).

    A new key is polled at once; :attr:`polls` counts the ``fetch`` calls. A ``fetch`` that
    raises :class:`~asynctorchx.errors.SchedulerUnreachableError` keeps the last values and
    the waiters waiting (logged once per outage); any other error reaches the waiters.

    Args:
        fetch: returns the value of each of ``keys`` it knows (one left out: ``None``).
        interval: seconds between polls while something changes (> 0).
        max_interval: the tick grows up to this many seconds while nothing changes.
        idle_after: seconds without any change before the tick starts to grow.

    Raises:
        ValueError: an interval is not a positive finite number, or ``max_interval < interval``.
    """

    def __init__(
        self,
        fetch: Callable[[Collection[K]], Awaitable[Mapping[K, V]]],
        *,
        interval: float = DEFAULT_INTERVAL,
        max_interval: float = DEFAULT_MAX_INTERVAL,
        idle_after: float = DEFAULT_IDLE_AFTER,
    ) -> None:
        for name, value in (("interval", interval), ("max_interval", max_interval)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name}={value!r}: use a positive number of seconds")
        if max_interval < interval:
            raise ValueError(f"max_interval={max_interval} is below interval={interval}")
        super().__init__()
        self._fetch = fetch
        self.interval = float(interval)
        self.max_interval = float(max_interval)
        self.idle_after = float(idle_after)
        self.polls = 0
        #: the last poll found the engine not answering (:class:`SchedulerUnreachableError`)
        self.unreachable = False
        self._watchers: dict[K, int] = {}
        self._values: dict[K, V | None] = {}
        self._arrivals = Notifier()
        self._last_poll = -math.inf
        self._last_change = -math.inf

    @property
    def watched(self) -> int:
        """How many distinct keys are watched now."""
        return len(self._watchers)

    async def wait_until(
        self, key: K, done: Callable[[V | None], bool], timeout: float | None = None
    ) -> V | None:
        """Return ``key``'s value (``None``: unknown) once ``done`` accepts it.

        Raises:
            TimeoutError: ``timeout`` seconds (``None``: no limit) passed first.
            Exception: the error ``fetch`` raised at a tick this waiter awaited.
        """

        def check() -> tuple[V | None] | None:
            if key in self._values and done(value := self._values[key]):
                return (value,)
            return None

        self._watchers[key] = self._watchers.get(key, 0) + 1
        if key not in self._values:
            self._arrivals.notify()
        try:
            return (await self.wait_for(check, timeout))[0]
        finally:
            self._watchers[key] -= 1
            if not self._watchers[key]:
                del self._watchers[key]

    async def next_poll(self, key: K, timeout: float | None = None) -> V | None:
        """Return ``key``'s value at the next poll (``None``: unknown), raising as wait_until."""
        after = self.polls
        return await self.wait_until(key, lambda value: self.polls > after, timeout)

    async def _read(self) -> None:
        """Sleep until the tick is due or a new key is watched, then poll."""
        while all(key in self._values for key in self._watchers):
            arrival = self._arrivals.event
            now = anyio.current_time()
            idle = now - self._last_change
            interval = self.interval
            if idle > self.idle_after:
                doublings = min(int((idle - self.idle_after) // self.interval) + 1, 32)
                interval = min(self.max_interval, math.ldexp(self.interval, doublings))
            if now >= self._last_poll + interval:
                break
            with anyio.move_on_after(self._last_poll + interval - now):
                await arrival.wait()
        keys = list(self._watchers)
        try:
            values = await self._fetch(keys)
        except SchedulerUnreachableError as error:  # down or restarting: wait on, as a waiter would
            if not self.unreachable:
                logger.warning("%s; waiting for it to answer again", error)
            self.unreachable = True
            return
        finally:
            self.polls += 1
            self._last_poll = anyio.current_time()
        if self.unreachable:
            logger.warning("the scheduler answers again")
            self.unreachable = False
        for gone in [key for key in self._values if key not in self._watchers]:
            del self._values[gone]
        for watched in keys:
            value = values.get(watched)
            if watched not in self._values or self._values[watched] != value:
                self._last_change = self._last_poll
            if watched in self._watchers:
                self._values[watched] = value


async def answered(ask: Callable[[], Awaitable[object]]) -> None:
    """Return once ``ask()`` raises no :class:`~asynctorchx.errors.SchedulerUnreachableError`:
    through an engine's restart, asked again with a backoff of at most :data:`RECONNECT_MAX_S`
    seconds (no event tells when it is back)."""
    retrying = tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception_type(SchedulerUnreachableError),
        wait=tenacity.wait_exponential(multiplier=0.1, max=RECONNECT_MAX_S),
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            await ask()
