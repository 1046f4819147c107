"""What ``local_cwd``'s ``list`` says of an app besides its state: its name, when it was
submitted and when it ended, from this process and from another process's record (first
read from the record, then from the list index).

The state directory is ``tmp_path/state`` (``conftest``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from asynctorchx.schedulers.api import ListAppResponse
from asynctorchx.schedulers.local._records import INDEX_NAME
from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
from asynctorchx.specs.api import AppDef, AppState, Role

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc process identities")

LIMIT = 60  # seconds: a safety bound, never a timing guess


def sh_app(name: str, script: str) -> AppDef:
    return AppDef(name, [Role("worker", "x", entrypoint="sh", args=["-c", script])])


def by_id(listed: list[ListAppResponse]) -> dict[str, ListAppResponse]:
    return {app.app_id: app for app in listed}


async def test_this_process_lists_name_submit_and_end_times(tmp_path: Path) -> None:
    go = tmp_path / "go"
    before = datetime.now(UTC)
    async with create_cwd_scheduler("test") as scheduler:
        with anyio.fail_after(LIMIT):
            done = await scheduler.submit(sh_app("quick", "true"), {})
            await scheduler.wait(done)
            running = await scheduler.submit(
                sh_app("slow", f"until [ -e {go} ]; do sleep 0.05; done"), {}
            )
            listed = by_id(await scheduler.list())
            go.touch()
            await scheduler.wait(running)
    quick, slow = listed[done], listed[running]
    assert (quick.name, quick.state, slow.name, slow.state) == (
        "quick",
        AppState.SUCCEEDED,
        "slow",
        AppState.RUNNING,
    )
    assert quick.submitted is not None
    assert slow.submitted is not None
    assert before <= quick.submitted <= slow.submitted <= datetime.now(UTC)
    assert quick.submitted.tzinfo == UTC
    assert quick.ended is not None
    assert quick.submitted <= quick.ended <= slow.submitted
    assert slow.ended is None  # it was running


RUN_ONE = """
import anyio
from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
from asynctorchx.specs.api import AppDef, Role

async def main():
    async with create_cwd_scheduler("test") as scheduler:
        app = AppDef("elsewhere", [Role("worker", "x", entrypoint="sh", args=["-c", "exit 3"])])
        app_id = await scheduler.submit(app, {})
        await scheduler.wait(app_id)
        print(app_id)

anyio.run(main)
"""


async def test_another_process_record_and_the_index_keep_name_and_times(state: Path) -> None:
    before = datetime.now(UTC)
    ran = subprocess.run(
        [sys.executable, "-c", RUN_ONE],
        env={**os.environ, "ASYNCTORCHX_STATE_DIR": str(state)},
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=True,
    )
    app_id = ran.stdout.strip()
    after = datetime.now(UTC)
    seen = []
    for _ in range(2):  # the record, then the index it made
        async with create_cwd_scheduler("test") as scheduler:
            seen.append(by_id(await scheduler.list())[app_id])
        assert (state / "local_cwd" / INDEX_NAME).exists()
    assert seen[0] == seen[1]
    app = seen[0]
    assert (app.name, app.state) == ("elsewhere", AppState.FAILED)
    assert app.submitted is not None
    assert app.ended is not None
    assert before <= app.submitted <= app.ended <= after
