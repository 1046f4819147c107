"""Jobs past ``MinJobAge``: squeue forgot them, accounting (``sacct``) remembers them.

On the cluster of ``scripts/slurm-cluster.sh start`` (accounting on, ``MinJobAge=10``) a
finished job leaves ``squeue`` about 20 s after its end (slurmctld purges old jobs in
batches). The module's jobs are submitted once, by the CLI in a process of their own,
and every test reads them after squeue forgot them, from processes and directories that
did not submit them: through the Runner, the CLI, and the scheduler's batched watch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import anyio
import pytest

from asynctorchx.components.utils import echo
from asynctorchx.errors import InvalidRunConfigException, SlurmSubmitError
from asynctorchx.runner import Runner
from asynctorchx.schedulers.api import DescribeAppResponse, Stream
from asynctorchx.schedulers.slurm_scheduler import SlurmCommands, SlurmScheduler, create_scheduler
from asynctorchx.specs import AppDef, AppState, Resource, Role
from tests.schedulers.slurm.conftest import SlurmCluster

LIMIT = 150  # seconds: a bound for squeue to forget a job (MinJobAge + one purge period)
TICK = 0.2  # seconds between two polls of the schedulers under test


def _role(name: str, script: str, num_replicas: int = 1) -> Role:
    return Role(
        name=name,
        image="",
        entrypoint="sh",
        args=["-c", script],
        num_replicas=num_replicas,
        resource=Resource(cpu=1, gpu=0, memMB=100),
    )


class Forgotten(NamedTuple):
    """The jobs of this module, ended and no longer listed by squeue."""

    failed: str  # printed `out-line` to stdout, `err-line` to stderr, exited 3
    succeeded: list[str]  # printed `ok <n>`
    job_dir: Path


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("TORCHX")}
    return subprocess.run(
        [sys.executable, "-m", "asynctorchx", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )


def _submit(cwd: Path, job_dir: Path, script: str) -> str:
    """Submit ``utils.sh sh -c script`` with the CLI (its own process); return the job id.

    ``--workspace ''``: the jobs share ``job_dir`` and need no copy of the current directory.
    """
    cfg = f"job_dir={job_dir}"
    ran = _cli(
        cwd, "run", "--workspace", "", "-s", "slurm", "-cfg", cfg, "utils.sh", "sh", "-c", script
    )
    assert ran.returncode == 0, ran.stderr
    handle = ran.stdout.splitlines()[0]
    assert handle.startswith("slurm://torchx/")
    return handle.rsplit("/", 1)[1]


def _listed_by_squeue(job_ids: list[str]) -> set[str]:
    done = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", ",".join(job_ids), "-o", "%i"],
        capture_output=True,
        text=True,
        timeout=15,
        check=False,
    )
    return {line.split("+")[0] for line in done.stdout.split()}


@pytest.fixture(scope="module")
def forgotten(
    slurm_accounting: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Forgotten:
    """Submit the jobs from another process, then poll squeue until it forgot all of them."""
    submitter = tmp_path_factory.mktemp("submitter")
    job_dir = submitter / "job"
    failed = _submit(submitter, job_dir, "echo out-line; echo err-line >&2; exit 3")
    succeeded = [_submit(submitter, job_dir, f"echo ok {n}") for n in range(3)]
    deadline = time.monotonic() + LIMIT
    while _listed_by_squeue([failed, *succeeded]):  # the condition, not a timing guess
        assert time.monotonic() < deadline, f"squeue still lists jobs after {LIMIT} s"
        time.sleep(1)
    return Forgotten(failed, succeeded, job_dir)


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory without the submitter's ``.torchxslurmjobdirs``: logs are found by sacct."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


async def test_runner_reads_state_exit_code_logs_and_list_past_min_job_age(
    forgotten: Forgotten, elsewhere: Path
) -> None:
    handle = f"slurm://torchx/{forgotten.failed}"
    async with Runner("torchx", {"slurm": create_scheduler}, scheduler_params={}) as runner:
        status = await runner.status(handle)
        assert status is not None
        assert status.state == AppState.FAILED
        (role,) = status.roles
        assert [(r.role, r.id, r.state, r.exit_code) for r in role.replicas] == [
            ("sh", 0, AppState.FAILED, 3)
        ]
        assert (await runner.wait(handle)).state == AppState.FAILED  # type: ignore[union-attr]
        out = [line async for line in runner.log_lines(handle, "sh", streams=Stream.STDOUT)]
        assert out == ["out-line\n"]
        err = [line async for line in runner.log_lines(handle, "sh", should_tail=True)]
        assert err == ["err-line\n"]  # stderr by default; should_tail ends: the job ended
        listed = {app.app_id: app.state for app in await runner.list("slurm")}
        assert listed[forgotten.failed] == AppState.FAILED
        assert all(listed[job_id] == AppState.SUCCEEDED for job_id in forgotten.succeeded)
        listed_now = {app.app_id for app in await runner.list("slurm", {"history": "0"})}
        assert forgotten.failed not in listed_now  # history 0: squeue only


def test_cli_reads_state_exit_code_logs_and_list_past_min_job_age(
    forgotten: Forgotten, elsewhere: Path
) -> None:
    handle = f"slurm://torchx/{forgotten.failed}"
    status = _cli(elsewhere, "status", "--json", handle)
    assert status.returncode == 0, status.stderr
    described = json.loads(status.stdout)
    assert described["state"] == "FAILED"
    assert [(r["id"], r["state"], r["exit_code"]) for r in described["roles"][0]["replicas"]] == [
        (0, "FAILED", 3)
    ]
    log = _cli(elsewhere, "log", "--streams", "stdout", handle)
    assert log.returncode == 0, log.stderr
    assert log.stdout.splitlines() == ["sh/0 out-line"]
    listed = _cli(elsewhere, "list", "-s", "slurm", "--all", "--json")
    assert listed.returncode == 0, listed.stderr
    apps = {app["app_id"]: app for app in json.loads(listed.stdout)}
    assert apps[forgotten.failed]["state"] == "FAILED"
    # sacct's Submit and End, squeue having forgotten the job
    assert apps[forgotten.failed]["submitted"] <= apps[forgotten.failed]["ended"]
    bad = _cli(elsewhere, "list", "-s", "slurm", "-cfg", "history=yesterday")
    assert bad.returncode != 0
    assert "'history' is 'yesterday'" in bad.stderr


async def test_forgotten_jobs_cost_one_squeue_and_one_sacct_per_tick(
    forgotten: Forgotten, elsewhere: Path
) -> None:
    scheduler = SlurmScheduler("test", poll_interval=TICK)
    async with scheduler:
        states: dict[str, AppState] = {}

        async def wait(job_id: str) -> None:
            response = await scheduler.wait(job_id, timeout=LIMIT)
            assert response is not None
            states[job_id] = response.state

        async with anyio.create_task_group() as task_group:
            for job_id in [forgotten.failed, *forgotten.succeeded]:
                task_group.start_soon(wait, job_id)
        assert states == {forgotten.failed: AppState.FAILED} | {
            job_id: AppState.SUCCEEDED for job_id in forgotten.succeeded
        }
        polls = scheduler._poller().polls
        assert polls >= 1
        assert scheduler.commands.counts["squeue"] == polls
        assert scheduler.commands.counts["sacct"] == polls
        assert scheduler.commands.counts["scontrol"] == 0  # sacct gave the exit codes
        for job_id in forgotten.succeeded:
            lines = scheduler.log_iter(job_id, "sh", streams=Stream.STDOUT)
            assert [line async for line in lines] == [f"ok {forgotten.succeeded.index(job_id)}\n"]


async def test_cancel_of_a_forgotten_job_is_a_no_op(forgotten: Forgotten) -> None:
    async with SlurmScheduler("test", poll_interval=TICK) as scheduler:
        await scheduler.cancel(forgotten.succeeded[0])
        response = await scheduler.describe(forgotten.succeeded[0])
        assert response is not None
        assert response.state == AppState.SUCCEEDED


async def test_without_accounting_a_forgotten_job_is_unknown_and_unlisted(
    forgotten: Forgotten, no_accounting_conf: dict[str, str]
) -> None:
    commands = SlurmCommands(environment=no_accounting_conf)
    async with SlurmScheduler("test", poll_interval=TICK, commands=commands) as scheduler:
        assert await scheduler.describe(forgotten.failed) is None  # never seen here
        listed = {app.app_id for app in await scheduler.list()}
        assert forgotten.failed not in listed
        await scheduler.describe(forgotten.succeeded[0])
        assert commands.counts["sacct"] == 1  # "accounting storage is disabled": asked once


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("account", "Invalid account or account/partition combination specified"),
        ("qos", "Invalid qos specification"),
    ],
)
async def test_bad_account_or_qos_is_refused_before_the_job_is_queued(
    slurm_accounting: SlurmCluster, elsewhere: Path, option: str, message: str
) -> None:
    # the cluster enforces associations and QOS (AccountingStorageEnforce), as production ones
    scheduler = SlurmScheduler("test", poll_interval=TICK)
    async with scheduler:
        with pytest.raises(SlurmSubmitError) as caught:
            await scheduler.submit(echo(), {option: "no-such-one", "job_dir": str(elsewhere)})
    assert caught.value.cfg_key == option
    assert isinstance(caught.value, InvalidRunConfigException)
    assert f"Slurm refused {option}='no-such-one'" in str(caught.value)
    assert message in str(caught.value)  # Slurm's own words
    assert scheduler.commands.counts["sbatch"] == 1
    assert list(elsewhere.glob("slurm-*")) == []  # nothing ran


def _view(response: DescribeAppResponse | None) -> tuple[object, ...]:
    """What a user reads of an ended app: state, restarts, each replica's fields."""
    assert response is not None
    replicas = [
        (r.role, r.id, r.state, r.exit_code, r.hostname)
        for status in response.roles_statuses
        for r in status.replicas
    ]
    return response.state, response.num_restarts, replicas


