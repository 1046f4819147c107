"""A STAND-IN for JobSet's controller and the Job controller under it (see
:mod:`.bare_cluster`).

:class:`JobSetStandIn`: for an unsuspended JobSet it creates each replicated job's
``batch/v1`` Job (which the real server validates; nothing acts on it) and its pods as an
Indexed Job does (``{jobset}-{rjob}-0-{k}-xxxxx``, hostname ``{jobset}-{rjob}-0-{k}``,
subdomain the JobSet, the ``batch.kubernetes.io/job-completion-index`` annotation and
label, JobSet's labels, ``JOB_COMPLETION_INDEX``), writes ``status.replicatedJobsStatus``
and the ``Suspended``/``Completed``/``Failed`` conditions as JobSet does, deletes the pods of
a suspended or deleted JobSet, and replaces a failed pod while the Job's ``backoffLimit``
allows.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import httpx2

from tests.schedulers.kubernetes.fake_apiserver import _now
from tests.schedulers.kubernetes.standin_base import (
    _COMPLETION_INDEX,
    _JOBSET_NAME,
    _JOBSETS,
    _RJOB_NAME,
    NODE,
    _checked,
    _Watching,
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
