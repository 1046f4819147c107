"""Local apps run from any event loop of the process, one after another or side by side.

The local scheduler makes asyncio (3.11) reap children through pidfds; the watcher
it installs is process-wide, so it must serve loops other than the one that installed
it, including after that loop has ended.
"""

from __future__ import annotations

import threading

import anyio
from anyio.from_thread import start_blocking_portal

from asynctorchx.runner import get_runner
from asynctorchx.specs import AppDef, AppState, Role

LIMIT = 60  # seconds: a safety bound, never a timing guess


async def _run_one(text: str) -> tuple[AppState, list[str]]:
    app = AppDef("loops", [Role("r", image="", entrypoint="echo", args=[text])])
    with anyio.fail_after(LIMIT):
        async with get_runner() as runner:
            handle = await runner.run(app, "local_cwd")
            status = await runner.wait(handle)
            assert status is not None
            lines = [line async for line in runner.log_lines(handle, "r", 0)]
            return status.state, lines


def test_an_app_runs_on_a_loop_in_another_thread_after_the_main_loop_ended() -> None:
    # anyio.run on the main thread, then a blocking portal's loop in a thread of its own:
    # an embedding program or a test harness does exactly this
    assert anyio.run(_run_one, "main") == (AppState.SUCCEEDED, ["main\n"])
    with start_blocking_portal() as portal:
        assert portal.call(_run_one, "portal") == (AppState.SUCCEEDED, ["portal\n"])


def test_apps_run_on_two_loops_at_once() -> None:
    results: dict[str, tuple[AppState, list[str]]] = {}

    def in_thread() -> None:
        results["thread"] = anyio.run(_run_one, "thread")

    anyio.run(_run_one, "warm")  # the main thread's loop installs the watcher first
    with start_blocking_portal() as portal:
        worker = threading.Thread(target=in_thread)
        worker.start()
        results["portal"] = portal.call(_run_one, "portal")
        worker.join(LIMIT)
    assert results == {
        "thread": (AppState.SUCCEEDED, ["thread\n"]),
        "portal": (AppState.SUCCEEDED, ["portal\n"]),
    }
