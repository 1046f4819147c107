"""What a bare API server lacks, for the ``kubernetes`` tests: STAND-INS for Volcano, JobSet,
Kueue and a kubelet.

``scripts/kube-apiserver.sh`` runs a real kube-apiserver with etcd, but no scheduler,
controller manager, kubelet or Volcano: pods stay Pending and nobody acts on a job. Here:

- :data:`CRDS`: minimal definitions of the custom resources the scheduler uses (Volcano's
  ``Job`` with its ``status`` subresource, Volcano's bus ``Command``), schemas that keep
  every field; the server stores, lists, watches and patches them as any CRD.
- :class:`VolcanoStandIn`: a STAND-IN for Volcano's job controller, a task watching jobs,
  commands and pods on the real server: it creates one pod per task (``{job}-{task}-0``,
  on the stand-in node), moves the job's phase as the pods' phases move (Pending, Running,
  Completed, Failed), retries a failed pod as Volcano does (a task's ``maxRetry``, its
  ``RestartJob`` policy: ``retryCount``, ``Restarting``, the pods made again once the old
  ones are gone), acts on ``AbortJob`` commands (Aborting, pods deleted, Aborted) and,
  as the garbage collector would, deletes a deleted job's pods. For a job with the ``svc``
  plugin it does that plugin's part: the ConfigMap ``{job}-svc`` of each task's hosts, the
  headless Service ``{job}`` (the pods' subdomain), and in each pod ``VC_{TASK}_HOSTS`` and
  ``VC_{TASK}_NUM`` from that ConfigMap, mounted at ``/etc/volcano``; both go with the job
  (its NetworkPolicy is left out: nothing on these clusters enforces one).
- :class:`JobSetStandIn`: a STAND-IN for JobSet's controller and the Job controller under
  it: for an unsuspended JobSet it creates each replicated job's ``batch/v1`` Job (which
  the real server validates; nothing acts on it) and its pods as an Indexed Job does
  (``{jobset}-{rjob}-0-{k}-xxxxx``, hostname ``{jobset}-{rjob}-0-{k}``, subdomain the
  JobSet, the ``batch.kubernetes.io/job-completion-index`` annotation and label, JobSet's
  labels, ``JOB_COMPLETION_INDEX``), writes ``status.replicatedJobsStatus`` and the
  ``Suspended``/``Completed``/``Failed`` conditions as JobSet does, deletes the pods of a
  suspended or deleted JobSet, and replaces a failed pod while the Job's ``backoffLimit``
  allows. :meth:`BareCluster.admit`
  plays Kueue admitting a workload (it creates the JobSet's ``Workload``, labelled
  ``kueue.x-k8s.io/job-uid``, and sets ``spec.suspend: false``).
- :class:`KubeletStandIn`: a STAND-IN for the kubelet's ``/containerLogs`` endpoint on
  127.0.0.1 (HTTPS, self-signed), registered as the Node ``asynctorchx-standin``: the real API
  server proxies ``pods/{name}/log`` to it, with ``follow``, ``timestamps`` and
  ``sinceTime`` as it forwards them.
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
import secrets
import ssl
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import h11
import httpx2
from anyio.streams.tls import TLSListener
from lightkube import KubeConfig
from lightkube.config import client_adapter
from lightkube.config.client_adapter import ConnectionParams

from tests.schedulers.kubernetes.fake_apiserver import _Notifier, _now, _parse_time, _timestamp

NODE = "asynctorchx-standin"
#: The lock file that lets one :class:`BareCluster` at a time run on this machine.
LOCK = Path(tempfile.gettempdir()) / "asynctorchx-kube-standins.lock"
_JOBS = "/apis/batch.volcano.sh/v1alpha1"
_COMMANDS = "/apis/bus.volcano.sh/v1alpha1"
_JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2"
_WORKLOADS = "/apis/kueue.x-k8s.io/v1beta1/namespaces"
_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
_JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
_RJOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
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
    return client_adapter.AsyncClient(
        config, ConnectionParams(timeout=httpx2.Timeout(30, read=None))
    )


async def _checked(response: httpx2.Response, *ok: int) -> dict[str, Any]:
    if response.status_code not in (ok or (200, 201)):
        raise AssertionError(f"{response.request.method} {response.request.url}: {response.text}")
    return dict(response.json())


def _self_signed() -> ssl.SSLContext:
    with tempfile.TemporaryDirectory() as directory:
        key, cert = Path(directory, "key.pem"), Path(directory, "cert.pem")
        command = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        command += ["-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)]
        subprocess.run(command, check=True, capture_output=True)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
    return context


class KubeletStandIn:
    """A STAND-IN for a kubelet's log endpoint: ``GET /containerLogs/{ns}/{pod}/{container}``.

    Logs are what the test writes (:meth:`write`); a follow ends when :meth:`end` is called.
    A container the test wrote nothing to by name has the pod's log (written without one).
    """

    def __init__(self) -> None:
        self.logs: dict[tuple[str, str, str | None], list[tuple[int, str]]] = {}
        self.ended: set[tuple[str, str]] = set()
        self.changed = _Notifier()
        self.port = 0
        self.requests: list[str] = []
        self._streams: list[anyio.CancelScope] = []

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[KubeletStandIn]:
        """Serve HTTPS on 127.0.0.1 (a free port) until the block ends.

        The API server speaks only HTTPS to kubelets and, without
        ``--kubelet-certificate-authority``, takes any certificate: a self-signed one
        made with ``openssl`` serves.
        """
        tcp = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = tcp.extra(anyio.abc.SocketAttribute.local_port)
        listener = TLSListener(tcp, _self_signed(), standard_compatible=False)
        async with listener, anyio.create_task_group() as task_group:
            task_group.start_soon(listener.serve, self._connection, task_group)
            try:
                yield self
            finally:
                task_group.cancel_scope.cancel()

    def write(
        self,
        namespace: str,
        pod: str,
        *lines: str,
        same_time: bool = False,
        container: str | None = None,
    ) -> None:
        """Append lines to a pod's log, or to one ``container``'s (``same_time``: all at
        the last line's time)."""
        log = self.logs.setdefault((namespace, pod, container), [])
        stamp = (
            log[-1][0] if same_time and log else max(time.time_ns(), log[-1][0] + 1 if log else 0)
        )
        for line in lines:
            log.append((stamp, line if line.endswith("\n") else line + "\n"))
            if not same_time:
                stamp += 1000
        self.changed.notify()

    async def wait_for_requests(self, count: int) -> None:
        """Wait until ``count`` log requests came in so far."""
        while True:
            changed = self.changed.event
            if len(self.requests) >= count:
                return
            await changed.wait()

    def end(self, namespace: str, pod: str) -> None:
        """The container ended: follows of its log end after the last line."""
        self.ended.add((namespace, pod))
        self.changed.notify()

    async def _connection(self, stream: anyio.abc.ByteStream) -> None:
        with contextlib.suppress(
            anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream
        ):
            async with stream:
                await self._serve(stream)

    async def _serve(self, stream: anyio.abc.ByteStream) -> None:
        connection = h11.Connection(h11.SERVER)
        request: h11.Request | None = None
        while request is None:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                connection.receive_data(await stream.receive())
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.ConnectionClosed):
                return
        target = urllib.parse.urlsplit(request.target.decode())
        self.requests.append(request.target.decode())
        self.changed.notify()
        query = {key: values[-1] for key, values in urllib.parse.parse_qs(target.query).items()}
        parts = target.path.strip("/").split("/")
        if len(parts) != 4 or parts[0] != "containerLogs":
            await stream.send(
                connection.send(h11.Response(status_code=404, headers=[("content-length", "0")]))
            )
            await stream.send(connection.send(h11.EndOfMessage()))
            return
        key = (parts[1], parts[2])
        named = (parts[1], parts[2], parts[3])
        log_key = named if named in self.logs else (parts[1], parts[2], None)
        headers = [("content-type", "text/plain"), ("transfer-encoding", "chunked")]
        await stream.send(connection.send(h11.Response(status_code=200, headers=headers)))
        since = _parse_time(query["sinceTime"]) if "sinceTime" in query else None
        stamps = query.get("timestamps") in ("true", "1")
        follow = query.get("follow") in ("true", "1")
        sent = 0
        with anyio.CancelScope() as scope:
            self._streams.append(scope)
            try:
                while True:
                    changed = self.changed.event
                    # lines written while these are sent are sent at the next turn
                    new = self.logs.get(log_key, [])[sent:]
                    sent += len(new)
                    for ns, line in new:
                        if since is None or ns >= since:
                            prefix = (_timestamp(ns) + " ") if stamps else ""
                            await stream.send(
                                connection.send(h11.Data(data=(prefix + line).encode()))
                            )
                    if not follow or key in self.ended:
                        await stream.send(connection.send(h11.EndOfMessage()))
                        return
                    await changed.wait()
            finally:
                self._streams.remove(scope)


