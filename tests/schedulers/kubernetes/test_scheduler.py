"""The ``kubernetes`` scheduler end to end, against the fake API server (or a real cluster)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
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
from asynctorchx.schedulers.kubernetes._jobapi import VOLCANO
from asynctorchx.schedulers.kubernetes_scheduler import KubernetesScheduler, create_scheduler
from asynctorchx.schedulers.toolkit import MAX_LINE_BYTES, STAMPED_START, LogQuery
from asynctorchx.specs import AppDef, AppState, Resource, RetryPolicy, Role
from asynctorchx.specs.overlays import JOIN, set_overlay
from tests.schedulers.kubernetes.conftest import IMAGE, connected
from tests.schedulers.kubernetes.fake_apiserver import FakeApiServer

CFG = {"queue": "default"}
#: Why some tests run on the fake server only.
RETRIES = "Volcano's retries (RestartJob) are its controller's logic, absent from a bare server"
BOOKMARK = "a real server sends bookmarks when it chooses; the fake sends one on demand"
LAGGING = "holding a watch's events back while the server moves on needs the fake"
WEBHOOK = (
    "a missing Volcano, and Volcano's admission webhook refusing a queue, need a server"
    " without the CRDs the other tests share, and a webhook"
)


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
    scheduler: KubernetesScheduler,
    app: AppDef,
    drive: Callable[[str], Awaitable[None]] | None = None,
) -> tuple[str, DescribeAppResponse | None]:
    app_id = await scheduler.submit(app, CFG)
    result: list[DescribeAppResponse | None] = []

    async def waiter() -> None:
        result.append(await scheduler.wait(app_id, timeout=60))

    async with anyio.create_task_group() as task_group:
        task_group.start_soon(waiter)
        if drive is not None:
            await drive(app_id)
    return app_id, result[0]


async def test_two_roles_succeed(tmp_path: Path) -> None:
    async with connected(tmp_path) as (cluster, scheduler):
        app = sh_app("two-roles", "echo trainer", "echo ps")

        async def drive(app_id: str) -> None:
            await cluster.run(app_id, "role0-0", ("trainer",))
            await cluster.run(app_id, "role1-0", ("ps",))

        app_id, response = await submit_and_wait(scheduler, app, drive)
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
        (listed,) = [app for app in await scheduler.list() if app.app_id == app_id]
        assert (listed.name, listed.state) == ("two-roles", AppState.SUCCEEDED)
        assert listed.submitted is not None  # the job's creationTimestamp
        assert listed.ended is not None  # its Completed phase's lastTransitionTime
        assert listed.submitted <= listed.ended
        await scheduler.delete(app_id)


async def test_failing_pod_fails_the_app_with_its_exit_code(tmp_path: Path) -> None:
    async with connected(tmp_path) as (cluster, scheduler):
        app = sh_app("fails", "exit 3")
        app_id, response = await submit_and_wait(
            scheduler, app, lambda app_id: cluster.run(app_id, "role0-0", exit_code=3)
        )
        assert response is not None
        assert response.state == AppState.FAILED
        (replica,) = response.roles_statuses[0].replicas
        assert (replica.state, replica.exit_code) == (AppState.FAILED, 3)
        await scheduler.delete(app_id)


async def test_retries_restart_the_job(tmp_path: Path) -> None:
    async with connected(tmp_path, fake_only=RETRIES) as (cluster, scheduler):
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
        await cluster.start(app_id, "role0-0")
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
    async with connected(tmp_path, proxy=True) as (cluster, scheduler):
        assert cluster.bare is not None
        assert cluster.proxy is not None
        app_id = await scheduler.submit(sh_app("gone", "true"), CFG)
        result: list[DescribeAppResponse | None] = []
        informer = scheduler.jobs(VOLCANO, "default")

        async def waiter() -> None:
            result.append(await scheduler.wait(app_id, timeout=60))

        async with anyio.create_task_group() as task_group:
            task_group.start_soon(waiter)
            await cluster.start(app_id, "role0-0")
            running = await scheduler.wait_for_state_change(app_id, AppState.PENDING, timeout=30)
            assert running is not None
            assert running.state == AppState.RUNNING
            watches = informer.watches
            assert cluster.proxy.cut() >= 1  # the watch reconnects from its last version
            # a changed CRD gets new storage: the server ends its watches, and a watch
            # from a version older than the new watch cache gets 410
            await cluster.bare.renew_job_storage()
            await cluster.finish(app_id, "role0-0")
        assert result[0] is not None
        assert result[0].state == AppState.SUCCEEDED
        assert informer.watches > watches
        assert informer.lists >= 2  # listed again after the 410


async def test_wait_for_state_change_returns_on_each_change(tmp_path: Path) -> None:
    async with connected(tmp_path) as (cluster, scheduler):
        app_id = await scheduler.submit(sh_app("changes", "sleep 5"), CFG)
        pending = await scheduler.wait_for_state_change(app_id, AppState.SUBMITTED, timeout=30)
        assert pending is not None
        assert pending.state == AppState.PENDING
        await cluster.start(app_id, "role0-0")
        running = await scheduler.wait_for_state_change(app_id, AppState.PENDING, timeout=60)
        assert running is not None
        assert running.state == AppState.RUNNING
        await cluster.finish(app_id, "role0-0")
        await scheduler.delete(app_id)


async def test_wait_for_state_change_answers_a_new_state_while_the_watch_lags(
    tmp_path: Path,
) -> None:
    """The fresh read behind the answer can be ahead of the watches' cache; the answer is
    still a state other than the one the caller last saw (what ``Runner.watch`` relies on)."""
    async with connected(tmp_path, fake_only=LAGGING) as (cluster, scheduler):
        fake = cluster.fake
        assert fake is not None
        app_id = await scheduler.submit(sh_app("lag", "sleep 5"), CFG)
        pending = await scheduler.wait_for_state_change(app_id, AppState.SUBMITTED, timeout=10)
        assert pending is not None
        assert pending.state == AppState.PENDING
        finished: list[DescribeAppResponse | None] = []
        changed: list[DescribeAppResponse | None] = []

        async def wait() -> None:  # keeps the watches open, so their cache can lag
            finished.append(await scheduler.wait(app_id, timeout=10))

        async def wait_for_change() -> None:
            changed.append(
                await scheduler.wait_for_state_change(app_id, AppState.RUNNING, timeout=10)
            )

        def pod_list(method: str, path: str) -> bool:
            return method == "GET" and "/pods?" in path and "watch=" not in path

        async with anyio.create_task_group() as task_group:
            task_group.start_soon(wait)
            await fake.wait_for_streams("jobs")
            await fake.wait_for_streams("pods")
            with fake.watches_held():
                fake.start_pod(cluster.pod(app_id, "role0-0"))  # the cache still says PENDING
                lists = fake.count(pod_list)
                task_group.start_soon(wait_for_change)
                await fake.wait_for_requests(pod_list, lists + 1)  # its fresh read: RUNNING
            fake.finish_pod(cluster.pod(app_id, "role0-0"), 0)
        assert [response and response.state for response in changed] == [AppState.SUCCEEDED]
        assert [response and response.state for response in finished] == [AppState.SUCCEEDED]


async def test_a_bookmark_is_not_a_change(tmp_path: Path) -> None:
    async with connected(tmp_path, fake_only=BOOKMARK) as (cluster, scheduler):
        fake = cluster.fake
        assert fake is not None
        app_id = await scheduler.submit(sh_app("changes", "true"), CFG)
        pending = await scheduler.wait_for_state_change(app_id, AppState.SUBMITTED, timeout=10)
        assert pending is not None
        fake.bookmark()
        fake.start_pod(cluster.pod(app_id, "role0-0"))
        running = await scheduler.wait_for_state_change(app_id, AppState.PENDING, timeout=10)
        assert running is not None
        assert running.state == AppState.RUNNING


async def test_log_follow_resumes_after_a_dropped_connection(tmp_path: Path) -> None:
    async with connected(tmp_path, proxy=True) as (cluster, scheduler):
        assert cluster.bare is not None
        assert cluster.proxy is not None
        app_id = await scheduler.submit(sh_app("logs", "seq 6"), CFG)
        await cluster.start(app_id, "role0-0")
        await cluster.write_log(app_id, "role0-0", "1", "2", "3", same_time=True)
        lines: list[str] = []
        three = anyio.Event()

        async def follow() -> None:
            async for line in scheduler.log_iter(app_id, "role0", 0, should_tail=True):
                lines.append(line)
                if len(lines) == 3:
                    three.set()

        kubelet = cluster.bare.kubelet
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(follow)
            await three.wait()
            follows = len(kubelet.requests)
            assert cluster.proxy.cut() >= 1
            await cluster.write_log(app_id, "role0-0", "4", same_time=True)  # same time as 1..3
            await cluster.write_log(app_id, "role0-0", "5", "6")
            await kubelet.wait_for_requests(follows + 1)  # the follower came back
            await cluster.finish(app_id, "role0-0")
        assert lines == [f"{n}\n" for n in range(1, 7)]
        # through the real server's log proxy, with what it forwards to the kubelet
        assert all("timestamps=true" in request for request in kubelet.requests)
        assert any("sinceTime=" in request for request in kubelet.requests[follows:])
        await scheduler.delete(app_id)


async def test_a_line_over_the_bound_comes_in_pieces_that_resume_exactly(tmp_path: Path) -> None:
    async with connected(tmp_path) as (cluster, scheduler):
        app_id = await scheduler.submit(sh_app("toolong", "true"), CFG)
        long = "é" * (5 << 20)  # 10 MiB of 2-byte characters, no byte lost or added
        await cluster.run(app_id, "role0-0", ("before", long, "after"))
        assert await scheduler.wait(app_id, timeout=60) is not None
        query = LogQuery("role0", 0)
        blocks = [block async for block in scheduler.log_blocks(app_id, query)]
        lines = [line for _, block in blocks for line in block]
        assert lines[0] == "before\n"
        assert lines[-1] == "after\n"
        pieces = lines[1:-1]
        assert len(pieces) == 3  # the toolkit's rule: at most MAX_LINE_BYTES each
        assert all(len(piece.encode()) <= MAX_LINE_BYTES for piece in pieces)
        assert all(not piece.endswith("\n") for piece in pieces[:-1])
        assert "".join(pieces) == long + "\n"
        # a resume from any block's position gives exactly the lines (pieces) from that
        # block on; past the first, the kubelet is asked from the block's time on
        offset = 0
        for at, block in blocks:
            requests = len(cluster.bare.kubelet.requests) if cluster.bare is not None else 0
            again = [
                line
                async for _, again_block in scheduler.log_blocks(app_id, query, at)
                for line in again_block
            ]
            assert again == lines[offset:]
            if cluster.bare is not None:
                (request,) = cluster.bare.kubelet.requests[requests:]
                assert ("sinceTime=" in request) == (at != STAMPED_START)
            offset += len(list(block))
        assert len(blocks) > 1
        await scheduler.delete(app_id)


async def test_log_filters(tmp_path: Path) -> None:
    async with connected(tmp_path) as (cluster, scheduler):
        app_id = await scheduler.submit(
            sh_app("filters", "echo apple; echo banana; echo avocado"), CFG
        )
        await cluster.run(app_id, "role0-0", ("apple", "banana", "avocado"))
        assert await scheduler.wait(app_id, timeout=60) is not None
        assert [line async for line in scheduler.log_iter(app_id, "role0", regex="^a")] == [
            "apple\n",
            "avocado\n",
        ]
        with pytest.raises(ValueError, match="replicas"):
            [line async for line in scheduler.log_iter(app_id, "role0", k=1)]
        await scheduler.delete(app_id)


async def test_100_apps_share_one_watch_per_kind(tmp_path: Path) -> None:
    async with connected(tmp_path) as (cluster, scheduler):
        app_ids = [await scheduler.submit(sh_app(f"many{n}", "true"), CFG) for n in range(100)]
        results: dict[str, AppState] = {}
        jobs, pods = scheduler.jobs(VOLCANO, "default"), scheduler.pods("default")

        async def waiter(app_id: str) -> None:
            response = await scheduler.wait(app_id, timeout=120)
            assert response is not None
            results[app_id] = response.state

        async with anyio.create_task_group() as task_group:
            for app_id in app_ids:
                task_group.start_soon(waiter, app_id)
            for app_id in app_ids:
                await cluster.finish(app_id, "role0-0")
        assert set(results.values()) == {AppState.SUCCEEDED}
        assert len(results) == 100
        assert jobs.lists <= 2
        assert pods.lists <= 2
        for app_id in app_ids:
            await scheduler.delete(app_id)


async def test_an_image_that_can_never_be_pulled_fails_the_app_with_the_reason(
    tmp_path: Path,
) -> None:
    async with connected(tmp_path) as (cluster, scheduler):
        app = sh_app("badimage", "true")
        app.roles[0].image = "Not/A:Valid:Image"
        app_id = await scheduler.submit(app, CFG)
        why = 'couldn\'t parse image reference "Not/A:Valid:Image": invalid reference format'
        await cluster.cannot_start(app_id, "role0-0", "InvalidImageName", why)
        response = await scheduler.wait(app_id, timeout=60)
        assert response is not None
        assert response.state == AppState.FAILED
        assert response.msg.startswith("role0/0 InvalidImageName: ")
        # wait aborted the job: nothing of it stays pending, and the reason stays
        job = await scheduler.api.get_job("default", app_id.partition(":")[2])
        assert job is not None
        assert job["metadata"]["annotations"]["asynctorchx/failed"] == response.msg
        # the pods go with the abort; the app still reads FAILED with the reason
        for kept in (await scheduler.wait(app_id, timeout=60), await scheduler.describe(app_id)):
            assert kept is not None
            assert (kept.state, kept.msg) == (AppState.FAILED, response.msg)
        # list says the same (it reads the job alone, not its pods)
        (listed,) = [app for app in await scheduler.list() if app.app_id == app_id]
        assert listed.state == AppState.FAILED
        await scheduler.delete(app_id)


async def test_a_failing_pull_shows_then_fails_the_app_after_the_timeout(tmp_path: Path) -> None:
    async with connected(tmp_path) as (cluster, scheduler):
        app = sh_app("nopull", "true")
        app.roles[0].image = "registry.invalid/none:1"
        app_id = await scheduler.submit(app, {**CFG, "image_pull_timeout": 3})
        why = 'Back-off pulling image "registry.invalid/none:1"'
        await cluster.cannot_start(app_id, "role0-0", "ImagePullBackOff", why)
        shown = await scheduler.describe(app_id)
        assert shown is not None
        if shown.state == AppState.PENDING:  # read within the 3 s
            assert shown.msg == f"role0/0 ImagePullBackOff: {why}"
        # no event marks the timeout: wait awaits its deadline
        response = await scheduler.wait(app_id, timeout=60)
        assert response is not None
        assert response.state == AppState.FAILED
        assert "image pull timeout (3 s)" in response.msg
        await scheduler.delete(app_id)


async def test_an_unschedulable_pod_shows_why_and_stays_pending(tmp_path: Path) -> None:
    async with connected(tmp_path) as (cluster, scheduler):
        app = sh_app("toobig", "true")
        app.roles[0].resource = Resource(cpu=4096, gpu=0, memMB=1024)
        app_id = await scheduler.submit(app, CFG)
        why = "0/1 nodes are available: 1 Insufficient cpu."
        await cluster.cannot_start(app_id, "role0-0", "Unschedulable", why)
        response = await scheduler.wait_for_state_change(app_id, AppState.SUBMITTED, timeout=60)
        assert response is not None
        assert response.state == AppState.PENDING  # a node may join: not an end
        described = await scheduler.describe(app_id)
        assert described is not None
        assert described.msg.startswith("role0/0 Unschedulable: ")
        assert (
            described.roles_statuses[0]
            .replicas[0]
            .structured_error_msg.startswith("Unschedulable: ")
        )
        await scheduler.delete(app_id)


async def test_a_pod_overlay_reaches_the_pods_the_server_accepts(tmp_path: Path) -> None:
    async with connected(tmp_path) as (cluster, scheduler):
        app = sh_app("overlay", "true")
        overlay = {
            "spec": {
                "nodeSelector": {"accelerator": "a100"},
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "volumes": [{"name": "scratch", "emptyDir": {}}],
                JOIN("containers", on="name"): [
                    {"name": "role0-0", "volumeMounts": [{"name": "scratch", "mountPath": "/x"}]}
                ],
            }
        }
        set_overlay(app.roles[0], "kubernetes", "V1Pod", overlay)
        app_id = await scheduler.submit(app, CFG)
        pending = await scheduler.wait_for_state_change(app_id, AppState.SUBMITTED, timeout=60)
        assert pending is not None
        namespace, name = app_id.split(":")
        job = await scheduler.api.get_job(namespace, name)
        assert job is not None  # the server stored the overlaid template as it was sent
        spec = job["spec"]["tasks"][0]["template"]["spec"]
        assert spec["nodeSelector"] == {"accelerator": "a100"}
        assert spec["volumes"][-1] == {"name": "scratch", "emptyDir": {}}
        mounts = spec["containers"][0]["volumeMounts"]
        assert {"name": "scratch", "mountPath": "/x"} in mounts
        if cluster.bare is not None:  # the server validated and created the pod from it
            pod = await cluster.bare.get_pod(cluster.pod(app_id, "role0-0"))
            assert pod is not None
            assert pod["spec"]["tolerations"][0]["key"] == "gpu"
        await scheduler.delete(app_id)


async def test_bad_input_raises_typed_errors(tmp_path: Path) -> None:
    missing = KubernetesScheduler("test", kubeconfig=str(tmp_path / "nope"))
    with pytest.raises(KubernetesConfigError, match="nope"):
        await missing.list()
    await missing.close()

    # the fake server: WEBHOOK
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
    assert "queue" in scheduler.run_opts()


def test_runs_under_trio_too(tmp_path: Path) -> None:
    async def main() -> AppState:
        async with connected(tmp_path) as (cluster, scheduler):
            app_id = await scheduler.submit(sh_app("trio", "true"), CFG)
            await cluster.finish(app_id, "role0-0")
            response = await scheduler.wait(app_id, timeout=60)
            assert response is not None
            await scheduler.delete(app_id)
            return response.state

    assert anyio.run(main, backend="trio") == AppState.SUCCEEDED


async def test_the_logs_of_every_container_follow_the_replicas_own_led_by_their_name(
    tmp_path: Path,
) -> None:
    async with connected(tmp_path) as (cluster, scheduler):
        app = sh_app("sidecars", "echo main1; echo main2")
        sidecars = [
            {"name": name, "image": IMAGE, "command": ["sh", "-c", f"echo {name}1"]}
            for name in ("side-a", "side-b")
        ]
        set_overlay(app.roles[0], "kubernetes", "V1Pod", {"spec": {"containers": sidecars}})
        app_id = await scheduler.submit(app, CFG)
        await cluster.start(app_id, "role0-0")
        if cluster.bare is not None:
            pod = await cluster.bare.get_pod(cluster.pod(app_id, "role0-0"))
            assert pod is not None
            names = [container["name"] for container in pod["spec"]["containers"]]
            assert names == ["role0-0", "side-a", "side-b"]
        await cluster.write_log(app_id, "role0-0", "main1", "main2", container="role0-0")
        for name in ("side-a", "side-b"):
            await cluster.write_log(app_id, "role0-0", f"{name}1", container=name)
        await cluster.finish(app_id, "role0-0")
        ended = await scheduler.wait(app_id, timeout=60)
        assert ended is not None
        assert ended.state == AppState.SUCCEEDED
        lines = ["main1\n", "main2\n", "side-a side-a1\n", "side-b side-b1\n"]
        assert [line async for line in scheduler.log_iter(app_id, "role0")] == lines
        followed = scheduler.log_iter(app_id, "role0", should_tail=True)
        assert [line async for line in followed] == lines
        # the regex is matched without the container's name (TorchX's order)
        matched = scheduler.log_iter(app_id, "role0", regex="^(main|side-b)1")
        assert [line async for line in matched] == ["main1\n", "side-b side-b1\n"]
        # a resume from any block's position gives the lines from that block on
        query = LogQuery("role0", 0)
        blocks = [block async for block in scheduler.log_blocks(app_id, query)]
        offset = 0
        for at, block in blocks:
            again = [
                line
                async for _, again_block in scheduler.log_blocks(app_id, query, at)
                for line in again_block
            ]
            assert again == lines[offset:]
            offset += len(list(block))
        assert offset == len(lines)
        await scheduler.delete(app_id)
