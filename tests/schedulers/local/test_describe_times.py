"""When ``local_cwd``'s supervisor says an app and its replicas were submitted, started and
ended (``describe``): aware UTC times, in order, the end only once ended.

The state directory is ``tmp_path/state`` (``conftest``).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
from asynctorchx.specs.api import AppDef, AppState, Role

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc process identities")

LIMIT = 60  # seconds: a safety bound, never a timing guess


async def test_describe_gives_submit_start_and_end_times_in_order(tmp_path: Path) -> None:
    go = tmp_path / "go"
    wait_for_go = f"until [ -e {go} ]; do sleep 0.05; done"
    app = AppDef("timed", [Role("worker", "x", entrypoint="sh", args=["-c", wait_for_go])])
    app.roles[0].num_replicas = 2
    before = datetime.now(UTC)
    async with create_cwd_scheduler("test") as scheduler:
        with anyio.fail_after(LIMIT):
            app_id = await scheduler.submit(app, {})
            running = await scheduler.describe(app_id)
            go.touch()
            done = await scheduler.wait(app_id)
    assert running is not None
    assert done is not None
    assert (running.state, running.ended, running.pending_reason) == (AppState.RUNNING, None, None)
    assert running.started is not None
    assert done.state == AppState.SUCCEEDED
    assert done.submitted is not None
    assert done.started is not None
    assert done.ended is not None
    assert done.submitted.tzinfo == UTC
    assert before <= done.submitted <= done.started <= done.ended <= datetime.now(UTC)
    assert done.started == running.started
    replicas = done.roles_statuses[0].replicas
    for replica in replicas:
        assert replica.started is not None
        assert replica.ended is not None
        assert done.started <= replica.started <= replica.ended <= done.ended
    assert done.started == min(replica.started for replica in replicas if replica.started)
