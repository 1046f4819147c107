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

from asynctorchx.errors import InvalidRunConfigException
from asynctorchx.schedulers.kubernetes._apiserver import ApiServer
from asynctorchx.schedulers.kubernetes._jobset import (
    LABEL_JOBSET_NAME,
    build_jobset,
    jobset_replicas,
    parse_jobset,
)
from asynctorchx.schedulers.kubernetes._request import KubernetesJob, build_job, str_option
from asynctorchx.schedulers.kubernetes._state import (
    ANNOTATION_FAILED,
    Job,
    Pod,
    Replicas,
    job_replicas,
    parse_job,
)
from asynctorchx.specs.api import AppDef, CfgVal, is_terminal


@attrs.frozen
class JobApi:
    """What differs between job APIs.

    Attributes:
        name: the run option's value (``volcano`` or ``jobset``).
        plural: the resource's plural (the watch and the requests use it).
        app_id: ``(namespace, name)`` -> the app id of the job ``name``.
        build: ``(app, cfg)`` -> the request (see the builders for what they raise).
        parse: the job's JSON, as the API server sent it -> the :class:`._state.Job`.
        pod_labels: job name -> the labels that select the job's pods.
        replicas: ``(job, pods)`` -> each replica's current pod or ``None``
            (``pods``: name -> pod; others than the job's are ignored).
        cancel: ``(api, namespace, job)``: stop the app (a no-op once it ended).
        stop_failed: ``(api, namespace, job, reason)``: record ``reason`` (a pod's
            waiting reason ended the app) on the job and stop what the job API keeps.
    """

    name: str
    plural: str
    app_id: Callable[[str, str], str]
    build: Callable[[AppDef, Mapping[str, CfgVal]], KubernetesJob]
    parse: Callable[[Mapping[str, Any]], Job]
    pod_labels: Callable[[str], dict[str, str]]
    replicas: Callable[[Job, Mapping[str, Pod]], Replicas]
    cancel: Callable[[ApiServer, str, Job], Awaitable[None]]
    stop_failed: Callable[[ApiServer, str, Job, str], Awaitable[None]]


async def _abort(api: ApiServer, namespace: str, job: Job) -> None:
    """Abort the job (a Volcano ``AbortJob`` command); it is kept, ending CANCELLED."""
    if not is_terminal(job.state):
        await api.abort_job(namespace, job.name, job.uid)


async def _abort_and_annotate(api: ApiServer, namespace: str, job: Job, reason: str) -> None:
    """Abort the job (nothing of it stays queued), then record ``reason`` on it.

    The annotation goes last: it marks the stop as done (it is not tried again) and makes
    the job read ``FAILED`` (:attr:`._state.Job.failed`), so it is written only once the
    abort was sent.
    """
    await api.abort_job(namespace, job.name, job.uid)
    patch = {"metadata": {"annotations": {ANNOTATION_FAILED: reason}}}
    await api.patch_job(namespace, job.name, patch)


async def _delete_jobset(api: ApiServer, namespace: str, job: Job) -> None:
    """Delete the JobSet (its Jobs and pods go with it).

    Not ``spec.suspend``: Kueue owns that field for a queued JobSet (it unsuspends an
    admitted one again), and JobSet documents suspension as a pause to resume, not an
    end. Deleting is how Kueue withdraws a workload and frees its quota; it is also what
    TorchX 0.7.0's ``cancel`` does. The app is then unknown (``None``).
    """
    await api.delete_job(namespace, job.name, "jobsets")


async def _stop_failed_jobset(api: ApiServer, namespace: str, job: Job, reason: str) -> None:
    """Release what the JobSet holds and keep it, ``FAILED`` with ``reason``.

    Kept rather than deleted (as :func:`_delete_jobset` does): a deleted JobSet is an
    unknown app, and its reason would be lost. Its Kueue workload is deactivated first
    (Kueue then stops counting its quota, and no longer unsuspends it), then one patch
    records the reason and sets ``spec.suspend`` (the JobSet controller deletes the pods,
    which free their nodes). The annotation goes last: it marks the stop as done.
    """
    await api.deactivate_workloads(namespace, job.uid)
    patch = {"metadata": {"annotations": {ANNOTATION_FAILED: reason}}, "spec": {"suspend": True}}
    await api.patch_job(namespace, job.name, patch, "jobsets")


#: A Volcano ``Job``: one task (one pod, ``{job}-{task}-0``) per replica; TorchX's app ids.
VOLCANO = JobApi(
    name="volcano",
    plural="jobs",
    app_id=lambda namespace, name: f"{namespace}:{name}",
    build=build_job,
    parse=parse_job,
    pod_labels=lambda name: {"volcano.sh/job-name": name},
    replicas=job_replicas,
    cancel=_abort,
    stop_failed=_abort_and_annotate,
)

#: A ``JobSet``: one replicated job per role, its pods found by label and index.
JOBSET = JobApi(
    name="jobset",
    plural="jobsets",
    app_id=lambda namespace, name: f"{namespace}:jobset:{name}",
    build=build_jobset,
    parse=parse_jobset,
    pod_labels=lambda name: {LABEL_JOBSET_NAME: name},
    replicas=jobset_replicas,
    cancel=_delete_jobset,
    stop_failed=_stop_failed_jobset,
)

#: The job APIs by the run option ``job_api``'s value, the default first.
_BY_NAME = {job_api.name: job_api for job_api in (VOLCANO, JOBSET)}
#: The values of the run option ``job_api``.
JOB_APIS = tuple(_BY_NAME)


def for_name(name: str) -> JobApi:
    """The job API whose run option value is ``name`` (one of :data:`JOB_APIS`).

    Raises:
        InvalidRunConfigException: any other value (the message lists the values).
    """
    if name not in _BY_NAME:
        raise InvalidRunConfigException(
            f"run option 'job_api' is {name!r}; use one of: {', '.join(JOB_APIS)}", "job_api"
        )
    return _BY_NAME[name]


def for_cfg(cfg: Mapping[str, CfgVal]) -> JobApi:
    """The job API the run option ``job_api`` names: ``volcano`` (unset) or ``jobset``.

    Raises:
        InvalidRunConfigException: any other value (the message lists the values).
    """
    return for_name(str_option(cfg, "job_api") or VOLCANO.name)
