"""``tracker list ...`` and ``configure --print/-a`` (TorchX 0.7.0's commands), in-process."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

import pytest

from asynctorchx.cli.main import run_cli
from tests.isolation import isolate_from_user_config

FACTORY = f"{__name__}:create"


class Artifact(NamedTuple):
    name: str
    path: str
    metadata: Mapping[str, object] | None


class Source(NamedTuple):
    source_run_id: str
    artifact_name: str | None


class MemoryTracker:
    """A tracker with TorchX's query methods, over fixed data; records its config."""

    configs: list[str | None] = []

    def __init__(self, config: str | None) -> None:
        MemoryTracker.configs.append(config)

    def run_ids(self, **kwargs: str) -> Iterable[str]:
        runs = {"local_cwd://torchx/a": "p1", "local_cwd://torchx/b": "p2"}
        parent = kwargs.get("parent_run_id")
        return [run for run, p in runs.items() if parent in (None, p)]

    def metadata(self, run_id: str) -> Mapping[str, object]:
        return {"lr": 0.1, "run": run_id}

    def artifacts(self, run_id: str) -> Mapping[str, Artifact]:
        return {
            "model": Artifact("model", "/ckpt/model.pt", {"step": 3}),
            "log": Artifact("log", "/logs/x", None),
        }

    def sources(self, run_id: str, artifact_name: str | None = None) -> Iterable[Source]:
        found = [Source("local_cwd://torchx/a", "model"), Source("local_cwd://torchx/z", None)]
        return [s for s in found if artifact_name in (None, s.artifact_name)]


def create(config: str | None) -> MemoryTracker:
    return MemoryTracker(config)


@pytest.fixture(autouse=True)
def clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    isolate_from_user_config(tmp_path, monkeypatch)
    MemoryTracker.configs.clear()
    yield tmp_path
    MemoryTracker.configs.clear()


def _table(capsys: pytest.CaptureFixture[str]) -> list[list[str]]:
    lines = capsys.readouterr().out.splitlines()
    return [line.split() for line in lines[:1] + lines[2:]]  # without the ---- rule


def test_tracker_lists_jobs_metadata_artifacts_and_lineage(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TORCHX_TRACKERS", FACTORY)
    assert run_cli(["tracker", "list", "jobs"]) == 0
    assert _table(capsys) == [["JOB", "ID"], ["local_cwd://torchx/a"], ["local_cwd://torchx/b"]]
    assert run_cli(["tracker", "list", "jobs", "--parent-run-id", "p2"]) == 0
    assert _table(capsys)[1:] == [["local_cwd://torchx/b"]]
    assert run_cli(["tracker", "list", "metadata", "local_cwd://torchx/a"]) == 0
    assert _table(capsys) == [["ID", "VALUE"], ["lr", "0.1"], ["run", "local_cwd://torchx/a"]]
    assert run_cli(["tracker", "list", "artifacts", "--artifact", "model", "r"]) == 0
    assert _table(capsys) == [
        ["ARTIFACT", "PATH", "METADATA"],
        ["model", "/ckpt/model.pt", "{'step':", "3}"],
    ]
    assert run_cli(["tracker", "list", "lineage", "--artifact", "model", "r"]) == 0
    assert _table(capsys)[1:] == [["local_cwd://torchx/a", "model"]]
    assert run_cli(["tracker", "list", "lineage", "--descendants-only", "r"]) == 2
    assert "records each job's sources" in capsys.readouterr().err


def test_tracker_from_the_config_gets_its_config(
    clean: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # a `module:factory` cannot be a configparser key (`:` delimits): name it in the
    # environment, and give its config in the file
    monkeypatch.setenv("TORCHX_TRACKERS", f"nope,{FACTORY}")
    monkeypatch.setenv(f"TORCHX_TRACKER_{FACTORY.upper()}_CONFIG", "/tracked")
    assert run_cli(["tracker", "list", "jobs"]) == 0
    assert MemoryTracker.configs == ["/tracked"]


def test_no_tracker_configured_is_one_line_saying_how(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli(["tracker", "list", "jobs"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no tracker is configured" in err
    assert "[torchx:tracker]" in err


def test_configure_print_and_all(clean: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["configure", "--print", "-s", "local_cwd"]) == 0
    assert capsys.readouterr().out.split() == ["[local_cwd]"]  # no option is required
    assert run_cli(["configure", "--print", "-a", "-s", "local_cwd"]) == 0
    assert "log_dir = None" in capsys.readouterr().out
    assert not (clean / ".torchxconfig").exists()
    assert run_cli(["configure", "-a", "-s", "local_cwd"]) == 0
    assert "stop_timeout = 10.0" in (clean / ".torchxconfig").read_text()
