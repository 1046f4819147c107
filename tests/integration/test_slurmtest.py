"""The steps of TorchX's ``scripts/slurmtest.sh``, with ``asynctorchx`` for ``torchx``.

TorchX checks its Slurm support with that script: from a new project directory with a
``.torchxconfig`` (the cluster's first partition, ``time``, ``comment`` and a ``job_dir``
that does not exist yet) and a ``main.py`` that prints to stderr, it runs ``dist.ddp -j
2x1 --script main.py`` with ``--wait --log``, reads the app handle from stdout, then asks
``status``, ``describe``, ``sacct``, ``log`` (2 lines of ``main.py``, one per node) and
``list`` (the app once). The script below takes the same steps, without its ``pip
install`` lines (this venv is the one under test). ``sacct`` runs when the cluster keeps
accounting (``scripts/slurm-cluster.sh`` may start it without; then it would only say
that accounting is disabled).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.schedulers.slurm.conftest import SlurmCluster, slurm_cluster

__all__ = ["slurm_cluster"]  # the fixture

LIMIT = 300  # seconds: two replicas start torchrun; ~20 s on this machine

STEPS = r"""
set -euxo pipefail
project="$WORK/project"
job_dir="$WORK/job"
mkdir "$project"
cd "$project"

sbatch --version
python --version

partition="$(sinfo --format=%R --noheader | head -n 1)"
printf '[slurm]\npartition=%s\ntime=10\ncomment=hello\njob_dir=%s\n' \
    "$partition" "$job_dir" > .torchxconfig
printf 'import sys\nprint("hello world!", file=sys.stderr)\n' > main.py

app_id="$(asynctorchx run --wait --log --scheduler slurm \
    dist.ddp -j 2x1 --cpu 1 --max_retries 1 --script main.py)"
asynctorchx status "$app_id"
asynctorchx describe "$app_id"
if ! scontrol show config | grep -q 'AccountingStorageType *= *accounting_storage/none'; then
    sacct -j "$(basename "$app_id")"
fi
asynctorchx log "$app_id"
hello="$(asynctorchx log "$app_id" | grep -c 'hello world')"
if [ "$hello" -ne 2 ]; then
    echo "expected 2 log lines, got $hello"
    exit 1
fi

asynctorchx list -s slurm
listed="$(asynctorchx list -s slurm | grep -c "^$app_id ")"  # not a job id it prefixes
if [ "$listed" -ne 1 ]; then
    echo "expected $app_id to be listed once, got $listed"
    exit 1
fi
"""


@pytest.mark.torch
def test_torchx_slurmtest_steps_pass(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    if len(slurm_cluster.nodes) < 2:
        pytest.skip("dist.ddp -j 2x1 needs 2 nodes")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("TORCHX")}
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env["PATH"]])
    env.update(HOME=str(tmp_path), WORK=str(tmp_path))
    done = subprocess.run(
        ["bash", "-c", STEPS],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # the copied workspace is what the job ran
    assert (tmp_path / "job" / "main.py").read_text() == (
        tmp_path / "project" / "main.py"
    ).read_text()
