"""Volcano job and pod states to asynctorchx states: pure decision tables, no I/O.

The app's state is the Volcano job's phase, TorchX's table
(``torchx.schedulers.kubernetes_scheduler.JOB_STATE``): Volcano decides whether a failed
pod ends the job or is retried. Each replica's state, exit code and hostname come from
its pod (TorchX 0.7.0 reads only the job's task counts and reports no hostname).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asynctorchx.schedulers._responses import DescribeAppResponse
from asynctorchx.schedulers.kubernetes._request import LABEL_REPLICA_ID, LABEL_ROLE_NAME
from asynctorchx.schedulers.toolkit import describe_app, role_statuses
from asynctorchx.specs.api import AppState, ReplicaStatus, Role, is_terminal

#: Volcano job phase -> app state (TorchX's table, plus ``Completing``).
JOB_STATE: Mapping[str, AppState] = {
    "Pending": AppState.PENDING,
    "Aborting": AppState.RUNNING,
    "Aborted": AppState.CANCELLED,
    "Running": AppState.RUNNING,
    "Restarting": AppState.RUNNING,
    "Completing": AppState.RUNNING,
    "Completed": AppState.SUCCEEDED,
    "Terminating": AppState.RUNNING,
    "Terminated": AppState.FAILED,
    "Failed": AppState.FAILED,
}

#: Pod phase -> replica state (Kubernetes' pod lifecycle).
POD_STATE: Mapping[str, AppState] = {
    "Pending": AppState.PENDING,
    "Running": AppState.RUNNING,
    "Succeeded": AppState.SUCCEEDED,
    "Failed": AppState.FAILED,
    "Unknown": AppState.UNKNOWN,
}


def job_phase(job: Mapping[str, Any]) -> str | None:
    """The job's Volcano phase, or ``None`` before the controller gave it one.

    Args:
        job: the Volcano job (a JSON dict).
    """
    status = job.get("status") or {}
    phase = (status.get("state") or {}).get("phase")
    return str(phase) if phase else None


def job_state(job: Mapping[str, Any]) -> AppState:
    """The app state of a Volcano job: ``SUBMITTED`` before it has a phase.

    Args:
        job: the Volcano job (a JSON dict).
    """
    phase = job_phase(job)
    if phase is None:
        return AppState.SUBMITTED
    return JOB_STATE.get(phase, AppState.UNKNOWN)


def exit_code(pod: Mapping[str, Any]) -> int | None:
    """The exit code of the pod's (first) container once it terminated, else ``None``.

    Args:
        pod: the pod (a JSON dict).
    """
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated")
        if terminated is not None and terminated.get("exitCode") is not None:
            return int(terminated["exitCode"])
    return None


def hostname(pod: Mapping[str, Any]) -> str:
    """The name other replicas reach the pod by: ``{hostname}.{subdomain}`` (Volcano's svc
    plugin sets both), else its IP, else ``""``.

    Args:
        pod: the pod (a JSON dict).
    """
    spec = pod.get("spec") or {}
    if spec.get("hostname") and spec.get("subdomain"):
        return f"{spec['hostname']}.{spec['subdomain']}"
    return str((pod.get("status") or {}).get("podIP") or "")


def _replica(
    task: Mapping[str, Any], pod: Mapping[str, Any] | None, app: AppState
) -> ReplicaStatus:
    labels = task["template"]["metadata"]["labels"]
    role, replica_id = labels[LABEL_ROLE_NAME], int(labels[LABEL_REPLICA_ID])
    if pod is None:  # not created yet, or removed (an aborted job's pods are deleted)
        state = app if is_terminal(app) else AppState.PENDING
        return ReplicaStatus(replica_id, state, role, "")
    state = POD_STATE.get(str((pod.get("status") or {}).get("phase")), AppState.UNKNOWN)
    if app == AppState.CANCELLED and not is_terminal(state):
        state = AppState.CANCELLED
    return ReplicaStatus(replica_id, state, role, hostname(pod), exit_code=exit_code(pod))


def _roles(tasks: list[Mapping[str, Any]]) -> list[Role]:
    roles: dict[str, Role] = {}
    for task in tasks:
        name = task["template"]["metadata"]["labels"][LABEL_ROLE_NAME]
        if name in roles:
            roles[name].num_replicas += 1
            continue
        container = task["template"]["spec"]["containers"][0]
        command = list(container.get("command") or [""])
        roles[name] = Role(
            name=name,
            image=str(container.get("image", "")),
            entrypoint=command[0],
            args=command[1:],
            num_replicas=1,
        )
    return list(roles.values())


def describe_job(
    app_id: str, job: Mapping[str, Any], pods: Mapping[str, Mapping[str, Any]]
) -> DescribeAppResponse:
    """Describe the app of a Volcano job from the job and its pods.

    Args:
        app_id: the app's id (``{namespace}:{job}``).
        job: the Volcano job.
        pods: pod name -> pod, for the job's pods (others are ignored).
    """
    name = job["metadata"]["name"]
    state = job_state(job)
    tasks = [
        task
        for task in (job.get("spec") or {}).get("tasks") or []
        if LABEL_ROLE_NAME in ((task.get("template") or {}).get("metadata") or {}).get("labels", {})
    ]
    replicas = [_replica(task, pods.get(f"{name}-{task['name']}-0"), state) for task in tasks]
    roles = _roles(tasks)
    return describe_app(
        app_id,
        role_statuses(replicas, [role.name for role in roles]),
        cancelled=state == AppState.CANCELLED,
        num_restarts=int((job.get("status") or {}).get("retryCount") or 0),
        roles=roles,
        state=state,
    )