class LoopbackProxy:
    """A TCP forwarder on 127.0.0.1 to ``port``; :meth:`cut` breaks every open connection."""

    def __init__(self, port: int) -> None:
        self.upstream = port
        self.port = 0
        self.connections = 0
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


def _job_owner(job: dict[str, Any]) -> dict[str, Any]:
    """The owner reference Volcano puts on what it makes for ``job``."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": job["metadata"]["name"],
        "uid": job["metadata"]["uid"],
        "controller": True,
    }


def _svc_keys(task_name: str) -> tuple[str, str]:
    """The ``svc`` plugin's variables of a task: its hosts and their number."""
    key = task_name.replace("-", "_").upper()
    return f"VC_{key}_HOSTS", f"VC_{key}_NUM"


def _svc_config_map(job: dict[str, Any]) -> dict[str, Any]:
    """The ``svc`` plugin's ConfigMap ``{job}-svc`` (Volcano's ``GenerateHosts``): per task,
    ``{task}.host`` (one host a line) and :func:`_svc_keys`, the host being the task's pod
    ``{job}-{task}-0.{job}`` (one replica per task)."""
    job_name = job["metadata"]["name"]
    data = {}
    for task in job["spec"]["tasks"]:
        host = f"{job_name}-{task['name']}-0.{job_name}"
        hosts, count = _svc_keys(task["name"])
        data.update({f"{task['name'].replace('-', '_')}.host": host, hosts: host, count: "1"})
    metadata = {"name": f"{job_name}-svc", "ownerReferences": [_job_owner(job)]}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def _svc_service(job: dict[str, Any], args: list[str]) -> dict[str, Any]:
    """The ``svc`` plugin's headless Service, named as the job: the subdomain of its pods."""
    name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
    spec = {
        "clusterIP": "None",
        "selector": {"volcano.sh/job-name": name, "volcano.sh/job-namespace": namespace},
        "publishNotReadyAddresses": "--publish-not-ready-addresses" in args,
    }
    metadata = {"name": name, "ownerReferences": [_job_owner(job)]}
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec}


