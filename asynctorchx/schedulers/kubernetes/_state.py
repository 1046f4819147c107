"""Volcano job and pod states to asynctorchx states: the :class:`Job` and :class:`Pod`
records every job and pod is parsed into once, and pure decision tables, no I/O.

The app's state is the Volcano job's phase, TorchX's table
(``torchx.schedulers.kubernetes_scheduler.JOB_STATE``): Volcano decides whether a failed
pod ends the job or is retried. Each replica's state, exit code and hostname come from
its pod (TorchX 0.7.0 reads only the job's task counts and reports no hostname).

A pod that cannot start says why in its container's ``waiting`` reason (set by the
kubelet, https://kubernetes.io/docs/concepts/containers/images/#imagepullbackoff) or in
its ``PodScheduled`` condition (``Unschedulable``, set by the scheduler); Volcano's phase
stays ``Pending`` whatever the reason. :data:`WAITING_REASONS` says what each reason does:
it is shown in the replica's and the app's message, and the reasons no retry can fix, or
an image pull failing longer than the job's pull timeout, end the app ``FAILED``
(TorchX 0.7.0 leaves such an app ``PENDING`` for ever).

A container that ended other than with exit code 0 says why in its ``terminated``
reason, set by the kubelet (``OOMKilled`` when the kernel killed it at its memory limit,
``Error`` otherwise, https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#container-state-terminated):
shown with its exit code in the replica's and the app's message, as is the last end of a
container the kubelet restarts (``CrashLoopBackOff``, a pod overlay's ``OnFailure``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs

from asynctorchx.schedulers._responses import DescribeAppResponse
from asynctorchx.schedulers.kubernetes._request import (
    ANNOTATION_PULL_TIMEOUT,
    LABEL_REPLICA_ID,
    LABEL_ROLE_NAME,
)
from asynctorchx.schedulers.toolkit import describe_app, role_statuses
from asynctorchx.specs.api import NONE, AppState, ReplicaStatus, Role, is_terminal

#: The job annotation with why the scheduler ended the app ``FAILED`` (it then aborted
#: the job, so the reason outlives the pods).
ANNOTATION_FAILED = "asynctorchx/failed"


class Verdict(enum.Enum):
    """What a pod's waiting reason does to the app."""

    #: shown in the messages; the app stays as Volcano says (the cause can go away).
    SHOW = "show"
    #: the app ends ``FAILED``: no retry can fix it.
    FAIL = "fail"
    #: the app ends ``FAILED`` once it lasted past the job's image pull timeout.
    FAIL_AFTER_PULL_TIMEOUT = "fail after the image pull timeout"


#: Why a pod waits -> what it does to the app. The container reasons are the kubelet's
#: (``k8s.io/kubernetes/pkg/kubelet/images``, ``.../kuberuntime``); ``Unschedulable`` is
#: the ``PodScheduled`` condition's reason.
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

#: Pod phase -> replica state (Kubernetes' pod lifecycle).
POD_STATE: Mapping[str, AppState] = {
    "Pending": AppState.PENDING,
    "Running": AppState.RUNNING,
    "Succeeded": AppState.SUCCEEDED,
    "Failed": AppState.FAILED,
    "Unknown": AppState.UNKNOWN,
}


