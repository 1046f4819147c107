"""``run`` builds the current directory into the image by default, as ``torchx run`` does,
when the scheduler says it builds workspaces (whatever its name), and says so on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from asynctorchx.cli.main import run_cli
from asynctorchx.schedulers import SchedulerFactory
from asynctorchx.schedulers.api import Capabilities
from asynctorchx.specs.api import CfgVal, Role
from tests.conftest import DOCKER_TEST_IMAGE
from tests.runner.fake_scheduler import (
    ClassOptsScheduler,
    FakeScheduler,
    create_class_opts,
    fake_run_opts,
)

LIMIT = 120  # seconds: a safety bound, never a timing guess


class Building(ClassOptsScheduler):
    """Builds workspaces (records what it was given); its name says nothing of it."""

    capabilities = Capabilities(run_opts=fake_run_opts, workspace="image")
    builds: ClassVar[list[str]] = []

    async def build_workspace_and_update_role(
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        Building.builds.append(workspace)
        role.image = "built-image"


def create_building(session_name: str, **kwargs: object) -> Building:
    return Building(session_name)


create_building.capabilities = Building.capabilities  # type: ignore[attr-defined]


@pytest.fixture
def schedulers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(project)
    for key in list(os.environ):
        if key.upper().startswith("TORCHX"):
            monkeypatch.delenv(key)
    factories: dict[str, SchedulerFactory] = {
        "plain_docker": create_class_opts,  # builds nothing, despite its name
        "cluster": create_building,
    }
    monkeypatch.setattr("asynctorchx.schedulers.get_scheduler_factories", lambda: factories)
    Building.builds.clear()
    yield project
    Building.builds.clear()
    FakeScheduler.created.clear()


def test_the_current_directory_is_built_when_the_scheduler_builds_workspaces(
    schedulers: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["run", "-s", "cluster", "--dryrun", "utils.echo"]) == 0
    assert Building.builds == [str(schedulers)]
    out, err = capsys.readouterr()
    assert "built-image" in out  # the request uses the built image
    assert f"building workspace {schedulers} into the image of role echo" in err
    assert "built workspace in " in err
    assert "echo: built-image" in err


def test_no_build_without_the_capability_or_with_an_empty_workspace(
    schedulers: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["run", "-s", "plain_docker", "--dryrun", "utils.echo"]) == 0
    assert run_cli(["run", "-s", "cluster", "--workspace", "", "--dryrun", "utils.echo"]) == 0
    assert Building.builds == []
    assert "building" not in capsys.readouterr().err
    other = schedulers.parent / "other"
    other.mkdir()
    assert (
        run_cli(["run", "-s", "cluster", "--workspace", str(other), "--dryrun", "utils.echo"]) == 0
    )
    assert Building.builds == [str(other)]


def _docker(*args: str) -> str:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=LIMIT, check=True
    ).stdout


@pytest.mark.docker
def test_an_unchanged_torchx_command_runs_the_script_of_the_current_directory(
    tmp_path: Path,
) -> None:
    (tmp_path / "hello.sh").write_text("echo hello from the workspace\n")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("TORCHX")}
    env["HOME"] = str(tmp_path)
    command = [sys.executable, "-m", "asynctorchx", "run", "-s", "local_docker"]
    command += ["-cfg", "cancel_on_close=true", "utils.sh", "--image", DOCKER_TEST_IMAGE]
    ran = subprocess.run(
        [*command, "sh", "hello.sh"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )
    app_id = ran.stdout.splitlines()[0].rsplit("/", 1)[-1] if ran.stdout else ""
    label = f"label=torchx.pytorch.org/app-id={app_id}"
    images = _docker("ps", "-a", "--filter", label, "--format", "{{.Image}}").split()
    try:
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout == f"local_docker://torchx/{app_id}\n"
        assert "sh/0 hello from the workspace" in ran.stderr.splitlines()
        assert f"building workspace {tmp_path} into the image of role sh..." in ran.stderr
        assert "asynctorchx: built workspace in " in ran.stderr
    finally:
        containers = _docker("ps", "-a", "-q", "--filter", label).split()
        if containers:
            _docker("rm", "-f", *containers)
        for image in images:
            if image != DOCKER_TEST_IMAGE:
                subprocess.run(["docker", "rmi", image], capture_output=True, check=False)


def _slurm_dryrun(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``asynctorchx run --dryrun -s slurm ARGS utils.echo`` in ``cwd`` (no cluster needed:
    the request is built, and the workspace copied, without Slurm's commands)."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("TORCHX")}
    env["HOME"] = str(cwd)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "asynctorchx",
            "run",
            "--dryrun",
            "-s",
            "slurm",
            *args,
            "utils.echo",
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )


def test_slurm_copies_the_workspace_into_job_dir_and_refuses_what_it_cannot_copy(
    tmp_path: Path,
) -> None:
    (tmp_path / "main.py").write_text("")
    # the default workspace is the current directory, where a job without job_dir runs
    plain = _slurm_dryrun(tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert "workspace" not in plain.stderr
    job_dir = tmp_path / "job"
    copied = _slurm_dryrun(tmp_path, "-cfg", f"job_dir={job_dir}")
    assert copied.returncode == 0, copied.stderr
    assert f"copying workspace {tmp_path} into job_dir {job_dir}..." in copied.stderr
    assert (job_dir / "main.py").is_file()
    # job_dir now holds the copy: a second run into it is refused, in one line
    again = _slurm_dryrun(tmp_path, "-cfg", f"job_dir={job_dir}")
    assert again.returncode == 2
    assert again.stderr.splitlines()[-1] == (
        f"asynctorchx run: error: job_dir '{job_dir}': the directory is not empty;"
        " give a new directory (it is created) or an empty one, or copy nothing"
        " (run --workspace '', Runner.run(..., workspace=None))"
    )
    # another directory than the one the job runs in needs job_dir
    other = tmp_path / "other"
    other.mkdir()
    refused = _slurm_dryrun(tmp_path, "--workspace", str(other))
    assert refused.returncode == 2
    assert "no job_dir: the job would run in the current directory" in refused.stderr
    assert "set the slurm run option job_dir" in refused.stderr