def _with_svc(job: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """The ``svc`` plugin's ``OnPodCreate``: every container gets each task's
    :func:`_svc_keys` from the ConfigMap and the ConfigMap mounted at ``/etc/volcano``."""
    config_map = f"{job['metadata']['name']}-svc"
    env = [
        {"name": key, "valueFrom": {"configMapKeyRef": {"name": config_map, "key": key}}}
        for task in job["spec"]["tasks"]
        for key in _svc_keys(task["name"])
    ]
    spec = json.loads(json.dumps(spec))
    for container in spec["containers"]:
        container["env"] = [*(container.get("env") or []), *env]
        mount = {"name": config_map, "mountPath": "/etc/volcano"}
        container["volumeMounts"] = [*(container.get("volumeMounts") or []), mount]
    volume = {"name": config_map, "configMap": {"name": config_map}}
    spec["volumes"] = [*(spec.get("volumes") or []), volume]
    return spec


def _pod_from_task(job: dict[str, Any], task: dict[str, Any], node: str | None) -> dict[str, Any]:
    """Volcano's pod for ``task``: on ``node``, or (``None``) left to the cluster's scheduler;
    with the ``svc`` plugin's part (:func:`_with_svc`) when the job names it."""
    namespace, job_name = job["metadata"]["namespace"], job["metadata"]["name"]
    template = task["template"]
    name = f"{job_name}-{task['name']}-0"
    labels = dict(template["metadata"].get("labels") or {})
    labels.update(
        {
            "volcano.sh/job-name": job_name,
            "volcano.sh/job-namespace": namespace,
            "volcano.sh/task-spec": task["name"],
        }
    )
    spec = template["spec"]
    if "svc" in (job["spec"].get("plugins") or {}):
        spec = _with_svc(job, spec)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": template["metadata"].get("annotations") or {},
            "ownerReferences": [_job_owner(job)],
        },
        "spec": {
            **spec,
            "hostname": name,
            "subdomain": job_name,
            **({"nodeName": node} if node else {}),
        },
    }


