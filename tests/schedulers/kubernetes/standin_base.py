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


async def _checked(response: httpx2.Response, *ok: int) -> dict[str, Any]:
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
