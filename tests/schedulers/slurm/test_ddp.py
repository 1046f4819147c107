"""The DDP example (``examples/ddp_train.py``, ``dist.ddp -j 2x1``, gloo) across 2 Slurm nodes.

Run through the CLI, ``asynctorchx run --wait -s slurm``, as a user would. Each replica is
one Slurm component on its own node running ``torchrun``, which rendezvouses at
``$TORCHX_RANK0_HOST`` on a port free when the test starts (the script exports the first
node's address; on the local cluster every virtual node is 127.0.0.1, so torch's default
29500 would meet any other rendezvous on this machine). The replicas' ``python`` is the one first on
``PATH`` when ``sbatch`` runs (Slurm exports the submitter's environment): this venv's.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from pathlib import Path

import anyio
import pytest

from tests.schedulers.slurm.conftest import SlurmCluster

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "ddp_train.py"
LIMIT = 240  # seconds: torch's import and the gloo rendezvous take ~20 s on 2 shared cores
STEPS = 20


@pytest.mark.torch
async def test_ddp_example_trains_across_two_slurm_nodes(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    if len(slurm_cluster.nodes) < 2:
        pytest.skip("dist.ddp -j 2x1 needs 2 nodes")
    job_dir = tmp_path / "job"
    checkpoint = tmp_path / "checkpoint.pt"
    venv_bin = str(Path(sys.executable).parent)
    # LOGLEVEL=INFO: each replica's torchrun agent logs its rendezvous result (its ranks)
    env = {
        **os.environ,
        "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}",
        "LOGLEVEL": "INFO",
    }
    argv = [
        *(sys.executable, "-m", "asynctorchx.cli.main", "run", "--wait"),
        *("-s", "slurm", "-cfg", f"job_dir={job_dir},time=10"),
        *("dist.ddp", "-j", "2x1", "--rdzv_port", str(_free_port())),
        *("--script", str(EXAMPLE), "--"),
        *("--steps", str(STEPS), "--log_every", "10", "--checkpoint", str(checkpoint)),
    ]
    with anyio.fail_after(LIMIT):
        done = await anyio.run_process(argv, cwd=tmp_path, env=env, check=False)
    output = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 0, output + _replica_errors(job_dir)
    assert "SUCCEEDED" in output
    (job_id,) = re.findall(r"slurm://torchx/(\d+)", done.stdout.decode())[:1]
    out = [(job_dir / f"slurm-{job_id}-ddp_train-{k}.out").read_text() for k in (0, 1)]
    err = [(job_dir / f"slurm-{job_id}-ddp_train-{k}.err").read_text() for k in (0, 1)]
    # each replica's agent joined the same world of 2 with its own global rank
    ranks = []
    for agent_log in err:
        assert "group_world_size=2" in agent_log
        assert "worker group successfully finished" in agent_log
        ranks += re.findall(r"global_ranks=\[(\d)\]", agent_log)
    assert sorted(ranks) == ["0", "1"]
    # rank 0 (torchrun --tee prefixes its lines with [0]:) printed the loss, falling
    (rank0_out,) = [text for text in out if text]
    losses = re.findall(rf"^\[0\]:step (\d+)/{STEPS} loss ([\d.]+)$", rank0_out, re.MULTILINE)
    assert [int(step) for step, _ in losses] == [1, 10, 20]
    assert float(losses[-1][1]) < float(losses[0][1])
    assert f"[0]:wrote checkpoint {checkpoint}" in rank0_out
    import torch

    saved = torch.load(checkpoint)
    assert (saved["world_size"], saved["step"]) == (2, STEPS)


def _free_port() -> int:
    """A TCP port of 127.0.0.1 that no one listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _replica_errors(job_dir: Path) -> str:
    """The last lines of each replica's stderr in ``job_dir``, to say why a job failed (the
    directory goes with the test's ``tmp_path``)."""
    tails = [
        f"\n--- {path.name}:\n" + "\n".join(path.read_text(errors="replace").splitlines()[-15:])
        for path in sorted(job_dir.glob("slurm-*.err"))
    ]
    return "".join(tails)
