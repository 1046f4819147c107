"""The ``kubernetes`` scheduler on a real node: pods that really run.

``scripts/kube-cluster.sh start`` runs etcd, the API server, and a node: kubelet,
kube-scheduler, kube-controller-manager and kube-proxy on containerd's CRI with CNI. Here
the scheduler, kubelet, container runtime, networking and log stream are all real; the one
STAND-INS are Volcano's job controller (:class:`VolcanoStandIn` with no node of its own: it
creates a pod per task, which the real scheduler places, moves the job's phase as the
pods move, and retries a failed pod as Volcano does) and JobSet's with the Job
controller's pod retries (:class:`JobSetStandIn`, likewise). The kubelet's reasons
(``ErrImagePull``, ``OOMKilled``, ``CrashLoopBackOff``), the scheduler's
(``Unschedulable``) and the exit codes are the node's own. The DDP test adds a STAND-IN for
the cluster's DNS server (:class:`~.cluster_dns.ClusterDns`, what CoreDNS answers for a
headless Service's pods), and the Volcano stand-in does its ``svc`` plugin's part (the
Service, the ``VC_{TASK}_HOSTS`` variables); the pod network, Endpoints and resolvers are real.

Without ``ASYNCTORCHX_KUBE_NODE_KUBECONFIG`` these tests are skipped with the command that
provides a node, and fail under ``ASYNCTORCHX_REQUIRE_KUBERNETES_NODE=1``. A failing test
names each pod left, the kubelet's reason and the command that shows the node's logs.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, NoReturn

import anyio
import httpx2
import pytest

from asynctorchx.errors import KubernetesUnreachableError, SchedulerUnavailableError
from asynctorchx.runner import LogEvent, Runner, StateEvent, get_runner
from asynctorchx.schedulers.api import DescribeAppResponse
from asynctorchx.schedulers.kubernetes._apiserver import MAX_REQUESTS
from asynctorchx.schedulers.kubernetes_scheduler import KubernetesScheduler
from asynctorchx.schedulers.toolkit import LogQuery
from asynctorchx.specs import AppDef, AppState, BindMount, Resource, RetryPolicy, Role
from asynctorchx.specs.api import parse_app_handle
from asynctorchx.specs.overlays import set_overlay
from tests.engine_restart import through_restart
from tests.isolation import isolate_from_user_config
from tests.schedulers.kubernetes.bare_cluster import (
    JobSetStandIn,
    LoopbackProxy,
    VolcanoStandIn,
    exclusive,
    http_client,
    install_crds,
    server_port,
    through,
)
from tests.schedulers.kubernetes.cluster_dns import ClusterDns, NodeDns, node_dns
from tests.schedulers.kubernetes.test_workspace import require_registry

NODE_KUBECONFIG = os.environ.get("ASYNCTORCHX_KUBE_NODE_KUBECONFIG")
#: An image on the node (``kube-cluster.sh load``), with a tag the kubelet does not pull.
IMAGE = os.environ.get("ASYNCTORCHX_KUBE_NODE_IMAGE", "asynctorchx-test/busybox:node")
START_NODE = (
    "export ASYNCTORCHX_KUBE_NODE_KUBECONFIG=$(bash scripts/kube-cluster.sh start | tail -n 1)"
    f" && docker tag asynctorchx-test/busybox:latest {IMAGE}"
    f" && bash scripts/kube-cluster.sh load {IMAGE} (as root)"
)
NODE_LOGS = "the node's logs: bash scripts/kube-cluster.sh logs"
CFG = {"queue": "default"}
#: ``job_api=jobset`` (no ``queue``: that is Kueue's, which would keep the JobSet suspended).
JOBSET_CFG = {"job_api": "jobset"}
NAMESPACE = "default"
#: Seconds an app may take on the node, from submit to its end (a loaded 2-core machine).
WAIT_S = 180
#: The DDP test's image: Debian, Python and PyTorch CPU, as scripts/kube-torch-image.sh builds it.
TORCH_IMAGE = os.environ.get(
    "ASYNCTORCHX_KUBE_NODE_TORCH_IMAGE", "asynctorchx-test/torch:2.13.0-node"
)
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
#: Seconds for ``dist.ddp -j 2x1``: two imports of torch and a rendezvous on 2 shared cores.
DDP_WAIT_S = 300


def missing(reason: str) -> NoReturn:
    """Skip for want of ``reason``'s part of the node (fail under the requirement)."""
    if os.environ.get("ASYNCTORCHX_REQUIRE_KUBERNETES_NODE") == "1":
        pytest.fail(f"ASYNCTORCHX_REQUIRE_KUBERNETES_NODE=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def require_node() -> str:
    """The node cluster's kubeconfig; skip without one (fail under the requirement)."""
    if not NODE_KUBECONFIG:
        missing(f"no Kubernetes node for these tests: {START_NODE}")
    return NODE_KUBECONFIG


def _why(pod: dict[str, Any]) -> str:
    """The pod's phase and the scheduler's or the kubelet's reason, as one line."""
    status = pod.get("status") or {}
    parts = [f"pod {pod['metadata']['name']}: {status.get('phase')}"]
    for condition in status.get("conditions") or []:
        derived = condition["type"] in ("Ready", "ContainersReady")  # from the containers'
        if condition["status"] == "False" and condition.get("reason") and not derived:
            parts.append(f"{condition['type']} {condition['reason']}: {condition.get('message')}")
    for container in status.get("containerStatuses") or []:
        states = [("", container.get("state") or {}), ("last ", container.get("lastState") or {})]
        for when, container_state in states:
            for kind, state in container_state.items():
                detail = state.get("reason") or ""
                if "exitCode" in state:
                    detail += f" exit code {state['exitCode']}"
                if state.get("message"):
                    detail += f": {state['message']}"
                parts.append(f"container {container['name']} {when}{kind} {detail}".rstrip())
    return "; ".join(parts)


class Node:
    """The node cluster as the tests see it: its pods, read through the API server.

    Args:
        http: a client to the API server (admin credentials).
    """

    def __init__(self, http: httpx2.AsyncClient) -> None:
        self.http = http
        self.pods_path = f"/api/v1/namespaces/{NAMESPACE}/pods"

    async def pod(self, app_id: str, task: str) -> dict[str, Any]:
        """The pod of ``task`` (``{role}-{replica}``) of the app."""
        name = f"{app_id.partition(':')[2]}-{task}-0"
        response = await self.http.get(f"{self.pods_path}/{name}")
        response.raise_for_status()
        return dict(response.json())

    async def deleted(self, scheduler: KubernetesScheduler, *app_ids: str) -> None:
        """Delete the apps (of one job API); return once their pods are gone (the kubelet
        confirmed their containers stopped), awaited on a watch of the jobs' pods."""
        async with anyio.create_task_group() as task_group:
            for app_id in app_ids:
                task_group.start_soon(scheduler.delete, app_id)
        names = ",".join(app_id.rpartition(":")[2] for app_id in app_ids)
        jobset = ":jobset:" in app_ids[0]
        label = "jobset.sigs.k8s.io/jobset-name" if jobset else "volcano.sh/job-name"
        params = {"labelSelector": f"{label} in ({names})"}
        while True:
            listed = (await self.http.get(self.pods_path, params=params)).json()
            left = {pod["metadata"]["name"] for pod in listed["items"]}
            if not left:
                return
            version = listed["metadata"]["resourceVersion"]
            watch = {**params, "watch": "true", "resourceVersion": version}
            async with self.http.stream("GET", self.pods_path, params=watch) as response:
                async for line in response.aiter_lines():
                    event = json.loads(line)
                    if event["type"] == "DELETED":
                        left.discard(event["object"]["metadata"]["name"])
                    if not left or event["type"] == "ERROR":
                        break

    async def report(self) -> str:
        """Every pod left in the namespace with its reason, and where the node's logs are."""
        response = await self.http.get(self.pods_path)
        lines = [_why(pod) for pod in response.json().get("items", [])] or ["no pod left"]
        return "\n".join([*lines, NODE_LOGS])

    async def clear(self) -> None:
        """Delete the namespace's Volcano jobs, JobSets and their pods (what a failed test
        left), so that the next test's report names its own pods only."""
        await self.http.delete(f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NAMESPACE}/jobs")
        await self.http.delete(f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NAMESPACE}/jobsets")
        for label in ("volcano.sh/job-name", "jobset.sigs.k8s.io/jobset-name"):
            await self.http.delete(self.pods_path, params={"labelSelector": label})

    async def until(
        self, app_id: str, task: str, holds: Callable[[dict[str, Any] | None], bool]
    ) -> None:
        """Return once the pod of ``task`` (``{role}-{replica}``) of the app satisfies
        ``holds`` (given ``None`` once it is gone), awaited on a watch of the pod."""
        name = f"{app_id.partition(':')[2]}-{task}-0"
        params = {"fieldSelector": f"metadata.name={name}"}
        while True:
            listed = (await self.http.get(self.pods_path, params=params)).json()
            if holds(listed["items"][0] if listed["items"] else None):
                return
            watch = {
                **params,
                "watch": "true",
                "resourceVersion": listed["metadata"]["resourceVersion"],
            }
            async with self.http.stream("GET", self.pods_path, params=watch) as response:
                async for line in response.aiter_lines():
                    event = json.loads(line)
                    if event["type"] == "ERROR":
                        break
                    if holds(None if event["type"] == "DELETED" else event["object"]):
                        return


def waiting_reason(pod: dict[str, Any] | None) -> str | None:
    """The pod's container's waiting reason (``ErrImagePull``...), or ``None``."""
    for container in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting")
        if waiting:
            return str(waiting.get("reason"))
    return None


def unschedulable(pod: dict[str, Any] | None) -> bool:
    conditions = ((pod or {}).get("status") or {}).get("conditions") or []
    return any(
        c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions
    )


@contextlib.asynccontextmanager
async def on_node(
    proxy: LoopbackProxy | None = None,
) -> AsyncIterator[tuple[Node, KubernetesScheduler]]:
    """The node cluster, Volcano's stand-in running, and a scheduler connected to it (through
    ``proxy``, which counts its connections, when given); a failure in the block gets the
    pods' reasons and the node's logs as a note."""
    kubeconfig = require_node()
    async with contextlib.AsyncExitStack() as stack:
        used = kubeconfig
        if proxy is not None:  # entered first, so that it ends after the stand-ins
            proxy.upstream = server_port(kubeconfig)
            await stack.enter_async_context(proxy.serving())
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            used = through(kubeconfig, proxy.port, directory)
        async with (
            exclusive(),
            http_client(kubeconfig) as http,
            anyio.create_task_group() as task_group,
        ):
            await install_crds(http)
            await task_group.start(VolcanoStandIn(http, NAMESPACE, node=None).run)
            await task_group.start(JobSetStandIn(http, NAMESPACE, node=None).run)
            node = Node(http)
            try:
                scheduler = KubernetesScheduler("test", kubeconfig=used)
                async with scheduler:
                    yield node, scheduler
            except Exception as error:
                error.add_note(await node.report())
                await node.clear()
                raise
            finally:
                task_group.cancel_scope.cancel()


def sh_app(name: str, script: str, *, replicas: int = 1, image: str = IMAGE) -> AppDef:
    role = Role(
        name="role0", image=image, entrypoint="sh", args=["-c", script], num_replicas=replicas
    )
    return AppDef(name=name, roles=[role])


async def ended(scheduler: KubernetesScheduler, app_id: str) -> DescribeAppResponse:
    response = await scheduler.wait(app_id, timeout=WAIT_S)
    assert response is not None
    return response


async def test_an_app_succeeds_on_the_node_with_the_kubelets_log() -> None:
    async with on_node() as (node, scheduler):
        app_id = await scheduler.submit(sh_app("hello", "echo hello; echo world"), CFG)
        response = await ended(scheduler, app_id)
        assert response.state == AppState.SUCCEEDED
        (replica,) = response.roles_statuses[0].replicas
        assert (replica.state, replica.exit_code) == (AppState.SUCCEEDED, 0)
        lines = [line async for line in scheduler.log_iter(app_id, "role0", 0)]
        assert lines == ["hello\n", "world\n"]
        await node.deleted(scheduler, app_id)


async def test_a_failing_container_fails_the_app_with_its_exit_code() -> None:
    async with on_node() as (node, scheduler):
        app_id = await scheduler.submit(sh_app("fails", "echo dying >&2; exit 3"), CFG)
        response = await ended(scheduler, app_id)
        assert response.state == AppState.FAILED
        (replica,) = response.roles_statuses[0].replicas
        assert (replica.state, replica.exit_code) == (AppState.FAILED, 3)
        await node.deleted(scheduler, app_id)


async def test_cancel_stops_both_replicas_and_delete_leaves_no_pod() -> None:
    async with on_node() as (node, scheduler):
        # sh as a container's pid 1 ends on TERM only with a handler
        app = sh_app("cancel", "trap 'exit 143' TERM; sleep 600 & wait", replicas=2)
        app_id = await scheduler.submit(app, CFG)
        for replica in range(2):
            await node.until(
                app_id,
                f"role0-{replica}",
                lambda pod: (pod or {}).get("status", {}).get("phase") == "Running",
            )
        await scheduler.cancel(app_id)
        response = await ended(scheduler, app_id)
        assert response.state == AppState.CANCELLED
        # a pod object goes once the kubelet confirmed its containers stopped
        for replica in range(2):
            await node.until(app_id, f"role0-{replica}", lambda pod: pod is None)
        await node.deleted(scheduler, app_id)
        assert await scheduler.describe(app_id) is None


async def test_a_missing_image_shows_the_kubelets_reason_then_fails_after_the_timeout() -> None:
    async with on_node() as (node, scheduler):
        # a registry on a closed loopback port: the pull fails with no lookup off the machine
        app = sh_app("nopull", "true", image="127.0.0.1:1/none:1")
        app_id = await scheduler.submit(app, {**CFG, "image_pull_timeout": 5})
        await node.until(
            app_id,
            "role0-0",
            lambda pod: waiting_reason(pod) in ("ErrImagePull", "ImagePullBackOff"),
        )
        response = await ended(scheduler, app_id)
        assert response.state == AppState.FAILED
        assert response.msg.startswith("role0/0 ")
        assert "Image" in response.msg  # ErrImagePull or ImagePullBackOff
        assert "for longer than the image pull timeout (5 s)" in response.msg
        await node.deleted(scheduler, app_id)


async def test_a_request_larger_than_the_node_is_unschedulable_with_the_schedulers_message() -> (
    None
):
    async with on_node() as (node, scheduler):
        app = sh_app("toobig", "true")
        app.roles[0].resource = Resource(cpu=4096, gpu=0, memMB=64)
        app_id = await scheduler.submit(app, CFG)
        await node.until(app_id, "role0-0", unschedulable)
        described = await scheduler.describe(app_id)
        assert described is not None
        assert described.state == AppState.PENDING  # a node may join: not an end
        assert described.msg.startswith("role0/0 Unschedulable: 0/1 nodes are available")
        assert "Insufficient cpu" in described.msg
        await node.deleted(scheduler, app_id)


async def test_log_iter_follows_the_kubelets_stream_until_the_container_ends(
    tmp_path: Path,
) -> None:
    async with on_node() as (node, scheduler):
        tmp_path.chmod(0o777)
        app = sh_app("follow", "echo 1; until [ -e /gate/go ]; do sleep 0.1; done; echo 2")
        app.roles[0].mounts = [BindMount(src_path=str(tmp_path), dst_path="/gate")]
        app_id = await scheduler.submit(app, CFG)
        lines = []
        async for line in scheduler.log_iter(app_id, "role0", 0, should_tail=True):
            lines.append(line)
            if line == "1\n":  # the container waits for this file: line 1 came while it ran
                (tmp_path / "go").touch()
        assert lines == ["1\n", "2\n"]
        response = await ended(scheduler, app_id)
        assert response.state == AppState.SUCCEEDED
        await node.deleted(scheduler, app_id)


@pytest.mark.parametrize("cfg", [CFG, JOBSET_CFG], ids=["volcano", "jobset"])
async def test_log_iter_reads_a_sidecars_log_after_the_replicas_own(cfg: dict[str, str]) -> None:
    async with on_node() as (node, scheduler):
        app = sh_app("sidecar", "echo main1; echo main2")
        sidecar = {"name": "side", "image": IMAGE, "command": ["sh", "-c", "echo side1"]}
        set_overlay(app.roles[0], "kubernetes", "V1Pod", {"spec": {"containers": [sidecar]}})
        app_id = await scheduler.submit(app, cfg)
        lines = ["main1\n", "main2\n", "side side1\n"]
        followed = [line async for line in scheduler.log_iter(app_id, "role0", should_tail=True)]
        assert followed == lines
        assert (await ended(scheduler, app_id)).state == AppState.SUCCEEDED
        query = LogQuery("role0", 0)
        blocks = [block async for block in scheduler.log_blocks(app_id, query)]
        assert [line for _, block in blocks for line in block] == lines
        side_at = next(at for at, block in blocks if "side side1\n" in block)
        again = [line async for _, b in scheduler.log_blocks(app_id, query, side_at) for line in b]
        assert again == ["side side1\n"]
        await node.deleted(scheduler, app_id)


@pytest.mark.docker
async def test_a_workspace_pushed_to_the_loopback_registry_runs_on_the_node(
    tmp_path: Path,
) -> None:
    require_node()  # its skip first: the registry is of no use without a node
    repo = f"{require_registry()}/asynctorchx-test/node-workspace"
    (tmp_path / "hello.txt").write_text("hello from the workspace\n")
    async with on_node() as (node, scheduler):
        app = sh_app("workspace", "cat hello.txt")
        cfg = {**CFG, "image_repo": repo}
        app_id = await scheduler.submit(app, cfg, workspace=str(tmp_path))
        try:
            assert app.roles[0].image.startswith(f"{repo}:")  # the kubelet pulls it from there
            response = await ended(scheduler, app_id)
            assert response.state == AppState.SUCCEEDED
            lines = [line async for line in scheduler.log_iter(app_id, "role0", 0)]
            assert lines == ["hello from the workspace\n"]
            await node.deleted(scheduler, app_id)
        finally:
            subprocess.run(["docker", "rmi", app.roles[0].image], capture_output=True, check=False)


async def test_a_container_over_its_memory_limit_fails_the_app_with_the_kernels_kill() -> None:
    async with on_node() as (node, scheduler):
        # dd holds one 256 MiB block in memory: over the 64 MB the role's resource limits
        app = sh_app("oom", "dd if=/dev/zero of=/dev/null bs=256M count=1")
        app.roles[0].resource = Resource(cpu=1, gpu=0, memMB=64)
        app_id = await scheduler.submit(app, CFG)
        response = await ended(scheduler, app_id)
        assert response.state == AppState.FAILED
        (replica,) = response.roles_statuses[0].replicas
        assert (replica.state, replica.exit_code) == (AppState.FAILED, 137)  # SIGKILL
        # the kubelet's reason, in the replica's and the app's message
        assert replica.structured_error_msg == "OOMKilled (exit code 137)"
        assert response.msg == "role0/0 OOMKilled (exit code 137)"
        await node.deleted(scheduler, app_id)


async def test_a_container_the_kubelet_restarts_shows_its_crash_loop_and_last_end() -> None:
    async with on_node() as (node, scheduler):
        app = sh_app("crashloop", "echo crashing; exit 1")
        # a pod overlay's OnFailure: the kubelet, not Volcano, restarts the container
        set_overlay(app.roles[0], "kubernetes", "V1Pod", {"spec": {"restartPolicy": "OnFailure"}})
        app_id = await scheduler.submit(app, CFG)
        await node.until(app_id, "role0-0", lambda pod: waiting_reason(pod) == "CrashLoopBackOff")
        described = await scheduler.describe(app_id)
        assert described is not None
        assert described.state == AppState.RUNNING  # the kubelet keeps restarting it
        (replica,) = described.roles_statuses[0].replicas
        why = replica.structured_error_msg
        assert why.startswith("CrashLoopBackOff: back-off "), why
        assert why.endswith(" (last end: Error (exit code 1))"), why
        assert described.msg == f"role0/0 {why}"
        await node.deleted(scheduler, app_id)


#: Fails its first run (after the file ``go`` appears in /gate, so a follower reads
#: ``first`` while it runs), succeeds its second: a retry's.
RETRIED = (
    "if [ -e /gate/failed ]; then echo second; exit 0; fi; touch /gate/failed; echo first;"
    " until [ -e /gate/go ]; do sleep 0.1; done; exit 1"
)


def retried_app(name: str, gate: Path, policy: RetryPolicy) -> AppDef:
    """:data:`RETRIED` with one retry under ``policy``, ``gate`` mounted at /gate."""
    gate.chmod(0o777)
    app = sh_app(name, RETRIED)
    app.roles[0].mounts = [BindMount(src_path=str(gate), dst_path="/gate")]
    app.roles[0].max_retries = 1
    app.roles[0].retry_policy = policy
    return app


async def assert_retried_once(
    scheduler: KubernetesScheduler, app_id: str, restarts: int = 1
) -> None:
    """The app succeeded in its retry: ``restarts`` as its job API counts them."""
    response = await ended(scheduler, app_id)
    assert (response.state, response.num_restarts) == (AppState.SUCCEEDED, restarts)
    (replica,) = response.roles_statuses[0].replicas
    assert (replica.state, replica.exit_code) == (AppState.SUCCEEDED, 0)  # the retry's pod


@pytest.mark.parametrize("cfg", [CFG, JOBSET_CFG], ids=["volcano", "jobset"])
async def test_log_iter_follows_a_replica_its_retry_policy_restarts(
    tmp_path: Path, cfg: dict[str, str]
) -> None:
    async with on_node() as (node, scheduler):
        # REPLICA: Volcano makes the failed pod again (same name, a new uid), JobSet's
        # Job (its backoffLimit) a new pod of the same completion index
        app_id = await scheduler.submit(retried_app("retry", tmp_path, RetryPolicy.REPLICA), cfg)
        lines = []
        async for line in scheduler.log_iter(app_id, "role0", 0, should_tail=True):
            lines.append(line)
            if line == "first\n":  # the first container fails once this line was read
                (tmp_path / "go").touch()
        assert lines == ["first\n", "second\n"]
        # JobSet counts its own restarts (failurePolicy), not its Jobs' pod retries
        await assert_retried_once(scheduler, app_id, 0 if cfg is JOBSET_CFG else 1)
        await node.deleted(scheduler, app_id)


async def test_runner_events_resumed_across_the_jobs_restart_give_each_line_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with on_node() as (node, scheduler):
        isolate_from_user_config(tmp_path, monkeypatch)
        monkeypatch.setenv("KUBECONFIG", require_node())
        gate = tmp_path / "gate"
        gate.mkdir()
        # APPLICATION: Volcano's RestartJob restarts every pod of the job
        app = retried_app("restart", gate, RetryPolicy.APPLICATION)
        lines: list[str] = []
        states: list[AppState] = []
        async with get_runner(handle_signals=False) as runner:
            handle = await runner.run(app, "kubernetes", CFG)
            app_id = parse_app_handle(handle).app_id
            cursor = None
            for resumed in (False, True):
                with anyio.fail_after(WAIT_S):
                    async with runner.events(handle, cursor=cursor) as events:
                        async for event in events:
                            cursor = event.cursor
                            if isinstance(event, LogEvent):
                                lines.append(event.line)
                            else:
                                assert isinstance(event, StateEvent)
                                states.append(event.state)
                            if not resumed and lines:
                                break  # the stream dropped while the first container runs
                (gate / "go").touch()
        assert lines == ["first\n", "second\n"]
        assert states[-1] == AppState.SUCCEEDED
        await assert_retried_once(scheduler, app_id)
        await node.deleted(scheduler, app_id)


async def test_100_apps_watched_cost_one_list_and_one_watch_per_kind_whatever_the_node_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Benchmark 10's request rate on the real node: 100 concurrent submits go through a
    bounded number of connections (``MAX_REQUESTS`` in flight), and 100 waits, while the
    real scheduler marks each of their pods ``Unschedulable`` (100 pod events; no container
    runs), cost one GET each, then one list and one watch per kind, nothing per event."""
    proxy = LoopbackProxy(0)
    async with on_node(proxy) as (node, scheduler):
        app = sh_app("many", "true")
        app.roles[0].resource = Resource(cpu=4096, gpu=0, memMB=64)
        app_ids: list[str] = []

        async def submit() -> None:
            app_ids.append(await scheduler.submit(app, CFG))

        async with anyio.create_task_group() as task_group:
            for _ in range(100):
                task_group.start_soon(submit)
        assert proxy.most_open <= MAX_REQUESTS, proxy.most_open  # issue 45: 119 before
        calls: collections.Counter[str] = collections.Counter()
        for name in ("list", "watch", "log"):  # the API server boundary's requests
            method = getattr(scheduler.api, name)

            def counted(*args: Any, _name: str = name, _method: Any = method, **kw: Any) -> Any:
                calls[_name] += 1
                return _method(*args, **kw)

            monkeypatch.setattr(scheduler.api, name, counted)
        get_job, all_got = scheduler.api.get_job, anyio.Event()

        async def counted_get(*args: Any, **kw: Any) -> Any:
            try:
                return await get_job(*args, **kw)
            finally:
                calls["get_job"] += 1
                if calls["get_job"] == len(app_ids):
                    all_got.set()  # every wait read its job: from here, caches only

        monkeypatch.setattr(scheduler.api, "get_job", counted_get)
        pods = scheduler.pods(NAMESPACE)

        def all_unschedulable() -> bool | None:
            whys = [pod.waiting and pod.waiting.reason for pod in pods.objects.values()]
            return True if whys.count("Unschedulable") == len(app_ids) else None

        async with anyio.create_task_group() as task_group:
            for app_id in app_ids:
                task_group.start_soon(functools.partial(scheduler.wait, app_id, timeout=WAIT_S))
            with anyio.fail_after(WAIT_S):
                await all_got.wait()
                await pods.wait_until(all_unschedulable)
            watched = dict(calls)
            task_group.cancel_scope.cancel()  # the waits' part is over: none of them ended
        # one GET per wait; the lists and watches are the two kinds' (the jobs', the pods'),
        # reopened at most once each if the server ended one: constant, not apps x events
        assert watched["get_job"] == len(app_ids), watched
        assert watched.get("list", 0) <= 4, watched
        assert watched.get("watch", 0) <= 4, watched
        assert "log" not in watched, watched
        assert proxy.most_open <= MAX_REQUESTS + 4, proxy.most_open  # and the watches
        await node.deleted(scheduler, *app_ids)


async def ddp_node() -> NodeDns:
    """The node's cluster DNS settings, once the node has what the DDP test needs: the
    image :data:`TORCH_IMAGE` and a kubelet with a cluster DNS (else skip, or fail under
    the requirement, with the command that provides it)."""
    async with http_client(require_node()) as http:
        (found,) = (await http.get("/api/v1/nodes")).json()["items"]
        images = {name for image in found["status"].get("images", []) for name in image["names"]}
        if f"docker.io/{TORCH_IMAGE}" not in images:
            missing(
                f"no image {TORCH_IMAGE} on the node: bash scripts/kube-torch-image.sh"
                f" && bash scripts/kube-cluster.sh load {TORCH_IMAGE}"
            )
        dns = await node_dns(http, found["metadata"]["name"])
    if dns is None:
        missing(
            "the node's kubelet has no cluster DNS (started by an older"
            " scripts/kube-cluster.sh): bash scripts/kube-cluster.sh start restarts it"
        )
    return dns


async def test_ddp_on_two_pods_meets_at_rank0_through_the_svc_plugins_hosts(
    tmp_path: Path,
) -> None:
    """``dist.ddp -j 2x1`` run by the CLI as a user would: replica 1's torchrun reaches rank 0
    at ``$VC_{ROLE}_0_HOSTS`` (the ``svc`` plugin's name of rank 0's pod) over the pod
    network; the two agents form one world of 2 and train with gloo; both pods end 0."""
    home, out = tmp_path / "home", tmp_path / "out"
    home.mkdir()
    out.mkdir()
    dns = await ddp_node()
    async with on_node() as (node, scheduler):
        argv = [
            *(sys.executable, "-m", "asynctorchx.cli.main", "run", "--wait"),
            *("--workspace", "", "-s", "kubernetes", "-cfg", "queue=default"),
            *("dist.ddp", "-j", "2x1", "--image", TORCH_IMAGE, "--cpu", "1"),
            *("--env", "LOGLEVEL=INFO"),  # each agent logs its rendezvous (its ranks)
            "--mounts",
            f"type=bind,src={EXAMPLES},dst=/examples,type=bind,src={out},dst=/out",
            *("--script", "/examples/ddp_train.py", "--"),
            *("--steps", "20", "--log_every", "10", "--checkpoint", "/out/checkpoint.pt"),
        ]
        env = {**os.environ, "KUBECONFIG": require_node(), "HOME": str(home)}
        async with ClusterDns(node.http, dns).serving() as resolver:
            with anyio.fail_after(DDP_WAIT_S):
                done = await anyio.run_process(argv, cwd=tmp_path, env=env, check=False)
        output = done.stdout.decode() + done.stderr.decode()
        handles = re.findall(r"kubernetes://[^/\s]*/(\S+)", done.stdout.decode())
        assert handles, output
        app_id = handles[0]
        described = await scheduler.describe(app_id)
        assert described is not None
        role = described.roles[0]
        logs = [
            "".join([line async for line in scheduler.log_iter(app_id, role.name, k)])
            for k in (0, 1)
        ]
        assert done.returncode == 0, output + "".join(logs)
        assert described.state == AppState.SUCCEEDED
        replicas = described.roles_statuses[0].replicas
        assert [(r.state, r.exit_code) for r in replicas] == [(AppState.SUCCEEDED, 0)] * 2
        # replica 1 looked rank 0's pod up by the svc plugin's name, in the cluster's domain
        rank0_host = replicas[0].hostname  # {job}-{task}-0.{job}
        assert f"{rank0_host}.{NAMESPACE}.svc.{dns.domain}" in resolver.asked
        # each replica's agent joined the same world of 2 with its own global rank
        ranks = []
        for log in logs:
            assert "group_world_size=2" in log, log
            assert "worker group successfully finished" in log, log
            ranks += re.findall(r"global_ranks=\[(\d)\]", log)
        assert sorted(ranks) == ["0", "1"]
        # rank 0 (torchrun --tee prefixes its lines with [0]:) printed the loss, falling
        (rank0_log,) = [log for log in logs if "[0]:step" in log]
        losses = re.findall(r"^\[0\]:step (\d+)/20 loss ([\d.]+)$", rank0_log, re.MULTILINE)
        assert [int(step) for step, _ in losses] == [1, 10, 20]
        assert float(losses[-1][1]) < float(losses[0][1])
        assert "[0]:wrote checkpoint /out/checkpoint.pt" in rank0_log
        assert (out / "checkpoint.pt").stat().st_size > 0
        await node.deleted(scheduler, app_id)


# The node cluster's API server, then its etcd, restarted under a running app
# (``scripts/kube-cluster.sh restart apiserver|etcd --down S``): ``wait``, a followed
# ``log_lines`` and ``Runner.events`` go on through it (their watches resume, a ``410 Gone``
# relists) and end with the app's real end and every line once; ``status`` while the API
# server is down raises the typed ``KubernetesUnreachableError``. The Volcano job's phase is
# its stand-in's (it lists again once the server answers, as a controller does). Last in the
# module: after an etcd restart the node's controller manager was seen to fail endpoint
# updates for a while, which the DDP test's rendezvous needs.
RESTART_SCRIPT = EXAMPLES.parent / "scripts/kube-cluster.sh"
RESTART_LINES = 100  # one each 0.2 s: the app outlives the restart
RESTART_DOWN_S = 3  # seconds the daemon stays down


async def _status_while_down(runner: Runner, handle: str) -> SchedulerUnavailableError:
    """The error ``status`` raises once the API server stops answering."""
    while True:
        try:
            await runner.status(handle)
        except KubernetesUnreachableError as error:
            return error
        await anyio.sleep(0.05)


@pytest.mark.parametrize("daemon", ["apiserver", "etcd"])
async def test_wait_logs_and_events_outlive_a_restart(
    daemon: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with on_node() as (node, scheduler):
        isolate_from_user_config(tmp_path, monkeypatch)
        monkeypatch.setenv("KUBECONFIG", require_node())
        script = f"for i in $(seq 1 {RESTART_LINES}); do echo line $i; sleep 0.2; done"
        async with get_runner(handle_signals=False) as runner:
            handle = await runner.run(sh_app("restart", script), "kubernetes", CFG)

            async def while_down() -> None:
                if daemon == "apiserver":  # with etcd down the server still answers
                    await _status_while_down(runner, handle)

            restart = ["bash", str(RESTART_SCRIPT), "restart", daemon]
            with anyio.fail_after(WAIT_S):
                seen = await through_restart(
                    runner, handle, "role0", [*restart, "--down", str(RESTART_DOWN_S)], while_down
                )
        status = seen.ended[0]
        assert status is not None
        assert status.state == AppState.SUCCEEDED
        every = [f"line {i}\n" for i in range(1, RESTART_LINES + 1)]
        assert seen.followed == every
        assert seen.streamed == every
        assert seen.states[-1] == AppState.SUCCEEDED
        await node.deleted(scheduler, parse_app_handle(handle).app_id)
