"""The job APIs the ``kubernetes`` scheduler submits to, one small strategy each.

The run option ``job_api`` picks one per run: ``volcano`` (a Volcano ``Job``, TorchX's
manifest; the default) or ``jobset`` (a ``jobset.x-k8s.io/v1alpha2`` ``JobSet``, with
Kueue when ``queue`` is given). The app id says which (``{namespace}:{job}`` or
``{namespace}:jobset:{jobset}``), so ``describe``, ``wait``, ``cancel`` and ``log_iter``
pick the same strategy. A strategy is pure except :meth:`JobApi.cancel` and
:meth:`JobApi.stop_failed`, which take the API server connection.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any

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
    describe_job,
    job_failure,
    job_state,
)
from asynctorchx.specs.api import AppDef, AppState, CfgVal, is_terminal

Obj = Mapping[str, Any]


class JobApi(abc.ABC):
    """What differs between job APIs; subclasses fill it in.

    Attributes:
        name: the run option's value (``volcano`` or ``jobset``).
        plural: the resource's plural (the watch and the requests use it).
        fixed_pod_names: whether :meth:`pod_name` is known without the pods (Volcano's
            ``{job}-{task}-0``), so no pod list is needed to read a log.
    """

    name = ""
    plural = ""
    fixed_pod_names = False

    @abc.abstractmethod
    def app_id(self, namespace: str, name: str) -> str:
        """The app id of a job ``name`` in ``namespace``."""

    @abc.abstractmethod
    def build(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> KubernetesJob:
        """The request for ``app`` (see the builders for what they raise)."""

    @abc.abstractmethod
    def pod_labels(self, name: str) -> dict[str, str]:
        """The labels that select the job's pods."""

    @abc.abstractmethod
    def state(self, job: Obj) -> AppState:
        """The app state the job object alone says (``list`` and log followers use it)."""

    @abc.abstractmethod
    def failure(self, job: Obj, pods: Mapping[str, Obj], now: float) -> str | None:
        """Why a pod ends the app ``FAILED`` though the job says otherwise, else ``None``."""

    @abc.abstractmethod
    def describe(
        self, app_id: str, job: Obj, pods: Mapping[str, Obj], now: float
    ) -> DescribeAppResponse:
        """The app's description from the job and its pods (name -> pod)."""

    @abc.abstractmethod
    def containers(self, job: Obj) -> dict[tuple[str, int], str]:
        """(role, replica id) -> the replica's container name."""

    @abc.abstractmethod
    def pod_name(self, job: Obj, pods: Mapping[str, Obj], role: str, replica_id: int) -> str | None:
        """The replica's current pod name (``pods``: name -> pod), or ``None`` if none yet."""

    @abc.abstractmethod
    async def cancel(self, api: ApiServer, namespace: str, job: dict[str, Any]) -> None:
        """Stop the app (a no-op once it ended)."""

    async def stop_failed(
        self, api: ApiServer, namespace: str, job: dict[str, Any], reason: str
    ) -> None:
        """Record ``reason`` (a pod's waiting reason ended the app) on the job."""
        await api.annotate_job(
            namespace, job["metadata"]["name"], {ANNOTATION_FAILED: reason}, self.plural
        )


