"""Job arrays on the real cluster of ``scripts/slurm-cluster.sh``: apps submitted together
by ``AppGroup.run_many`` or ``Scheduler.schedule_many`` go as one ``sbatch --array``, and
each element is still an app of its own (status, logs, cancel, retries, journal).

Every test runs in its own directory and cancels only the jobs it submitted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from asynctorchx.runner import Runner
from asynctorchx.schedulers.api import Stream
from asynctorchx.schedulers.slurm_scheduler import SlurmScheduler
from asynctorchx.specs import AppDef, AppState, Resource, Role
from tests.schedulers.slurm.conftest import SlurmCluster

LIMIT = 120  # seconds; every element here ends within a few seconds on the local cluster
TICK = 0.2  # seconds between two squeue calls of the scheduler under test


def _app(index: int, script: str) -> AppDef:
    role = Role(
        name="trial",
        image="",
        entrypoint="sh",
        args=["-c", script],
        resource=Resource(cpu=1, gpu=0, memMB=100),
    )
    return AppDef(name=f"trial{index}", roles=[role])


@pytest.fixture
async def slurm(
    slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[SlurmScheduler]:
    """A scheduler polling every TICK s, run from ``tmp_path``; cancels its jobs at the end."""
    monkeypatch.chdir(tmp_path)
    scheduler = SlurmScheduler("test", poll_interval=TICK)
    async with scheduler:
        yield scheduler
        with anyio.CancelScope(shield=True):
            for app_id in list(scheduler._job_dirs):
                await scheduler.cancel(app_id)


def _runner(slurm: SlurmScheduler) -> Runner:
    def factory(session_name: str, **kwargs: Any) -> SlurmScheduler:
        return slurm

    return Runner("test", {"slurm": factory}, scheduler_params={})


def _cfg(tmp_path: Path) -> dict[str, str]:
    return {"job_dir": str(tmp_path / "job"), "time": "5"}


async def test_fifty_apps_go_as_one_array_and_each_ends_with_its_own_output_and_status(
    slurm: SlurmScheduler, tmp_path: Path
) -> None:
    apps = [_app(i, f"echo trial {i}; exit {3 if i % 10 == 3 else 0}") for i in range(50)]
    async with _runner(slurm) as runner:
        async with runner.group() as group:
            handles = await group.run_many(apps, "slurm", _cfg(tmp_path))
            assert slurm.commands.counts["sbatch"] == 1
        statuses = await group.wait()
        job_ids = {handle.rpartition("/")[2].partition("_")[0] for handle in handles}
        assert len(job_ids) == 1
        assert [handle.rpartition("_")[2] for handle in handles] == [str(i) for i in range(50)]
        for i, handle in enumerate(handles):
            status = statuses[handle]
            failed = i % 10 == 3
            assert status.state == (AppState.FAILED if failed else AppState.SUCCEEDED), handle
            (replica,) = status.roles[0].replicas
            assert replica.exit_code == (3 if failed else 0)
            logs = runner.log_lines(handle, "trial", streams=Stream.STDOUT)
            assert [line async for line in logs] == [f"trial {i}\n"]


async def test_a_pending_arrays_elements_each_report_pending_and_one_cancelled_ends_alone(
    slurm: SlurmScheduler, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sbatch = slurm.commands.sbatch

    async def held(argv: list[str], options: dict[str, str], app_name: str | None) -> str:
        return await sbatch([argv[0], "--begin=now+120", *argv[1:]], options, app_name)

    monkeypatch.setattr(slurm.commands, "sbatch", held)
    dryruns = [slurm.submit_dryrun(_app(i, "true"), _cfg(tmp_path)) for i in range(4)]
    app_ids = await slurm.schedule_many(dryruns)
    responses = await slurm._describe_many(app_ids)
    assert {response.state for response in responses.values()} == {AppState.PENDING}
    assert sorted(responses) == sorted(app_ids)
    await slurm.cancel(app_ids[1])  # Slurm drops a pending element it cancels, leaving no record
    cancelled = await slurm.wait(app_ids[1], timeout=LIMIT)
    assert cancelled is not None
    assert cancelled.state == AppState.CANCELLED
    for app_id in (app_ids[0], *app_ids[2:]):
        still = await slurm.describe(app_id)
        assert still is not None
        assert still.state == AppState.PENDING


async def test_cancelling_a_running_element_cancels_only_it(
    slurm: SlurmScheduler, tmp_path: Path
) -> None:
    dryruns = [slurm.submit_dryrun(_app(i, "sleep 60"), _cfg(tmp_path)) for i in range(3)]
    app_ids = await slurm.schedule_many(dryruns)
    for app_id in app_ids:
        running = await slurm.wait_for_state_change(app_id, AppState.PENDING, timeout=LIMIT)
        assert running is not None
        assert running.state == AppState.RUNNING
    await slurm.cancel(app_ids[1])
    cancelled = await slurm.wait(app_ids[1], timeout=LIMIT)
    assert cancelled is not None
    assert cancelled.state == AppState.CANCELLED
    for app_id in (app_ids[0], app_ids[2]):
        still = await slurm.describe(app_id)
        assert still is not None
        assert still.state == AppState.RUNNING


async def test_a_failing_element_is_retried_alone(slurm: SlurmScheduler, tmp_path: Path) -> None:
    # trial 1 fails the first time it runs (in job_dir, its working directory), then succeeds
    flaky = "if [ -e tried ]; then echo again; else touch tried; exit 3; fi"
    apps = [_app(0, "echo one"), _app(1, flaky), _app(2, "echo three")]
    async with _runner(slurm) as runner:
        async with runner.group(retries=1, retry_backoff=(0.0, 0.0)) as group:
            handles = await group.run_many(apps, "slurm", _cfg(tmp_path))
        statuses = await group.wait()
        first, retried, third = (group.attempts(handle) for handle in handles)
        assert (len(first), len(third)) == (1, 1)
        assert len(retried) == 2
        assert "_" not in retried[1]  # submitted alone: a job, not an array element
        assert statuses[retried[1]].state == AppState.SUCCEEDED
        assert slurm.commands.counts["sbatch"] == 2
        lines = [line async for line in runner.log_lines(retried[1], "trial", streams="stdout")]
        assert lines == ["again\n"]


async def test_a_journaled_run_many_submits_each_trial_and_resumes_without_submitting(
    slurm: SlurmScheduler, tmp_path: Path
) -> None:
    apps = [_app(i, f"echo {i}") for i in range(3)]
    keys = ["a", "b", "c"]
    journal = tmp_path / "sweep.jsonl"
    async with _runner(slurm) as runner:
        async with runner.group(journal=journal) as group:
            handles = await group.run_many(apps, "slurm", _cfg(tmp_path), keys=keys)
        assert {status.state for status in (await group.wait()).values()} == {AppState.SUCCEEDED}
        async with runner.group(journal=journal) as again:
            assert await again.run_many(apps, "slurm", _cfg(tmp_path), keys=keys) == handles
    # each trial's own mark in its --comment: journaled apps are jobs, never one array
    assert slurm.commands.counts["sbatch"] == 3
    assert all("_" not in handle for handle in handles)


async def test_apps_of_other_shapes_are_submitted_each_as_a_job(
    slurm: SlurmScheduler, tmp_path: Path
) -> None:
    cfg = _cfg(tmp_path)
    two = AppDef(name="two", roles=[_app(0, "true").roles[0]])
    two.roles[0].num_replicas = 2  # a heterogeneous job: Slurm has no array of them
    dryruns = [slurm.submit_dryrun(app, cfg) for app in (_app(0, "true"), two, _app(2, "true"))]
    app_ids = await slurm.schedule_many(dryruns)
    assert "_" not in app_ids[1]
    assert app_ids[0].partition("_")[0] == app_ids[2].partition("_")[0]
    assert slurm.commands.counts["sbatch"] == 2
    for app_id in app_ids:
        response = await slurm.wait(app_id, timeout=LIMIT)
        assert response is not None
        assert response.state == AppState.SUCCEEDED
