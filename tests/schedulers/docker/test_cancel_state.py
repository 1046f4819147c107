"""A cancelled ``local_docker`` app is terminal only once every container has stopped.

The cancel runs in one task while another waits: while the replicas' SIGTERM handlers
still run, the app is RUNNING, and ``wait`` returns ``CANCELLED`` only after the engine
reports every container stopped (the local schedulers' promise, tests/schedulers/local/
test_cancel_state.py).
"""

from __future__ import annotations

import subprocess
from contextlib import aclosing
from pathlib import Path

import anyio
import pytest

from asynctorchx.schedulers.docker_scheduler import create_scheduler
from asynctorchx.specs.api import AppDef, AppState, Role, parse_mounts

LIMIT = 60  # seconds; each step awaits an event, this only bounds a hang

# on SIGTERM: say so, then keep running until the test lets it finish
HANDLER = (
    "trap 'echo stopping; while [ ! -e /w/go ]; do sleep 0.05; done; exit 0' TERM;"
    " echo ready; sleep 600 & wait; wait"
)


def _listed_running(app_id: str) -> int:
    """How many of the app's containers ``docker ps`` lists as running (the engine's
    listing, which lags behind an exit until the engine has recorded it)."""
    label = f"label=torchx.pytorch.org/app-id={app_id}"
    listed = subprocess.run(
        ["docker", "ps", "-q", "--filter", label], capture_output=True, text=True, check=True
    )
    return len(listed.stdout.split())


@pytest.mark.docker
async def test_wait_returns_cancelled_only_once_every_container_has_stopped(
    docker_image: str, docker_apps: list[str], tmp_path: Path
) -> None:
    role = Role(
        "r",
        docker_image,
        entrypoint="sh",
        args=["-c", HANDLER],
        num_replicas=2,
        mounts=parse_mounts([f"type=bind,src={tmp_path},dst=/w"]),
    )
    async with create_scheduler("t", stop_timeout=LIMIT) as sched:
        app_id = await sched.submit(AppDef("stopping", [role]), {})
        docker_apps.append(app_id)

        async def until(k: int, wanted: str) -> None:
            lines = sched.log_iter(app_id, "r", k, should_tail=True)
            async with aclosing(lines):  # type: ignore[type-var]
                async for line in lines:
                    if line == wanted:
                        return

        with anyio.fail_after(LIMIT):
            for k in (0, 1):
                await until(k, "ready\n")
            async with anyio.create_task_group() as tg:
                tg.start_soon(sched.cancel, app_id)  # returns once the containers stopped
                for k in (0, 1):
                    await until(k, "stopping\n")  # both handlers run
                during = await sched.describe(app_id)
                assert during is not None
                assert during.state == AppState.RUNNING
                assert _listed_running(app_id) == 2
                (tmp_path / "go").touch()
                final = await sched.wait(app_id)
                assert _listed_running(app_id) == 0  # stopped for the engine too
        assert final is not None
        assert final.state == AppState.CANCELLED
