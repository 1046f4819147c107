"""What a bare API server lacks, for the ``kubernetes`` tests: STAND-INS for Volcano, JobSet,
Kueue and a kubelet.

``scripts/kube-apiserver.sh`` runs a real kube-apiserver with etcd, but no scheduler,
controller manager, kubelet or Volcano: pods stay Pending and nobody acts on a job. Here:

- :data:`CRDS`: minimal definitions of the custom resources the scheduler uses (Volcano's
  ``Job`` with its ``status`` subresource, Volcano's bus ``Command``), schemas that keep
  every field; the server stores, lists, watches and patches them as any CRD.
- :class:`~tests.schedulers.kubernetes.volcano_standin.VolcanoStandIn`: a STAND-IN for
  Volcano's job controller (its module says what it does).
- :class:`~tests.schedulers.kubernetes.jobset_standin.JobSetStandIn`: a STAND-IN for
  JobSet's controller and the Job controller under it (its module says what it does).
  :meth:`BareCluster.admit` plays Kueue admitting a workload (it creates the JobSet's
  ``Workload``, labelled ``kueue.x-k8s.io/job-uid``, and sets ``spec.suspend: false``).
- :class:`~tests.schedulers.kubernetes.kubelet_standin.KubeletStandIn`: a STAND-IN for the
  kubelet's ``/containerLogs`` endpoint (its module says how).
- The test plays the container runtime: :meth:`BareCluster.start_pod`,
  :meth:`BareCluster.finish_pod` and :meth:`BareCluster.wait_pod` patch the pod's status
  (its ``status`` subresource) as the kubelet would.
- :class:`LoopbackProxy`: a TCP forwarder the scheduler connects through, so a test can cut
  its connections (a network fault; TLS passes through untouched).

The node and the ``default`` namespace are the server's, so one :class:`BareCluster` at a
time may run against a server, whatever process runs it: a second one would point the
node at its own kubelet (the first one's log requests would reach it) and its Volcano
stand-in would make pods for the first one's jobs. :meth:`BareCluster.running` takes a
lock file (:data:`LOCK`) for its whole block, so concurrent test runs and benchmarks
take turns instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import yaml
from lightkube import KubeConfig
from lightkube.config import client_adapter
from lightkube.config.client_adapter import ConnectionParams

from tests.schedulers.kubernetes.fake_apiserver import _now
from tests.schedulers.kubernetes.jobset_standin import JobSetStandIn, _owned_by
from tests.schedulers.kubernetes.kubelet_standin import KubeletStandIn
from tests.schedulers.kubernetes.standin_base import (
    _COMPLETION_INDEX,
    _JOBS,
    _JOBSET_NAME,
    _JOBSETS,
    _RJOB_NAME,
    NODE,
    _checked,
)
from tests.schedulers.kubernetes.volcano_standin import VolcanoStandIn

#: The lock file that lets one :class:`BareCluster` at a time run on this machine.
LOCK = Path(tempfile.gettempdir()) / "asynctorchx-kube-standins.lock"
_WORKLOADS = "/apis/kueue.x-k8s.io/v1beta1/namespaces"
_KEEP_ALL = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}


def _crd(group: str, kind: str, plural: str, version: str, status: bool) -> dict[str, Any]:
    served: dict[str, Any] = {"name": version, "served": True, "storage": True, "schema": _KEEP_ALL}
    if status:
        served["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [served],
        },
    }


#: The custom resources the tests use, as minimal definitions (not Volcano's own).
CRDS = [
    _crd("batch.volcano.sh", "Job", "jobs", "v1alpha1", status=True),
    _crd("bus.volcano.sh", "Command", "commands", "v1alpha1", status=False),
    _crd("jobset.x-k8s.io", "JobSet", "jobsets", "v1alpha2", status=True),
    _crd("kueue.x-k8s.io", "Workload", "workloads", "v1beta1", status=True),
]


def http_client(kubeconfig: str) -> httpx2.AsyncClient:
    """An HTTP client with the kubeconfig's server, TLS and credentials (lightkube's adapter)."""
    config = KubeConfig.from_file(kubeconfig).get()
    assert config is not None, f"{kubeconfig} names no current context"
    return client_adapter.AsyncClient(
        config, ConnectionParams(timeout=httpx2.Timeout(30, read=None))
    )


class LoopbackProxy:
    """A TCP forwarder on 127.0.0.1 to ``port``; :meth:`cut` breaks every open connection."""

    def __init__(self, port: int) -> None:
        self.upstream = port
        self.port = 0
        self.connections = 0
        self.most_open = 0  # the most connections open at once
        self._scopes: list[anyio.CancelScope] = []

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[LoopbackProxy]:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with listener, anyio.create_task_group() as task_group:
            task_group.start_soon(listener.serve, self._forward, task_group)
            try:
                yield self
            finally:
                task_group.cancel_scope.cancel()

    def cut(self) -> int:
        """Close every connection open now; return how many."""
        cut = list(self._scopes)
        for scope in cut:
            scope.cancel()
        return len(cut)

    async def _forward(self, client: anyio.abc.SocketStream) -> None:
        self.connections += 1
        with anyio.CancelScope() as scope:
            self._scopes.append(scope)
            self.most_open = max(self.most_open, len(self._scopes))
            try:
                async with client, await anyio.connect_tcp("127.0.0.1", self.upstream) as server:

                    async def pipe(
                        source: anyio.abc.SocketStream, sink: anyio.abc.SocketStream
                    ) -> None:
                        with contextlib.suppress(
                            anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError
                        ):
                            async for data in source:
                                await sink.send(data)
                        scope.cancel()

                    async with anyio.create_task_group() as pipes:
                        pipes.start_soon(pipe, client, server)
                        pipes.start_soon(pipe, server, client)
            finally:
                self._scopes.remove(scope)


async def install_crds(http: httpx2.AsyncClient) -> None:
    """Install :data:`CRDS` (kept if present); return once the server serves them."""
    base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for crd in CRDS:
        await _checked(await http.post(base, json=crd), 201, 409)
    for crd in CRDS:  # served once Established: watch the CRD for that condition
        name = crd["metadata"]["name"]
        params = {"watch": "true", "fieldSelector": f"metadata.name={name}"}
        async with http.stream("GET", base, params=params) as response:
            async for line in response.aiter_lines():
                conditions = json.loads(line)["object"].get("status", {}).get("conditions") or []
                if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                    break


@contextlib.asynccontextmanager
async def exclusive() -> AsyncIterator[None]:
    """Hold :data:`LOCK` (awaiting it in a thread while another process holds it)."""
    with LOCK.open("a") as lock:
        await anyio.to_thread.run_sync(fcntl.flock, lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


class BareCluster:
    """A bare API server made usable for the tests: CRDs, a node, the stand-ins, pod controls.

    Args:
        http: a client to the server (admin credentials).
        kubelet: the kubelet stand-in (its port is the node's kubelet port).
        namespace: where the tests' jobs go.
    """

    def __init__(
        self,
        http: httpx2.AsyncClient,
        kubelet: KubeletStandIn,
        namespace: str = "default",
    ) -> None:
        self.http = http
        self.kubelet = kubelet
        self.namespace = namespace
        self.volcano = VolcanoStandIn(http, namespace)
        self.jobset = JobSetStandIn(http, namespace)
        self.renewals = 0

    @classmethod
    @contextlib.asynccontextmanager
    async def running(cls, kubeconfig: str) -> AsyncIterator[BareCluster]:
        """Install the CRDs and the stand-in node, run the stand-ins until the block ends
        (once no other one runs: see :data:`LOCK`)."""
        async with (
            exclusive(),
            http_client(kubeconfig) as http,
            KubeletStandIn().serving() as kubelet,
            anyio.create_task_group() as task_group,
        ):
            cluster = cls(http, kubelet)
            await cluster._install()
            await task_group.start(cluster.volcano.run)
            await task_group.start(cluster.jobset.run)
            try:
                yield cluster
            finally:
                task_group.cancel_scope.cancel()

    async def _install(self) -> None:
        await install_crds(self.http)
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": NODE},
        }
        await _checked(await self.http.post("/api/v1/nodes", json=node), 201, 409)
        status = {
            "status": {
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": self.kubelet.port}},
            }
        }
        await _checked(
            await self.http.patch(
                f"/api/v1/nodes/{NODE}/status",
                content=json.dumps(status),
                headers={"content-type": "application/merge-patch+json"},
            )
        )

    async def renew_job_storage(self) -> None:
        """Change the Volcano job CRD's spec (a new short name) and return once the server
        replaced the jobs' storage and watch cache: it has then ended every jobs watch open
        before, and answers ``410`` to a watch from a version older than the new cache."""
        self.renewals += 1
        patch = {"spec": {"names": {"shortNames": [f"vcjob{self.renewals}x{time.time_ns()}"]}}}
        path = f"{_JOBS}/namespaces/{self.namespace}/jobs"
        listed = await _checked(await self.http.get(path))
        params = {"watch": "true", "resourceVersion": listed["metadata"]["resourceVersion"]}
        async with self.http.stream("GET", path, params=params) as probe:
            await _checked(
                await self.http.patch(
                    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/jobs.batch.volcano.sh",
                    content=json.dumps(patch),
                    headers={"content-type": "application/merge-patch+json"},
                )
            )
            async for _ in probe.aiter_lines():  # ends with the old storage
                pass

    async def _patch_pod_status(self, pod: str, status: dict[str, Any]) -> None:
        await _checked(
            await self.http.patch(
                f"/api/v1/namespaces/{self.namespace}/pods/{pod}/status",
                content=json.dumps({"status": status}),
                headers={"content-type": "application/merge-patch+json"},
            )
        )

    @staticmethod
    def _container(pod: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        container = pod["spec"]["containers"][0]
        return {
            "name": container["name"],
            "state": state,
            "ready": "running" in state,
            "restartCount": 0,
            "image": container["image"],
            "imageID": "",
        }

    async def get_pod(self, pod: str) -> dict[str, Any] | None:
        """The pod as the server has it, or ``None``."""
        response = await self.http.get(f"/api/v1/namespaces/{self.namespace}/pods/{pod}")
        return None if response.status_code == 404 else await _checked(response)

    async def _existing_pod(self, pod: str) -> dict[str, Any]:
        """The pod, awaited on a watch until the Volcano stand-in created it."""
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        listed = await _checked(
            await self.http.get(path, params={"fieldSelector": f"metadata.name={pod}"})
        )
        if listed["items"]:
            return dict(listed["items"][0])
        params = {
            "watch": "true",
            "fieldSelector": f"metadata.name={pod}",
            "resourceVersion": listed["metadata"]["resourceVersion"],
        }
        async with self.http.stream("GET", path, params=params) as response:
            async for line in response.aiter_lines():
                event = json.loads(line)
                if event["type"] in ("ADDED", "MODIFIED"):
                    return dict(event["object"])
        raise AssertionError(f"the watch of pod {pod} ended before it was created")

    async def start_pod(self, pod: str) -> None:
        """The kubelet's part: the pod's container is running."""
        found = await self._existing_pod(pod)
        running = self._container(found, {"running": {"startedAt": _now()}})
        await self._patch_pod_status(
            pod, {"phase": "Running", "podIP": "10.0.0.7", "containerStatuses": [running]}
        )

    async def finish_pod(self, pod: str, exit_code: int) -> None:
        """The kubelet's part: the container ended with ``exit_code``; its log follow ends."""
        found = await self._existing_pod(pod)
        if (found.get("status") or {}).get("phase") == "Pending":
            await self.start_pod(pod)
        terminated = {
            "terminated": {
                "exitCode": exit_code,
                "reason": "Completed" if exit_code == 0 else "Error",
                "startedAt": _now(),
                "finishedAt": _now(),
            }
        }
        self.kubelet.end(self.namespace, pod)
        await self._patch_pod_status(
            pod,
            {
                "phase": "Succeeded" if exit_code == 0 else "Failed",
                "containerStatuses": [self._container(found, terminated)],
            },
        )

    async def wait_pod(self, pod: str, reason: str, message: str = "") -> None:
        """The kubelet's part: the container waits (``ErrImagePull``, ``InvalidImageName``...)."""
        found = await self._existing_pod(pod)
        waiting = self._container(found, {"waiting": {"reason": reason, "message": message}})
        await self._patch_pod_status(pod, {"phase": "Pending", "containerStatuses": [waiting]})

    async def unschedulable(self, pod: str, message: str) -> None:
        """The scheduler's part: the pod cannot be placed (its ``PodScheduled`` condition)."""
        await self._existing_pod(pod)
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastTransitionTime": _now(),
        }
        await self._patch_pod_status(pod, {"phase": "Pending", "conditions": [condition]})

    async def jobset_pod(self, jobset: str, rjob: str, index: int, other_than: str = "") -> str:
        """The name of the newest pod of replica ``index`` of a JobSet's replicated job
        (other than ``other_than``: a replaced one), awaited on a watch until the JobSet
        stand-in created it."""
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        selector = f"{_JOBSET_NAME}={jobset},{_RJOB_NAME}={rjob},{_COMPLETION_INDEX}={index}"
        listed = await _checked(await self.http.get(path, params={"labelSelector": selector}))
        found = [pod for pod in listed["items"] if pod["metadata"]["name"] != other_than]
        if found:
            newest = max(found, key=lambda pod: pod["metadata"]["creationTimestamp"])
            return str(newest["metadata"]["name"])
        params = {
            "watch": "true",
            "labelSelector": selector,
            "resourceVersion": listed["metadata"]["resourceVersion"],
        }
        async with self.http.stream("GET", path, params=params) as response:
            async for line in response.aiter_lines():
                event = json.loads(line)
                if event["type"] == "ADDED" and event["object"]["metadata"]["name"] != other_than:
                    return str(event["object"]["metadata"]["name"])
        raise AssertionError(f"the watch of {selector} ended before the pod was created")

    async def admit(self, jobset: str) -> None:
        """Kueue's part: it admitted the JobSet's workload and unsuspends the JobSet."""
        path = f"{_JOBSETS}/namespaces/{self.namespace}/jobsets/{jobset}"
        stored = await _checked(await self.http.get(path))
        workload = {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "Workload",
            "metadata": {
                "name": f"jobset-{jobset}",
                "labels": {"kueue.x-k8s.io/job-uid": stored["metadata"]["uid"]},
                "ownerReferences": [_owned_by(stored)],
            },
            "spec": {"active": True, "queueName": "team-a"},
        }
        await _checked(
            await self.http.post(f"{_WORKLOADS}/{self.namespace}/workloads", json=workload), 201
        )
        await _checked(
            await self.http.patch(
                path,
                content=json.dumps({"spec": {"suspend": False}}),
                headers={"content-type": "application/merge-patch+json"},
            )
        )

    async def workload(self, jobset: str) -> dict[str, Any]:
        """The JobSet's Kueue workload (made by :meth:`admit`)."""
        path = f"{_WORKLOADS}/{self.namespace}/workloads/jobset-{jobset}"
        return await _checked(await self.http.get(path))

    async def jobset_pods_gone(self, jobset: str) -> None:
        """Return once the JobSet has no pod (awaited on a pods watch)."""
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        selector = f"{_JOBSET_NAME}={jobset}"
        listed = await _checked(await self.http.get(path, params={"labelSelector": selector}))
        left = {pod["metadata"]["name"] for pod in listed["items"]}
        params = {
            "watch": "true",
            "labelSelector": selector,
            "resourceVersion": listed["metadata"]["resourceVersion"],
        }
        if not left:
            return
        async with self.http.stream("GET", path, params=params) as response:
            async for line in response.aiter_lines():
                event = json.loads(line)
                name = event["object"]["metadata"]["name"]
                if event["type"] == "DELETED":
                    left.discard(name)
                elif event["type"] == "ADDED":
                    left.add(name)
                if not left:
                    return
        raise AssertionError(f"the watch of {selector} ended with pods left: {sorted(left)}")

    def write_log(
        self, pod: str, *lines: str, same_time: bool = False, container: str | None = None
    ) -> None:
        """The container (the pod's, or the one named) writes ``lines`` (the kubelet
        stand-in serves them)."""
        self.kubelet.write(self.namespace, pod, *lines, same_time=same_time, container=container)


__all__ = [
    "CRDS",
    "NODE",
    "BareCluster",
    "JobSetStandIn",
    "KubeletStandIn",
    "LoopbackProxy",
    "VolcanoStandIn",
    "exclusive",
    "http_client",
    "install_crds",
]


def through(kubeconfig: str, port: int, directory: Path) -> str:
    """A copy of ``kubeconfig`` whose server is ``127.0.0.1:port`` (same TLS and credentials)."""
    config = yaml.safe_load(Path(kubeconfig).read_text())
    for cluster in config["clusters"]:
        server = cluster["cluster"]["server"]
        scheme = server.partition("://")[0]
        cluster["cluster"]["server"] = f"{scheme}://127.0.0.1:{port}"
    path = directory / "kubeconfig-proxied"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def server_port(kubeconfig: str) -> int:
    config = yaml.safe_load(Path(kubeconfig).read_text())
    contexts = {each["name"]: each["context"] for each in config["contexts"]}
    cluster_name = contexts[config["current-context"]]["cluster"]
    (server,) = [c["cluster"]["server"] for c in config["clusters"] if c["name"] == cluster_name]
    return int(server.rpartition(":")[2].rstrip("/"))