def _terminating(pod: dict[str, Any]) -> bool:
    """Whether the pod is being deleted (a real kubelet confirms it has stopped)."""
    return bool(pod["metadata"].get("deletionTimestamp"))


def _phase_of(pods: list[dict[str, Any]]) -> str | None:
    """Volcano's job phase for its pods' phases (the failed pods are
    :meth:`VolcanoStandIn._retry_or_fail`'s)."""
    phases = [(pod.get("status") or {}).get("phase") for pod in pods]
    if any(phase == "Failed" for phase in phases):
        return "Failed"
    if phases and all(phase == "Succeeded" for phase in phases):
        return "Completed"
    if phases and all(phase in ("Running", "Succeeded") for phase in phases):
        return "Running"
    return None


class _Watching:
    """A controller stand-in: list-then-watch some paths, calling a handler per event."""

    def __init__(self, http: httpx2.AsyncClient, namespace: str) -> None:
        self.http = http
        self.namespace = namespace

    def watched(self) -> list[tuple[str, Any]]:
        raise NotImplementedError

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Watch the paths; act on each event. Started once the watches are open."""
        async with anyio.create_task_group() as task_group:
            for path, handle in self.watched():
                await task_group.start(self._watch, path, handle)
            task_status.started()

    async def _watch(
        self, path: str, handle: Any, *, task_status: anyio.abc.TaskStatus[None]
    ) -> None:
        """List, then watch from the list; when the server ends the watch, list again."""
        started = False
        while True:
            listed = await _checked(await self.http.get(path))
            if started:  # what happened while no watch was open
                for item in listed["items"]:
                    await handle("MODIFIED", item)
            params = {"watch": "true", "resourceVersion": listed["metadata"]["resourceVersion"]}
            async with self.http.stream("GET", path, params=params) as response:
                if not started:
                    task_status.started()
                    started = True
                async for line in response.aiter_lines():
                    if line.strip():
                        event = json.loads(line)
                        if event["type"] != "ERROR":
                            await handle(event["type"], event["object"])


class VolcanoStandIn(_Watching):
    """A STAND-IN for Volcano's job controller on a bare API server (see the module doc).

    Args:
        http: a client to the server (admin credentials).
        namespace: where it acts on jobs.
        node: the node its pods go to; ``None`` on a cluster with a real node, whose
            scheduler places them and whose kubelet runs and deletes them.
    """

    def __init__(self, http: httpx2.AsyncClient, namespace: str, node: str | None = NODE) -> None:
        super().__init__(http, namespace)
        self.node = node
        #: (job, phase) -> monotonic time the stand-in sent the patch setting that phase
        self.phase_times: dict[tuple[str, str], float] = {}

    def watched(self) -> list[tuple[str, Any]]:
        return [
            (f"{_JOBS}/namespaces/{self.namespace}/jobs", self._job),
            (f"{_COMMANDS}/namespaces/{self.namespace}/commands", self._command),
            (f"/api/v1/namespaces/{self.namespace}/pods", self._pod),
        ]

    async def _job(self, kind: str, job: dict[str, Any]) -> None:
        name = job["metadata"]["name"]
        plugins = job["spec"].get("plugins") or {}
        if kind == "DELETED":  # the garbage collector's part: the job's pods go
            for pod in await self._pods_of(name):
                await self._delete_pod(pod["metadata"]["name"])
            if "svc" in plugins:  # the svc plugin's OnJobDelete
                base = f"/api/v1/namespaces/{self.namespace}"
                await self.http.delete(f"{base}/configmaps/{name}-svc")
                await self.http.delete(f"{base}/services/{name}")
        elif kind in ("ADDED", "MODIFIED") and not job.get("status"):
            if "svc" in plugins:  # the svc plugin's OnJobAdd, before any pod
                base = f"/api/v1/namespaces/{self.namespace}"
                made = [
                    ("configmaps", _svc_config_map(job)),
                    ("services", _svc_service(job, plugins["svc"])),
                ]
                for kind_path, body in made:
                    response = await self.http.post(f"{base}/{kind_path}", json=body)
                    await _checked(response, 201, 409)
            # Volcano's order: the job is Pending before its pods exist, so that a pod's
            # own moves (the real scheduler's Unschedulable, a start) come after it
            await self._set_phase(name, "Pending")
            await self._create_pods(job)

    async def _create_pods(self, job: dict[str, Any]) -> None:
        """Volcano's ``syncJob``: each task's pod that does not exist is made (one that
        still exists, terminating or not, is left)."""
        for task in job["spec"]["tasks"]:
            await _checked(
                await self.http.post(
                    f"/api/v1/namespaces/{self.namespace}/pods",
                    json=_pod_from_task(job, task, self.node),
                ),
                201,
                409,
            )

    async def _command(self, kind: str, command: dict[str, Any]) -> None:
        if kind == "DELETED" or command.get("action") != "AbortJob":
            return
        job_name = command["target"]["name"]
        deleted = await self.http.delete(
            f"{_COMMANDS}/namespaces/{self.namespace}/commands/{command['metadata']['name']}"
        )
        if deleted.status_code == 404:  # acted on already
            return
        job = await self.http.get(f"{_JOBS}/namespaces/{self.namespace}/jobs/{job_name}")
        if job.status_code == 404:
            return
        phase = ((job.json().get("status") or {}).get("state") or {}).get("phase")
        if phase in ("Completed", "Failed", "Aborted"):
            return
        await self._set_phase(job_name, "Aborting")
        for pod in await self._pods_of(job_name):
            await self._delete_pod(pod["metadata"]["name"])
        await self._set_phase(job_name, "Aborted")

    async def _pod(self, kind: str, pod: dict[str, Any]) -> None:
        job_name = (pod["metadata"].get("labels") or {}).get("volcano.sh/job-name")
        if kind not in ("MODIFIED", "DELETED") or not job_name:
            return
        response = await self.http.get(f"{_JOBS}/namespaces/{self.namespace}/jobs/{job_name}")
        if response.status_code == 404:
            return
        job = response.json()
        status = job.get("status") or {}
        current = (status.get("state") or {}).get("phase")
        if current in ("Aborting", "Aborted", "Completed", "Failed"):
            return
        pods = await self._pods_of(job_name)
        if kind == "DELETED":  # a retry's pod went: made again, as syncJob does
            await self._create_pods(job)
            if current == "Restarting" and not any(_terminating(each) for each in pods):
                await self._set_phase(job_name, "Pending")
            return
        failed = [
            each
            for each in pods
            if (each.get("status") or {}).get("phase") == "Failed" and not _terminating(each)
        ]
        if failed:
            await self._retry_or_fail(job, failed, pods)
            return
        phase = _phase_of([each for each in pods if not _terminating(each)])
        if phase is not None and phase != current:
            await self._set_phase(job_name, phase)

    async def _retry_or_fail(
        self, job: dict[str, Any], failed: list[dict[str, Any]], pods: list[dict[str, Any]]
    ) -> None:
        """Volcano's retries: while the job's ``retryCount`` is under the failed task's
        ``maxRetry``, a ``RestartJob`` policy (``RetryPolicy.APPLICATION``) restarts every
        pod (phase ``Restarting``), no policy (``REPLICA``) the failed pods alone; the new
        pods are made once the old ones are gone (:meth:`_pod`). Else the job fails."""
        name = job["metadata"]["name"]
        tasks = {task["name"]: task for task in job["spec"]["tasks"]}
        task = tasks[failed[0]["metadata"]["labels"]["volcano.sh/task-spec"]]
        retries = int((job.get("status") or {}).get("retryCount") or 0)
        if retries >= int(task.get("maxRetry") or 0):
            await self._set_phase(name, "Failed")
            return
        restart_job = any(p.get("action") == "RestartJob" for p in task.get("policies") or [])
        current = ((job.get("status") or {}).get("state") or {}).get("phase") or "Running"
        await self._set_phase(name, "Restarting" if restart_job else current, retries + 1)
        for pod in pods if restart_job else failed:
            await self._delete_pod(pod["metadata"]["name"])

    async def _pods_of(self, job_name: str) -> list[dict[str, Any]]:
        listed = await _checked(
            await self.http.get(
                f"/api/v1/namespaces/{self.namespace}/pods",
                params={"labelSelector": f"volcano.sh/job-name={job_name}"},
            )
        )
        return list(listed["items"])

    async def _delete_pod(self, name: str) -> None:
        # a real kubelet confirms a graceful deletion; with none, remove at once
        params = {"gracePeriodSeconds": "0"} if self.node else {}
        await self.http.delete(f"/api/v1/namespaces/{self.namespace}/pods/{name}", params=params)

    async def _set_phase(self, job_name: str, phase: str, retries: int | None = None) -> None:
        """Set the job's phase (and ``retryCount``, if given) in its status."""
        patch: dict[str, Any] = {
            "status": {"state": {"phase": phase, "lastTransitionTime": _now()}}
        }
        if retries is not None:
            patch["status"]["retryCount"] = retries
        self.phase_times[(job_name, phase)] = time.monotonic()
        await _checked(
            await self.http.patch(
                f"{_JOBS}/namespaces/{self.namespace}/jobs/{job_name}/status",
                content=json.dumps(patch),
                headers={"content-type": "application/merge-patch+json"},
            ),
            200,
            404,
        )