class Volcano(JobApi):
    """A Volcano ``Job``: one task (one pod, ``{job}-{task}-0``) per replica."""

    name = "volcano"
    plural = "jobs"
    fixed_pod_names = True

    def app_id(self, namespace: str, name: str) -> str:
        """TorchX's ``{namespace}:{job}``."""
        return f"{namespace}:{name}"

    def build(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> KubernetesJob:
        """:func:`._request.build_job`."""
        return build_job(app, cfg)

    def pod_labels(self, name: str) -> dict[str, str]:
        """Volcano's ``volcano.sh/job-name`` label."""
        return {"volcano.sh/job-name": name}

    def state(self, job: Obj) -> AppState:
        """:func:`._state.job_state`."""
        return job_state(job)

    def failure(self, job: Obj, pods: Mapping[str, Obj], now: float) -> str | None:
        """:func:`._state.job_failure`."""
        return job_failure(job, pods, now)

    def describe(
        self, app_id: str, job: Obj, pods: Mapping[str, Obj], now: float
    ) -> DescribeAppResponse:
        """:func:`._state.describe_job`."""
        return describe_job(app_id, job, pods, now)

    def containers(self, job: Obj) -> dict[tuple[str, int], str]:
        """Each task's name (its container's)."""
        found = {}
        for task in job["spec"]["tasks"]:
            labels = task["template"]["metadata"]["labels"]
            found[(labels[LABEL_ROLE_NAME], int(labels[LABEL_REPLICA_ID]))] = str(task["name"])
        return found

    def pod_name(self, job: Obj, pods: Mapping[str, Obj], role: str, replica_id: int) -> str | None:
        """Volcano's fixed name ``{job}-{task}-0``."""
        return f"{job['metadata']['name']}-{self.containers(job)[(role, replica_id)]}-0"

    async def cancel(self, api: ApiServer, namespace: str, job: dict[str, Any]) -> None:
        """Abort the job (a Volcano ``AbortJob`` command); it is kept, ending CANCELLED."""
        if not is_terminal(job_state(job)):
            await api.abort_job(namespace, job)

    async def stop_failed(
        self, api: ApiServer, namespace: str, job: dict[str, Any], reason: str
    ) -> None:
        """Record ``reason`` on the job, then abort it (nothing of it stays queued)."""
        await super().stop_failed(api, namespace, job, reason)
        await api.abort_job(namespace, job)


class JobSet(JobApi):
    """A ``JobSet``: one replicated job per role, its pods found by label and index."""

    name = "jobset"
    plural = "jobsets"

    def app_id(self, namespace: str, name: str) -> str:
        """``{namespace}:jobset:{name}``."""
        return f"{namespace}:jobset:{name}"

    def build(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> KubernetesJob:
        """:func:`._jobset_request.build_jobset`."""
        return build_jobset(app, cfg)

    def pod_labels(self, name: str) -> dict[str, str]:
        """The JobSet controller's ``jobset.sigs.k8s.io/jobset-name`` label."""
        return {LABEL_JOBSET_NAME: name}

    def state(self, job: Obj) -> AppState:
        """:func:`._jobset_state.jobset_state`."""
        return jobset_state(job)

    def failure(self, job: Obj, pods: Mapping[str, Obj], now: float) -> str | None:
        """:func:`._jobset_state.jobset_failure`."""
        return jobset_failure(job, pods, now)

    def describe(
        self, app_id: str, job: Obj, pods: Mapping[str, Obj], now: float
    ) -> DescribeAppResponse:
        """:func:`._jobset_state.describe_jobset`."""
        return describe_jobset(app_id, job, pods, now)

    def containers(self, job: Obj) -> dict[tuple[str, int], str]:
        """The replicated job's name, for every replica of the role."""
        return {
            (role, replica_id): rjob
            for role, rjob, count in replicated_jobs(job)
            for replica_id in range(count)
        }

    def pod_name(self, job: Obj, pods: Mapping[str, Obj], role: str, replica_id: int) -> str | None:
        """The newest pod of the replica's index (:func:`._jobset_state.replica_pods`)."""
        name = job["metadata"]["name"]
        mine = {
            key: pod
            for key, pod in pods.items()
            if ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_JOBSET_NAME) == name
        }
        pod = replica_pods(job, mine).get((role, replica_id))
        return None if pod is None else str(pod["metadata"]["name"])

    async def cancel(self, api: ApiServer, namespace: str, job: dict[str, Any]) -> None:
        """Delete the JobSet (its Jobs and pods go with it).

        Not ``spec.suspend``: Kueue owns that field for a queued JobSet (it unsuspends
        an admitted one again), and JobSet documents suspension as a pause to resume,
        not an end. Deleting is how Kueue withdraws a workload and frees its quota; it is
        also what TorchX 0.7.0's ``cancel`` does. The app is then unknown (``None``).
        """
        await api.delete_job(namespace, job["metadata"]["name"], self.plural)


#: The strategies by run option value.
STRATEGIES: dict[str, JobApi] = {"volcano": Volcano(), "jobset": JobSet()}


def for_cfg(cfg: Mapping[str, CfgVal]) -> JobApi:
    """The strategy the run option ``job_api`` names.

    Raises:
        InvalidRunConfigException: an unknown value (the message lists the values).
    """
    return STRATEGIES[job_api(cfg)]
