"""Volcano job and pod states to asynctorchx states: the :class:`Job` and :class:`Pod` every
job and pod is parsed into once, and pure decision tables.

The app's state is the Volcano job's phase (TorchX's ``JOB_STATE``); each replica's state,
exit code and hostname come from its pod. A pod that cannot start says why in a
container's ``waiting`` reason (the kubelet's) or its ``PodScheduled`` condition while the
phase stays ``Pending``: :data:`WAITING_REASONS` says which reasons end the app ``FAILED``
(https://kubernetes.io/docs/concepts/containers/images/#imagepullbackoff).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple

import attrs

from asynctorchx.schedulers._responses import DescribeAppResponse
from asynctorchx.schedulers.kubernetes._request import (
    ANNOTATION_PULL_TIMEOUT,
    LABEL_APP_NAME,
    LABEL_REPLICA_ID,
    LABEL_ROLE_NAME,
)
from asynctorchx.schedulers.toolkit import describe_app, parse_rfc3339, role_statuses
from asynctorchx.specs.api import NONE, AppState, EndCause, ReplicaStatus, Role, is_terminal

#: The job annotation with why the scheduler ended the app ``FAILED`` (it outlives the pods).
ANNOTATION_FAILED = "asynctorchx/failed"


class Verdict(enum.Enum):
    """What a pod's waiting reason does to the app."""

    SHOW = "show"  # the cause can go away
    FAIL = "fail"  # no retry can fix it
    FAIL_AFTER_PULL_TIMEOUT = "fail after the image pull timeout"


#: Why a pod waits (the kubelet's ``pkg/kubelet/images``, ``kuberuntime``; the scheduler's
#: ``Unschedulable``) -> what it does to the app.
WAITING_REASONS: Mapping[str, Verdict] = {
    "ErrImagePull": Verdict.FAIL_AFTER_PULL_TIMEOUT,
    "ImagePullBackOff": Verdict.FAIL_AFTER_PULL_TIMEOUT,
    "InvalidImageName": Verdict.FAIL,
    "ErrImageNeverPull": Verdict.FAIL,
    "CreateContainerConfigError": Verdict.SHOW,  # a missing Secret or ConfigMap may appear
    "CreateContainerError": Verdict.SHOW,
    "CrashLoopBackOff": Verdict.SHOW,  # the kubelet restarts it: it may yet succeed
    "Unschedulable": Verdict.SHOW,  # a node may join
}

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

#: Pod phase -> replica state.
POD_STATE: Mapping[str, AppState] = {
    "Pending": AppState.PENDING,
    "Running": AppState.RUNNING,
    "Succeeded": AppState.SUCCEEDED,
    "Failed": AppState.FAILED,
    "Unknown": AppState.UNKNOWN,
}


#: Why a pod ended, by its ``DisruptionTarget`` condition's reason (the pod disruption
#: conditions of the Kubernetes docs), else its status reason, else its container's.
POD_END_CAUSES: Mapping[str, EndCause] = {
    "PreemptionByScheduler": EndCause.PREEMPTED,
    "EvictionByEvictionAPI": EndCause.EVICTED,
    "TerminationByKubelet": EndCause.EVICTED,  # node pressure, or a graceful node shutdown
    "Evicted": EndCause.EVICTED,
    "DeletionByTaintManager": EndCause.NODE_LOST,
    "DeletionByPodGC": EndCause.NODE_LOST,  # its node is gone
    "NodeLost": EndCause.NODE_LOST,
    "DeadlineExceeded": EndCause.TIMED_OUT,  # activeDeadlineSeconds
    "OOMKilled": EndCause.OUT_OF_MEMORY,
}


def _end_cause(status: Mapping[str, Any]) -> EndCause | None:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            return POD_END_CAUSES.get(str(condition.get("reason")))
    if status.get("reason") in POD_END_CAUSES:
        return POD_END_CAUSES[str(status["reason"])]
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated") or {}
        if terminated.get("reason") in POD_END_CAUSES:
            return POD_END_CAUSES[str(terminated["reason"])]
    return None


class Waiting(NamedTuple):
    """Why a pod waits: a :data:`WAITING_REASONS` key and the kubelet's (or scheduler's) message."""

    reason: str
    message: str


