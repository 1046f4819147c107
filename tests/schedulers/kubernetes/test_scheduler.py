"""The ``kubernetes`` scheduler end to end, against the fake API server (or a real cluster)."""

from __future__ import annotations

import functools
from pathlib import Path

import anyio
import pytest

from asynctorchx.errors import (
    KubernetesApiError,
    KubernetesConfigError,
    KubernetesUnreachableError,
    VolcanoNotInstalledError,
)
from asynctorchx.schedulers.api import DescribeAppResponse
from asynctorchx.schedulers.kubernetes import KubernetesScheduler, create_scheduler
from asynctorchx.specs import AppDef, AppState, RetryPolicy, Role
from tests.schedulers.kubernetes.conftest import IMAGE, connected
from tests.schedulers.kubernetes.fake_apiserver import JOBS, PODS, FakeApiServer

CFG = {"queue": "default"}


def sh_app(name: str, *scripts: str, max_retries: int = 0) -> AppDef:
    roles = [
        Role(
            name=f"role{index}",
            image=IMAGE,
            entrypoint="sh",
            args=["-c", script],
            max_retries=max_retries,
            retry_policy=RetryPolicy.APPLICATION,
        )
        for index, script in enumerate(scripts)
    ]
    return AppDef(name=name, roles=roles)


async def submit_and_wait(
    scheduler: KubernetesScheduler, app: AppDef, drive: functools.partial[None] | None = None
) -> tuple[str, DescribeAppResponse | None]:
    app_id = await scheduler.submit(app, CFG)
    result: list[DescribeAppResponse | None] = []

    async def waiter() -> None:
        result.append(await scheduler.wait(app_id, timeout=60))

    async with anyio.create_task_group() as task_group:
        task_group.start_soon(waiter)
        if drive is not None:
            drive(app_id)
    return app_id, result[0]


async def test_two_roles_succeed(tmp_path: Path) -> None:
    async with connected(tmp_path) as (cluster, scheduler):
        app = sh_app("two-roles", "echo trainer", "echo ps")

        def drive(app_id: str) -> None:
            cluster.run(app_id, "role0-0", ("trainer",))
            cluster.run(app_id, "role1-0", ("ps",))

        app_id, response = await submit_and_wait(scheduler, app, functools.partial(drive))
        assert response is not None
        assert response.state == AppState.SUCCEEDED
        assert [role.role for role in response.roles_statuses] == ["role0", "role1"]
        for role in response.roles_statuses:
            (replica,) = role.replicas
            assert replica.state == AppState.SUCCEEDED
            assert replica.exit_code == 0
            assert (
                replica.hostname
                == f"{app_id.partition(':')[2]}-{role.role}-0-0.{app_id.partition(':')[2]}"
            )
        lines = [line async for line in scheduler.log_iter(app_id, "role0", 0)]
        assert lines == ["trainer\n"]
        assert app_id in [listed.app_id for listed in await scheduler.list()]
        await scheduler.delete(app_id)


async def test_failing_pod_fails_the_app_with_its_exit_code(tmp_path: Path) -> None:
    async with connected(tmp_path) as (cluster, scheduler):
        app = sh_app("fails", "exit 3")
        app_id, response = await submit_and_wait(
            scheduler,
            app,
            functools.partial(lambda app_id: cluster.run(app_id, "role0-0", exit_code=3)),
        )
        assert response is not None
        assert response.state == AppState.FAILED
        (replica,) = response.roles_statuses[0].replicas
        assert (replica.state, replica.exit_code) == (AppState.FAILED, 3)
        await scheduler.delete(app_id)


async def test_retries_restart_the_job(tmp_path: Path) -> None:
    async with connected(tmp_path, fake_only=True) as (cluster, scheduler):
        fake = cluster.fake
        assert fake is not None
        app = sh_app("retry", "run", max_retries=1)
        app_id = await scheduler.submit(app, CFG)
        pod = cluster.pod(app_id, "role0-0")
        first_uid = fake.pod(pod)["metadata"]["uid"]
        fake.start_pod(pod)
        running = await scheduler.wait_for_state_change(app_id, AppState.PENDING, timeout=30)
        assert running is not None
        assert running.state == AppState.RUNNING
        fake.finish_pod(pod, 1)  # Volcano restarts the job: the app is not over
        assert fake.pod(pod)["metadata"]["uid"] != first_uid
        fake.start_pod(pod)
        fake.finish_pod(pod, 0)
        response = await scheduler.wait(app_id, timeout=30)
        assert response is not None
        assert response.state == AppState.SUCCEEDED
        assert response.num_restarts == 1