async def _squeue_forgets(job_ids: list[str]) -> None:
    with anyio.fail_after(LIMIT):
        while _listed_by_squeue(job_ids):  # the condition, not a timing guess
            await anyio.sleep(1)


async def test_hetjob_and_outside_scancel_read_alike_from_squeue_and_sacct(
    slurm_accounting: SlurmCluster, elsewhere: Path
) -> None:
    if len(slurm_accounting.nodes) < 3:
        pytest.skip("3 components need 3 nodes")
    scheduler = SlurmScheduler("test", poll_interval=TICK)
    seen: dict[str, tuple[object, ...]] = {}
    job_ids: list[str] = []
    async with scheduler:
        try:
            het = AppDef(
                name="het",
                roles=[_role("trainer", "true", num_replicas=2), _role("reader", "exit 0")],
            )
            job_ids.append(job_id := await scheduler.submit(het, {"job_dir": str(elsewhere)}))
            seen[job_id] = _view(await scheduler.wait(job_id, timeout=LIMIT))
            assert seen[job_id][0] == AppState.SUCCEEDED

            sleeper = AppDef(name="sleeper", roles=[_role("sleeper", "echo started; sleep 300")])
            job_ids.append(job_id := await scheduler.submit(sleeper, {"job_dir": str(elsewhere)}))
            with anyio.fail_after(LIMIT):
                response = await scheduler.describe(job_id)
                while response is not None and response.state != AppState.RUNNING:
                    response = await scheduler.wait_for_state_change(job_id, response.state)
            await anyio.run_process(["scancel", job_id])  # from outside the scheduler
            seen[job_id] = _view(await scheduler.wait(job_id, timeout=LIMIT))
            assert seen[job_id][0] == AppState.CANCELLED
        finally:
            with anyio.CancelScope(shield=True):
                for job_id in job_ids:
                    await scheduler.cancel(job_id)
    await _squeue_forgets(job_ids)
    accounting = SlurmScheduler("test", poll_interval=TICK)  # sees them only through sacct
    async with accounting:
        for job_id in job_ids:
            assert _view(await accounting.describe(job_id)) == seen[job_id], job_id
    assert accounting.commands.counts["scontrol"] == 0
