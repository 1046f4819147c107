"""What the controller STAND-INS of :mod:`.bare_cluster` share: the API paths and labels
they act on, the node their pods go to, and :class:`_Watching` (list, then watch)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.abc
import httpx2

NODE = "asynctorchx-standin"
_JOBS = "/apis/batch.volcano.sh/v1alpha1"
_COMMANDS = "/apis/bus.volcano.sh/v1alpha1"
_JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2"
_WORKLOADS = "/apis/kueue.x-k8s.io/v1beta1/namespaces"
_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
_JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
_RJOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"


class _Unavailable(AssertionError):
    """The API server answered 5xx: its storage (etcd) restarts."""


async def _checked(response: httpx2.Response, *ok: int) -> dict[str, Any]:
    if response.status_code >= 500:
        raise _Unavailable(f"{response.request.method} {response.request.url}: {response.text}")
    if response.status_code not in (ok or (200, 201)):
        raise AssertionError(f"{response.request.method} {response.request.url}: {response.text}")
    return dict(response.json())


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
        """List, then watch from the list; when the server ends the watch, list again (once
        it answers again, as a controller does through the API server's restart)."""
        opened: list[bool] = []  # once the first watch is open (and the task started)
        while True:
            try:
                await self._list_and_watch(path, handle, opened, task_status)
            except (httpx2.TransportError, _Unavailable):
                if not opened:
                    raise
                await anyio.sleep(0.2)  # the server is down: no event tells when it is back

    async def _list_and_watch(
        self, path: str, handle: Any, opened: list[bool], task_status: anyio.abc.TaskStatus[None]
    ) -> None:
        response = await self.http.get(path)
        if opened and response.status_code == 404:  # a restarted server serves CRDs a bit later
            raise _Unavailable(f"GET {path}: 404")
        listed = await _checked(response)
        if opened:  # what happened while no watch was open
            for item in listed["items"]:
                await handle("MODIFIED", item)
        params = {"watch": "true", "resourceVersion": listed["metadata"]["resourceVersion"]}
        async with self.http.stream("GET", path, params=params) as response:
            if not opened:
                task_status.started()
                opened.append(True)
            async for line in response.aiter_lines():
                if line.strip():
                    event = json.loads(line)
                    if event["type"] != "ERROR":
                        await handle(event["type"], event["object"])