async def test_cancel_aborts_and_keeps_the_job_then_delete_removes_it(tmp_path: Path) -> None:
    async with connected(tmp_path) as (cluster, scheduler):
        app_id = await scheduler.submit(sh_app("cancel", "sleep 600"), CFG)
        cluster.start(app_id, "role0-0")
        await scheduler.cancel(app_id)
        response = await scheduler.wait(app_id, timeout=60)
        assert response is not None
        assert response.state == AppState.CANCELLED
        kept = await scheduler.describe(app_id)
        assert kept is not None
        assert kept.state == AppState.CANCELLED
        await scheduler.cancel(app_id)  # a finished app: nothing to do
        await scheduler.delete(app_id)
        assert await scheduler.describe(app_id) is None
        assert await scheduler.wait(app_id) is None
        await scheduler.delete(app_id)  # deleting twice is fine (Scheduler.delete's contract)
        assert await scheduler.describe(app_id) is None


async def test_wait_survives_410_and_dropped_watches(tmp_path: Path) -> None:
    async with connected(tmp_path, fake_only=True) as (cluster, scheduler):
        fake = cluster.fake
        assert fake is not None
        app_id = await scheduler.submit(sh_app("gone", "true"), CFG)
        pod = cluster.pod(app_id, "role0-0")
        result: list[DescribeAppResponse | None] = []

        async def waiter() -> None:
            result.append(await scheduler.wait(app_id, timeout=30))

        async with anyio.create_task_group() as task_group:
            task_group.start_soon(waiter)
            await fake.wait_for_streams(JOBS)
            fake.start_pod(pod)  # seen on the first watch
            fake.compact()
            assert fake.drop_connections(JOBS) == 1  # reconnects from a version now too old
            fake.finish_pod(pod, 0)
        assert result[0] is not None
        assert result[0].state == AppState.SUCCEEDED
        informer = scheduler.informer("jobs", "default")
        assert informer.lists == 2  # listed again after the 410
        assert fake.watch_connections[JOBS] >= 2


async def test_wait_for_state_change_returns_on_each_change(tmp_path: Path) -> None:
    async with connected(tmp_path, fake_only=True) as (cluster, scheduler):
        fake = cluster.fake
        assert fake is not None
        app_id = await scheduler.submit(sh_app("changes", "true"), CFG)
        pod = cluster.pod(app_id, "role0-0")
        pending = await scheduler.wait_for_state_change(app_id, AppState.SUBMITTED, timeout=10)
        assert pending is not None
        assert pending.state == AppState.PENDING
        fake.bookmark()  # a bookmark is not a change
        fake.start_pod(pod)
        running = await scheduler.wait_for_state_change(app_id, AppState.PENDING, timeout=10)
        assert running is not None
        assert running.state == AppState.RUNNING


async def test_log_follow_resumes_after_a_dropped_connection(tmp_path: Path) -> None:
    async with connected(tmp_path, fake_only=True) as (cluster, scheduler):
        fake = cluster.fake
        assert fake is not None
        app_id = await scheduler.submit(sh_app("logs", "seq 6"), CFG)
        pod = cluster.pod(app_id, "role0-0")
        fake.start_pod(pod)
        fake.write_log(pod, "1", "2", "3", same_time=True)
        lines: list[str] = []
        three = anyio.Event()

        async def follow() -> None:
            async for line in scheduler.log_iter(app_id, "role0", 0, should_tail=True):
                lines.append(line)
                if len(lines) == 3:
                    three.set()

        async with anyio.create_task_group() as task_group:
            task_group.start_soon(follow)
            await three.wait()
            assert fake.drop_connections("log") == 1
            fake.write_log(pod, "4", same_time=True)  # same time as 1..3
            fake.write_log(pod, "5", "6")
            await fake.wait_for_streams("log")
            fake.finish_pod(pod, 0)
        assert lines == [f"{n}\n" for n in range(1, 7)]
        assert fake.log_connections >= 2


