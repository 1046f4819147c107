"""The logs of apps a local scheduler forgets (``cache_size``) when it runs without
``log_dir`` and without a records directory to keep them in: gone from their path before
the next waiter wakes, then removed from the disk, and never the logs of a dry run
scheduled again under the same app id.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from asynctorchx.schedulers.local._scheduler import LocalScheduler
from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
from asynctorchx.specs.api import AppDef, AppState, Role

pytestmark = pytest.mark.usefixtures("no_records")

LIMIT = 30  # seconds: a deadline for a hung test, never a guess at timing


def echo_app(message: str) -> AppDef:
    return AppDef("evict", [Role("worker", "x", entrypoint="echo", args=[message])])


async def run(scheduler: LocalScheduler, message: str) -> tuple[str, Path]:
    """Run an app that echoes ``message`` to its end: its id and its log directory."""
    app_id = await scheduler.submit(echo_app(message), {})
    final = await scheduler.wait(app_id)
    assert final is not None
    assert final.state == AppState.SUCCEEDED
    assert final.ui_url is not None
    return app_id, Path(final.ui_url.removeprefix("file://"))


async def all_removed(root: Path) -> None:
    """Return once ``root`` holds no log directory moved aside (the remover's work)."""
    with anyio.fail_after(LIMIT):
        while any(name.startswith(".evicted") for name in os.listdir(root)):
            await anyio.sleep(0.01)


async def test_a_forgotten_apps_logs_leave_at_once_and_are_then_removed() -> None:
    async with create_cwd_scheduler("test", cache_size=1) as scheduler:
        first, first_logs = await run(scheduler, "one")
        assert (first_logs / "SUCCESS").exists()
        _, second_logs = await run(scheduler, "two")  # the first is forgotten
        assert await scheduler.describe(first) is None
        assert not first_logs.exists()  # before the second's waiter woke
        root = second_logs.parent.parent
        await all_removed(root)  # and then removed from the disk
        assert (second_logs / "SUCCESS").exists()  # the kept app's logs stay
    assert not root.exists()


async def test_a_dry_run_scheduled_again_after_it_was_forgotten_keeps_its_new_logs() -> None:
    async with create_cwd_scheduler("test", cache_size=1) as scheduler:
        info = scheduler.submit_dryrun(echo_app("again"), {})
        app_id = await scheduler.schedule(info)
        await scheduler.wait(app_id)
        _, other_logs = await run(scheduler, "other")  # forgets the dry run's first run
        assert await scheduler.schedule(info) == app_id  # same id, same log directory
        final = await scheduler.wait(app_id)
        assert final is not None
        assert final.state == AppState.SUCCEEDED
        await all_removed(other_logs.parent.parent)  # every forgotten log removed
        lines = [line async for line in scheduler.log_iter(app_id, "worker")]
        assert lines == ["again\n"]
