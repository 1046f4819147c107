"""JobSet and pod states to asynctorchx states (``job_api=jobset``): pure decision tables.

A JobSet reports its end in ``status.conditions`` (``Completed`` or ``Failed`` with
status ``True``, and ``status.terminalState``), its suspension in ``spec.suspend`` and
the ``Suspended`` condition, and its progress per replicated job in
``status.replicatedJobsStatus`` (``ready``, ``succeeded``, ``failed``, ``active``,
``suspended`` child Jobs); see JobSet's ``api/jobset/v1alpha2/jobset_types.go``.
:func:`jobset_state` reads them in that order (:data:`JOBSET_STATE` is the table); each
replica comes from its pod, found by the labels and annotation the JobSet and Job
controllers set (a pod's name has a random suffix), and a pod that cannot start says why
as under Volcano (:mod:`._state`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asynctorchx.schedulers._responses import DescribeAppResponse
from asynctorchx.schedulers.kubernetes._jobset_request import (
    ANNOTATION_COMPLETION_INDEX,
    LABEL_KUEUE_QUEUE,
    LABEL_REPLICATED_JOB,
    replicated_jobs,
)
from asynctorchx.schedulers.kubernetes._request import LABEL_ROLE_NAME
from asynctorchx.schedulers.kubernetes._state import (
    ANNOTATION_FAILED,
    Pod,
    Replicas,
    describe,
    failure,
    read_role,
)
from asynctorchx.specs.api import AppState, Role

#: What the JobSet shows -> the app's state, first match wins.
JOBSET_STATE: Mapping[str, AppState] = {
    "Completed": AppState.SUCCEEDED,  # condition Completed=True (or terminalState)
    "Failed": AppState.FAILED,  # condition Failed=True (or terminalState), or ANNOTATION_FAILED
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
    if ANNOTATION_FAILED in ((jobset.get("metadata") or {}).get("annotations") or {}):
        return "Failed"  # the scheduler stopped it (a pod could never start); it stays suspended
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


def jobset_state(jobset: Mapping[str, Any]) -> AppState:
    """The app state of a JobSet (:data:`JOBSET_STATE`).

    Args:
        jobset: the JobSet (a JSON dict).
    """
    return JOBSET_STATE[jobset_case(jobset)]


def jobset_message(jobset: Mapping[str, Any]) -> str | None:
    """What the JobSet itself says: why it waits (suspended: for Kueue's admission when
    it has a queue) or how it ended (its condition's message); else ``None``.

    Args:
        jobset: the JobSet (a JSON dict).
    """
    case = jobset_case(jobset)
    condition = _true_conditions(jobset).get(case) or {}
    if case == "Suspended":
        queue = ((jobset.get("metadata") or {}).get("labels") or {}).get(LABEL_KUEUE_QUEUE)
        if queue:
            return f"waiting for Kueue to admit it from queue {queue!r} (the JobSet is suspended)"
        return "the JobSet is suspended (spec.suspend)"
    if case in ("Completed", "Failed") and condition.get("message"):
        return str(condition["message"])
    return None


def _newness(pod: Pod) -> tuple[float, bool]:
    """Creation time (whole seconds), then not failed: a replacement is made for a failed
    pod, so on a tie the pod that has not failed is the newer."""
    return pod.created or 0.0, pod.phase != "Failed"


def replica_pods(jobset: Mapping[str, Any], pods: Mapping[str, Pod]) -> dict[tuple[str, int], Pod]:
    """Each replica's pod: ``(role, replica id)`` -> the newest pod of that index.

    A pod belongs to replica ``k`` of role ``r`` when its ``replicatedjob-name`` label is
    ``r``'s replicated job and its ``batch.kubernetes.io/job-completion-index``
    annotation is ``k``; a retried index has several pods, the newest is the replica's
    (by creation time, which has whole seconds: on a tie, the one that has not failed).

    Args:
        jobset: the JobSet (a JSON dict).
        pods: pod name -> pod, for the JobSet's pods.
    """
    roles = {rjob: role for role, rjob, _ in replicated_jobs(jobset)}
    found: dict[tuple[str, int], Pod] = {}
    for pod in pods.values():
        role = roles.get(str(pod.labels.get(LABEL_REPLICATED_JOB)))
        index = pod.annotations.get(ANNOTATION_COMPLETION_INDEX)
        if role is None or index is None or not index.isdigit():
            continue
        key = (role, int(index))
        if key not in found or _newness(pod) > _newness(found[key]):
            found[key] = pod
    return found


def _replicas(jobset: Mapping[str, Any], pods: Mapping[str, Pod]) -> Replicas:
    """Every replica of the JobSet, in order -> its pod (:func:`replica_pods`) or ``None``."""
    found = replica_pods(jobset, pods)
    return {
        (role, replica_id): found.get((role, replica_id))
        for role, _, count in replicated_jobs(jobset)
        for replica_id in range(count)
    }


def jobset_failure(jobset: Mapping[str, Any], pods: Mapping[str, Pod], now: float) -> str | None:
    """:func:`._state.failure` of a JobSet.

    Args:
        jobset: the JobSet (a JSON dict).
        pods: pod name -> pod, for the JobSet's pods.
        now: the current time (epoch seconds).
    """
    return failure(jobset, jobset_state(jobset), _replicas(jobset, pods), now)


def _roles(jobset: Mapping[str, Any]) -> list[Role]:
    roles = []
    for rjob in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        job_spec = rjob["template"]["spec"]
        name = job_spec["template"]["metadata"]["labels"].get(LABEL_ROLE_NAME, rjob["name"])
        roles.append(read_role(name, job_spec["template"], int(job_spec["parallelism"])))
    return roles


def describe_jobset(
    app_id: str, jobset: Mapping[str, Any], pods: Mapping[str, Pod], now: float
) -> DescribeAppResponse:
    """:func:`._state.describe` of a JobSet: its ``restarts``, and what it says of its
    state (:func:`jobset_message`).

    Args:
        app_id: the app's id (``{namespace}:jobset:{name}``).
        jobset: the JobSet.
        pods: pod name -> pod, for the JobSet's pods (others are ignored).
        now: the current time (epoch seconds), for the image pull timeout.
    """
    return describe(
        app_id,
        jobset,
        jobset_state(jobset),
        _replicas(jobset, pods),
        _roles(jobset),
        now,
        int((jobset.get("status") or {}).get("restarts") or 0),
        jobset_message(jobset),
    )
