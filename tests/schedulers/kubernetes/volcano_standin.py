"""A STAND-IN for Volcano's job controller on a bare API server (see :mod:`.bare_cluster`).

:class:`VolcanoStandIn`, a task watching jobs, commands and pods on the real server: it
creates one pod per task (``{job}-{task}-0``, on the stand-in node), moves the job's phase
as the pods' phases move (Pending, Running, Completed, Failed), retries a failed pod as
Volcano does (a task's ``maxRetry``, its ``RestartJob`` policy: ``retryCount``,
``Restarting``, the pods made again once the old ones are gone), acts on ``AbortJob``
commands (Aborting, pods deleted, Aborted) and, as the garbage collector would, deletes a
deleted job's pods. For a job with the ``svc`` plugin it does that plugin's part: the
ConfigMap ``{job}-svc`` of each task's hosts, the headless Service ``{job}`` (the pods'
subdomain), and in each pod ``VC_{TASK}_HOSTS`` and ``VC_{TASK}_NUM`` from that ConfigMap,
mounted at ``/etc/volcano``; both go with the job (its NetworkPolicy is left out: nothing on
these clusters enforces one).
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx2

from tests.schedulers.kubernetes.fake_apiserver import _now
from tests.schedulers.kubernetes.standin_base import (
    _COMMANDS,
    _JOBS,
    NODE,
    _checked,
    _Watching,
)


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
        job = await _checked(response, 200)
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
