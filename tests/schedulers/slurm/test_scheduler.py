"""``SlurmScheduler`` on the real cluster of ``scripts/slurm-cluster.sh``: submit, describe,
wait, cancel, logs, the batched watch, bad input, and the Runner.

Every test runs in its own directory (the scheduler appends to ``.torchxslurmjobdirs`` in
the current directory, as TorchX does) and cancels only the jobs it submitted.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from asynctorchx.components.utils import echo
from asynctorchx.errors import (
    InvalidRunConfigException,
    SlurmNotInstalledError,
    SlurmSubmitError,
    UnknownAppException,
)
from asynctorchx.runner import Runner
from asynctorchx.schedulers.api import Stream
from asynctorchx.schedulers.slurm_scheduler import SlurmScheduler, create_scheduler
from asynctorchx.specs import AppDef, AppState, Resource, Role
from tests.schedulers.slurm.conftest import SlurmCluster

LIMIT = 60  # seconds; every job here ends within a few seconds on the local cluster
TICK = 0.2  # seconds between two squeue calls of the scheduler under test


def _role(name: str, script: str, num_replicas: int = 1) -> Role:
    return Role(
        name=name,
        image="",
        entrypoint="sh",
        args=["-c", script],
        num_replicas=num_replicas,
        resource=Resource(cpu=1, gpu=0, memMB=100),
    )


@pytest.fixture
async def scheduler(
    slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[SlurmScheduler]:
    """A scheduler polling every TICK s, run from ``tmp_path``; cancels its jobs at the end."""
    monkeypatch.chdir(tmp_path)
    slurm = SlurmScheduler("test", poll_interval=TICK)
    submitted: list[str] = []
    schedule = slurm.schedule

    async def recording_schedule(dryrun_info):  # type: ignore[no-untyped-def]
        job_id = await schedule(dryrun_info)
        submitted.append(job_id)
        return job_id

    slurm.schedule = recording_schedule  # type: ignore[method-assign]
    async with slurm:
        yield slurm
        with anyio.CancelScope(shield=True):
            for job_id in submitted:
                await slurm.cancel(job_id)


async def _run(scheduler: SlurmScheduler, app: AppDef, job_dir: Path) -> str:
    return await scheduler.submit(app, {"job_dir": str(job_dir), "time": "5"})


async def test_echo_succeeds_with_its_log(scheduler: SlurmScheduler, tmp_path: Path) -> None:
    app = echo(msg="hello from slurm")
    job_id = await _run(scheduler, app, tmp_path / "job")
    assert job_id.isdigit()
    response = await scheduler.wait(job_id, timeout=LIMIT)
    assert response is not None
    assert response.state == AppState.SUCCEEDED
    (replica,) = response.roles_statuses[0].replicas
    assert (replica.role, replica.id, replica.exit_code) == ("echo", 0, 0)
    assert replica.hostname.startswith("n")
    lines = [line async for line in scheduler.log_iter(job_id, "echo", streams=Stream.STDOUT)]
    assert lines == ["hello from slurm\n"]
    assert (tmp_path / "job" / f"slurm-{job_id}-echo-0.out").exists()
    assert (tmp_path / ".torchxslurmjobdirs").read_text() == f"{job_id} = {tmp_path / 'job'}\n"


async def test_two_roles_run_as_one_heterogeneous_job(
    scheduler: SlurmScheduler, slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    if len(slurm_cluster.nodes) < 3:
        pytest.skip("3 components need 3 nodes")
    app = AppDef(
        name="het",
        roles=[
            _role("trainer", "echo trainer $SLURMD_NODENAME", num_replicas=2),
            _role("reader", "echo reader $SLURMD_NODENAME"),
        ],
    )
    job_id = await _run(scheduler, app, tmp_path)
    response = await scheduler.wait(job_id, timeout=LIMIT)
    assert response is not None
    assert response.state == AppState.SUCCEEDED
    trainer, reader = response.roles_statuses
    assert [(r.role, r.id) for r in trainer.replicas] == [("trainer", 0), ("trainer", 1)]
    assert [(r.role, r.id) for r in reader.replicas] == [("reader", 0)]
    hosts = [r.hostname for r in [*trainer.replicas, *reader.replicas]]
    assert len(set(hosts)) == 3
    assert set(hosts) <= set(slurm_cluster.nodes)
    for k, host in enumerate(hosts[:2]):
        out = [line async for line in scheduler.log_iter(job_id, "trainer", k, streams="stdout")]
        assert out == [f"trainer {host}\n"]


async def test_failing_replica_fails_the_app_with_its_exit_code(
    scheduler: SlurmScheduler, tmp_path: Path
) -> None:
    app = AppDef(name="fail", roles=[_role("bad", "echo oops >&2; exit 3")])
    job_id = await _run(scheduler, app, tmp_path)
    response = await scheduler.wait(job_id, timeout=LIMIT)
    assert response is not None
    assert response.state == AppState.FAILED
    assert response.msg.startswith("FAILED")
    (replica,) = response.roles_statuses[0].replicas
    assert (replica.state, replica.exit_code) == (AppState.FAILED, 3)
    assert [line async for line in scheduler.log_iter(job_id, "bad")] == ["oops\n"]  # stderr


async def _processes_with(marker: str) -> list[str]:
    done = await anyio.run_process(["ps", "-eww", "-o", "args"])
    return [line for line in done.stdout.decode().splitlines() if marker in line]


async def test_cancel_ends_every_process(scheduler: SlurmScheduler, tmp_path: Path) -> None:
    marker = f"marker-{uuid.uuid4().hex}"
    app = AppDef(name="long", roles=[_role("sleeper", f": {marker}; echo started; sleep 300")])
    job_id = await _run(scheduler, app, tmp_path)
    logs = scheduler.log_iter(job_id, "sleeper", streams=Stream.STDOUT, should_tail=True)
    with anyio.fail_after(LIMIT):
        async with aclosing(logs):  # type: ignore[type-var]
            assert await anext(logs) == "started\n"  # the replica runs
    assert await _processes_with(marker)
    await scheduler.cancel(job_id)
    response = await scheduler.wait(job_id, timeout=LIMIT)
    assert response is not None
    assert response.state == AppState.CANCELLED
    assert await _processes_with(marker) == []
    await scheduler.cancel(job_id)  # idempotent
    await scheduler.cancel("99999999")


async def test_log_iter_options(scheduler: SlurmScheduler, tmp_path: Path) -> None:
    script = "for i in 1 2 3; do echo line $i; echo err $i >&2; sleep 0.3; done"
    app = AppDef(name="logs", roles=[_role("talker", script)])
    job_id = await _run(scheduler, app, tmp_path)

    async def read(**options: object) -> list[str]:
        iterator = scheduler.log_iter(job_id, "talker", **options)  # type: ignore[arg-type]
        async with aclosing(iterator):  # type: ignore[type-var]
            return [line async for line in iterator]

    with anyio.fail_after(LIMIT):  # followed while it runs, to its end
        followed = await read(streams=Stream.STDOUT, should_tail=True)
    assert followed == ["line 1\n", "line 2\n", "line 3\n"]
    response = await scheduler.describe(job_id)
    assert response is not None
    assert response.state == AppState.SUCCEEDED
    assert await read() == ["err 1\n", "err 2\n", "err 3\n"]  # stderr by default, as TorchX
    assert await read(streams=Stream.STDERR, regex="[13]") == ["err 1\n", "err 3\n"]
    later = datetime.now() + timedelta(days=1)  # since/until: ignored (no time per line)
    assert len(await read(streams=Stream.STDOUT, since=later, until=later)) == 3
    with pytest.raises(ValueError, match="COMBINED"):
        scheduler.log_iter(job_id, "talker", streams=Stream.COMBINED)
    with pytest.raises(ValueError, match=r"replicas 0\.\.0"):
        await read(k=1)
    with pytest.raises(ValueError, match="no role 'nope'"):
        [_ async for _ in scheduler.log_iter(job_id, "nope")]
    with pytest.raises(UnknownAppException):
        [_ async for _ in scheduler.log_iter("99999999", "talker")]


async def test_fifty_watched_apps_cost_one_squeue_per_tick(
    scheduler: SlurmScheduler, tmp_path: Path
) -> None:
    app = AppDef(name="short", roles=[_role("nap", "sleep 1")])
    job_ids = [await _run(scheduler, app, tmp_path) for _ in range(50)]
    squeue_before = scheduler.commands.counts["squeue"]
    polls_before = scheduler._poller().polls
    states: list[AppState] = []

    async def wait(job_id: str) -> None:
        response = await scheduler.wait(job_id, timeout=LIMIT)
        assert response is not None
        states.append(response.state)

    async with anyio.create_task_group() as task_group:
        for job_id in job_ids:
            task_group.start_soon(wait, job_id)
    assert states == [AppState.SUCCEEDED] * 50
    polls = scheduler._poller().polls - polls_before
    assert scheduler.commands.counts["squeue"] - squeue_before == polls
    assert 1 <= polls < 50


async def test_twenty_apps_submitted_and_awaited_concurrently(
    scheduler: SlurmScheduler, tmp_path: Path
) -> None:
    results: dict[int, tuple[str, AppState]] = {}

    async def submit_and_wait(index: int) -> None:
        job_id = await _run(scheduler, echo(msg=f"app {index}"), tmp_path / f"job{index}")
        response = await scheduler.wait(job_id, timeout=LIMIT)
        assert response is not None
        results[index] = (job_id, response.state)

    async with anyio.create_task_group() as task_group:
        for index in range(20):
            task_group.start_soon(submit_and_wait, index)
    assert {state for _, state in results.values()} == {AppState.SUCCEEDED}
    assert len({job_id for job_id, _ in results.values()}) == 20
    for index, (job_id, _) in results.items():
        log = scheduler.log_iter(job_id, "echo", streams=Stream.STDOUT)
        assert [line async for line in log] == [f"app {index}\n"]


async def test_fifty_concurrent_submits_into_one_job_dir_each_run_their_own_script(
    scheduler: SlurmScheduler, tmp_path: Path
) -> None:
    job_dir = tmp_path / "shared"
    job_ids: dict[int, str] = {}

    async def submit(index: int) -> None:
        job_ids[index] = await _run(scheduler, echo(msg=f"app {index}"), job_dir)

    async with anyio.create_task_group() as task_group:
        for index in range(50):
            task_group.start_soon(submit, index)
    assert len(set(job_ids.values())) == 50
    assert scheduler.commands.counts["sinfo"] == 2  # the version, the partition's memory once
    for index, job_id in job_ids.items():
        response = await scheduler.wait(job_id, timeout=LIMIT)
        assert response is not None
        assert response.state == AppState.SUCCEEDED
        log = scheduler.log_iter(job_id, "echo", streams=Stream.STDOUT)
        assert [line async for line in log] == [f"app {index}\n"]
    # only the script TorchX keeps is left, whole: the last one submitted
    scripts = sorted(path.name for path in job_dir.iterdir() if "sbatch" in path.name)
    assert scripts == ["torchx-sbatch.sh"]
    assert "echo" in (job_dir / "torchx-sbatch.sh").read_text()


async def test_unknown_partition_is_a_typed_error_naming_it(
    scheduler: SlurmScheduler, tmp_path: Path
) -> None:
    with pytest.raises(SlurmSubmitError, match="invalid partition") as caught:
        await scheduler.submit(echo(), {"partition": "no-such-partition", "job_dir": str(tmp_path)})
    assert caught.value.cfg_key == "partition"
    assert isinstance(caught.value, InvalidRunConfigException)


async def test_negative_time_is_refused_before_sbatch(scheduler: SlurmScheduler) -> None:
    with pytest.raises(InvalidRunConfigException, match="'time'") as caught:
        await scheduler.submit(echo(), {"time": "-5"})
    assert caught.value.cfg_key == "time"
    assert scheduler.commands.counts["sbatch"] == 0


async def test_the_signal_option_warns_the_tasks_before_their_time_limit(
    scheduler: SlurmScheduler, tmp_path: Path
) -> None:
    # issue 43: a trial is warned before it is killed, so it can write a checkpoint; sleep
    # outlasts the one-minute limit, so only the warning lets the app succeed
    script = "trap 'echo warned; exit 0' USR1; sleep 90 & wait"
    app = AppDef("warned", roles=[_role("main", script)])
    cfg = {"job_dir": str(tmp_path / "job"), "time": "1", "signal": "USR1@50"}
    job_id = await scheduler.submit(app, cfg)
    response = await scheduler.wait(job_id, timeout=LIMIT + 60)
    assert response is not None
    assert response.state == AppState.SUCCEEDED, response
    lines = [line async for line in scheduler.log_iter(job_id, "main", streams=Stream.STDOUT)]
    assert lines == ["warned\n"]


async def test_missing_sbatch_says_slurm_is_not_installed(
    scheduler: SlurmScheduler, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SlurmNotInstalledError, match="Slurm's client tools are not installed"):
        await scheduler.submit(echo(), {"job_dir": str(tmp_path)})


async def test_unknown_job_is_none_and_list_shows_ours(scheduler: SlurmScheduler) -> None:
    assert await scheduler.describe("99999999") is None
    assert await scheduler.describe("not-a-job-id") is None
    assert await scheduler.wait("99999999") is None
    job_id = await scheduler.submit(echo(msg="listed"), {})
    await scheduler.wait(job_id, timeout=LIMIT)
    listed = {app.app_id: app.state for app in await scheduler.list()}
    assert listed[job_id] == AppState.SUCCEEDED


async def test_list_gives_the_job_name_and_its_submit_and_end_times(
    scheduler: SlurmScheduler,
) -> None:
    before = datetime.now(UTC).replace(microsecond=0)  # Slurm's times are whole seconds
    job_id = await scheduler.submit(echo(msg="timed"), {})
    await scheduler.wait(job_id, timeout=LIMIT)
    after = datetime.now(UTC)
    app = {app.app_id: app for app in await scheduler.list()}[job_id]
    assert app.name == "echo-0"  # Slurm's job name: the first replica's, as torchx-nightly
    assert app.submitted is not None
    assert app.ended is not None
    assert before <= app.submitted <= app.ended <= after


async def test_forgotten_job_keeps_its_last_seen_state(scheduler: SlurmScheduler) -> None:
    job_id = await scheduler.submit(echo(msg="seen"), {})
    first = await scheduler.describe(job_id)
    assert first is not None

    async def forgotten(job_ids: object) -> dict[str, object]:
        return {}  # as squeue answers once MinJobAge has passed

    scheduler.commands.squeue = forgotten  # type: ignore[assignment,method-assign]
    scheduler._accounting = False  # this cluster has none
    again = await scheduler.describe(job_id)
    assert again is not None
    assert again.state == first.state  # never SUCCEEDED by guess
    assert again.msg.startswith("squeue no longer lists this job")


async def test_runner_runs_echo_on_slurm(
    slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with Runner("torchx", {"slurm": create_scheduler}, scheduler_params={}) as runner:
        handle = await runner.run_component(
            "utils.echo", ["--msg", "via the runner"], "slurm", cfg={"job_dir": str(tmp_path)}
        )
        assert handle.startswith("slurm://torchx/")
        status = await runner.wait(handle)
        assert status is not None
        assert status.state == AppState.SUCCEEDED
        lines = [line async for line in runner.log_lines(handle, "echo", streams=Stream.STDOUT)]
        assert lines == ["via the runner\n"]


async def _node_address(node: str) -> str:
    done = await anyio.run_process(["sinfo", "-h", "-N", "-n", node, "-o", "%o"])
    return done.stdout.decode().split()[0]


@pytest.mark.parametrize("num_replicas", [1, 2])
async def test_rank0_host_is_the_first_nodes_address_in_every_replica(
    scheduler: SlurmScheduler, slurm_cluster: SlurmCluster, tmp_path: Path, num_replicas: int
) -> None:
    if len(slurm_cluster.nodes) < num_replicas:
        pytest.skip(f"{num_replicas} replicas need {num_replicas} nodes")
    role = _role("peer", "echo ${rank0_env}=$${${rank0_env}}", num_replicas=num_replicas)
    job_id = await _run(scheduler, AppDef(name="rank0", roles=[role]), tmp_path)
    response = await scheduler.wait(job_id, timeout=LIMIT)
    assert response is not None
    assert response.state == AppState.SUCCEEDED
    first_node = response.roles_statuses[0].replicas[0].hostname
    expected = f"TORCHX_RANK0_HOST={await _node_address(first_node)}\n"
    for k in range(num_replicas):
        lines = [line async for line in scheduler.log_iter(job_id, "peer", k, streams="stdout")]
        assert lines == [expected]


async def test_a_job_held_to_its_begin_time_says_why_and_a_finished_one_when(
    scheduler: SlurmScheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    done_id = await scheduler.submit(echo(msg="timed"), {})
    sbatch = scheduler.commands.sbatch

    async def held(argv: list[str], options: dict[str, str], app_name: str | None) -> str:
        return await sbatch([argv[0], "--begin=now+60", *argv[1:]], options, app_name)

    monkeypatch.setattr(scheduler.commands, "sbatch", held)
    held_id = await scheduler.submit(echo(msg="held"), {})
    pending = await scheduler.describe(held_id)
    assert pending is not None
    assert (pending.state, pending.pending_reason) == (AppState.PENDING, "BeginTime")
    assert pending.submitted is not None
    assert (pending.started, pending.ended) == (None, None)  # StartTime is only a forecast
    await scheduler.cancel(held_id)
    done = await scheduler.wait(done_id, timeout=LIMIT)
    assert done is not None
    assert done.state == AppState.SUCCEEDED
    assert done.submitted is not None
    assert done.started is not None
    assert done.ended is not None
    assert done.submitted <= done.started <= done.ended
    (replica,) = done.roles_statuses[0].replicas
    assert (replica.started, replica.ended) == (done.started, done.ended)
