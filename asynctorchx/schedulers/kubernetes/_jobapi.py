"""The job APIs the ``kubernetes`` scheduler submits to: what differs between them, one record each.

The run option ``job_api`` picks one per run: ``volcano`` (a Volcano ``Job``, TorchX's
manifest; the default) or ``jobset`` (a ``jobset.x-k8s.io/v1alpha2`` ``JobSet``, with
Kueue when ``queue`` is given). The app id says which (``{namespace}:{job}`` or
``{namespace}:jobset:{jobset}``), so ``describe``, ``wait``, ``cancel`` and ``log_iter``
pick the same record. Its functions are pure except ``cancel`` and ``stop_failed``,
which take the API server connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs

from asynctorchx.schedulers._responses import DescribeAppResponse
from asynctorchx.schedulers.kubernetes._apiserver import ApiServer
from asynctorchx.schedulers.kubernetes._jobset_request import (
    LABEL_JOBSET_NAME,
    build_jobset,
    replicated_jobs,
)
from asynctorchx.schedulers.kubernetes._jobset_state import (
    describe_jobset,
    jobset_failure,
    jobset_state,
    replica_pods,
)
from asynctorchx.schedulers.kubernetes._request import (
    LABEL_REPLICA_ID,
    LABEL_ROLE_NAME,
    KubernetesJob,
    build_job,
    job_api,
)
from asynctorchx.schedulers.kubernetes._state import (
    ANNOTATION_FAILED,
    Pod,
    describe_job,
    job_failure,
    job_state,
)
from asynctorchx.specs.api import AppDef, AppState, CfgVal, is_terminal

Obj = Mapping[str, Any]
Pods = Mapping[str, Pod]


@attrs.frozen
class JobApi:
    """What differs between job APIs.

    Attributes:
        name: the run option's value (``volcano`` or ``jobset``).
        plural: the resource's plural (the watch and the requests use it).
        app_id: ``(namespace, name)`` -> the app id of the job ``name``.
        build: ``(app, cfg)`` -> the request (see the builders for what they raise).
        pod_labels: job name -> the labels that select the job's pods.
        state: the app state the job object alone says (``list`` and log followers).
        failure: ``(job, pods, now)`` -> why a pod ends the app ``FAILED`` though the job
            says otherwise, else ``None`` (``pods``: name -> pod; ``now``: epoch seconds).
        describe: ``(app_id, job, pods, now)`` -> the app's description.
        containers: job -> ``(role, replica id)`` -> the replica's container name.
        pod_name: ``(job, pods, role, replica id)`` -> the replica's current pod name, or
            ``None`` if none yet.
        cancel: ``(api, namespace, job)``: stop the app (a no-op once it ended).
        stop_failed: ``(api, namespace, job, reason)``: record ``reason`` (a pod's
            waiting reason ended the app) on the job and stop what the job API keeps.
        fixed_pod_names: whether ``pod_name`` is known without the pods (Volcano's
            ``{job}-{task}-0``), so no pod list is needed to read a log.
    """

    name: str
    plural: str
    app_id: Callable[[str, str], str]
    build: Callable[[AppDef, Mapping[str, CfgVal]], KubernetesJob]
    pod_labels: Callable[[str], dict[str, str]]
    state: Callable[[Obj], AppState]
    failure: Callable[[Obj, Pods, float], str | None]
    describe: Callable[[str, Obj, Pods, float], DescribeAppResponse]
    containers: Callable[[Obj], dict[tuple[str, int], str]]
    pod_name: Callable[[Obj, Pods, str, int], str | None]
    cancel: Callable[[ApiServer, str, dict[str, Any]], Awaitable[None]]
    stop_failed: Callable[[ApiServer, str, dict[str, Any], str], Awaitable[None]]
    fixed_pod_names: bool = False


def _tasks(job: Obj) -> dict[tuple[str, int], str]:
    """A Volcano job's task names (its containers' too) by (role, replica id)."""
    found = {}
    for task in job["spec"]["tasks"]:
        labels = task["template"]["metadata"]["labels"]
        found[(labels[LABEL_ROLE_NAME], int(labels[LABEL_REPLICA_ID]))] = str(task["name"])
    return found


async def _abort(api: ApiServer, namespace: str, job: dict[str, Any]) -> None:
    """Abort the job (a Volcano ``AbortJob`` command); it is kept, ending CANCELLED."""
    if not is_terminal(job_state(job)):
        await api.abort_job(namespace, job)


async def _abort_and_annotate(
    api: ApiServer, namespace: str, job: dict[str, Any], reason: str
) -> None:
    """Abort the job (nothing of it stays queued), then record ``reason`` on it.

    The annotation goes last: it marks the stop as done (it is not tried again) and makes
    the job read ``FAILED`` (:func:`._state.job_state`), so it is written only once the
    abort was sent.
    """
    await api.abort_job(namespace, job)
    await api.patch_job(
        namespace,
        job["metadata"]["name"],
        {"metadata": {"annotations": {ANNOTATION_FAILED: reason}}},
    )


def _jobset_pod(job: Obj, pods: Pods, role: str, replica_id: int) -> str | None:
    """The newest pod of the replica's index (:func:`._jobset_state.replica_pods`)."""
    name = job["metadata"]["name"]
    mine = {key: pod for key, pod in pods.items() if pod.labels.get(LABEL_JOBSET_NAME) == name}
    pod = replica_pods(job, mine).get((role, replica_id))
    return None if pod is None else pod.name