def _waiting(status: Mapping[str, Any]) -> Waiting | None:
    """The first known waiting reason and message: init containers (they run first),
    containers, then the ``PodScheduled`` condition."""
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(key) or []:
            waiting = (container.get("state") or {}).get("waiting") or {}
            reason = str(waiting.get("reason") or "")
            if reason in WAITING_REASONS:
                return Waiting(reason, str(waiting.get("message") or ""))
    for condition in status.get("conditions") or []:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            return Waiting("Unschedulable", str(condition.get("message") or ""))
    return None


def _exit_code(status: Mapping[str, Any]) -> int | None:
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if terminated is not None and terminated.get("exitCode") is not None:
            return int(terminated["exitCode"])
    return None


def _ended(status: Mapping[str, Any]) -> str | None:
    """``{reason} (exit code {code})[: {message}]`` of the first container that exited
    non-zero, from its current state, else its last (one the kubelet restarts)."""
    for container in status.get("containerStatuses") or []:
        for key in ("state", "lastState"):
            terminated = (container.get(key) or {}).get("terminated") or {}
            code = terminated.get("exitCode")
            if code:
                shown = f"{terminated.get('reason') or 'Error'} (exit code {code})"
                message = str(terminated.get("message") or "").strip()
                return f"{shown}: {message}" if message else shown
    return None


def _run_times(status: Mapping[str, Any]) -> tuple[datetime | None, datetime | None]:
    """Its containers' first ``startedAt`` and, once every one terminated, last ``finishedAt``."""
    states = [c.get("state") or {} for c in status.get("containerStatuses") or []]
    runs = [state.get("running") or state.get("terminated") or {} for state in states]
    started = [at for run in runs if (at := parse_rfc3339(run.get("startedAt")))]
    ended = [
        at for s in states if (at := parse_rfc3339((s.get("terminated") or {}).get("finishedAt")))
    ]
    return min(started, default=None), max(ended) if ended and len(ended) == len(states) else None


