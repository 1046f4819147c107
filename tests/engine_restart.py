"""A running app followed through its engine's restart, as the Docker and Kubernetes restart
tests do: ``wait``, ``log_lines(should_tail=True)`` and ``Runner.events`` at once."""

from __future__ import annotations

import subprocess
from collections.abc import Awaitable, Callable, Sequence

import anyio
import attrs

from asynctorchx.runner import LogEvent, Runner, StateEvent
from asynctorchx.specs.api import AppState, AppStatus

#: Lines both logs must have delivered before the restart.
BEFORE = 10


@attrs.define
class Seen:
    """What each follower saw, to the app's end."""

    ended: list[AppStatus | None] = attrs.field(factory=list)
    followed: list[str] = attrs.field(factory=list)  # log_lines'
    streamed: list[str] = attrs.field(factory=list)  # Runner.events' log lines
    states: list[AppState] = attrs.field(factory=list)  # Runner.events' states


async def through_restart(
    runner: Runner,
    handle: str,
    role: str,
    restart: Sequence[str],
    while_down: Callable[[], Awaitable[None]],
) -> Seen:
    """Follow the app; once both logs delivered :data:`BEFORE` lines, run ``restart`` (a
    command), await ``while_down()`` (the test's checks meanwhile) and the command's end, which
    is awaited whatever failed, so that the engine is up for the next test. ``wait`` must not
    have returned by then."""
    seen = Seen()
    started = anyio.Event()

    def line(into: list[str], text: str) -> None:
        into.append(text)
        if len(seen.followed) >= BEFORE and len(seen.streamed) >= BEFORE:
            started.set()

    async def wait() -> None:
        seen.ended.append(await runner.wait(handle))

    async def follow() -> None:
        async for text in runner.log_lines(handle, role, should_tail=True):
            line(seen.followed, text)

    async def stream() -> None:
        async with runner.events(handle) as events:
            async for event in events:
                if isinstance(event, LogEvent):
                    line(seen.streamed, event.line)
                elif isinstance(event, StateEvent):
                    seen.states.append(event.state)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(wait)
        tasks.start_soon(follow)
        tasks.start_soon(stream)
        await started.wait()
        process = subprocess.Popen(list(restart), stdout=subprocess.DEVNULL)
        try:
            await while_down()
            assert not seen.ended  # wait goes on
        finally:
            assert await anyio.to_thread.run_sync(process.wait) == 0
    return seen
