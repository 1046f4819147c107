"""The ``fsspec`` tracker (the ``tracker`` extra): what is written is read back, by us
and by TorchX's own ``FsspecTracker`` (torchx-nightly's venv), in both directions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asynctorchx.errors import ConfigError
from asynctorchx.tracker.api import TrackerArtifact, TrackerSource, build_trackers
from tests.nightly import run_nightly

RUN = "local_cwd://sess/app-1"
PARENT = "local_cwd://sess/parent"


def test_a_run_reads_back_what_was_written(fsspec_config: Path) -> None:
    from asynctorchx.tracker.backend.fsspec import FsspecTracker

    (tracker,) = build_trackers({"fsspec": str(fsspec_config)})
    assert isinstance(tracker, FsspecTracker)
    tracker.add_metadata(PARENT, kind="parent")
    for lr in range(50):  # back to back: no call replaces another's file
        tracker.add_metadata(RUN, lr=lr, epochs=3)
    tracker.add_artifact(RUN, "model", "/ckpt/1.pt", {"step": 1})
    tracker.add_artifact(RUN, "model", "/ckpt/2.pt", {"step": 2})
    tracker.add_artifact(RUN, "log", "/logs/x")
    tracker.add_source(RUN, PARENT)
    tracker.add_source(RUN, PARENT)
    tracker.add_source(RUN, "s3://data/v2", "dataset")
    assert tracker.metadata(RUN) == {"lr": 49, "epochs": 3}
    assert tracker.artifacts(RUN) == {
        "model": TrackerArtifact("model", "/ckpt/2.pt", {"step": 2}),
        "log": TrackerArtifact("log", "/logs/x", None),
    }
    assert sorted(tracker.sources(RUN), key=str) == sorted(
        [TrackerSource(PARENT, None), TrackerSource("s3://data/v2", "dataset")], key=str
    )
    assert tracker.sources(RUN, "dataset") == [TrackerSource("s3://data/v2", "dataset")]
    assert sorted(tracker.run_ids()) == sorted([RUN, PARENT])
    assert tracker.run_ids(parent_run_id=PARENT) == [RUN]
    assert tracker.metadata("local_cwd://sess/none") == {}


def test_create_names_what_is_wrong(fsspec_config: Path, tmp_path: Path) -> None:
    from asynctorchx.tracker.backend.fsspec import create

    bad = tmp_path / "bad.cfg"
    bad.write_text("protocol = file\n")
    with pytest.raises(ConfigError, match=r"lacks \['root_path'\]"):
        create(str(bad))
    bad.write_text(f"protocol = file\nroot_path = {tmp_path / 'absent'}\n")
    with pytest.raises(ConfigError, match="absent' does not exist"):
        create(str(bad))
    with pytest.raises(ConfigError, match="needs a config file"):
        create(None)
    bad.write_text("protocol = file\nroot_path = /\nouter. = x\n")
    with pytest.raises(ConfigError, match=r"bad key 'outer\.'"):
        create(str(bad))


# TorchX's tracker, built by its own entry point in torchx-nightly's venv: it writes what
# the input asks, then prints what it reads of every run.
NIGHTLY_TRACKER = """
import json, sys
from torchx.tracker.api import build_trackers
data = json.load(sys.stdin)
(tracker,) = build_trackers({"fsspec": data["config"]})
for run, md in data["metadata"]:
    tracker.add_metadata(run, **md)
for run, name, path, md in data["artifacts"]:
    tracker.add_artifact(run, name, path, md)
for run, source, name in data["sources"]:
    tracker.add_source(run, source, name)
