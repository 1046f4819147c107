"""The ``kubernetes`` scheduler with ``job_api=jobset`` (and Kueue), against the real API server.

The server stores, validates (the pods), watches and proxies logs for real; JobSet's
controller, the Job controller and Kueue are the STAND-INS of ``bare_cluster.py``, so
these tests run on the bare server only (the one about a cluster without JobSet runs on
the fake server, which has no JobSet API group).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from asynctorchx.errors import JobSetNotInstalledError
from asynctorchx.schedulers.api import DescribeAppResponse
from asynctorchx.schedulers.kubernetes_scheduler import KubernetesScheduler
from asynctorchx.specs import AppDef, AppState, RetryPolicy, Role
from tests.schedulers.kubernetes.bare_cluster import BareCluster
from tests.schedulers.kubernetes.conftest import BARE, IMAGE, connected

CFG = {"job_api": "jobset"}


def app(name: str, *replicas: int) -> AppDef:
    roles = [
        Role(
            name=f"role{index}",
            image=IMAGE,
            entrypoint="sh",
            args=["-c", "echo replica ${replica_id}"],
            num_replicas=count,
        )
        for index, count in enumerate(replicas)
    ]
    return AppDef(name=name, roles=roles)


@contextlib.asynccontextmanager
async def bare(tmp_path: Path) -> AsyncIterator[tuple[BareCluster, KubernetesScheduler]]:
    if not BARE:
        pytest.skip("drives the stand-ins of JobSet's controller and Kueue: a bare server only")
    async with connected(tmp_path) as (cluster, scheduler):
        assert cluster.bare is not None
        yield cluster.bare, scheduler


def name_of(app_id: str) -> str:
    namespace, api, name = app_id.split(":")
    assert (namespace, api) == ("default", "jobset")
    return name


async def run_pod(
    cluster: BareCluster, app_id: str, rjob: str, index: int, lines: tuple[str, ...], code: int
) -> None:
    pod = await cluster.jobset_pod(name_of(app_id), rjob, index)
    await cluster.start_pod(pod)
    if lines:
        cluster.write_log(pod, *lines)
    await cluster.finish_pod(pod, code)


async def test_a_two_role_jobset_succeeds_with_logs_and_hostnames(tmp_path: Path) -> None:
    async with bare(tmp_path) as (cluster, scheduler):
        app_id = await scheduler.submit(app("js-two", 2, 1), CFG)
        name = name_of(app_id)
        result: list[DescribeAppResponse | None] = []

        async def waiter() -> None:
            result.append(await scheduler.wait(app_id, timeout=60))

        async with anyio.create_task_group() as task_group:
            task_group.start_soon(waiter)
            for rjob, index in (("role0", 0), ("role0", 1), ("role1", 0)):
                await run_pod(cluster, app_id, rjob, index, (f"{rjob} {index}",), 0)
        response = result[0]
        assert response is not None
        assert response.state == AppState.SUCCEEDED
        assert response.msg == "jobset completed successfully"
        # the replicated job's template is a Job the real server accepted
        child = await cluster.http.get(f"/apis/batch/v1/namespaces/default/jobs/{name}-role0-0")
        assert child.status_code == 200
        spec = child.json()["spec"]
        assert (spec["parallelism"], spec["completions"], spec["backoffLimit"]) == (2, 2, 0)
        replicas = [
            (replica.role, replica.id, replica.state, replica.hostname)
            for role in response.roles_statuses
            for replica in role.replicas
        ]
        assert replicas == [
            ("role0", 0, AppState.SUCCEEDED, f"{name}-role0-0-0.{name}"),
            ("role0", 1, AppState.SUCCEEDED, f"{name}-role0-0-1.{name}"),
            ("role1", 0, AppState.SUCCEEDED, f"{name}-role1-0-0.{name}"),
        ]
        # the replica's pod is found by its index, through the real server's log proxy
        assert [line async for line in scheduler.log_iter(app_id, "role0", 1)] == ["role0 1\n"]
        listed = await scheduler.list({"job_api": "jobset"})
        assert (app_id, AppState.SUCCEEDED) in [(each.app_id, each.state) for each in listed]
        assert app_id not in [each.app_id for each in await scheduler.list()]  # Volcano's
        await scheduler.delete(app_id)
        assert await scheduler.describe(app_id) is None


async def test_a_failing_pod_fails_the_jobset_app(tmp_path: Path) -> None:
    async with bare(tmp_path) as (cluster, scheduler):
        app_id = await scheduler.submit(app("js-fail", 2), CFG)
        running = await scheduler.wait_for_state_change(app_id, AppState.SUBMITTED, timeout=30)
        assert running is not None
        assert running.state == AppState.PENDING  # pods created, none running
        await run_pod(cluster, app_id, "role0", 1, (), 3)
        response = await scheduler.wait(app_id, timeout=60)
        assert response is not None
        assert response.state == AppState.FAILED
        assert response.msg == "jobset failed due to one or more job failures"
        replicas = {replica.id: replica for replica in response.roles_statuses[0].replicas}
        assert (replicas[1].state, replicas[1].exit_code) == (AppState.FAILED, 3)
        assert replicas[0].state == AppState.PENDING
        await scheduler.delete(app_id)


async def test_running_then_cancel_deletes_the_jobset_and_its_pods(tmp_path: Path) -> None:
    async with bare(tmp_path) as (cluster, scheduler):
        app_id = await scheduler.submit(app("js-cancel", 1), CFG)
        pod = await cluster.jobset_pod(name_of(app_id), "role0", 0)
        await cluster.start_pod(pod)
        running = await scheduler.wait_for_state_change(app_id, AppState.PENDING, timeout=30)
        assert running is not None
        assert running.state == AppState.RUNNING
        lines: list[str] = []
        read = anyio.Event()

        async def follow() -> None:
            async for line in scheduler.log_iter(app_id, "role0", 0, should_tail=True):
                lines.append(line)
                read.set()

        async with anyio.create_task_group() as task_group:
            task_group.start_soon(follow)
            cluster.write_log(pod, "working")
            await read.wait()
            await scheduler.cancel(app_id)  # the follower ends with the JobSet
            cluster.kubelet.end("default", pod)  # the kubelet's part: the container was killed
        assert lines == ["working\n"]
        assert await scheduler.wait(app_id, timeout=30) is None
        assert await scheduler.describe(app_id) is None
        await scheduler.cancel(app_id)  # unknown now: nothing to do


async def test_a_queue_sets_kueues_label_and_suspends_until_admitted(tmp_path: Path) -> None:
    async with bare(tmp_path) as (cluster, scheduler):
        app_id = await scheduler.submit(app("js-kueue", 1), {**CFG, "queue": "team-a"})
        name = name_of(app_id)
        stored = await scheduler.api.get_job("default", name, "jobsets")
        assert stored is not None  # as the server stored it
        assert stored["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
        assert stored["spec"]["suspend"] is True
        pending = await scheduler.wait_for_state_change(app_id, AppState.SUBMITTED, timeout=30)
        assert pending is not None
        assert pending.state == AppState.PENDING
        assert pending.msg == (
            "waiting for Kueue to admit it from queue 'team-a' (the JobSet is suspended)"
        )
        assert pending.roles_statuses[0].replicas[0].state == AppState.PENDING
        await cluster.admit(name)
        await run_pod(cluster, app_id, "role0", 0, ("admitted",), 0)
        response = await scheduler.wait(app_id, timeout=60)
        assert response is not None
        assert response.state == AppState.SUCCEEDED
        assert [line async for line in scheduler.log_iter(app_id, "role0")] == ["admitted\n"]
        await scheduler.delete(app_id)


@pytest.mark.parametrize("queued", [False, True], ids=["no-queue", "kueue"])
async def test_a_jobset_pod_that_can_never_start_fails_the_app_and_is_stopped(
    tmp_path: Path, queued: bool
) -> None:
    async with bare(tmp_path) as (cluster, scheduler):
        cfg = {**CFG, "queue": "team-a"} if queued else CFG
        app_id = await scheduler.submit(app("js-badimage", 1), cfg)
        name = name_of(app_id)
        if queued:  # admitted once suspended (the stand-in wrote its Suspended condition)
            await scheduler.wait_for_state_change(app_id, AppState.SUBMITTED, timeout=30)
            await cluster.admit(name)
        pod = await cluster.jobset_pod(name, "role0", 0)
        await cluster.wait_pod(pod, "InvalidImageName", "invalid reference format")
        response = await scheduler.wait(app_id, timeout=60)
        assert response is not None
        assert response.state == AppState.FAILED
        assert response.msg == "role0/0 InvalidImageName: invalid reference format"
        # stopped: nothing of it holds a node or Kueue's quota, and it is kept
        stored = await scheduler.api.get_job("default", name, "jobsets")
        assert stored is not None
        assert stored["spec"]["suspend"] is True
        if queued:
            assert (await cluster.workload(name))["spec"]["active"] is False
        await cluster.jobset_pods_gone(name)
        # what a user sees afterwards: still FAILED with the reason, not an unknown app
        kept = await scheduler.describe(app_id)
        assert kept is not None
        assert (kept.state, kept.msg) == (AppState.FAILED, response.msg)
        listed = await scheduler.list(CFG)
        assert (app_id, AppState.FAILED) in [(each.app_id, each.state) for each in listed]
        lines = [line async for line in scheduler.log_iter(app_id, "role0", should_tail=True)]
        assert lines == []  # a follower ends: the app is over
        await scheduler.cancel(app_id)  # finished: a no-op, the JobSet stays
        assert await scheduler.describe(app_id) is not None
        await scheduler.delete(app_id)


async def test_a_cluster_without_jobset_raises_a_typed_error(tmp_path: Path) -> None:
    # the fake server: it has no JobSet API group, as a cluster without JobSet's CRD
    async with connected(tmp_path, fake_only="a cluster without the JobSet CRD") as (_, scheduler):
        with pytest.raises(JobSetNotInstalledError, match="JobSet is not installed"):
            await scheduler.submit(app("nojs", 1), CFG)
        with pytest.raises(JobSetNotInstalledError, match="job_api=volcano"):
            await scheduler.describe("default:jobset:nojs-x")


async def test_a_followed_log_goes_on_in_the_retried_pod(tmp_path: Path) -> None:
    async with bare(tmp_path) as (cluster, scheduler):
        retried = app("js-retry", 1)
        retried.roles[0].max_retries = 1
        retried.roles[0].retry_policy = RetryPolicy.REPLICA  # the Job's backoffLimit
        app_id = await scheduler.submit(retried, CFG)
        name = name_of(app_id)
        first = await cluster.jobset_pod(name, "role0", 0)
        await cluster.start_pod(first)
        lines: list[str] = []
        read = anyio.Event()

        async def follow() -> None:
            async for line in scheduler.log_iter(app_id, "role0", 0, should_tail=True):
                lines.append(line)
                read.set()

        async with anyio.create_task_group() as task_group:
            task_group.start_soon(follow)
            cluster.write_log(first, "first")
            await read.wait()
            await cluster.finish_pod(first, 1)  # the Job controller replaces the pod
            second = await cluster.jobset_pod(name, "role0", 0, other_than=first)
            await cluster.start_pod(second)
            cluster.write_log(second, "second")
            await cluster.finish_pod(second, 0)
        assert lines == ["first\n", "second\n"]
        response = await scheduler.wait(app_id, timeout=60)
        assert response is not None
        assert response.state == AppState.SUCCEEDED
        (replica,) = response.roles_statuses[0].replicas
        assert (replica.state, replica.exit_code) == (AppState.SUCCEEDED, 0)  # the new pod
        assert second != first
        await scheduler.delete(app_id)
