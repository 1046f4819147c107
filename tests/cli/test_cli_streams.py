"""What goes to stdout and what to stderr, as in TorchX's scripts.

TorchX's ``scripts/slurmtest.sh`` reads the app handle as ``APP_ID="$(torchx run --wait
--log ...)"`` and passes it to ``torchx status``: ``run`` prints the handle alone on
stdout, and the followed logs and every progress message on stderr
(``torchx.cli.cmd_run``). The same shell lines run here with ``asynctorchx`` on every
scheduler a user runs from a terminal.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DOCKER_TEST_IMAGE
from tests.schedulers.slurm.conftest import SlurmCluster, slurm_cluster

__all__ = ["slurm_cluster"]  # the fixture, for the slurm case

LIMIT = 120  # seconds: a safety bound, never a timing guess

#: TorchX's lines, the program's name changed; the run options and component follow.
SCRIPT = """
set -euo pipefail
APP_ID="$(asynctorchx run --wait --log "$@")"
asynctorchx status "$APP_ID"
echo "APP_ID=$APP_ID"
"""

#: writes on stderr: Slurm's logs are read from a replica's .err file by default (TorchX's)
SAY = ("sh", "-c", "echo stream-contract >&2")


def _run_script(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run :data:`SCRIPT` in ``tmp_path`` with ``args`` after ``run --wait --log``."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("TORCHX")}
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env["PATH"]])
    env["HOME"] = str(tmp_path)
    return subprocess.run(
        ["bash", "-c", SCRIPT, "script", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )


def _check(done: subprocess.CompletedProcess[str]) -> None:
    """Assert that `status` took what `run` printed, and that the logs went to stderr."""
    assert done.returncode == 0, done.stdout + done.stderr
    *status, app_id = done.stdout.splitlines()  # `status`'s lines, then APP_ID
    assert re.fullmatch(r"APP_ID=\w+://torchx/[\w-]+", app_id)
    assert "State: SUCCEEDED" in "\n".join(status)
    assert "sh/0 stream-contract" in done.stderr.splitlines()
    assert "stream-contract" not in done.stdout


def test_run_prints_the_handle_alone_on_stdout_on_local_cwd(tmp_path: Path) -> None:
    _check(_run_script(tmp_path, "-s", "local_cwd", "utils.sh", *SAY))


@pytest.mark.docker
def test_run_prints_the_handle_alone_on_stdout_on_local_docker(
    tmp_path: Path, docker_apps: list[str]
) -> None:
    args = ("--workspace=", "utils.sh", "--image", DOCKER_TEST_IMAGE, *SAY)
    done = _run_script(tmp_path, "-s", "local_docker", *args)
    docker_apps.extend(re.findall(r"local_docker://torchx/([\w-]+)", done.stdout + done.stderr))
    _check(done)


def test_run_prints_the_handle_alone_on_stdout_on_slurm(
    tmp_path: Path, slurm_cluster: SlurmCluster
) -> None:
    del slurm_cluster
    _check(_run_script(tmp_path, "-s", "slurm", "-cfg", "time=10", "utils.sh", *SAY))