print(json.dumps({
    run: {
        "metadata": tracker.metadata(run),
        "artifacts": {n: [a.path, a.metadata] for n, a in tracker.artifacts(run).items()},
        "sources": sorted([s.source_run_id, s.artifact_name or ""] for s in tracker.sources(run)),
        "children": sorted(tracker.run_ids(parent_run_id=run)),
    }
    for run in tracker.run_ids()
}))
"""

WRITES = {
    "metadata": [[PARENT, {"kind": "parent"}], [RUN, {"lr": 0.1, "epochs": 3}]],
    "artifacts": [[RUN, "model", "/ckpt/2.pt", {"step": 2}], [RUN, "log", "/logs/x", None]],
    "sources": [[RUN, PARENT, None], [RUN, "s3://data/v2", "dataset"]],
}
EXPECTED = {
    PARENT: {"metadata": {"kind": "parent"}, "artifacts": {}, "sources": [], "children": [RUN]},
    RUN: {
        "metadata": {"lr": 0.1, "epochs": 3},
        "artifacts": {"model": ["/ckpt/2.pt", {"step": 2}], "log": ["/logs/x", None]},
        "sources": [[PARENT, ""], ["s3://data/v2", "dataset"]],
        "children": [],
    },
}


def _read_ours(config: Path) -> dict[str, object]:
    (tracker,) = build_trackers({"fsspec": str(config)})
    return {
        run: {
            "metadata": tracker.metadata(run),
            "artifacts": {n: [a.path, a.metadata] for n, a in tracker.artifacts(run).items()},
            "sources": sorted(
                [s.source_run_id, s.artifact_name or ""] for s in tracker.sources(run)
            ),
            "children": sorted(tracker.run_ids(parent_run_id=run)),
        }
        for run in tracker.run_ids()
    }


def test_torchx_nightly_reads_what_we_write(fsspec_config: Path) -> None:
    (tracker,) = build_trackers({"fsspec": str(fsspec_config)})
    for run, md in WRITES["metadata"]:
        tracker.add_metadata(run, **md)
    for run, name, path, md in WRITES["artifacts"]:
        tracker.add_artifact(run, name, path, md)
    for run, source, name in WRITES["sources"]:
        tracker.add_source(run, source, name)
    read = run_nightly(
        NIGHTLY_TRACKER,
        {"config": str(fsspec_config), "metadata": [], "artifacts": [], "sources": []},
    )
    assert read == EXPECTED
    assert _read_ours(fsspec_config) == EXPECTED


def test_we_read_what_torchx_nightly_writes(fsspec_config: Path) -> None:
    read = run_nightly(NIGHTLY_TRACKER, {"config": str(fsspec_config), **WRITES})
    assert read == EXPECTED
    assert json.loads(json.dumps(_read_ours(fsspec_config))) == EXPECTED


# a training script's calls, through torchx-nightly's app_run_from_env
NIGHTLY_APP_RUN = """
import json
from torchx.tracker import app_run_from_env
run = app_run_from_env()
run.add_metadata(lr=0.1)
run.add_artifact("model", "/ckpt/model.pt", {"step": 7})
run.add_source("s3://data/v2", "dataset")
print(json.dumps(run.job_id()))
"""


def test_a_script_records_the_same_through_torchx_nightlys_app_run_and_ours(
    fsspec_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asynctorchx.tracker import AppRun, app_run_from_env

    env = {
        "TORCHX_TRACKERS": "fsspec",
        "TORCHX_TRACKER_FSSPEC_CONFIG": str(fsspec_config),
        "TORCHX_PARENT_RUN_ID": "exp-7",
    }
    theirs = run_nightly(NIGHTLY_APP_RUN, env={**env, "TORCHX_JOB_ID": "local_cwd://s/theirs"})
    for name, value in {**env, "TORCHX_JOB_ID": "local_cwd://s/ours"}.items():
        monkeypatch.setenv(name, value)
    AppRun.run_from_env.cache_clear()
    try:
        run = app_run_from_env()
        run.add_metadata(lr=0.1)
        run.add_artifact("model", "/ckpt/model.pt", {"step": 7})
        run.add_source("s3://data/v2", "dataset")
    finally:
        AppRun.run_from_env.cache_clear()
    read = _read_ours(fsspec_config)
    assert theirs == "local_cwd://s/theirs"
    assert (
        read["local_cwd://s/ours"]
        == read[theirs]
        == {
            "metadata": {"lr": 0.1},
            "artifacts": {"model": ["/ckpt/model.pt", {"step": 7}]},
            "sources": [["exp-7", ""], ["s3://data/v2", "dataset"]],
            "children": [],
        }
    )
    (tracker,) = build_trackers({"fsspec": str(fsspec_config)})
    assert sorted(tracker.run_ids(parent_run_id="exp-7")) == ["local_cwd://s/ours", theirs]
