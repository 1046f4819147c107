"""Await an app's state on the engine's events stream: ``wait`` and ``wait_for_state_change``.

TorchX 0.7.0's ``torchx.schedulers.docker_scheduler`` has no wait of its own (the runner
polls ``describe``); here the scheduler subscribes to the engine's events for the app's
containers before its first inspect, so no change is missed, and each event prompts a
fresh look at its container. No polling.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from asynctorchx.schedulers.api import DescribeAppResponse
from asynctorchx.schedulers.docker._containers import (
    cancelled_at,
    inspect_and_marker,
    inspect_app,
)
from asynctorchx.schedulers.docker._engine import Engine, EventStream
from asynctorchx.schedulers.docker._request import LABEL_APP_ID
from asynctorchx.schedulers.docker._state import (
    STATE_EVENTS,
    describe_from,
    event_action,
    event_id,
    exit_for_good,
)
from asynctorchx.schedulers.toolkit import race

#: Container id -> its new events, oldest first.
EventsById = dict[str, list[dict[str, Any]]]


async def watch(
    engine: Engine, app_id: str, done: Callable[[DescribeAppResponse], bool]
) -> DescribeAppResponse | None:
    """Describe the app after every event of its containers until ``done`` says so.

    Subscribes to the app's container events, then lists and inspects its containers.
    Each event prompts a fresh inspect of its container, except that a ``die`` the
    engine will not restart is answered at once from the event (see ``exit_for_good``):
    an inspect right after a ``die`` waits ~50 ms for the engine to finish its exit
    handling, and ``wait`` should return sooner. A container that is ``restarting`` is
    also awaited on the engine's wait endpoint: when the engine fails to start it again
    (its bind source is gone, say) it marks it exited without logging any event.

    Args:
        engine: the engine.
        app_id: a valid app id.
        done: whether a description is the one awaited.

    Returns:
        the first description ``done`` accepts, or ``None`` once the app has no
        container (unknown, or all removed).

    Raises:
        SchedulerUnavailableError: no engine, or it closed the events stream.
    """
    filters = {
        "type": ["container"],
        "label": [f"{LABEL_APP_ID}={app_id}"],
        "event": [*STATE_EVENTS, "kill"],
    }
    async with engine.events(filters) as events:
        inspected, cancelled = await inspect_app(engine, app_id)
        watcher = _Watcher(engine, app_id, done, inspected, cancelled)
        return await watcher.run(events)


class _Watcher:
    """The state of one :func:`watch`: the containers' last inspects, kills, the cancel."""

    def __init__(
        self,
        engine: Engine,
        app_id: str,
        done: Callable[[DescribeAppResponse], bool],
        inspected: list[dict[str, Any]],
        cancelled_at_ns: int | None,
    ) -> None:
        self.engine = engine
        self.app_id = app_id
        self.done = done
        self.containers = {info["Id"]: info for info in inspected}
        self.killed: dict[str, int] = {}  # container -> when it was last sent a signal (ns)
        self.cancelled_at_ns = cancelled_at_ns

    async def run(self, events: EventStream) -> DescribeAppResponse | None:
        """Describe, await the next events, look again; until ``done`` or no container."""
        while self.containers:
            response = self._describe(self.containers)
            if self.done(response):
                return response
            prompted = await self._next_prompts(events)
            if not prompted:
                continue
            decided = await self._from_die_events(prompted)
            if decided is not None:
                return decided
            await self._inspect_again(prompted)
        return None

    def _describe(self, containers: dict[str, dict[str, Any]]) -> DescribeAppResponse:
        return describe_from(self.app_id, list(containers.values()), self.cancelled_at_ns)

    async def _next_prompts(self, events: EventStream) -> EventsById:
        """Await new events (or a restarting container's stop); return them by container.

        ``kill`` events are not prompts: they are remembered (an API signal means the
        engine will not restart the container) until the container starts again.
        """
        prompted: EventsById = {}
        restarting = [
            cid
            for cid, info in self.containers.items()
            if info["State"].get("Status") == "restarting"
        ]
        await race(
            [
                events.fill,
                *(functools.partial(self._backstop, cid, prompted) for cid in restarting),
            ]
        )
        for event in events.pop():
            cid, action = event_id(event), event_action(event)
            if action == "kill":  # an API signal: the engine will not restart it
                self.killed.setdefault(cid, int(event.get("timeNano") or 0))
                continue
            if action == "start":
                self.killed.pop(cid, None)
            prompted.setdefault(cid, []).append(event)
        return prompted

    async def _backstop(self, cid: str, prompted: EventsById) -> None:
        """Add ``cid`` to ``prompted`` once the restarting container is next not running."""
        await self.engine.wait_stopped(cid)
        prompted.setdefault(cid, [])

    async def _from_die_events(self, prompted: EventsById) -> DescribeAppResponse | None:
        """The awaited description if every prompt is a ``die`` decided from its event."""
        if not all(
            cid in self.containers and any(event_action(e) == "die" for e in evs)
            for cid, evs in prompted.items()
        ):
            return None
        if self.cancelled_at_ns is None:
            self.cancelled_at_ns = await cancelled_at(self.engine, self.app_id)
        exits = {
            cid: exit_for_good(
                self.containers[cid], evs, self.killed.get(cid), self.cancelled_at_ns
            )
            for cid, evs in prompted.items()
        }
        found = {cid: info for cid, info in exits.items() if info is not None}
        if len(found) != len(exits):
            return None
        response = self._describe({**self.containers, **found})
        return response if self.done(response) else None

    async def _inspect_again(self, prompted: EventsById) -> None:
        """Inspect the prompted containers (and the cancel marker while not cancelled)."""
        fresh, marker = await inspect_and_marker(
            self.engine, self.app_id, sorted(prompted), marker=self.cancelled_at_ns is None
        )
        if self.cancelled_at_ns is None:
            self.cancelled_at_ns = marker
        for cid in prompted:
            self.containers.pop(cid, None)
        self.containers.update((info["Id"], info) for info in fresh)