async def test_log_filters(tmp_path: Path) -> None:
    async with connected(tmp_path, fake_only=True) as (cluster, scheduler):
        fake = cluster.fake
        assert fake is not None
        app_id = await scheduler.submit(sh_app("filters", "x"), CFG)
        pod = cluster.pod(app_id, "role0-0")
        fake.start_pod(pod)
        fake.write_log(pod, "apple", "banana", "avocado")
        fake.finish_pod(pod, 0)
        assert [line async for line in scheduler.log_iter(app_id, "role0", regex="^a")] == [
            "apple\n",
            "avocado\n",
        ]
        with pytest.raises(ValueError, match="replicas"):
            [line async for line in scheduler.log_iter(app_id, "role0", k=1)]


async def test_100_apps_share_one_watch_per_kind(tmp_path: Path) -> None:
    async with connected(tmp_path, fake_only=True) as (cluster, scheduler):
        fake = cluster.fake
        assert fake is not None
        app_ids = [await scheduler.submit(sh_app(f"many{n}", "true"), CFG) for n in range(100)]
        results: dict[str, AppState] = {}

        async def waiter(app_id: str) -> None:
            response = await scheduler.wait(app_id, timeout=60)
            assert response is not None
            results[app_id] = response.state

        async with anyio.create_task_group() as task_group:
            for app_id in app_ids:
                task_group.start_soon(waiter, app_id)
            await fake.wait_for_streams(JOBS)
            for app_id in app_ids:
                fake.finish_pod(f"{app_id.partition(':')[2]}-role0-0-0", 0)
        assert set(results.values()) == {AppState.SUCCEEDED}
        assert len(results) == 100
        assert fake.max_open_watches[JOBS] == 1
        assert fake.max_open_watches[PODS] == 0  # waiting needs the jobs only
        assert fake.watch_connections[JOBS] <= 3


async def test_bad_input_raises_typed_errors(tmp_path: Path) -> None:
    missing = KubernetesScheduler("test", kubeconfig=str(tmp_path / "nope"))
    with pytest.raises(KubernetesConfigError, match="nope"):
        await missing.list()
    await missing.close()

    fake = FakeApiServer(volcano_installed=False)
    async with fake.running(tmp_path) as server:
        async with KubernetesScheduler("test", kubeconfig=str(server.kubeconfig)) as scheduler:
            with pytest.raises(VolcanoNotInstalledError, match="Volcano is not installed"):
                await scheduler.submit(sh_app("x", "true"), CFG)
        server.volcano_installed = True
        async with KubernetesScheduler("test", kubeconfig=str(server.kubeconfig)) as scheduler:
            with pytest.raises(
                KubernetesApiError, match="unable to find job queue: nope"
            ) as refused:
                await scheduler.submit(sh_app("x", "true"), {"queue": "nope"})
            assert refused.value.status == 400
        url = server.url
    unreachable = tmp_path / "unreachable"
    unreachable.write_text(server.kubeconfig.read_text().replace(url, "http://127.0.0.1:9"))
    async with KubernetesScheduler("test", kubeconfig=str(unreachable)) as scheduler:
        with pytest.raises(KubernetesUnreachableError, match=r"127\.0\.0\.1:9"):
            await scheduler.describe("default:x")


def test_factory_ignores_unknown_parameters() -> None:
    scheduler = create_scheduler("test", kubeconfig="/x", foo="1", scheduler_params="y")
    assert isinstance(scheduler, KubernetesScheduler)
    assert scheduler.api.kubeconfig == "/x"
    assert "queue" in KubernetesScheduler.class_run_opts()  # type: ignore[operator]


def test_runs_under_trio_too(tmp_path: Path) -> None:
    async def main() -> AppState:
        fake = FakeApiServer()
        async with (
            fake.running(tmp_path) as server,
            KubernetesScheduler("test", kubeconfig=str(server.kubeconfig)) as scheduler,
        ):
            app_id = await scheduler.submit(sh_app("trio", "true"), CFG)
            server.finish_pod(f"{app_id.partition(':')[2]}-role0-0-0", 0)
            response = await scheduler.wait(app_id, timeout=30)
            assert response is not None
            return response.state

    assert anyio.run(main, backend="trio") == AppState.SUCCEEDED
