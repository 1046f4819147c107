"""``AppRun`` / ``app_run_from_env``: what a training script records reaches every
tracker the Runner's environment names (TorchX's ``torchx.tracker`` in-job API)."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping

import pytest

from asynctorchx.tracker import AppRun, app_run_from_env
from asynctorchx.tracker.api import TrackerArtifact, TrackerSource, tracker_config_env_var_name

FACTORY = f"{__name__}:create"


class MemoryTracker:
    """Keeps what it is given, per run; remembers its config."""

    def __init__(self, config: str | None) -> None:
        self.config = config
        self.meta: dict[str, dict[str, object]] = {}
        self.arts: dict[str, dict[str, TrackerArtifact]] = {}
        self.srcs: dict[str, list[TrackerSource]] = {}

    def add_metadata(self, run_id: str, **kwargs: object) -> None:
        self.meta.setdefault(run_id, {}).update(kwargs)

    def add_artifact(
        self, run_id: str, name: str, path: str, metadata: Mapping[str, object] | None = None
    ) -> None:
        self.arts.setdefault(run_id, {})[name] = TrackerArtifact(name, path, metadata)

    def add_source(self, run_id: str, source_id: str, artifact_name: str | None = None) -> None:
        self.srcs.setdefault(run_id, []).append(TrackerSource(source_id, artifact_name))

    def sources(self, run_id: str, artifact_name: str | None = None) -> list[TrackerSource]:
        return [s for s in self.srcs.get(run_id, []) if artifact_name in (None, s.artifact_name)]


def create(config: str | None) -> MemoryTracker:
    return MemoryTracker(config)


@pytest.fixture(autouse=True)
def _fresh_run() -> Iterator[None]:
    """``run_from_env`` builds the run once per process: each test starts anew."""
    AppRun.run_from_env.cache_clear()
    yield
    AppRun.run_from_env.cache_clear()


def test_outside_a_job_the_run_is_undefined_and_records_nothing() -> None:
    run = app_run_from_env()
    assert run.job_id() == "<UNDEFINED>"
    assert list(run.backends) == []
    run.add_metadata(lr=0.1)
    run.add_artifact("model", "/m.pt")
    assert run.sources() == []


def test_the_run_writes_to_every_tracker_the_env_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHX_JOB_ID", "local_cwd://sess/app-1")
    monkeypatch.setenv("TORCHX_TRACKERS", f"{FACTORY}, {FACTORY}")
    monkeypatch.setenv(tracker_config_env_var_name(FACTORY), "cfg-a")
    monkeypatch.setenv("TORCHX_PARENT_RUN_ID", "local_cwd://sess/parent")
    run = app_run_from_env()
    assert run is AppRun.run_from_env()
    assert run.job_id() == "local_cwd://sess/app-1"
    run.add_metadata(lr=0.1, epochs=3)
    run.add_metadata(lr=0.2)
    run.add_artifact("model", "/ckpt/model.pt", {"step": 7})
    run.add_source("s3://data/v2", "dataset")
    trackers = list(run.backends)
    # a name given twice is one tracker: TorchX keys them by name too
    assert len(trackers) == 1
    (tracker,) = trackers
    assert isinstance(tracker, MemoryTracker)
    assert tracker.config == "cfg-a"
    assert tracker.meta["local_cwd://sess/app-1"] == {"lr": 0.2, "epochs": 3}
    assert tracker.arts["local_cwd://sess/app-1"]["model"].metadata == {"step": 7}
    assert [(s.parent.job_id(), s.artifact_name) for s in run.sources()] == [
        ("local_cwd://sess/parent", None),
        ("s3://data/v2", "dataset"),
    ]
    assert all(s.parent.backends == run.backends for s in run.sources())


def test_an_unknown_tracker_name_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHX_TRACKERS", f"no.such.module:create,{FACTORY}")
    assert [type(t) for t in app_run_from_env().backends] == [MemoryTracker]


def test_the_builtin_fsspec_tracker_without_its_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "fsspec", None)  # import fsspec raises ImportError
    monkeypatch.delitem(sys.modules, "asynctorchx.tracker.backend.fsspec", raising=False)
    monkeypatch.setenv("TORCHX_TRACKERS", "fsspec")
    assert list(app_run_from_env().backends) == []
    assert "pip install 'asynctorchx[tracker]'" in caplog.text
