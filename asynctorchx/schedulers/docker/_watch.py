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
    inspect_and_marker,
    inspect_app,
)
from asynctorchx.schedulers.docker._engine import Engine, EventStream
from asynctorchx.schedulers.docker._request import LABEL_APP_ID
from asynctorchx.schedulers.docker._state import (
    STATE_EVENTS,
    describe_from,
    event_id,
)
from asynctorchx.schedulers.toolkit import race

#: Container id -> its new events, oldest first.
EventsById = dict[str, list[dict[str, Any]]]


async def watch(
    engine: Engine, app_id: str, done: Callable[[DescribeAppResponse], bool]
) -> DescribeAppResponse | None:
    """Describe the app after every event of its containers until ``done`` says so.

    Subscribes to the app's container events, then lists and inspects its containers.
    Each event prompts a fresh inspect of its container. An inspect right after a
    ``die`` waits (~50 ms) for the engine to finish its exit handling: a terminal state
    is returned only once the engine has recorded every container stopped (answering
    from the ``die`` event itself let ``wait`` return while ``docker ps`` still listed the
    container as running). A container that is ``restarting`` is
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
        "event": list(STATE_EVENTS),
    }
    async with engine.events(filters) as events:
        inspected, cancelled = await inspect_app(engine, app_id)
        watcher = _Watcher(engine, app_id, done, inspected, cancelled)
        return await watcher.run(events)


class _Watcher:
    """The state of one :func:`watch`: the containers' last inspects and the cancel."""

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
        self.cancelled_at_ns = cancelled_at_ns

    async def run(self, events: EventStream) -> DescribeAppResponse | None:
        """Describe, await the next events, look again; until ``done`` or no container."""
        while self.containers:
            response = self._describe(self.containers)
            if self.done(response):
                return response
            prompted = await self._next_prompts(events)
            if prompted:
                await self._inspect_again(prompted)
        return None

    def _describe(self, containers: dict[str, dict[str, Any]]) -> DescribeAppResponse:
        return describe_from(self.app_id, list(containers.values()), self.cancelled_at_ns)

    async def _next_prompts(self, events: EventStream) -> EventsById:
        """Await new events (or a restarting container's stop); return them by container."""
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
            prompted.setdefault(event_id(event), []).append(event)
        return prompted

    async def _backstop(self, cid: str, prompted: EventsById) -> None:
        """Add ``cid`` to ``prompted`` once the restarting container is next not running."""
        await self.engine.wait_stopped(cid)
        prompted.setdefault(cid, [])

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
