"""The ``JobSet`` of run option ``job_api=jobset``: its manifest and its states, pure.

One replicated job per role, a Job of ``parallelism`` = ``completions`` = ``num_replicas``
in ``Indexed`` mode, as JobSet's PyTorch examples and Kubeflow Trainer lay it out
(https://jobset.sigs.k8s.io/docs/concepts/). The pods of a role share one template, so
the replica id is the pod's completion index, given to the container as
``$(TORCHX_REPLICA_ID)``. With ``queue`` the JobSet has Kueue's queue label and is created
suspended for Kueue to admit (https://kueue.sigs.k8s.io/docs/tasks/run/jobsets/).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asynctorchx.errors import InvalidAppDefException
from asynctorchx.schedulers.kubernetes._request import (
    RANK0_ENV,
    KubernetesJob,
    Setup,
    clean_name,
    job_request,
    make_job_name,
    replica_pod,
    str_option,
)
from asynctorchx.schedulers.kubernetes._state import Job, Pod, Replicas, Template
from asynctorchx.specs.api import AppDef, AppState, CfgVal, RetryPolicy, Role, macros

JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_VERSION = "v1alpha2"
JOBSET_API_VERSION = f"{JOBSET_GROUP}/{JOBSET_VERSION}"
#: Kueue's label naming the LocalQueue of a workload.
LABEL_KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
#: Labels the JobSet controller sets on the Jobs and pods it creates.
LABEL_JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
LABEL_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
ANNOTATION_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
REPLICA_ID_ENV = "TORCHX_REPLICA_ID"
#: JobSet's webhook refuses a pod name ``{jobset}-{rjob}-{r}-{k}`` + suffix over this.
MAX_POD_NAME = 63
#: The Job controller's random suffix of a pod's name (``-xxxxx``).
POD_SUFFIX = 6


def replicated_job_name(role: Role) -> str:
    """A role's replicated job (and container) name; raises ``InvalidAppDefException``
    unless it starts with a letter (an RFC 1035 label)."""
    name = clean_name(role.name)
    if not name or not name[0].isalpha():
        raise InvalidAppDefException(
            f"role {role.name!r} cannot name a JobSet replicated job: its name cleaned to"
            f" [a-z0-9-] is {name!r}, which must start with a letter; rename the role"
        )
    return name


def hostname(jobset: str, rjob: str, replica_id: int) -> str:
    """A replica's DNS name on the JobSet's headless service."""
    return f"{jobset}-{rjob}-0-{replica_id}.{jobset}"


def name_budget(app: AppDef) -> int:
    """The longest JobSet name whose pods' names fit :data:`MAX_POD_NAME`; raises
    ``InvalidAppDefException`` when a role's name leaves no room."""
    budget = MAX_POD_NAME
    for role in app.roles:
        tail = f"-{replicated_job_name(role)}-0-{max(role.num_replicas - 1, 0)}"
        room = MAX_POD_NAME - len(tail) - POD_SUFFIX
        if room < 12:  # the random part of the name alone takes 11
            raise InvalidAppDefException(
                f"role {role.name!r}: its name is too long for a JobSet (pod names"
                f" {{jobset}}{tail}-xxxxx must fit in {MAX_POD_NAME} characters);"
                " shorten the role's name"
            )
        budget = min(budget, room)
    return budget


def build_jobset(
    app: AppDef, cfg: Mapping[str, CfgVal], job_name: str | None = None
) -> KubernetesJob:
    """The request for ``app`` as a ``JobSet``. A role with ``RetryPolicy.REPLICA`` gets
    its Job's ``backoffLimit`` = ``max_retries``; with ``APPLICATION`` the JobSet's
    ``maxRestarts`` is the largest ``max_retries``. ``min_replicas`` has no JobSet meaning
    (Kueue admits a workload whole). Raises as
    :func:`~asynctorchx.schedulers.kubernetes._request.build_job`, and
    ``InvalidAppDefException`` when two roles clean to one replicated job name.
    """
    setup = Setup.read(app, cfg)
    name = job_name or make_job_name(app.name, name_budget(app), letter_first=True)
    values = macros.Values(
        img_root="", app_id=name, replica_id=f"$({REPLICA_ID_ENV})", rank0_env=RANK0_ENV
    )
    env = {RANK0_ENV: hostname(name, replicated_job_name(app.roles[0]), 0)}
    index = {REPLICA_ID_ENV: f"metadata.annotations['{ANNOTATION_COMPLETION_INDEX}']"}
    rjobs: list[dict[str, Any]] = []
    for role_index, role in enumerate(app.roles):
        rjob = replicated_job_name(role)
        if any(existing["name"] == rjob for existing in rjobs):
            raise InvalidAppDefException(
                f"roles of app {app.name!r} clean to one replicated job name {rjob!r};"
                " give them names that differ in [a-z0-9-]"
            )
        # Kueue reads a workload's priority from its pods
        template = replica_pod(
            app, role_index, rjob, values, env, setup, None, field_env=index, priority=True
        )
        job_spec: dict[str, Any] = {
            "parallelism": role.num_replicas,
            "completions": role.num_replicas,
            "completionMode": "Indexed",
            "backoffLimit": role.max_retries if role.retry_policy == RetryPolicy.REPLICA else 0,
            "template": template,
        }
        rjobs.append({"name": rjob, "replicas": 1, "template": {"spec": job_spec}})
    restarts = [role.max_retries for role in app.roles if role.retry_policy != RetryPolicy.REPLICA]
    spec: dict[str, Any] = {
        "replicatedJobs": rjobs,
        "network": {"enableDNSHostnames": True},
        "successPolicy": {"operator": "All"},
        "failurePolicy": {"maxRestarts": max(restarts, default=0)},
    }
    metadata: dict[str, Any] = {"name": name}
    if queue := str_option(cfg, "queue"):
        metadata["labels"] = {LABEL_KUEUE_QUEUE: queue}
        spec["suspend"] = True
    jobset = {
        "apiVersion": JOBSET_API_VERSION,
        "kind": "JobSet",
        "metadata": metadata,
        "spec": spec,
    }
    return job_request(cfg, jobset, setup.images, "jobset")


#: What the JobSet shows (``jobset_types.go``'s conditions and ``replicatedJobsStatus``) ->
#: the app's state, first match wins.
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
    """Why it waits (suspended: for Kueue when it has a queue) or how it ended; else ``None``."""
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
    """A JobSet: :data:`JOBSET_STATE` of :func:`jobset_case`, its replicated jobs made from a
    role (one per role, ``torchx.pytorch.org/role-name``) its replicas."""
    templates: list[Template] = []
    for rjob in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        job_spec = (rjob.get("template") or {}).get("spec") or {}
        count = int(job_spec.get("parallelism") or 0)
        templates.append((job_spec.get("template") or {}, str(rjob.get("name")), count))
    case = jobset_case(jobset)
    restarts = int((jobset.get("status") or {}).get("restarts") or 0)
    ended = (_true_conditions(jobset).get(case) or {}).get("lastTransitionTime")  # when it ended
    return Job.read(jobset, JOBSET_STATE[case], restarts, templates, _message(jobset, case), ended)


def _newness(pod: Pod) -> tuple[float, bool]:
    """Creation time (whole seconds), then not failed: a replacement is made for a failed pod."""
    return pod.created or 0.0, pod.phase != "Failed"


def jobset_replicas(jobset: Job, pods: Mapping[str, Pod]) -> Replicas:
    """Each replica of the JobSet -> the newest pod with its labels and completion index."""
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
