"""One reader, many waiters: :class:`SharedFeed`, and the batched poll built on it.

A backend learns of state changes from one feed: a Kubernetes watch (the informer of
``kubernetes/_informer.py``), or, where the backend pushes nothing to ordinary users
(Slurm: ``strigger`` is for the SlurmUser only, ``sbatch --wait`` itself polls), a poll.
Either way many tasks wait on the same snapshot, each for its own condition.
:class:`SharedFeed` is that part, written once: one waiter at a time reads the feed's
next step for everyone and wakes them all; each re-checks its condition on the new
snapshot. :class:`BatchedPoller` is the poll: one ``fetch`` per tick for every watched
key together (one ``squeue`` for all watched jobs), instead of each waiter polling on
its own timer as TorchX's ``Runner.wait`` does.

No background task is needed: the first waiter to find nobody reading becomes the
reader; when it leaves (its condition held, or it was cancelled), the next waiter takes
over. So a feed is only read while somebody waits, and cancelling any waiter never
stops the others.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Collection, Hashable, Mapping
from typing import Generic, TypeVar

import anyio

from asynctorchx.schedulers.toolkit._tail import Notifier

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
T = TypeVar("T")

#: Seconds between two polls while watched states change (the default tick).
DEFAULT_INTERVAL = 1.0
#: The longest tick, in seconds, reached by backing off while nothing changes.
DEFAULT_MAX_INTERVAL = 10.0
#: Seconds without any change after which the tick starts to grow (x2 per idle tick).
DEFAULT_IDLE_AFTER = 60.0


class SharedFeed:
    """A snapshot kept by one feed, and the tasks waiting on it for their conditions.

    A subclass keeps the snapshot and implements :meth:`_read` (one step of the feed:
    a poll, a watch event); :meth:`_idle` runs when the last waiter leaves (closing a
    watch nobody reads). :attr:`reads` counts the steps run, cancelled ones included.
    """

    def __init__(self) -> None:
        self.reads = 0
        self._changed = Notifier()
        self._reading = False
        self._waiters = 0
        self._failure: tuple[int, Exception] | None = None

    async def _read(self) -> None:
        """Run one step of the feed, updating the snapshot (the subclass's)."""
        raise NotImplementedError

    async def _idle(self) -> None:
        """Called when the last waiter left (nothing to do by default)."""

    async def wait_for(self, check: Callable[[], T | None], timeout: float | None = None) -> T:
        """Wait until ``check()`` returns something other than ``None``, and return it.

        ``check`` is called now and after every step of the feed, on the snapshot.

        Args:
            check: reads the snapshot; ``None`` means "not yet".
            timeout: seconds to wait at most; ``None``: no limit.

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
            Exception: the error a step this waiter awaited raised (every waiter of
                that step gets it).
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
    """Polls the state of every watched key with one ``fetch`` call per tick.

    Args:
        fetch: ``await fetch(keys)`` returns the current value of each key it knows
            (a key it leaves out is unknown: ``None`` to the waiter). It is called with
            every key watched at that tick, once per tick, never concurrently.
        interval: seconds between polls while something changes (> 0).
        max_interval: the tick grows up to this many seconds while nothing changes.
        idle_after: seconds without any change before the tick starts to grow.

    Raises:
        ValueError: an interval is not a positive finite number of seconds, or
            ``max_interval < interval``.

    A new watcher whose key has no value yet is served by an immediate poll, and any
    change of any value brings the tick back to ``interval``. :attr:`polls` counts the
    ``fetch`` calls (benchmarks and tests read it).
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
        """Wait until ``done(value of key)`` holds, and return that value.

        ``None`` is the value of a key that ``fetch`` did not return (unknown).

        Args:
            key: what to watch (an app id).
            done: the condition, called with each new value (and ``None``).
            timeout: seconds to wait at most; ``None``: no limit.

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
            Exception: the error ``fetch`` raised at a tick this waiter awaited.
        """

        def check() -> tuple[V | None] | None:
            if key in self._values and done(value := self._values[key]):
                return (value,)
            return None

        self._watchers[key] = self._watchers.get(key, 0) + 1
        if key not in self._values:
            self._arrivals.notify()  # a sleeping tick polls at once for a new key
        try:
            return (await self.wait_for(check, timeout))[0]
        finally:
            self._watchers[key] -= 1
            if not self._watchers[key]:
                del self._watchers[key]  # its value is dropped at the next poll

    async def next_poll(self, key: K, timeout: float | None = None) -> V | None:
        """Wait for the next poll that includes ``key`` and return its value there.

        A caller that loops on ``next_poll`` (a log follower re-reading a file after each
        state poll) is served once per tick with the other waiters; a key watched for the
        first time is polled at once. ``None``: ``fetch`` did not return the key.

        Args:
            key: what to watch (an app id).
            timeout: seconds to wait at most; ``None``: no limit.

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
            Exception: the error ``fetch`` raised at the tick this waiter awaited.
        """
        after = self.polls
        return await self.wait_until(key, lambda value: self.polls > after, timeout)

    async def _read(self) -> None:
        """Sleep until the tick is due (or a key with no value yet is watched), then poll."""
        while all(key in self._values for key in self._watchers):
            arrival = self._arrivals.event
            now = anyio.current_time()
            idle = now - self._last_change
            interval = self.interval
            if idle > self.idle_after:  # x2 per idle tick, up to max_interval
                doublings = min(int((idle - self.idle_after) // self.interval) + 1, 32)
                interval = min(self.max_interval, math.ldexp(self.interval, doublings))
            if now >= self._last_poll + interval:
                break
            with anyio.move_on_after(self._last_poll + interval - now):
                await arrival.wait()
        keys = list(self._watchers)
        try:
            values = await self._fetch(keys)
        finally:
            self.polls += 1
            self._last_poll = anyio.current_time()
        for gone in [key for key in self._values if key not in self._watchers]:
            del self._values[gone]  # nobody watches it any more
        for watched in keys:
            value = values.get(watched)
            if watched not in self._values or self._values[watched] != value:
                self._last_change = self._last_poll
            if watched in self._watchers:
                self._values[watched] = value