def _jobset_pod(
    jobset: dict[str, Any], rjob: dict[str, Any], index: int, node: str | None
) -> dict[str, Any]:
    """The pod an Indexed Job of the JobSet makes for ``index`` (named as the Job controller
    names it: the hostname plus a random suffix), on ``node``, or (``None``) left to the
    cluster's scheduler."""
    name = jobset["metadata"]["name"]
    template = rjob["template"]["spec"]["template"]
    host = f"{name}-{rjob['name']}-0-{index}"
    labels = dict(template["metadata"].get("labels") or {})
    labels.update(
        {
            _JOBSET_NAME: name,
            _RJOB_NAME: rjob["name"],
            "jobset.sigs.k8s.io/job-index": "0",
            _COMPLETION_INDEX: str(index),
            "job-name": f"{name}-{rjob['name']}-0",
        }
    )
    annotations = dict(template["metadata"].get("annotations") or {})
    annotations.update({_COMPLETION_INDEX: str(index), _JOBSET_NAME: name})
    spec = json.loads(json.dumps(template["spec"]))
    for container in spec["containers"]:
        path = f"metadata.annotations['{_COMPLETION_INDEX}']"
        container.setdefault("env", []).append(
            {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {"fieldPath": path}}}
        )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{host}-{secrets.token_hex(3)[:5]}",
            "namespace": jobset["metadata"]["namespace"],
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [_owned_by(jobset)],
        },
        "spec": {
            **spec,
            "hostname": host,
            "subdomain": name,
            **({"nodeName": node} if node else {}),
        },
    }


