"""Await an app's state on the engine's events stream: ``wait`` and ``wait_for_state_change``.

TorchX 0.7.0's ``torchx.schedulers.docker_scheduler`` has no wait of its own (the runner
polls ``describe``); here the scheduler subscribes to the engine's events for the app's
containers before its first inspect, so no change is missed, and each event prompts a
fresh look at its container. No polling.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from asynctorchx.schedulers.api import DescribeAppResponse
from asynctorchx.schedulers.docker._containers import inspect_app
from asynctorchx.schedulers.docker._engine import Engine
from asynctorchx.schedulers.docker._request import LABEL_APP_ID
from asynctorchx.schedulers.docker._state import STATE_EVENTS, describe_from
from asynctorchx.schedulers.toolkit import race


async def watch(
    engine: Engine, app_id: str, done: Callable[[DescribeAppResponse], bool]
) -> DescribeAppResponse | None:
    """Describe the app after every event of its containers until ``done`` says so.

    Subscribes to the app's container events, then lists and inspects its containers.
    Each event prompts a fresh inspect of its container (and of the cancel marker while
    the app is not cancelled). An inspect right after a ``die`` waits (~50 ms) for the
    engine to finish its exit handling: a terminal state is returned only once the engine
    has recorded every container stopped (answering from the ``die`` event itself let
    ``wait`` return while ``docker ps`` still listed the container as running). A
    container that is ``restarting`` is also awaited on the engine's wait endpoint: when
    the engine fails to start it again (its bind source is gone, say) it marks it exited
    without logging any event.

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
        containers, cancelled_at_ns = await inspect_app(engine, app_id)
        while containers:
            response = describe_from(app_id, containers.values(), cancelled_at_ns)
            if done(response):
                return response
            prompted: set[str] = set()
            restarting = [cid for cid, found in containers.items() if found.status == "restarting"]
            await race(
                [
                    events.fill,
                    *(functools.partial(_stopped, engine, cid, prompted) for cid in restarting),
                ]
            )
            prompted.update(event.id for event in events.pop())
            if not prompted:
                continue
            fresh, marker = await inspect_app(
                engine, app_id, sorted(prompted), marker=cancelled_at_ns is None
            )
            if cancelled_at_ns is None:
                cancelled_at_ns = marker
            for cid in prompted:
                containers.pop(cid, None)
            containers.update(fresh)
    return None


async def _stopped(engine: Engine, cid: str, prompted: set[str]) -> None:
    """Add ``cid`` to ``prompted`` once the restarting container is next not running."""
    await engine.wait_stopped(cid)
    prompted.add(cid)