def _waiting(status: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first reason of :data:`WAITING_REASONS` in a pod's status: its init containers
    (they run first), its containers, then its ``PodScheduled`` condition."""
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(key) or []:
            waiting = (container.get("state") or {}).get("waiting") or {}
            reason = str(waiting.get("reason") or "")
            if reason in WAITING_REASONS:
                return reason, str(waiting.get("message") or "")
    for condition in status.get("conditions") or []:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            return "Unschedulable", str(condition.get("message") or "")
    return None


def _exit_code(status: Mapping[str, Any]) -> int | None:
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if terminated is not None and terminated.get("exitCode") is not None:
            return int(terminated["exitCode"])
    return None


def _ended(status: Mapping[str, Any]) -> str | None:
    """The kubelet's reason for the first container that ended with a non-zero exit code,
    from its current state, else (a container it restarts) from its last one:
    ``{reason} (exit code {code})``, then ``: {termination message}`` if it wrote one."""
    for container in status.get("containerStatuses") or []:
        for key in ("state", "lastState"):
            terminated = (container.get(key) or {}).get("terminated") or {}
            code = terminated.get("exitCode")
            if code:
                shown = f"{terminated.get('reason') or 'Error'} (exit code {code})"
                message = str(terminated.get("message") or "").strip()
                return f"{shown}: {message}" if message else shown
    return None


@attrs.frozen
class Pod:
    """What the scheduler reads of a pod, parsed once where the pod arrives (a list, a
    watch event): :meth:`parse`.

    Attributes:
        name: the pod's name.
        uid: its uid (a retry's new pod has a new one).
        labels: its labels.
        annotations: its annotations.
        phase: its phase (``Pending``, ``Running``, ``Succeeded``, ``Failed``,
            ``Unknown``), ``None`` before it has one.
        created: its creation time (epoch seconds, whole seconds), ``None`` if unknown.
        hostname: the name other replicas reach it by: ``{hostname}.{subdomain}``
            (Volcano's ``svc`` plugin sets both), else its IP, else ``""``.
        exit_code: its (first) container's exit code once it terminated, else ``None``.
        waiting: why it cannot start, if :data:`WAITING_REASONS` knows the reason:
            ``(reason, message)``, from its init containers (they run first), its
            containers, then its ``PodScheduled`` condition; else ``None``.
        ended: the kubelet's reason for its container's non-zero exit (current or, for
            a container it restarts, last): ``{reason} (exit code {code})``, then
            ``: {message}`` if the container wrote a termination message; else ``None``.
        containers: the names of its containers (``spec.containers``), in its order:
            the replica's own and any others (sidecars an overlay or a webhook added).
    """

    name: str
    uid: str = ""
    labels: Mapping[str, str] = attrs.field(factory=dict)
    annotations: Mapping[str, str] = attrs.field(factory=dict)
    phase: str | None = None
    created: float | None = None
    hostname: str = ""
    exit_code: int | None = None
    waiting: tuple[str, str] | None = None
    ended: str | None = None
    containers: tuple[str, ...] = ()

    @classmethod
    def parse(cls, pod: Mapping[str, Any]) -> Pod:
        """Read a pod's JSON (the API's ``Pod``).

        Args:
            pod: the pod as the API server sent it.
        """
        metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        status = pod.get("status") or {}
        stamp = metadata.get("creationTimestamp")
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
        )

    @property
    def over(self) -> bool:
        """Whether its containers ended (``Succeeded`` or ``Failed``)."""
        return self.phase in ("Succeeded", "Failed")

    @property
    def why(self) -> str | None:
        """:attr:`waiting` as ``{reason}: {message}`` (the reason alone without a message),
        then ``(last end: {ended})`` if the container ended before; else :attr:`ended`."""
        if self.waiting is None:
            return self.ended
        reason, message = self.waiting
        why = f"{reason}: {message}" if message else reason
        return f"{why} (last end: {self.ended})" if self.ended else why


def pull_deadline(pod: Pod, timeout: float | None) -> float | None:
    """When a pod failing to pull its image ends the app (epoch seconds), else ``None``.

    The timeout counts from the pod's creation.

    Args:
        pod: the pod.
        timeout: the job's image pull timeout in seconds, or ``None`` (no limit).
    """
    if timeout is None or pod.waiting is None or pod.created is None:
        return None
    if WAITING_REASONS[pod.waiting[0]] is not Verdict.FAIL_AFTER_PULL_TIMEOUT:
        return None
    return pod.created + timeout


def pod_failure(pod: Pod, timeout: float | None, now: float) -> str | None:
    """The message that ends the app ``FAILED`` because of this pod, or ``None``.

    Args:
        pod: the pod.
        timeout: the job's image pull timeout in seconds, or ``None`` (no limit).
        now: the current time (epoch seconds).
    """
    if pod.waiting is None:
        return None
    reason, message = pod.waiting
    deadline = pull_deadline(pod, timeout)
    if WAITING_REASONS[reason] is Verdict.FAIL:
        return pod.why
    if deadline is not None and now >= deadline:
        return f"{reason} for longer than the image pull timeout ({timeout:g} s): {message}"
    return None


def replica_status(
    role: str,
    replica_id: int,
    pod: Pod | None,
    app: AppState,
    failure: str | None,
) -> ReplicaStatus:
    """One replica's status from its pod (either job API).

    Args:
        role: the role's name.
        replica_id: the replica's id.
        pod: its pod, or ``None`` (not created yet, or removed).
        app: the app's state.
        failure: why this pod ended the app ``FAILED`` (:func:`pod_failure`), or ``None``.
    """
    if pod is None:  # not created yet, or removed (an aborted job's pods are deleted)
        state = app if is_terminal(app) else AppState.PENDING
        return ReplicaStatus(replica_id, state, role, "")
    state, shown = POD_STATE.get(str(pod.phase), AppState.UNKNOWN), pod.why or NONE
    if failure is not None:
        state, shown = AppState.FAILED, failure
    elif app == AppState.CANCELLED and not is_terminal(state):
        state = AppState.CANCELLED
    return ReplicaStatus(
        replica_id, state, role, pod.hostname, structured_error_msg=shown, exit_code=pod.exit_code
    )


def read_role(name: str, pod_template: Mapping[str, Any], replicas: int) -> Role:
    """The role a pod template was made from, as far as the template says (image, command).

    Args:
        name: the role's name.
        pod_template: a replica's pod template (its first container is the role's).
        replicas: the role's number of replicas.
    """
    container = pod_template["spec"]["containers"][0]
    command = list(container.get("command") or [""])
    image = str(container.get("image", ""))
    return Role(name, image, entrypoint=command[0], args=command[1:], num_replicas=replicas)


@attrs.frozen
class Job:
    """What the scheduler reads of a Volcano ``Job`` or a ``JobSet``, parsed once where it
    arrives (a get, a list, a watch event): :func:`parse_job`,
    :func:`._jobset.parse_jobset`. Two reads of a job are equal only when they are of
    the same version (``wait`` judges a cached job again once it changed).

    Attributes:
        name: the job's name.
        uid: its uid (the owner of its abort command and of its Kueue workloads).
        version: its ``metadata.resourceVersion`` (the server changes it on every write).
        state: the app state the job alone says; ``FAILED`` once it has
            :data:`ANNOTATION_FAILED`.
        failed: its :data:`ANNOTATION_FAILED` (why the scheduler ended the app
            ``FAILED`` and stopped it), or ``None``.
        pull_timeout: its image pull timeout in seconds (:data:`ANNOTATION_PULL_TIMEOUT`),
            or ``None`` (no limit).
        restarts: how many times its job API restarted the app.
        said: what the job says of its state (a JobSet's suspension or ending
            condition), or ``None``.
        roles: the app's roles, as read back from the pod templates (image, command,
            replicas).
        containers: each replica ``(role, replica id)``, in the job's order -> its
            container's name (a Volcano task's, a JobSet replicated job's).
    """

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

    @classmethod
    def read(
        cls,
        obj: Mapping[str, Any],
        state: AppState,
        restarts: int,
        roles: list[Role],
        containers: Mapping[tuple[str, int], str],
        said: str | None = None,
    ) -> Job:
        """A job from what its job API reads (the arguments) and its metadata (``obj``'s).

        Args:
            obj: the job as the API server sent it (its metadata is read here).
            state: the app state its job API reads from it.
            restarts: how many times its job API restarted the app.
            roles: its roles.
            containers: its replicas -> their containers' names.
            said: what it says of its state, or ``None``.
        """
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
        )


def parse_job(job: Mapping[str, Any]) -> Job:
    """Read a Volcano ``Job``'s JSON: its state is :data:`JOB_STATE` of its phase
    (``SUBMITTED`` before the controller gave it one), its restarts its ``retryCount``,
    its replicas its tasks made from a role (one each, ``torchx.pytorch.org/role-name``).

    Args:
        job: the Volcano job as the API server sent it.
    """
    status = job.get("status") or {}
    phase = (status.get("state") or {}).get("phase")
    containers: dict[tuple[str, int], str] = {}
    roles: dict[str, Role] = {}
    for task in (job.get("spec") or {}).get("tasks") or []:
        labels = ((task.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if LABEL_ROLE_NAME not in labels:
            continue
        name = str(labels[LABEL_ROLE_NAME])
        containers[(name, int(labels[LABEL_REPLICA_ID]))] = str(task["name"])
        if name in roles:
            roles[name].num_replicas += 1
        else:
            roles[name] = read_role(name, task["template"], 1)
    state = JOB_STATE.get(str(phase), AppState.UNKNOWN) if phase else AppState.SUBMITTED
    restarts = int(status.get("retryCount") or 0)
    return Job.read(job, state, restarts, list(roles.values()), containers)


def volcano_pod_name(job: Job, replica: tuple[str, int]) -> str:
    """The name Volcano gives a replica's pod: ``{job}-{task}-0``.

    Args:
        job: the Volcano job.
        replica: ``(role, replica id)``, one of ``job.containers``.
    """
    return f"{job.name}-{job.containers[replica]}-0"


#: Each replica of an app, ``(role, replica id)`` in the job's order, -> its pod or ``None``.
Replicas = Mapping[tuple[str, int], "Pod | None"]


def job_replicas(job: Job, pods: Mapping[str, Pod]) -> Replicas:
    """A Volcano job's replicas -> their pods (:func:`volcano_pod_name`).

    Args:
        job: the Volcano job.
        pods: pod name -> pod (others than the job's are ignored).
    """
    return {replica: pods.get(volcano_pod_name(job, replica)) for replica in job.containers}


def failure(job: Job, replicas: Replicas, now: float) -> str | None:
    """Why the app ends ``FAILED`` though its job says otherwise, else ``None`` (either
    job API).

    The job's :attr:`Job.failed` (the scheduler already decided and stopped the job),
    else the first replica whose pod's waiting reason ends the app (:func:`pod_failure`),
    as ``{role}/{replica} {reason}: {message}``. A job that ended is not re-judged.

    Args:
        job: the Volcano job or JobSet.
        replicas: each replica's pod.
        now: the current time (epoch seconds).
    """
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
    """The earliest image pull deadline of the replicas' pods after ``now``, or ``None``.

    Args:
        job: the Volcano job or JobSet (its image pull timeout).
        replicas: each replica's pod.
        now: the current time (epoch seconds).
    """
    deadlines = [pull_deadline(pod, job.pull_timeout) for pod in replicas.values() if pod]
    return min((at for at in deadlines if at is not None and at > now), default=None)


def describe(app_id: str, job: Job, replicas: Replicas, now: float) -> DescribeAppResponse:
    """Describe an app from its job and its replicas' pods (either job API).

    Each replica's ``structured_error_msg`` is why its pod waits or why its container
    ended (:attr:`Pod.why`). :func:`failure` ends the app ``FAILED``. The app's ``msg``
    is that failure, else what the job says of its end, else the replicas' reasons
    (``{role}/{id} {reason}: {message}``, joined by ``; ``; none for a cancelled app,
    whose containers the cancel ended), else what the job says (:attr:`Job.said`).

    Args:
        app_id: the app's id.
        job: the Volcano job or JobSet.
        replicas: each replica's pod.
        now: the current time (epoch seconds), for the image pull timeout.
    """
    failed = failure(job, replicas, now)
    state = AppState.FAILED if failed is not None else job.state
    statuses = []
    for (role, replica_id), pod in replicas.items():
        why = None if pod is None or failed is None else pod_failure(pod, job.pull_timeout, now)
        statuses.append(replica_status(role, replica_id, pod, state, why))
    said = job.said
    waiting = "; ".join(
        f"{r.role}/{r.id} {r.structured_error_msg}"
        for r in statuses
        if r.structured_error_msg != NONE and state != AppState.CANCELLED  # killed by it
    )
    msg = failed or (said if is_terminal(state) else None) or waiting or said
    return describe_app(
        app_id,
        role_statuses(statuses, [role.name for role in job.roles]),
        cancelled=state == AppState.CANCELLED,
        num_restarts=job.restarts,
        msg=msg,
        roles=job.roles,
        state=state,
    )
