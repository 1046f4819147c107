"""A low-priority job really preempted by a high-priority one, on the cluster's preemption
pair (``scripts/slurm-cluster.sh``: ``PreemptType=preempt/partition_prio``; a job of
``high`` preempts those of ``low``, requeued, and ``lowcancel``, cancelled)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from asynctorchx.runner import Runner
from asynctorchx.schedulers.slurm_scheduler import SlurmScheduler, create_scheduler
from asynctorchx.specs import AppDef, AppState, EndCause, Resource, Role
from tests.schedulers.slurm.conftest import SlurmCluster

LIMIT = 120  # seconds: a bound on a hang, never a timing guess
HIGH = ["sbatch", "--parsable", "-p", "high", "-N", "4", "--exclusive", "-o", "/dev/null"]


@pytest.fixture
def high_jobs() -> Iterator[list[str]]:
    submitted: list[str] = []
    yield submitted
    for job_id in submitted:
        subprocess.run(["scancel", job_id], check=False)


def _preempt_every_node(high_jobs: list[str]) -> None:
    """Submit a job of ``high`` that needs every node whole: it preempts what runs there."""
    done = subprocess.run(
        [*HIGH, "--wrap", "sleep 2"],
        check=True,
        capture_output=True,
        text=True,
    )
    high_jobs.append(done.stdout.strip())


async def _state(runner: Runner, handle: str) -> AppState | None:
    status = await runner.status(handle)
    return None if status is None else status.state


def _app() -> AppDef:
    role = Role("low", "", entrypoint="sh", args=["-c", "sleep 5"], resource=Resource(1, 0, 100))
    return AppDef("low", roles=[role])


async def test_a_requeued_job_keeps_its_handle_waits_with_the_reason_then_succeeds(
    scheduler: SlurmScheduler, tmp_path: Path, high_jobs: list[str]
) -> None:
    job_id = await scheduler.submit(_app(), {"partition": "low", "job_dir": str(tmp_path)})
    with anyio.fail_after(LIMIT):
        await scheduler._wait_until(job_id, lambda now: now.state == AppState.RUNNING, None)
        _preempt_every_node(high_jobs)
        await scheduler._wait_until(job_id, lambda now: now.state == AppState.PENDING, None)
        requeued = await scheduler.describe(job_id)
        assert requeued is not None
        assert (requeued.state, requeued.cause) == (AppState.PENDING, None)  # not a failure
        assert requeued.msg == "PENDING (BeginTime)"  # Slurm holds a requeued job 120 s
        assert requeued.num_restarts == 1
        # skip the hold: the test is about what the scheduler reports, not the 120 s
        subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], check=True)
        ended = await scheduler.wait(job_id)
    assert ended is not None
    assert (ended.state, ended.cause, ended.num_restarts) == (
        AppState.SUCCEEDED,
        EndCause.EXITED,
        1,
    )


async def test_a_job_cancelled_by_preemption_failed_preempted(
    scheduler: SlurmScheduler, tmp_path: Path, high_jobs: list[str]
) -> None:
    job_id = await scheduler.submit(_app(), {"partition": "lowcancel", "job_dir": str(tmp_path)})
    with anyio.fail_after(LIMIT):
        await scheduler._wait_until(job_id, lambda now: now.state == AppState.RUNNING, None)
        _preempt_every_node(high_jobs)
        ended = await scheduler.wait(job_id)
    assert ended is not None
    assert (ended.state, ended.cause) == (AppState.FAILED, EndCause.PREEMPTED)


async def test_a_trial_preempted_twice_succeeds_without_spending_its_retries(
    slurm_cluster: SlurmCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    high_jobs: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = {"partition": "lowcancel", "job_dir": str(tmp_path)}
    async with Runner("torchx", {"slurm": create_scheduler}, scheduler_params={}) as runner:
        with anyio.fail_after(3 * LIMIT):
            group = runner.group(retries=0, preemption_retries=2, preemption_backoff=(0.1, 0.2))
            async with group:
                first = await group.run(_app(), "slurm", cfg=cfg)
                for attempt in (1, 2):
                    while len(group.attempts(first)) < attempt:
                        await anyio.sleep(0.1)  # the next attempt is submitted
                    handle = group.attempts(first)[-1]
                    while (await _state(runner, handle)) != AppState.RUNNING:
                        await anyio.sleep(0.2)
                    _preempt_every_node(high_jobs)
                [(last, status)] = [ended async for ended in group.as_completed()]
    assert (status.state, status.cause) == (AppState.SUCCEEDED, EndCause.EXITED)
    assert group.budgets(first) == ["first", "preemption", "preemption"]
    assert last == group.attempts(first)[-1]
