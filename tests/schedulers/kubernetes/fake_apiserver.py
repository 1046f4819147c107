"""A FAKE Kubernetes API server with a fake Volcano, for the ``kubernetes`` scheduler's tests.

No Kubernetes API server runs on the test machines, so this in-process HTTP/1.1 server
(anyio sockets + h11, so it runs under asyncio and trio) implements exactly the endpoints
the scheduler uses, with the API server's semantics for them:

- Volcano jobs: discovery (``GET /apis/batch.volcano.sh/v1alpha1``), create, get (and
  its ``status`` subresource, which TorchX's ``describe`` reads), list, watch, delete;
  ``bus.volcano.sh`` commands (``AbortJob``);
- pods: list and watch (``labelSelector`` with ``key=value`` terms), and ``log`` with
  ``follow``, ``timestamps``, ``sinceTime`` (inclusive) and ``container``;
- watches: ``resourceVersion`` (events after it; none given: ``ADDED`` for every
  object first), ``allowWatchBookmarks`` (``BOOKMARK`` events on :meth:`bookmark`),
  and a ``410 Gone`` ``ERROR`` event for a version older than the last
  :meth:`compact`.

A minimal Volcano controller creates one pod per task (``{job}-{task}-0``, with the
hostname and subdomain Volcano's ``svc`` plugin sets) and derives the job's phase from
its pods, with ``maxRetry`` and ``RestartJob`` policies. Pods do not run anything: the
test moves them with :meth:`start_pod`, :meth:`write_log` and :meth:`finish_pod`, and can
break things with :meth:`drop_connections` and :meth:`compact`. Counters
(:attr:`requests`, :attr:`watch_connections`, :attr:`max_open_watches`) let tests and
benchmarks check how the scheduler uses the API.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import json
import time
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import h11
from anyio.abc import SocketStream

JOBS = "jobs"
PODS = "pods"
_JOBS_PREFIX = "/apis/batch.volcano.sh/v1alpha1"
_COMMANDS_PREFIX = "/apis/bus.volcano.sh/v1alpha1"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _timestamp(ns: int) -> str:
    """RFC 3339 with nanoseconds, as the kubelet writes log timestamps."""
    seconds, nanos = divmod(ns, 1_000_000_000)
    stamp = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{nanos:09d}Z"


def _parse_time(text: str) -> int:
    """RFC 3339 (fraction optional) to nanoseconds since the epoch."""
    main, _, rest = text.rstrip("Z").partition(".")
    seconds = int(datetime.strptime(main, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp())
    return seconds * 1_000_000_000 + int((rest or "0").ljust(9, "0")[:9])


def _status(
    code: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details or {},
        "code": code,
    }


def _matches(obj: dict[str, Any], selector: str | None) -> bool:
    if not selector:
        return True
    labels = obj["metadata"].get("labels") or {}
    for term in selector.split(","):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


class _Notifier:
    def __init__(self) -> None:
        self.event = anyio.Event()

    def notify(self) -> None:
        event, self.event = self.event, anyio.Event()
        event.set()


class _Response(Exception):
    """Raised by a handler to answer at once (status and JSON body)."""

    def __init__(self, code: int, body: dict[str, Any]) -> None:
        super().__init__(code)
        self.code = code
        self.body = body


class FakeApiServer:
    """The fake API server; ``async with FakeApiServer().running(tmp_path) as server``.

    Args:
        volcano_installed: ``False``: the Volcano CRDs are missing (404 on their paths).
        queues: the Volcano queues that exist; a job in another queue is refused as
            Volcano's admission webhook refuses it.
    """

    def __init__(
        self, *, volcano_installed: bool = True, queues: tuple[str, ...] = ("default",)
    ) -> None:
        self.volcano_installed = volcano_installed
        self.queues = set(queues)
        self.rv = 1
        self.compacted_rv = 0
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {JOBS: {}, PODS: {}}
        self.events: dict[str, list[tuple[int, str, dict[str, Any]]]] = {JOBS: [], PODS: []}
        self.logs: dict[tuple[str, str], list[tuple[int, str]]] = {}
        self.changed = _Notifier()
        self.requests: list[tuple[str, str]] = []
        self.watch_connections: collections.Counter[str] = collections.Counter()
        self.open_watches: collections.Counter[str] = collections.Counter()
        self.max_open_watches: collections.Counter[str] = collections.Counter()
        self.log_connections = 0
        self.url = ""
        self._streams: list[tuple[str, anyio.CancelScope]] = []
        self._bookmarks = 0
        self._streams_changed = _Notifier()
        self._requested = _Notifier()
        self._watches_held = False

    # ------------------------------------------------------------------ serving

    @contextlib.asynccontextmanager
    async def running(self, directory: Path) -> AsyncIterator[FakeApiServer]:
        """Serve on 127.0.0.1 (a free port) and write ``directory/kubeconfig`` for it."""
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        self.url = f"http://127.0.0.1:{port}"
        self.kubeconfig = directory / "kubeconfig"
        self.kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                    "users": [{"name": "fake", "user": {"token": "fake-token"}}],
                    "contexts": [
                        {
                            "name": "fake",
                            "context": {"cluster": "fake", "user": "fake", "namespace": "default"},
                        }
                    ],
                    "current-context": "fake",
                }
            )
        )
        async with listener, anyio.create_task_group() as task_group:
            task_group.start_soon(listener.serve, self._connection, task_group)
            try:
                yield self
            finally:
                task_group.cancel_scope.cancel()

    async def _connection(self, stream: SocketStream) -> None:
        with contextlib.suppress(
            anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream
        ):
            await self._serve_connection(stream)

    async def _serve_connection(self, stream: SocketStream) -> None:
        async with stream:
            connection = h11.Connection(h11.SERVER)
            while True:
                request, body = await self._read_request(stream, connection)
                if request is None:
                    return
                keep = await self._answer(stream, connection, request, body)
                if not keep or connection.our_state is not h11.DONE:
                    return
                try:
                    connection.start_next_cycle()
                except h11.LocalProtocolError:
                    return

    async def _read_request(
        self, stream: SocketStream, connection: h11.Connection
    ) -> tuple[h11.Request | None, bytes]:
        request: h11.Request | None = None
        body = b""
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                try:
                    connection.receive_data(await stream.receive())
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return None, b""
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return request, body
            else:
                return None, b""

    async def _send(self, stream: SocketStream, connection: h11.Connection, event: Any) -> None:
        await stream.send(connection.send(event))

    async def _answer(
        self, stream: SocketStream, connection: h11.Connection, request: h11.Request, body: bytes
    ) -> bool:
        target = urllib.parse.urlsplit(request.target.decode())
        query = {key: values[-1] for key, values in urllib.parse.parse_qs(target.query).items()}
        method = request.method.decode()
        self.requests.append((method, target.path + ("?" + target.query if target.query else "")))
        self._requested.notify()
        try:
            streamer = self._route(method, target.path, query, body)
        except _Response as answer:
            data = json.dumps(answer.body).encode()
            headers = [("content-type", "application/json"), ("content-length", str(len(data)))]
            await self._send(
                stream, connection, h11.Response(status_code=answer.code, headers=headers)
            )
            await self._send(stream, connection, h11.Data(data=data))
            await self._send(stream, connection, h11.EndOfMessage())
            return True
        kind, content_type, chunks = streamer
        headers = [("content-type", content_type), ("transfer-encoding", "chunked")]
        await self._send(stream, connection, h11.Response(status_code=200, headers=headers))
        with anyio.CancelScope() as scope:
            entry = (kind, scope)
            self._streams.append(entry)
            self._streams_changed.notify()
            try:
                async for chunk in chunks:
                    await self._send(stream, connection, h11.Data(data=chunk))
                await self._send(stream, connection, h11.EndOfMessage())
                return True
            finally:
                self._streams.remove(entry)
        return False  # dropped: close the socket mid-response

    # ------------------------------------------------------------------ routing

    def _route(
        self, method: str, path: str, query: dict[str, str], body: bytes
    ) -> tuple[str, str, AsyncIterator[bytes]]:
        parts = path.strip("/").split("/")
        if path.startswith(_JOBS_PREFIX) or path.startswith(_COMMANDS_PREFIX):
            if not self.volcano_installed:
                raise _Response(
                    404,
                    _status(404, "NotFound", "the server could not find the requested resource"),
                )
            if path.rstrip("/") == _JOBS_PREFIX and method == "GET":
                raise _Response(
                    200,
                    {
                        "kind": "APIResourceList",
                        "apiVersion": "v1",
                        "groupVersion": "batch.volcano.sh/v1alpha1",
                        "resources": [
                            {
                                "name": "jobs",
                                "namespaced": True,
                                "kind": "Job",
                                "verbs": ["create", "delete", "get", "list", "watch"],
                            }
                        ],
                    },
                )
        # /apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs[/{name}]
        if (
            path.startswith(_JOBS_PREFIX + "/namespaces/")
            and len(parts) in (6, 7)
            and parts[5] == JOBS
        ):
            namespace = parts[4]
            name = parts[6] if len(parts) == 7 else None
            return self._jobs(method, namespace, name, query, body)
        # .../jobs/{name}/status: the status subresource (TorchX's describe reads it)
        if (
            path.startswith(_JOBS_PREFIX + "/namespaces/")
            and len(parts) == 8
            and parts[5] == JOBS
            and parts[7] == "status"
            and method == "GET"
        ):
            return self._jobs(method, parts[4], parts[6], query, body)
        if (
            path.startswith(_COMMANDS_PREFIX + "/namespaces/")
            and len(parts) == 6
            and parts[5] == "commands"
            and method == "POST"
        ):
            self._command(parts[4], json.loads(body))
        # /api/v1/namespaces/{ns}/pods[/{name}/log]
        if (
            path.startswith("/api/v1/namespaces/")
            and len(parts) >= 5
            and parts[4] == PODS
            and method == "GET"
        ):
            if len(parts) == 5:
                return self._list_or_watch(PODS, parts[3], query)
            if len(parts) == 7 and parts[6] == "log":
                return self._log(parts[3], parts[5], query)
        raise _Response(
            404, _status(404, "NotFound", "the server could not find the requested resource")
        )

    def _jobs(
        self, method: str, namespace: str, name: str | None, query: dict[str, str], body: bytes
    ) -> tuple[str, str, AsyncIterator[bytes]]:
        if name is None and method == "GET":
            return self._list_or_watch(JOBS, namespace, query)
        if name is None and method == "POST":
            self._create_job(namespace, json.loads(body), dry_run=query.get("dryRun") == "All")
        if name is not None and method == "GET":
            job = self.objects[JOBS].get((namespace, name))
            if job is None:
                raise _Response(
                    404,
                    _status(
                        404,
                        "NotFound",
                        f'jobs.batch.volcano.sh "{name}" not found',
                        {"name": name, "group": "batch.volcano.sh", "kind": "jobs"},
                    ),
                )
            raise _Response(200, job)
        if name is not None and method == "DELETE":
            job = self.objects[JOBS].get((namespace, name))
            if job is None:
                raise _Response(
                    404,
                    _status(
                        404,
                        "NotFound",
                        f'jobs.batch.volcano.sh "{name}" not found',
                        {"name": name, "group": "batch.volcano.sh", "kind": "jobs"},
                    ),
                )
            for pod in self._pods_of(namespace, name):
                self._delete(PODS, pod)
            self._delete(JOBS, job)
            raise _Response(
                200,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Success",
                    "details": {"name": name},
                },
            )
        raise _Response(405, _status(405, "MethodNotAllowed", f"{method} is not allowed here"))

    # ------------------------------------------------------------------ objects and events

    def _record(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.events[kind].append((self.rv, event_type, copy.deepcopy(obj)))
        self.changed.notify()

    def _put(self, kind: str, obj: dict[str, Any]) -> None:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        event_type = "MODIFIED" if key in self.objects[kind] else "ADDED"
        self.objects[kind][key] = obj
        self._record(kind, event_type, obj)

    def _delete(self, kind: str, obj: dict[str, Any]) -> None:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        self.objects[kind].pop(key, None)
        self._record(kind, "DELETED", obj)

    def _list(self, kind: str, namespace: str, selector: str | None) -> list[dict[str, Any]]:
        return [
            copy.deepcopy(obj)
            for (ns, _), obj in sorted(self.objects[kind].items())
            if ns == namespace and _matches(obj, selector)
        ]

    def _list_or_watch(
        self, kind: str, namespace: str, query: dict[str, str]
    ) -> tuple[str, str, AsyncIterator[bytes]]:
        selector = query.get("labelSelector")
        if query.get("watch") not in ("true", "1"):
            list_kind = "JobList" if kind == JOBS else "PodList"
            raise _Response(
                200,
                {
                    "kind": list_kind,
                    "apiVersion": "batch.volcano.sh/v1alpha1" if kind == JOBS else "v1",
                    "metadata": {"resourceVersion": str(self.rv)},
                    "items": self._list(kind, namespace, selector),
                },
            )
        return kind, "application/json", self._watch(kind, namespace, query)

    async def _watch(
        self, kind: str, namespace: str, query: dict[str, str]
    ) -> AsyncIterator[bytes]:
        selector = query.get("labelSelector")
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        self.watch_connections[kind] += 1
        self.open_watches[kind] += 1
        self.max_open_watches[kind] = max(self.max_open_watches[kind], self.open_watches[kind])
        try:
            since = query.get("resourceVersion")
            if since in (None, "", "0"):
                last = self.rv
                for obj in self._list(kind, namespace, selector):
                    yield json.dumps({"type": "ADDED", "object": obj}).encode() + b"\n"
            else:
                last = int(since)
                if last < self.compacted_rv:
                    gone = _status(
                        410, "Expired", f"too old resource version: {last} ({self.compacted_rv})"
                    )
                    yield json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n"
                    return
            bookmarks_seen = self._bookmarks
            while True:
                changed = self.changed.event
                if self._watches_held:
                    await changed.wait()
                    continue
                for rv, event_type, obj in list(self.events[kind]):
                    if rv <= last:
                        continue
                    last = rv
                    if obj["metadata"]["namespace"] == namespace and _matches(obj, selector):
                        yield json.dumps({"type": event_type, "object": obj}).encode() + b"\n"
                if bookmarks and self._bookmarks > bookmarks_seen:
                    bookmarks_seen = self._bookmarks
                    if not any(rv > last for rv, _, _ in self.events[kind]):
                        last = self.rv
                    api = "batch.volcano.sh/v1alpha1" if kind == JOBS else "v1"
                    mark = {
                        "kind": "Job" if kind == JOBS else "Pod",
                        "apiVersion": api,
                        "metadata": {"resourceVersion": str(last)},
                    }
                    yield json.dumps({"type": "BOOKMARK", "object": mark}).encode() + b"\n"
                await changed.wait()
        finally:
            self.open_watches[kind] -= 1

    # ------------------------------------------------------------------ fake Volcano

    def _create_job(self, namespace: str, job: dict[str, Any], dry_run: bool = False) -> None:
        metadata = job.get("metadata") or {}
        name = metadata.get("name")
        if job.get("kind") != "Job" or not name or not (job.get("spec") or {}).get("tasks"):
            raise _Response(
                422,
                _status(
                    422, "Invalid", "Job is invalid: metadata.name and spec.tasks are required"
                ),
            )
        if (namespace, name) in self.objects[JOBS]:
            raise _Response(
                409,
                _status(
                    409,
                    "AlreadyExists",
                    f'jobs.batch.volcano.sh "{name}" already exists',
                    {"name": name},
                ),
            )
        queue = job["spec"].get("queue", "default")
        if queue not in self.queues:
            raise _Response(
                400,
                _status(
                    400,
                    "BadRequest",
                    'admission webhook "validatejob.volcano.sh" denied the request:'
                    f" unable to find job queue: {queue}",
                ),
            )
        if dry_run:  # validated, admitted, not stored (Kubernetes' dryRun=All)
            raise _Response(201, job)
        job = copy.deepcopy(job)
        job["metadata"].update(namespace=namespace, uid=str(uuid.uuid4()), creationTimestamp=_now())
        job["status"] = {
            "state": {"phase": "Pending", "lastTransitionTime": _now()},
            "retryCount": 0,
        }
        self._put(JOBS, job)
        for task in job["spec"]["tasks"]:
            self._create_pod(job, task)
        raise _Response(201, job)

    def _create_pod(self, job: dict[str, Any], task: dict[str, Any]) -> None:
        namespace, job_name = job["metadata"]["namespace"], job["metadata"]["name"]
        template = copy.deepcopy(task["template"])
        name = f"{job_name}-{task['name']}-0"
        labels = dict(template["metadata"].get("labels") or {})
        labels.update({"volcano.sh/job-name": job_name, "volcano.sh/task-spec": task["name"]})
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": str(uuid.uuid4()),
                "labels": labels,
                "annotations": template["metadata"].get("annotations") or {},
                "creationTimestamp": _now(),
            },
            "spec": {**template["spec"], "hostname": name, "subdomain": job_name},
            "status": {"phase": "Pending"},
        }
        self.logs[(namespace, name)] = []
        self._put(PODS, pod)

    def _pods_of(self, namespace: str, job_name: str) -> list[dict[str, Any]]:
        return [
            pod
            for (ns, _), pod in self.objects[PODS].items()
            if ns == namespace and pod["metadata"]["labels"].get("volcano.sh/job-name") == job_name
        ]

    def _set_phase(self, job: dict[str, Any], phase: str) -> None:
        if job["status"]["state"]["phase"] != phase:
            job["status"]["state"] = {"phase": phase, "lastTransitionTime": _now()}
            self._put(JOBS, job)

    def _reconcile(self, namespace: str, job_name: str) -> None:
        job = self.objects[JOBS].get((namespace, job_name))
        if job is None or job["status"]["state"]["phase"] in (
            "Aborting",
            "Aborted",
            "Completed",
            "Failed",
        ):
            return
        pods = self._pods_of(namespace, job_name)
        phases = [pod["status"]["phase"] for pod in pods]
        failed = [pod for pod in pods if pod["status"]["phase"] == "Failed"]
        if failed:
            self._retry_or_fail(job, failed)
        elif phases and all(phase == "Succeeded" for phase in phases):
            self._set_phase(job, "Completed")
        elif phases and all(phase in ("Running", "Succeeded") for phase in phases):
            self._set_phase(job, "Running")

    def _retry_or_fail(self, job: dict[str, Any], failed: list[dict[str, Any]]) -> None:
        namespace, job_name = job["metadata"]["namespace"], job["metadata"]["name"]
        tasks = {task["name"]: task for task in job["spec"]["tasks"]}
        task = tasks[failed[0]["metadata"]["labels"]["volcano.sh/task-spec"]]
        restart_job = any(
            policy.get("action") == "RestartJob" for policy in task.get("policies", [])
        )
        retries = job["status"]["retryCount"]
        if restart_job and retries < task.get("maxRetry", 0):
            job["status"]["retryCount"] = retries + 1
            self._set_phase(job, "Restarting")
            for pod in self._pods_of(namespace, job_name):
                self._delete(PODS, pod)
            for each in job["spec"]["tasks"]:
                self._create_pod(job, each)
            self._set_phase(job, "Pending")
        elif not restart_job and retries < task.get("maxRetry", 0):
            job["status"]["retryCount"] = retries + 1
            self._put(JOBS, job)
            for pod in failed:
                self._delete(PODS, pod)
                self._create_pod(job, tasks[pod["metadata"]["labels"]["volcano.sh/task-spec"]])
        else:
            self._set_phase(job, "Failed")

    def _command(self, namespace: str, command: dict[str, Any]) -> None:
        target = (command.get("target") or {}).get("name")
        job = self.objects[JOBS].get((namespace, target or ""))
        if command.get("action") != "AbortJob" or job is None:
            raise _Response(
                422,
                _status(
                    422, "Invalid", f"command {command.get('action')!r} on {target!r} is invalid"
                ),
            )
        if job["status"]["state"]["phase"] not in ("Completed", "Failed", "Aborted"):
            self._set_phase(job, "Aborting")
            for pod in self._pods_of(namespace, target or ""):
                self._delete(PODS, pod)
            self._set_phase(job, "Aborted")
        created = copy.deepcopy(command)
        created["metadata"] = {
            **command.get("metadata", {}),
            "name": f"{target}-abortjob-x",
            "namespace": namespace,
        }
        raise _Response(201, created)

    # ------------------------------------------------------------------ logs

    async def _log_lines(
        self, key: tuple[str, str], query: dict[str, str], uid: str
    ) -> AsyncIterator[bytes]:
        since = _parse_time(query["sinceTime"]) if "sinceTime" in query else None
        stamps = query.get("timestamps") in ("true", "1")
        follow = query.get("follow") in ("true", "1")
        sent = 0
        self.log_connections += 1
        while True:
            changed = self.changed.event
            lines = self.logs.get(key, [])
            new = lines[sent:]  # lines written while a yield waits are sent next time
            sent += len(new)
            for ns, line in new:
                if since is None or ns >= since:
                    yield ((_timestamp(ns) + " ") if stamps else "").encode() + line.encode()
            pod = self.objects[PODS].get(key)
            if (
                not follow
                or pod is None
                or pod["metadata"]["uid"] != uid
                or pod["status"]["phase"] in ("Succeeded", "Failed")
            ):
                return
            await changed.wait()

    def _log(
        self, namespace: str, name: str, query: dict[str, str]
    ) -> tuple[str, str, AsyncIterator[bytes]]:
        pod = self.objects[PODS].get((namespace, name))
        if pod is None:
            raise _Response(
                404,
                _status(
                    404, "NotFound", f'pods "{name}" not found', {"name": name, "kind": "pods"}
                ),
            )
        if pod["status"]["phase"] == "Pending":
            raise _Response(
                400,
                _status(
                    400,
                    "BadRequest",
                    f'container "{name}" in pod "{name}" is waiting to start: ContainerCreating',
                ),
            )
        return (
            "log",
            "text/plain",
            self._log_lines((namespace, name), query, pod["metadata"]["uid"]),
        )

    # ------------------------------------------------------------------ the test's controls

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any]:
        """The pod ``name`` as the server has it now."""
        return self.objects[PODS][(namespace, name)]

    def job(self, name: str, namespace: str = "default") -> dict[str, Any]:
        """The job ``name`` as the server has it now."""
        return self.objects[JOBS][(namespace, name)]

    def start_pod(self, name: str, namespace: str = "default") -> None:
        """Move a pending pod to Running (scheduled on ``fake-node``)."""
        pod = self.pod(name, namespace)
        container = pod["spec"]["containers"][0]["name"]
        pod["spec"]["nodeName"] = "fake-node"
        pod["status"] = {
            "phase": "Running",
            "podIP": f"10.0.0.{len(self.objects[PODS]) % 250 + 1}",
            "containerStatuses": [
                {
                    "name": container,
                    "state": {"running": {"startedAt": _now()}},
                    "restartCount": 0,
                    "ready": True,
                    "image": "",
                    "imageID": "",
                }
            ],
        }
        self._put(PODS, pod)
        self._reconcile(namespace, pod["metadata"]["labels"]["volcano.sh/job-name"])

    def write_log(
        self, name: str, *lines: str, namespace: str = "default", same_time: bool = False
    ) -> None:
        """Append lines (each ending with ``\\n`` unless given without) to a pod's log.

        Args:
            name: the pod.
            lines: the lines.
            namespace: its namespace.
            same_time: give every line the timestamp of the log's last line (or one
                shared timestamp): the kubelet can write several lines at one time.
        """
        log = self.logs[(namespace, name)]
        if same_time and log:
            stamp = log[-1][0]
        else:
            stamp = max(time.time_ns(), (log[-1][0] + 1) if log else 0)
        for line in lines:
            log.append((stamp, line if line.endswith("\n") else line + "\n"))
            if not same_time:
                stamp += 1000
        self.changed.notify()

    def finish_pod(self, name: str, exit_code: int, namespace: str = "default") -> None:
        """End a pod's container with ``exit_code`` (0: Succeeded, else Failed)."""
        pod = self.pod(name, namespace)
        if pod["status"].get("phase") == "Pending":
            self.start_pod(name, namespace)
            pod = self.pod(name, namespace)
        container = pod["spec"]["containers"][0]["name"]
        pod["status"]["phase"] = "Succeeded" if exit_code == 0 else "Failed"
        pod["status"]["containerStatuses"] = [
            {
                "name": container,
                "state": {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": "Completed" if exit_code == 0 else "Error",
                        "finishedAt": _now(),
                    }
                },
                "restartCount": 0,
                "ready": False,
                "image": "",
                "imageID": "",
            }
        ]
        self._put(PODS, pod)
        self._reconcile(namespace, pod["metadata"]["labels"]["volcano.sh/job-name"])

    def bookmark(self) -> None:
        """Send a ``BOOKMARK`` (the current resourceVersion) on watches that allow them."""
        self._bookmarks += 1
        self.changed.notify()

    def compact(self) -> None:
        """Forget every event so far: a watch from an older resourceVersion gets 410 Gone."""
        self.compacted_rv = self.rv
        for kind in self.events:
            self.events[kind] = []

    def drop_connections(self, kind: str | None = None) -> int:
        """Cut every open streaming response (``jobs``/``pods`` watches, ``log``) mid-stream.

        Returns:
            how many were cut.
        """
        cut = [scope for each, scope in self._streams if kind is None or each == kind]
        for scope in cut:
            scope.cancel()
        return len(cut)

    @contextlib.contextmanager
    def watches_held(self) -> Iterator[None]:
        """Deliver no watch event meanwhile (a watch that lags behind the server's state);
        the held events follow on exit."""
        self._watches_held = True
        try:
            yield
        finally:
            self._watches_held = False
            self.changed.notify()

    async def wait_for_requests(self, predicate: Callable[[str, str], bool], count: int) -> None:
        """Wait until at least ``count`` requests satisfy ``predicate`` (see :meth:`count`)."""
        while True:
            requested = self._requested.event
            if self.count(predicate) >= count:
                return
            await requested.wait()

    def count(self, predicate: Callable[[str, str], bool]) -> int:
        """How many requests so far satisfy ``predicate(method, path_and_query)``."""
        return sum(1 for method, path in self.requests if predicate(method, path))

    async def wait_for_streams(self, kind: str, count: int = 1) -> None:
        """Wait until at least ``count`` streaming responses of ``kind`` are open."""
        while True:
            changed = self._streams_changed.event
            if sum(1 for each, _ in self._streams if each == kind) >= count:
                return
            await changed.wait()


__all__ = ["JOBS", "PODS", "FakeApiServer"]
