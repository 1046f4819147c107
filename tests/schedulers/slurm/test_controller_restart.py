"""slurmctld stopped under a running job and started again (``scripts/slurm-cluster.sh
restart slurmctld --down S``): ``wait`` and a log tail go on through the outage and end
with the job's real end and every line once; ``describe`` during it raises the typed
:class:`SlurmControllerUnreachableError` rather than guessing a state."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest

from asynctorchx.errors import SchedulerUnavailableError, SlurmControllerUnreachableError
from asynctorchx.schedulers.api import DescribeAppResponse, Stream
from asynctorchx.schedulers.slurm_scheduler import SlurmScheduler
from asynctorchx.specs import AppDef, AppState, Resource, Role
from tests.schedulers.slurm.conftest import REPO

LINES = 25  # one a second: the job outlives the outage
DOWN_S = 20  # seconds slurmctld stays down (squeue takes about 9 s to give up on it)


def _controller_down() -> bool:
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, check=False)
    return "DOWN" in ping.stdout


async def test_wait_and_tail_outlive_a_controller_restart(
    scheduler: SlurmScheduler, tmp_path: Path
) -> None:
    script = f"for i in $(seq 1 {LINES}); do echo line $i; sleep 1; done"
    role = Role("ticker", "", entrypoint="sh", args=["-c", script], resource=Resource(1, 0, 100))
    job_id = await scheduler.submit(AppDef("ticker", roles=[role]), {"job_dir": str(tmp_path)})
    ended: list[DescribeAppResponse | None] = []
    lines: list[str] = []

    async def tail() -> None:
        logs = scheduler.log_iter(job_id, "ticker", streams=Stream.STDOUT, should_tail=True)
        lines.extend([line async for line in logs])

    async def wait() -> None:
        ended.append(await scheduler.wait(job_id))

    with anyio.fail_after(180):
        await scheduler._wait_until(job_id, lambda now: now.state == AppState.RUNNING, None)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(wait)
            tasks.start_soon(tail)
            argv = ["bash", str(REPO / "scripts/slurm-cluster.sh"), "restart", "slurmctld"]
            restart = await anyio.open_process([*argv, "--down", str(DOWN_S)])
            async with restart:
                while not _controller_down():
                    await anyio.sleep(0.2)
                with pytest.raises(SlurmControllerUnreachableError) as unreachable:
                    await scheduler.describe(job_id)
                assert isinstance(unreachable.value, SchedulerUnavailableError)
                assert not ended  # wait goes on
                assert await restart.wait() == 0
    assert ended[0] is not None
    assert ended[0].state == AppState.SUCCEEDED
    assert lines == [f"line {i}\n" for i in range(1, LINES + 1)]
