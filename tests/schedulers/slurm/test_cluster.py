"""Jobs on a real Slurm cluster (``bash scripts/slurm-cluster.sh start``), driven with anyio.

Slurm sends no event when a job ends, so completion is awaited by polling ``squeue``
(``-t all``: finished jobs are listed only with it, for ``MinJobAge`` seconds).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from asynctorchx.schedulers.slurm_scheduler import build_batch_request
from asynctorchx.specs import AppDef, Resource, Role
from tests.schedulers.slurm.conftest import SlurmCluster

LIMIT = 60  # seconds; a job of this file ends in about 2 s on the local cluster
POLL = 0.1  # seconds between two squeue calls
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


async def _sbatch(*args: str) -> str:
    """Submit with ``sbatch --parsable`` and return the job id."""
    done = await anyio.run_process(["sbatch", "--parsable", *args])
    return done.stdout.decode().strip().split(";")[0]


async def _states(job_id: str) -> list[str]:
    """The state of each component of the job (one for a plain job)."""
    done = await anyio.run_process(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"])
    return done.stdout.decode().split()


async def _await_states(job_id: str, wanted: set[str]) -> list[str]:
    """Poll until every component is in one of ``wanted``; return the states."""
    with anyio.fail_after(LIMIT):
        while True:
            states = await _states(job_id)
            if states and all(state in wanted for state in states):
                return states
            await anyio.sleep(POLL)


async def test_wrapped_command_completes(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    job_id = await _sbatch(f"--chdir={tmp_path}", "--wrap", "echo hello from $SLURMD_NODENAME")
    assert job_id.isdigit()
    assert await _await_states(job_id, FINISHED) == ["COMPLETED"]
    output = (tmp_path / f"slurm-{job_id}.out").read_text()
    assert output.startswith("hello from ")
    assert output.split()[-1] in slurm_cluster.nodes


async def test_request_runs_each_replica_as_a_component(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    if len(slurm_cluster.nodes) < 2:
        pytest.skip("a 2-component heterogeneous job needs 2 nodes")
    role = Role(
        name="worker",
        image="",
        entrypoint="sh",
        args=["-c", 'echo "replica ${replica_id} of $SLURM_JOB_ID on $SLURMD_NODENAME"'],
        num_replicas=2,
        resource=Resource(cpu=1, gpu=0, memMB=100),
    )
    request = build_batch_request(AppDef(name="het", roles=[role]), {"time": "5"})
    script = tmp_path / "torchx-sbatch.sh"
    script.write_text(request.materialize())
    job_id = await _sbatch(*request.cmd[2:], f"--chdir={tmp_path}", str(script))
    assert await _await_states(job_id, FINISHED) == ["COMPLETED", "COMPLETED"]
    nodes = set()
    for replica in (0, 1):
        words = (tmp_path / f"slurm-{job_id}-worker-{replica}.out").read_text().split()
        assert words[:4] == ["replica", str(replica), "of", job_id]
        nodes.add(words[-1])
    assert len(nodes) == 2
    assert nodes <= set(slurm_cluster.nodes)


async def test_scancel_cancels_a_running_job(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    job_id = await _sbatch(f"--chdir={tmp_path}", "--wrap", "sleep 300")
    try:
        await _await_states(job_id, {"RUNNING"})
        await anyio.run_process(["scancel", job_id])
        assert await _await_states(job_id, FINISHED) == ["CANCELLED"]
    finally:
        await anyio.run_process(["scancel", job_id], check=False)
