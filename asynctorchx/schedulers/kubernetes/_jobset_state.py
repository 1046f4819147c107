"""JobSet and pod states to asynctorchx states (``job_api=jobset``): pure decision tables.

A JobSet reports its end in ``status.conditions`` (``Completed`` or ``Failed`` with
status ``True``, and ``status.terminalState``), its suspension in ``spec.suspend`` and
the ``Suspended`` condition, and its progress per replicated job in
``status.replicatedJobsStatus`` (``ready``, ``succeeded``, ``failed``, ``active``,
``suspended`` child Jobs); see JobSet's ``api/jobset/v1alpha2/jobset_types.go``.
:func:`jobset_case` reads them in that order (:data:`JOBSET_STATE` is the table); each
replica comes from its pod, found by the labels and annotation the JobSet and Job
controllers set (a pod's name has a random suffix), and a pod that cannot start says why
as under Volcano (:mod:`._state`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asynctorchx.schedulers.kubernetes._jobset_request import (
    ANNOTATION_COMPLETION_INDEX,
    LABEL_JOBSET_NAME,
    LABEL_KUEUE_QUEUE,
    LABEL_REPLICATED_JOB,
)
from asynctorchx.schedulers.kubernetes._request import LABEL_ROLE_NAME
from asynctorchx.schedulers.kubernetes._state import Job, Pod, Replicas, read_role
from asynctorchx.specs.api import AppState, Role

#: What the JobSet shows -> the app's state, first match wins (a JobSet the scheduler
#: stopped for a pod that could never start reads ``FAILED`` before any: :attr:`Job.failed`).
JOBSET_STATE: Mapping[str, AppState] = {
    "Completed": AppState.SUCCEEDED,  # condition Completed=True (or terminalState)
    "Failed": AppState.FAILED,  # condition Failed=True (or terminalState)
    "Suspended": AppState.PENDING,  # spec.suspend, or condition Suspended=True
    "NoStatus": AppState.SUBMITTED,  # the controller has not written a status yet
    "AllJobsReady": AppState.RUNNING,  # every child Job ready (or succeeded)
    "Starting": AppState.PENDING,  # some child Job's pods are not all running yet
}


def _true_conditions(jobset: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    status = jobset.get("status") or {}
    return {
        str(c.get("type")): c for c in status.get("conditions") or [] if c.get("status") == "True"
    }


def jobset_case(jobset: Mapping[str, Any]) -> str:
    """Which row of :data:`JOBSET_STATE` the JobSet is in.

    Args:
        jobset: the JobSet (a JSON dict).
    """
    status = jobset.get("status") or {}
    conditions = _true_conditions(jobset)
    for end in ("Completed", "Failed"):
        if end in conditions or status.get("terminalState") == end:
            return end
    if (jobset.get("spec") or {}).get("suspend") or "Suspended" in conditions:
        return "Suspended"
    if not status:
        return "NoStatus"
    counts = {str(r.get("name")): r for r in status.get("replicatedJobsStatus") or []}
    for rjob in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        done = counts.get(str(rjob.get("name"))) or {}
        if int(done.get("ready") or 0) + int(done.get("succeeded") or 0) < int(
            rjob.get("replicas") or 1
        ):
            return "Starting"
    return "AllJobsReady"


def _message(jobset: Mapping[str, Any], case: str) -> str | None:
    """What the JobSet in row ``case`` says: why it waits (suspended: for Kueue's
    admission when it has a queue) or how it ended (its condition's message); else ``None``."""
    if case == "Suspended":
        queue = ((jobset.get("metadata") or {}).get("labels") or {}).get(LABEL_KUEUE_QUEUE)
        if queue:
            return f"waiting for Kueue to admit it from queue {queue!r} (the JobSet is suspended)"
        return "the JobSet is suspended (spec.suspend)"
    condition = _true_conditions(jobset).get(case) or {}
    if case in ("Completed", "Failed") and condition.get("message"):
        return str(condition["message"])
    return None


def parse_jobset(jobset: Mapping[str, Any]) -> Job:
    """Read a JobSet's JSON: its state is :data:`JOBSET_STATE` of :func:`jobset_case`, its
    restarts ``status.restarts``, what it says its suspension or ending condition's
    message; its replicas are those of its replicated jobs made from a role (one per role,
    ``parallelism`` pods, ``torchx.pytorch.org/role-name``), the container named after
    the replicated job.

    Args:
        jobset: the JobSet as the API server sent it.
    """
    roles: list[Role] = []
    containers: dict[tuple[str, int], str] = {}
    for rjob in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        job_spec = (rjob.get("template") or {}).get("spec") or {}
        template = job_spec.get("template") or {}
        name = ((template.get("metadata") or {}).get("labels") or {}).get(LABEL_ROLE_NAME)
        if name is None:
            continue
        roles.append(read_role(str(name), template, int(job_spec["parallelism"])))
        containers.update({(name, k): str(rjob["name"]) for k in range(roles[-1].num_replicas)})
    case = jobset_case(jobset)
    restarts = int((jobset.get("status") or {}).get("restarts") or 0)
    return Job.read(jobset, JOBSET_STATE[case], restarts, roles, containers, _message(jobset, case))


def _newness(pod: Pod) -> tuple[float, bool]:
    """Creation time (whole seconds), then not failed: a replacement is made for a failed
    pod, so on a tie the pod that has not failed is the newer."""
    return pod.created or 0.0, pod.phase != "Failed"


def jobset_replicas(jobset: Job, pods: Mapping[str, Pod]) -> Replicas:
    """Each replica of the JobSet, in order -> the newest pod of its index, or ``None``.

    A pod belongs to replica ``k`` of role ``r`` when its ``jobset-name`` label is the
    JobSet's, its ``replicatedjob-name`` label is ``r``'s replicated job and its
    ``batch.kubernetes.io/job-completion-index`` annotation is ``k``; a retried index has
    several pods, the newest is the replica's (by creation time, which has whole seconds:
    on a tie, the one that has not failed).

    Args:
        jobset: the JobSet.
        pods: pod name -> pod (others than the JobSet's are ignored).
    """
    roles = {rjob: role for (role, _), rjob in jobset.containers.items()}
    found: dict[tuple[str, int], Pod | None] = dict.fromkeys(jobset.containers)
    for pod in pods.values():
        role = roles.get(str(pod.labels.get(LABEL_REPLICATED_JOB)))
        index = pod.annotations.get(ANNOTATION_COMPLETION_INDEX, "")
        if pod.labels.get(LABEL_JOBSET_NAME) != jobset.name or role is None or not index.isdigit():
            continue
        key = (role, int(index))
        old = found.get(key)
        if key in found and (old is None or _newness(pod) > _newness(old)):
            found[key] = pod
    return found
