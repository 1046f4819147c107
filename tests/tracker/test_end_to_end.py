"""A job the Runner starts with a tracker configured records through
``app_run_from_env()`` in each replica, and the driver reads it back through the
tracker's queries: TorchX's tracker flow, on real ``local_cwd`` processes."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from asynctorchx.runner import Runner
from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
from asynctorchx.specs.api import AppDef, AppState, Role, macros
from asynctorchx.tracker.api import TrackerArtifact, TrackerSource, build_trackers

LIMIT = 60  # seconds: a safety bound, never a timing guess

# what a training script does; argv[1] is its replica id
TRAINER = """
import sys
from asynctorchx.tracker import app_run_from_env
run = app_run_from_env()
replica = sys.argv[1]
run.add_metadata(**{f"loss_{replica}": 0.5, "lr": 0.01})
run.add_artifact(f"ckpt_{replica}", f"/ckpt/{replica}.pt", {"step": 100})
print(run.job_id())
"""


async def test_replicas_record_and_the_driver_reads_it_back(fsspec_config: Path) -> None:
    role = Role(
        "trainer",
        image=".",
        entrypoint=sys.executable,
        args=["-c", TRAINER, macros.replica_id],
        num_replicas=2,
    )
    trackers = {"fsspec": str(fsspec_config)}
    runner = Runner(
        "sess", {"local_cwd": create_cwd_scheduler}, trackers=trackers, handle_signals=False
    )
    async with runner:
        handle = await runner.run(AppDef("train", [role]), "local_cwd", parent_run_id="exp-7")
        with anyio.fail_after(LIMIT):
            final = await runner.wait(handle)
        assert final is not None
        assert final.state == AppState.SUCCEEDED
        printed = [line async for line in runner.log_lines(handle, "trainer", 0)]
    assert printed == [f"{handle}\n"]
    (tracker,) = build_trackers(trackers)
    assert tracker.run_ids(parent_run_id="exp-7") == [handle]
    assert tracker.metadata(handle) == {"loss_0": 0.5, "loss_1": 0.5, "lr": 0.01}
    assert tracker.artifacts(handle) == {
        f"ckpt_{r}": TrackerArtifact(f"ckpt_{r}", f"/ckpt/{r}.pt", {"step": 100}) for r in "01"
    }
    assert list(tracker.sources(handle)) == [TrackerSource("exp-7", None)]