def _owned_by(jobset: dict[str, Any]) -> dict[str, Any]:
    """The owner reference the JobSet controller puts on what it makes."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "name": jobset["metadata"]["name"],
        "uid": jobset["metadata"]["uid"],
        "controller": True,
    }


def _child_job(jobset: dict[str, Any], rjob: dict[str, Any]) -> dict[str, Any]:
    """The batch/v1 Job JobSet makes for job index 0 of a replicated job."""
    name = jobset["metadata"]["name"]
    labels = {_JOBSET_NAME: name, _RJOB_NAME: rjob["name"], "jobset.sigs.k8s.io/job-index": "0"}
    spec = json.loads(json.dumps(rjob["template"]["spec"]))
    spec["template"]["metadata"].setdefault("labels", {}).update(labels)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{name}-{rjob['name']}-0",
            "namespace": jobset["metadata"]["namespace"],
            "labels": labels,
            "ownerReferences": [_owned_by(jobset)],
        },
        "spec": spec,
    }


def _condition(kind: str, status: bool, reason: str, message: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": _now(),
    }


class JobSetStandIn(_Watching):
    """A STAND-IN for JobSet's controller (and the Job controller under it); see the module.

    Args:
        http: a client to the server (admin credentials).
        namespace: where it acts on JobSets.
        node: the node its pods go to; ``None`` on a cluster with a real node, whose
            scheduler places them and whose kubelet runs and deletes them. There it
            makes no child ``batch/v1`` Job: Kubernetes 1.20's Job controller, real on
            that cluster, has no ``Indexed`` mode and would run the Job's pods itself.
    """

    def __init__(self, http: httpx2.AsyncClient, namespace: str, node: str | None = NODE) -> None:
        super().__init__(http, namespace)
        self.node = node

    def watched(self) -> list[tuple[str, Any]]:
        return [
            (f"{_JOBSETS}/namespaces/{self.namespace}/jobsets", self._jobset),
            (f"/api/v1/namespaces/{self.namespace}/pods", self._pod),
        ]

    def _path(self, name: str) -> str:
        return f"{_JOBSETS}/namespaces/{self.namespace}/jobsets/{name}"

    async def _jobset(self, kind: str, jobset: dict[str, Any]) -> None:
        name = jobset["metadata"]["name"]
        if kind == "DELETED":  # the garbage collector's part: the JobSet's Jobs and pods go
            await self._delete_pods(name)
            await self.http.delete(
                f"/apis/batch/v1/namespaces/{self.namespace}/jobs",
                params={"labelSelector": f"{_JOBSET_NAME}={name}"},
            )
            return
        status = jobset.get("status") or {}
        if kind not in ("ADDED", "MODIFIED") or status.get("terminalState"):
            return
        conditions = {c["type"]: c for c in status.get("conditions") or []}
        was_suspended = (conditions.get("Suspended") or {}).get("status") == "True"
        rjobs = jobset["spec"]["replicatedJobs"]
        if jobset["spec"].get("suspend"):
            if not was_suspended:  # suspended Jobs: the Job controller deletes their pods
                await self._delete_pods(name)
                counts = [{"suspended": 1} for _ in rjobs]
                suspended = _condition("Suspended", True, "SuspendedJobs", "jobset is suspended")
                await self._write(jobset, counts, [suspended])
            return
        if status and not was_suspended:
            return
        for rjob in rjobs:
            # the child Job, as JobSet makes it: the real server validates its template
            # as a batch/v1 Job (no Job controller acts on it; the pods are made here)
            if self.node:
                await _checked(
                    await self.http.post(
                        f"/apis/batch/v1/namespaces/{self.namespace}/jobs",
                        json=_child_job(jobset, rjob),
                    ),
                    201,
                    409,
                )
            for index in range(int(rjob["template"]["spec"]["completions"])):
                await _checked(
                    await self.http.post(
                        f"/api/v1/namespaces/{self.namespace}/pods",
                        json=_jobset_pod(jobset, rjob, index, self.node),
                    ),
                    201,
                )
        resumed = [_condition("Suspended", False, "ResumeJobs", "jobset is resumed")]
        await self._write(jobset, [{"active": 1} for _ in rjobs], resumed if was_suspended else [])

    async def _pod(self, kind: str, pod: dict[str, Any]) -> None:
        name = (pod["metadata"].get("labels") or {}).get(_JOBSET_NAME)
        if kind != "MODIFIED" or not name:
            return
        response = await self.http.get(self._path(name))
        if response.status_code == 404:
            return
        jobset = response.json()
        status = jobset.get("status") or {}
        if status.get("terminalState") or jobset["spec"].get("suspend"):
            return
        pods = await self._pods_of(name)
        counts = []
        for rjob in jobset["spec"]["replicatedJobs"]:
            mine = [
                each for each in pods if each["metadata"]["labels"].get(_RJOB_NAME) == rjob["name"]
            ]
            live = [each for each in mine if (each.get("status") or {}).get("phase") != "Failed"]
            # the Job controller's part: a failed pod is replaced while failures stay
            # within the Job's backoffLimit; past it, the Job fails
            failed = len(mine) - len(live) > int(rjob["template"]["spec"].get("backoffLimit") or 0)
            index = pod["metadata"]["annotations"].get(_COMPLETION_INDEX)
            replaced = any(
                each["metadata"]["annotations"].get(_COMPLETION_INDEX) == index for each in live
            )
            this = [each for each in mine if each["metadata"]["name"] == pod["metadata"]["name"]]
            if (
                this
                and not failed
                and not replaced
                and (this[0].get("status") or {}).get("phase") == "Failed"
            ):
                replacement = _jobset_pod(jobset, rjob, int(index), self.node)
                await _checked(
                    await self.http.post(
                        f"/api/v1/namespaces/{self.namespace}/pods", json=replacement
                    ),
                    201,
                )
                live.append(replacement)
            phases = [(each.get("status") or {}).get("phase") for each in live]
            complete = phases.count("Succeeded") == int(rjob["template"]["spec"]["completions"])
            ready = all(phase in ("Running", "Succeeded") for phase in phases)
            counts.append(
                {
                    "succeeded": int(complete),
                    "failed": int(failed),
                    "ready": int(ready and not complete and not failed),
                    "active": int(not complete and not failed),
                }
            )
        conditions = []
        if any(count["failed"] for count in counts):
            message = "jobset failed due to one or more job failures"
            conditions.append(_condition("Failed", True, "FailedJobs", message))
        elif all(count["succeeded"] for count in counts):
            message = "jobset completed successfully"
            conditions.append(_condition("Completed", True, "AllJobsCompleted", message))
        await self._write(jobset, counts, conditions)

    async def _write(
        self,
        jobset: dict[str, Any],
        counts: list[dict[str, int]],
        conditions: list[dict[str, str]],
    ) -> None:
        """Write the JobSet's status as its controller does: the replicated jobs' counts and
        the conditions (merged by type), ``terminalState`` once it ended."""
        status = jobset.get("status") or {}
        merged = {c["type"]: c for c in status.get("conditions") or []}
        merged.update({c["type"]: c for c in conditions})
        rjobs = [
            {"name": rjob["name"], "ready": 0, "succeeded": 0, "failed": 0, "active": 0}
            | {"suspended": 0}
            | count
            for rjob, count in zip(jobset["spec"]["replicatedJobs"], counts, strict=True)
        ]
        patch: dict[str, Any] = {
            "conditions": list(merged.values()),
            "restarts": 0,
            "replicatedJobsStatus": rjobs,
        }
        for end in ("Completed", "Failed"):
            if (merged.get(end) or {}).get("status") == "True":
                patch["terminalState"] = end
        await _checked(
            await self.http.patch(
                self._path(jobset["metadata"]["name"]) + "/status",
                content=json.dumps({"status": patch}),
                headers={"content-type": "application/merge-patch+json"},
            ),
            200,
            404,
        )

    async def _pods_of(self, name: str) -> list[dict[str, Any]]:
        listed = await _checked(
            await self.http.get(
                f"/api/v1/namespaces/{self.namespace}/pods",
                params={"labelSelector": f"{_JOBSET_NAME}={name}"},
            )
        )
        return list(listed["items"])

    async def _delete_pods(self, name: str) -> None:
        # a real kubelet confirms a graceful deletion; with none, remove at once
        params = {"gracePeriodSeconds": "0"} if self.node else {}
        for pod in await self._pods_of(name):
            await self.http.delete(
                f"/api/v1/namespaces/{self.namespace}/pods/{pod['metadata']['name']}",
                params=params,
            )


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