@attrs.frozen
class Pod:
    """What the scheduler reads of a pod: :attr:`hostname` is ``{hostname}.{subdomain}``
    (Volcano's ``svc`` plugin), else its IP; :attr:`created` whole epoch seconds;
    :attr:`containers` every container's name in the pod's order (sidecars included);
    :attr:`started` and :attr:`finished` of :func:`_run_times`."""

    name: str
    uid: str = ""
    labels: Mapping[str, str] = attrs.field(factory=dict)
    annotations: Mapping[str, str] = attrs.field(factory=dict)
    phase: str | None = None
    created: float | None = None
    hostname: str = ""
    exit_code: int | None = None
    waiting: Waiting | None = None
    ended: str | None = None
    containers: tuple[str, ...] = ()
    cause: EndCause | None = None
    started: datetime | None = None
    finished: datetime | None = None

    @classmethod
    def parse(cls, pod: Mapping[str, Any]) -> Pod:
        metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        status = pod.get("status") or {}
        stamp = metadata.get("creationTimestamp")
        started, finished = _run_times(status)
        hostname = str(status.get("podIP") or "")
        if spec.get("hostname") and spec.get("subdomain"):
            hostname = f"{spec['hostname']}.{spec['subdomain']}"
        return cls(
            name=str(metadata.get("name") or ""),
            uid=str(metadata.get("uid") or ""),
            labels=dict(metadata.get("labels") or {}),
            annotations=dict(metadata.get("annotations") or {}),
            phase=str(status["phase"]) if status.get("phase") else None,
            created=datetime.fromisoformat(str(stamp)).timestamp() if stamp else None,
            hostname=hostname,
            exit_code=_exit_code(status),
            waiting=_waiting(status),
            ended=_ended(status),
            containers=tuple(str(c.get("name") or "") for c in spec.get("containers") or ()),
            cause=_end_cause(status),
            started=started,
            finished=finished,
        )

    @property
    def over(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def why(self) -> str | None:
        """``{reason}: {message}`` of :attr:`waiting`, with the last end, else :attr:`ended`."""
        if self.waiting is None:
            return self.ended
        reason, message = self.waiting.reason, self.waiting.message
        why = f"{reason}: {message}" if message else reason
        return f"{why} (last end: {self.ended})" if self.ended else why


def pull_deadline(pod: Pod, timeout: float | None) -> float | None:
    """When the pod's failing image pull ends the app (epoch seconds; ``timeout`` from its
    creation, in seconds), else ``None``."""
    if timeout is None or pod.waiting is None or pod.created is None:
        return None
    if WAITING_REASONS[pod.waiting.reason] is not Verdict.FAIL_AFTER_PULL_TIMEOUT:
        return None
    return pod.created + timeout


def pod_failure(pod: Pod, timeout: float | None, now: float) -> str | None:
    """The message that ends the app ``FAILED`` because of this pod, or ``None``."""
    if pod.waiting is None:
        return None
    deadline = pull_deadline(pod, timeout)
    if WAITING_REASONS[pod.waiting.reason] is Verdict.FAIL:
        return pod.why
    if deadline is not None and now >= deadline:
        reason, message = pod.waiting.reason, pod.waiting.message
        return f"{reason} for longer than the image pull timeout ({timeout:g} s): {message}"
    return None


def replica_status(
    role: str,
    replica_id: int,
    pod: Pod | None,
    app: AppState,
    failure: str | None,
) -> ReplicaStatus:
    """One replica's status from its pod (``None``: not created yet, or removed)."""
    if pod is None:
        state = app if is_terminal(app) else AppState.PENDING
        return ReplicaStatus(replica_id, state, role, "")
    state, shown = POD_STATE.get(str(pod.phase), AppState.UNKNOWN), pod.why or NONE
    if failure is not None:
        state, shown = AppState.FAILED, failure
    elif app == AppState.CANCELLED and not is_terminal(state):
        state = AppState.CANCELLED
    return ReplicaStatus(
        replica_id,
        state,
        role,
        pod.hostname,
        structured_error_msg=shown,
        exit_code=pod.exit_code,
        started=pod.started,
        ended=pod.finished if is_terminal(state) else None,
    )


#: A pod template, its container's name and how many replicas it serves.
Template = tuple[Mapping[str, Any], str, int]


def read_roles(templates: list[Template]) -> tuple[list[Role], dict[tuple[str, int], str]]:
    """The roles pod templates were made from (``torchx.pytorch.org/role-name``, image,
    command) and each replica's container; a template with a replica id label is that
    replica's, else it serves replicas ``0..n-1``."""
    roles: dict[str, Role] = {}
    containers: dict[tuple[str, int], str] = {}
    for template, container, count in templates:
        labels = (template.get("metadata") or {}).get("labels") or {}
        if LABEL_ROLE_NAME not in labels:
            continue
        name = str(labels[LABEL_ROLE_NAME])
        first = int(labels.get(LABEL_REPLICA_ID, 0))
        containers.update({(name, k): container for k in range(first, first + count)})
        if name in roles:
            roles[name].num_replicas += count
        else:
            command = list(template["spec"]["containers"][0].get("command") or [""])
            image = str(template["spec"]["containers"][0].get("image", ""))
            roles[name] = Role(
                name, image, entrypoint=command[0], args=command[1:], num_replicas=count
            )
    return list(roles.values()), containers


@attrs.frozen
class Job:
    """What the scheduler reads of a Volcano ``Job`` or a ``JobSet``. Two reads are equal
    only at the same ``resourceVersion``, so ``wait`` judges a cached job again once it
    changed. :attr:`failed` is its :data:`ANNOTATION_FAILED`, :attr:`said` what it says of
    its state, :attr:`containers` each replica ``(role, id)`` -> its container's name;
    :attr:`app_name` is its pods' ``torchx.pytorch.org/app-name``, :attr:`ended` when it
    turned terminal."""

    name: str
    uid: str
    version: str
    state: AppState
    failed: str | None
    pull_timeout: float | None
    restarts: int
    said: str | None
    roles: tuple[Role, ...]
    containers: Mapping[tuple[str, int], str]
    app_name: str = ""
    created: datetime | None = None
    ended: datetime | None = None

    @classmethod
    def read(
        cls,
        obj: Mapping[str, Any],
        state: AppState,
        restarts: int,
        templates: list[Template],
        said: str | None = None,
        ended: str | None = None,
    ) -> Job:
        """A job from what its job API read (``ended``: the time it turned terminal, as the API
        gives it) and its metadata (``obj``'s)."""
        roles, containers = read_roles(templates)
        labels = [
            (template.get("metadata") or {}).get("labels") or {} for template, _, _ in templates
        ]
        app_name = next((str(at[LABEL_APP_NAME]) for at in labels if LABEL_APP_NAME in at), "")
        metadata = obj.get("metadata") or {}
        annotations = metadata.get("annotations") or {}
        failed = annotations.get(ANNOTATION_FAILED)
        try:
            timeout: float | None = float(annotations[ANNOTATION_PULL_TIMEOUT])
        except (KeyError, TypeError, ValueError):
            timeout = None
        return cls(
            name=str(metadata.get("name") or ""),
            uid=str(metadata.get("uid") or ""),
            version=str(metadata.get("resourceVersion") or ""),
            state=AppState.FAILED if failed is not None else state,
            failed=None if failed is None else str(failed),
            pull_timeout=timeout,
            restarts=restarts,
            said=said,
            roles=tuple(roles),
            containers=containers,
            app_name=app_name,
            created=parse_rfc3339(metadata.get("creationTimestamp")),
            ended=parse_rfc3339(ended) if is_terminal(state) else None,
        )


def parse_job(job: Mapping[str, Any]) -> Job:
    """A Volcano ``Job``: :data:`JOB_STATE` of its phase (``SUBMITTED`` before it has one),
    its tasks made from a role (``torchx.pytorch.org/role-name``) its replicas."""
    status = job.get("status") or {}
    phase = (status.get("state") or {}).get("phase")
    tasks = (job.get("spec") or {}).get("tasks") or []
    templates = [(task.get("template") or {}, str(task.get("name")), 1) for task in tasks]
    state = JOB_STATE.get(str(phase), AppState.UNKNOWN) if phase else AppState.SUBMITTED
    ended = (status.get("state") or {}).get("lastTransitionTime")  # of the terminal phase
    return Job.read(job, state, int(status.get("retryCount") or 0), templates, ended=ended)


def volcano_pod_name(job: Job, replica: tuple[str, int]) -> str:
    return f"{job.name}-{job.containers[replica]}-0"


#: Each replica ``(role, replica id)``, in the job's order, -> its pod or ``None``.
Replicas = Mapping[tuple[str, int], "Pod | None"]


def job_replicas(job: Job, pods: Mapping[str, Pod]) -> Replicas:
    return {replica: pods.get(volcano_pod_name(job, replica)) for replica in job.containers}


def failure(job: Job, replicas: Replicas, now: float) -> str | None:
    """Why the app ends ``FAILED`` though its job says otherwise (``{role}/{replica}
    {reason}``), else ``None``; a job that ended is not judged again."""
    if job.failed:
        return job.failed
    if is_terminal(job.state):
        return None
    for (role, replica_id), pod in replicas.items():
        ended = None if pod is None else pod_failure(pod, job.pull_timeout, now)
        if ended is not None:
            return f"{role}/{replica_id} {ended}"
    return None


def next_deadline(job: Job, replicas: Replicas, now: float) -> float | None:
    """The earliest image pull deadline of the replicas' pods after ``now``, or ``None``."""
    deadlines = [pull_deadline(pod, job.pull_timeout) for pod in replicas.values() if pod]
    return min((at for at in deadlines if at is not None and at > now), default=None)


def describe(app_id: str, job: Job, replicas: Replicas, now: float) -> DescribeAppResponse:
    """Describe an app from its job and its replicas' pods (either job API). The ``msg``
    is the failure, else what an ended job says, else the replicas' reasons (none for a
    cancelled app: the cancel ended them), else what the job says."""
    failed = failure(job, replicas, now)
    state = AppState.FAILED if failed is not None else job.state
    statuses = []
    for (role, replica_id), pod in replicas.items():
        why = None if pod is None or failed is None else pod_failure(pod, job.pull_timeout, now)
        statuses.append(replica_status(role, replica_id, pod, state, why))
    waiting = "; ".join(
        f"{r.role}/{r.id} {r.structured_error_msg}"
        for r in statuses
        if r.structured_error_msg != NONE and state != AppState.CANCELLED  # killed by it
    )
    msg = failed or (job.said if is_terminal(state) else None) or waiting or job.said
    return describe_app(
        app_id,
        role_statuses(statuses, [role.name for role in job.roles]),
        cancelled=state == AppState.CANCELLED,
        num_restarts=job.restarts,
        msg=msg,
        roles=job.roles,
        state=state,
        cause=_app_cause(replicas) if state == AppState.FAILED else None,
        pending_reason=next((p.why for p in replicas.values() if p and p.waiting), job.said),
        submitted=job.created,
        ended=job.ended,
    )


def _app_cause(replicas: Replicas) -> EndCause | None:
    """The first replica pod's cause; a pull that failed; else an exit, where a pod exited."""
    pods = [pod for pod in replicas.values() if pod is not None]
    for pod in pods:
        if pod.cause is not None:
            return pod.cause
    if any(pod.waiting and WAITING_REASONS[pod.waiting.reason] is not Verdict.SHOW for pod in pods):
        return EndCause.IMAGE_PULL_FAILED
    return EndCause.EXITED if any(pod.exit_code is not None for pod in pods) else None
