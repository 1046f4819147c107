"""``local_docker``'s follow of a log still flowing when its container exits (Docker Engine API).

A follower from ``submit`` falls behind a replica that writes without pause; at the exit it
reads its follow on while the engine sends, then takes what is left from the log's tail or
from its position (dropping what it consumed already): every line comes once, in order.
"""

from __future__ import annotations

import anyio
import pytest

from asynctorchx.schedulers.docker_scheduler import create_scheduler
from asynctorchx.specs.api import AppDef, AppState, Role

LIMIT = 120.0  # seconds: a safety bound on awaits, never a timing guess


@pytest.mark.docker
@pytest.mark.parametrize("count", [20_000, 300_000])  # a few frames / a burst it forgets
async def test_a_follow_of_a_log_written_without_pause_yields_every_line_once_in_order(
    docker_image: str, docker_apps: list[str], count: int
) -> None:
    script = f'i=0; while [ $i -lt {count} ]; do echo "line $i"; i=$((i + 1)); done'
    role = Role(name="r", image=docker_image, entrypoint="sh", args=["-c", script])
    async with create_scheduler("t") as sched:
        app_id = await sched.submit(AppDef("flowing", [role]), {})
        docker_apps.append(app_id)
        with anyio.fail_after(LIMIT):
            followed = [line async for line in sched.log_iter(app_id, "r", 0, should_tail=True)]
            done = await sched.wait(app_id)
        assert done is not None
        assert done.state == AppState.SUCCEEDED
        assert followed == [f"line {i}\n" for i in range(count)]
