"""``slurm``'s directory workspace on the cluster: the code a job runs is copied to ``job_dir``.

As TorchX's ``SlurmScheduler`` (a ``DirWorkspaceMixin``): ``run -s slurm ... --script
main.py`` from a project directory copies the directory (minus ``.torchxignore``) into
``job_dir`` before ``sbatch``, and the job runs there. Through the CLI with a
``dist.ddp`` job, and through ``Runner.run(..., workspace=...)``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from asynctorchx.components import utils
from asynctorchx.runner import get_runner
from asynctorchx.schedulers.api import Stream
from asynctorchx.specs import AppState
from tests.schedulers.slurm.conftest import SlurmCluster

LIMIT = 240  # seconds: torch's import in each replica takes ~10 s on 2 shared cores


def _user_env(tmp_path: Path) -> dict[str, str]:
    """A user's environment: this venv first on PATH (the replicas' `python`), no TORCHX_*."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("TORCHX")}
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env["PATH"]])
    env["HOME"] = str(tmp_path)
    return env


@pytest.mark.torch
def test_ddp_script_of_the_current_directory_runs_from_job_dir(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    if len(slurm_cluster.nodes) < 2:
        pytest.skip("dist.ddp -j 2x1 needs 2 nodes")
    project = tmp_path / "project"
    project.mkdir()
    (project / "main.py").write_text(
        "import os, sys\nprint('hello from', os.getcwd(), file=sys.stderr)\n"
    )
    (project / "secret.key").write_text("not for the cluster\n")
    (project / ".torchxignore").write_text("*.key\n")
    job_dir = tmp_path / "job"
    command = ["asynctorchx", "run", "--wait", "--log", "-s", "slurm"]
    command += ["-cfg", f"job_dir={job_dir},time=10"]
    command += ["dist.ddp", "-j", "2x1", "--cpu", "1", "--script", "main.py"]
    done = subprocess.run(
        command,
        cwd=project,
        env=_user_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.fullmatch(r"slurm://torchx/\d+\n", done.stdout)
    assert f"asynctorchx: copying workspace {project} into job_dir {job_dir}..." in done.stderr
    assert f"(main: {job_dir})" in done.stderr
    assert sorted(p.name for p in job_dir.iterdir() if not p.name.startswith("slurm-")) == [
        ".torchxignore",
        "main.py",
        "torchx-sbatch.sh",
    ]
    said = [line for line in done.stderr.splitlines() if "hello from" in line]
    assert len(said) == 2  # one line per replica, each run in job_dir
    assert all(line.endswith(f"hello from {job_dir}") for line in said)


async def test_runner_run_copies_the_workspace_it_is_given(
    slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    del slurm_cluster
    monkeypatch.chdir(tmp_path)  # where `.torchxslurmjobdirs` is written
    project = tmp_path / "project"
    project.mkdir()
    (project / "hello.sh").write_text("echo hello from $(pwd)\n")
    job_dir = tmp_path / "job"
    app = utils.sh("sh", "hello.sh", image="unused")
    with anyio.fail_after(LIMIT):
        async with get_runner() as runner:
            handle = await runner.run(
                app, "slurm", {"job_dir": str(job_dir), "time": "10"}, workspace=str(project)
            )
            status = await runner.wait(handle)
            assert status is not None
            assert status.state == AppState.SUCCEEDED, status
            lines = [line async for line in runner.log_lines(handle, "sh", streams=Stream.STDOUT)]
    assert lines == [f"hello from {job_dir}\n"]
