"""The CLI asks schedulers what they can do, never their names (in-process runs)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from asynctorchx.cli.main import run_cli
from asynctorchx.schedulers import SchedulerFactory
from tests.isolation import isolate_from_user_config
from tests.runner.fake_scheduler import FakeScheduler, create_class_opts, create_in_process


@pytest.fixture(autouse=True)
def fake_schedulers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Register two fake schedulers whose names say the opposite of what they do."""
    isolate_from_user_config(tmp_path, monkeypatch)
    factories: dict[str, SchedulerFactory] = {
        "local_remote": create_class_opts,  # apps outlive the process, despite the name
        "cluster_in_process": create_in_process,  # apps live in the process
    }
    monkeypatch.setattr("asynctorchx.schedulers.get_scheduler_factories", lambda: factories)
    FakeScheduler.created.clear()
    yield
    FakeScheduler.created.clear()


def test_run_follows_an_in_process_app_whatever_its_scheduler_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli(["run", "-s", "cluster_in_process", "utils.echo"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0].startswith("cluster_in_process://torchx/")
    assert any(line.startswith("echo/0 ran ") for line in err.splitlines())
    assert "SUCCEEDED" in err


def test_run_returns_at_once_for_apps_that_outlive_it_whatever_its_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli(["run", "-s", "local_remote", "utils.echo"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [out.splitlines()[0]]  # the handle only
    assert "waiting" not in err


def test_not_found_hint_follows_the_capability(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["status", "cluster_in_process://torchx/nope"]) == 1
    assert "ends with the `asynctorchx run` that started it" in capsys.readouterr().err
    assert run_cli(["status", "local_remote://torchx/nope"]) == 1
    assert "`asynctorchx list -s local_remote`" in capsys.readouterr().err


def test_run_reads_the_config_files_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".torchxconfig").write_text(
        "[cli:run]\nscheduler = cluster_in_process\n"
        "[cluster_in_process]\nlabel = from-config\n"
        "[component:utils.echo]\nmsg = configured\n"
        "[torchx:tracker]\nfsspec =\n"
    )
    from asynctorchx.runner import config

    reads: list[str] = []
    real_read = config._read

    def counting_read(path: str) -> Any:
        reads.append(path)
        return real_read(path)

    monkeypatch.setattr(config, "_read", counting_read)
    assert run_cli(["run", "--dryrun", "utils.echo"]) == 0
    out = capsys.readouterr().out
    assert "configured" in out  # [component:utils.echo]
    assert "TORCHX_TRACKERS" in out  # [torchx:tracker]
    assert reads == [str(tmp_path / ".torchxconfig")]
    reads.clear()
    assert run_cli(["run", "utils.echo"]) == 0
    assert reads == [str(tmp_path / ".torchxconfig")]


COUNTED = f"{Path(__file__).parents[1] / 'runner' / 'counted_component.py'}:counted"


@pytest.mark.parametrize("flags", [[], ["--dryrun"]])
def test_run_calls_the_component_function_once(tmp_path: Path, flags: list[str]) -> None:
    marker = tmp_path / "calls"
    argv = ["run", *flags, "-s", "cluster_in_process", COUNTED, "--marker", str(marker)]
    assert run_cli(argv) == 0
    assert marker.read_text() == "called\n"


def test_a_bad_argument_is_still_a_usage_error_and_calls_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "calls"
    argv = ["run", "-s", "cluster_in_process", COUNTED, "--marker", str(marker), "--nope", "x"]
    assert run_cli(argv) == 2
    assert "--nope" in capsys.readouterr().err
    assert not marker.exists()
