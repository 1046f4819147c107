"""What differs between the job APIs the run option ``job_api`` picks (``volcano``, the
default, or ``jobset``): one record each; the app id says which."""

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
    """What differs between job APIs: ``build`` and ``parse`` the manifest and the job,
    ``pod_label`` is the label naming the job on its pods, ``replicas`` finds each
    replica's pod, ``cancel`` stops the app, ``stop_failed`` stops it and records why (a
    pod's waiting reason ended it)."""

    name: str
    plural: str
    app_id: Callable[[str, str], str]
    build: Callable[[AppDef, Mapping[str, CfgVal]], KubernetesJob]
    parse: Callable[[Mapping[str, Any]], Job]
    pod_label: str
    replicas: Callable[[Job, Mapping[str, Pod]], Replicas]
    cancel: Callable[[ApiServer, str, Job], Awaitable[None]]
    stop_failed: Callable[[ApiServer, str, Job, str], Awaitable[None]]


async def _abort(api: ApiServer, namespace: str, job: Job) -> None:
    """A Volcano ``AbortJob`` command; the job is kept, ending CANCELLED."""
    if not is_terminal(job.state):
        await api.abort_job(namespace, job.name, job.uid)


async def _abort_and_annotate(api: ApiServer, namespace: str, job: Job, reason: str) -> None:
    # the annotation goes last: it marks the stop as done
    await api.abort_job(namespace, job.name, job.uid)
    patch = {"metadata": {"annotations": {ANNOTATION_FAILED: reason}}}
    await api.patch_job(namespace, job.name, patch)


async def _delete_jobset(api: ApiServer, namespace: str, job: Job) -> None:
    """Delete the JobSet with its Jobs and pods, as TorchX's ``cancel`` does.

    Not ``spec.suspend``: Kueue owns that field for a queued JobSet and unsuspends an
    admitted one; deleting is how Kueue withdraws a workload and frees its quota.
    """
    await api.delete_job(namespace, job.name, "jobsets")


async def _stop_failed_jobset(api: ApiServer, namespace: str, job: Job, reason: str) -> None:
    """Keep the JobSet, ``FAILED`` with ``reason`` (deleted, it would be an unknown app):
    its Kueue workload is deactivated (no more quota, no unsuspending), then one patch
    suspends it (its pods go) and records the reason, which marks the stop as done."""
    await api.deactivate_workloads(namespace, job.uid)
    patch = {"metadata": {"annotations": {ANNOTATION_FAILED: reason}}, "spec": {"suspend": True}}
    await api.patch_job(namespace, job.name, patch, "jobsets")


#: A Volcano ``Job``: one task (one pod) per replica; TorchX's app ids.
VOLCANO = JobApi(
    name="volcano",
    plural="jobs",
    app_id=lambda namespace, name: f"{namespace}:{name}",
    build=build_job,
    parse=parse_job,
    pod_label="volcano.sh/job-name",
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
    pod_label=LABEL_JOBSET_NAME,
    replicas=jobset_replicas,
    cancel=_delete_jobset,
    stop_failed=_stop_failed_jobset,
)

_BY_NAME = {job_api.name: job_api for job_api in (VOLCANO, JOBSET)}
#: The values of the run option ``job_api``.
JOB_APIS = tuple(_BY_NAME)


def for_name(name: str) -> JobApi:
    """The job API named ``name``; raises ``InvalidRunConfigException`` for another name."""
    if name not in _BY_NAME:
        raise InvalidRunConfigException(
            f"run option 'job_api' is {name!r}; use one of: {', '.join(JOB_APIS)}", "job_api"
        )
    return _BY_NAME[name]


def for_cfg(cfg: Mapping[str, CfgVal]) -> JobApi:
    """The job API the run option ``job_api`` names (``volcano`` when unset)."""
    return for_name(str_option(cfg, "job_api") or VOLCANO.name)
