"""The watch fallback for backends without events: ONE batched poll for every watcher.

Where a backend pushes state changes (process exit, Docker's ``/events``, a Kubernetes
watch) a scheduler awaits them. Where it pushes nothing to ordinary users (Slurm:
``strigger`` is for the SlurmUser only, ``sbatch --wait`` itself polls), state has to be
asked for. :class:`BatchedPoller` asks once per tick for every watched key together
(one ``squeue`` for all watched jobs), however many tasks wait, instead of each waiter
polling on its own timer as TorchX's ``Runner.wait`` does.

No background task is needed: the first waiter to find no tick in progress runs the next
one and the others await its result; when that waiter leaves (its app ended, or it was
cancelled), the next waiter takes over. So the poller is only active while somebody
waits, and cancelling any waiter never stops the others.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Collection, Hashable, Mapping
from typing import Generic, TypeVar

import anyio

from asynctorchx.schedulers.toolkit._tail import Notifier

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: Seconds between two polls while watched states change (the default tick).
DEFAULT_INTERVAL = 1.0
#: The longest tick, in seconds, reached by backing off while nothing changes.
DEFAULT_MAX_INTERVAL = 10.0
#: Seconds without any change after which the tick starts to grow (x2 per idle tick).
DEFAULT_IDLE_AFTER = 60.0


class BatchedPoller(Generic[K, V]):
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
        self._fetch = fetch
        self.interval = float(interval)
        self.max_interval = float(max_interval)
        self.idle_after = float(idle_after)
        self.polls = 0
        self._watchers: dict[K, int] = {}
        self._values: dict[K, V | None] = {}
        self._notifier: Notifier | None = None
        self._arrival_notifier: Notifier | None = None
        self._polling = False
        self._last_poll = -math.inf
        self._last_change = -math.inf
        self._failure: tuple[int, Exception] | None = None

    @property
    def watched(self) -> int:
        """How many distinct keys are watched now."""
        return len(self._watchers)

    def _changed(self) -> Notifier:
        if self._notifier is None:
            self._notifier = Notifier()
        return self._notifier

    def _current_interval(self, now: float) -> float:
        idle = now - self._last_change
        if idle <= self.idle_after:
            return self.interval
        doublings = int((idle - self.idle_after) // self.interval) + 1
        return min(self.max_interval, math.ldexp(self.interval, min(doublings, 32)))

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
        self._watchers[key] = self._watchers.get(key, 0) + 1
        if key not in self._values:
            self._arrivals().notify()  # a sleeping tick polls at once for a new key
        try:
            with anyio.fail_after(timeout):
                return await self._wait(key, done)
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

    async def _wait(self, key: K, done: Callable[[V | None], bool]) -> V | None:
        while True:
            event = self._changed().event
            if key in self._values:
                value = self._values[key]
                if done(value):
                    return value
            if not self._polling:
                await self._lead()
                continue
            seen = self.polls
            await event.wait()
            if self._failure is not None and self._failure[0] > seen:
                raise self._failure[1]

    async def _lead(self) -> None:
        """Run the next tick for everyone, then wake every waiter (also when cancelled)."""
        self._polling = True
        try:
            await self._until_tick()
            keys = list(self._watchers)
            try:
                values = await self._fetch(keys)
            except Exception as error:
                self._failure = (self.polls + 1, error)
                raise
            finally:
                self.polls += 1
                self._last_poll = anyio.current_time()
            self._store(keys, values)
        finally:
            self._polling = False
            self._changed().notify()

    async def _until_tick(self) -> None:
        """Sleep until the next tick is due, or a key with no value yet is watched."""
        while True:
            arrival = self._arrivals().event
            if any(key not in self._values for key in self._watchers):
                return
            now = anyio.current_time()
            deadline = self._last_poll + self._current_interval(now)
            if now >= deadline:
                return
            with anyio.move_on_after(deadline - now):
                await arrival.wait()

    def _arrivals(self) -> Notifier:
        if self._arrival_notifier is None:
            self._arrival_notifier = Notifier()
        return self._arrival_notifier

    def _store(self, keys: list[K], values: Mapping[K, V]) -> None:
        for gone in [key for key in self._values if key not in self._watchers]:
            del self._values[gone]  # nobody watches it any more
        for watched in keys:
            value = values.get(watched)
            if watched not in self._values or self._values[watched] != value:
                self._last_change = self._last_poll
            if watched in self._watchers:
                self._values[watched] = value