async def _delete_jobset(api: ApiServer, namespace: str, job: dict[str, Any]) -> None:
    """Delete the JobSet (its Jobs and pods go with it).

    Not ``spec.suspend``: Kueue owns that field for a queued JobSet (it unsuspends an
    admitted one again), and JobSet documents suspension as a pause to resume, not an
    end. Deleting is how Kueue withdraws a workload and frees its quota; it is also what
    TorchX 0.7.0's ``cancel`` does. The app is then unknown (``None``).
    """
    await api.delete_job(namespace, job["metadata"]["name"], "jobsets")


async def _stop_failed_jobset(
    api: ApiServer, namespace: str, job: dict[str, Any], reason: str
) -> None:
    """Release what the JobSet holds and keep it, ``FAILED`` with ``reason``.

    Kept rather than deleted (as :func:`_delete_jobset` does): a deleted JobSet is an
    unknown app, and its reason would be lost. Its Kueue workload is deactivated first
    (Kueue then stops counting its quota, and no longer unsuspends it), then one patch
    records the reason and sets ``spec.suspend`` (the JobSet controller deletes the pods,
    which free their nodes). The annotation goes last: it marks the stop as done.
    """
    await api.deactivate_workloads(namespace, job["metadata"].get("uid", ""))
    patch = {"metadata": {"annotations": {ANNOTATION_FAILED: reason}}, "spec": {"suspend": True}}
    await api.patch_job(namespace, job["metadata"]["name"], patch, "jobsets")


#: A Volcano ``Job``: one task (one pod, ``{job}-{task}-0``) per replica; TorchX's app ids.
VOLCANO = JobApi(
    name="volcano",
    plural="jobs",
    app_id=lambda namespace, name: f"{namespace}:{name}",
    build=build_job,
    pod_labels=lambda name: {"volcano.sh/job-name": name},
    state=job_state,
    failure=job_failure,
    describe=describe_job,
    containers=_tasks,
    pod_name=lambda job, _, role, replica_id: (
        f"{job['metadata']['name']}-{_tasks(job)[(role, replica_id)]}-0"
    ),
    cancel=_abort,
    stop_failed=_abort_and_annotate,
    fixed_pod_names=True,
)

#: A ``JobSet``: one replicated job per role, its pods found by label and index.
JOBSET = JobApi(
    name="jobset",
    plural="jobsets",
    app_id=lambda namespace, name: f"{namespace}:jobset:{name}",
    build=build_jobset,
    pod_labels=lambda name: {LABEL_JOBSET_NAME: name},
    state=jobset_state,
    failure=jobset_failure,
    describe=describe_jobset,
    containers=lambda job: {
        (role, replica_id): rjob
        for role, rjob, count in replicated_jobs(job)
        for replica_id in range(count)
    },
    pod_name=_jobset_pod,
    cancel=_delete_jobset,
    stop_failed=_stop_failed_jobset,
)

#: The job APIs by run option value.
STRATEGIES: dict[str, JobApi] = {"volcano": VOLCANO, "jobset": JOBSET}


def for_cfg(cfg: Mapping[str, CfgVal]) -> JobApi:
    """The job API the run option ``job_api`` names.

    Raises:
        InvalidRunConfigException: an unknown value (the message lists the values).
    """
    return STRATEGIES[job_api(cfg)]
