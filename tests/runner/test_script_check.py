"""TorchX issue 405: ``run`` refuses a ``--script`` the replicas will not find, before
anything is built or queued, and the dry run says where each replica's logs go."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from asynctorchx.errors import ComponentValidationException, ScriptNotFoundError
from asynctorchx.runner import get_runner
from asynctorchx.runner._script_check import check_in_workspace
from asynctorchx.specs import Workspace
from tests.isolation import isolate_from_user_config


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_from_user_config(tmp_path, monkeypatch)
    (tmp_path / "src").mkdir()
    (tmp_path / "src/train.py").write_text("print('hi')\n")


@pytest.mark.parametrize(
    ("component", "args"),
    [
        ("dist.ddp", ["-j", "1x1", "--script", "src/nope.py"]),
        ("dist.torchrun", ["--script", "src/nope.py"]),
        ("utils.python", ["--script", "src/nope.py"]),
    ],
)
async def test_a_missing_script_is_refused_at_dry_run_with_the_path_and_the_fix(
    tmp_path: Path, component: str, args: list[str]
) -> None:
    async with get_runner() as runner:
        with pytest.raises(ScriptNotFoundError) as caught:
            await runner.dryrun_component(component, args, "local_cwd")
        assert isinstance(caught.value, FileNotFoundError)
        assert isinstance(caught.value, ComponentValidationException)
        assert caught.value.script == "src/nope.py"
        assert caught.value.root == str(tmp_path)
        assert f"{component} --script 'src/nope.py': no such file in {tmp_path}" in str(
            caught.value
        )
        assert "give a path relative to that directory" in str(caught.value)
        assert list(await runner.list("local_cwd")) == []


async def test_a_script_that_is_there_runs_and_m_is_not_checked() -> None:
    async with get_runner() as runner:
        info = await runner.dryrun_component(
            "utils.python", ["--script", "src/train.py"], "local_cwd"
        )
        assert info.app is not None
        await runner.dryrun_component("utils.python", ["-m", "no.such.module"], "local_cwd")
        await runner.dryrun_component(
            "utils.python", {"script": str(Path("src/train.py").resolve())}, "local_cwd"
        )


def test_the_workspace_is_read_as_it_will_be_laid_out(tmp_path: Path) -> None:
    plain = Workspace({str(tmp_path / "src"): ""})
    check_in_workspace("dist.ddp", "train.py", plain)
    check_in_workspace("dist.ddp", "./train.py", plain)
    check_in_workspace("dist.ddp", "/abs/in/the/image.py", plain)  # not on this host
    mapped = Workspace({str(tmp_path / "src"): "proj", str(tmp_path / "src/train.py"): "one"})
    check_in_workspace("dist.ddp", "proj/train.py", mapped)
    check_in_workspace("dist.ddp", "one/train.py", mapped)
    for missing in ("train.py", "proj/nope.py", "one/other.py"):
        with pytest.raises(ScriptNotFoundError, match=r"no such file in the workspace .*"):
            check_in_workspace("dist.ddp", missing, mapped)


def test_cli_refuses_before_building_or_reaching_the_engine(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "DOCKER_HOST": "unix:///nonexistent/docker.sock",  # a build would fail otherwise
    }
    env = {k: v for k, v in env.items() if not k.startswith("TORCHX")}
    run = ["run", "-s", "local_docker", "dist.ddp", "-j", "1x1", "--script", "nope.py"]
    done = subprocess.run(
        [sys.executable, "-m", "asynctorchx", *run],
        cwd=tmp_path / "src",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert f"dist.ddp --script 'nope.py': no such file in the workspace {tmp_path / 'src'}" in (
        done.stderr
    )
    assert "building workspace" not in done.stderr


async def test_the_local_dry_run_names_each_replicas_log_directory(tmp_path: Path) -> None:
    async with get_runner() as runner:
        info = await runner.dryrun_component(
            "utils.echo", ["--num_replicas", "2"], "local_cwd", {"log_dir": str(tmp_path / "l")}
        )
    text = str(info)
    for replica in (0, 1):
        assert f"logs: {tmp_path / 'l'}/torchx/{info.request.app_id}/echo/{replica}" in text
