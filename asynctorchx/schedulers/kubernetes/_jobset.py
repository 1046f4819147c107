"""The ``JobSet`` of the ``kubernetes`` scheduler (run option ``job_api=jobset``): its
manifest and its states, pure data and decision tables.

An :class:`~asynctorchx.specs.AppDef` becomes one ``jobset.x-k8s.io/v1alpha2`` ``JobSet``
(https://jobset.sigs.k8s.io/docs/concepts/, its ``api/jobset/v1alpha2/jobset_types.go``):
one replicated job per role, with ``replicas: 1`` and a Job of ``parallelism`` =
``completions`` = ``num_replicas`` in ``Indexed`` completion mode. This is the layout
JobSet's own PyTorch examples and Kubeflow Trainer use: one Kubernetes Job per role, its
pods numbered 0..n-1 by the Job's completion index, which is the replica id. (One Job per
replica, ``replicas: num_replicas``, would give n Jobs per role and the same shared pod
template, so nothing would be gained for replica ids.)

The pods of a role share one template, so what differs per replica comes from the pod
itself: ``macros.replica_id`` is ``$(TORCHX_REPLICA_ID)``, an env var the container gets
first from the pod's ``batch.kubernetes.io/job-completion-index`` annotation (the Job
controller sets it on every pod of an Indexed Job); Kubernetes expands ``$(VAR)`` in
``command``, ``args`` and later env values. The labels are the Volcano pods' except
``torchx.pytorch.org/replica-id``: the replica is the completion index.

Rank 0 discovery is JobSet's headless service (named after the JobSet, with
``network.enableDNSHostnames``): pod ``k`` of a replicated job ``r`` resolves as
``{jobset}-{r}-0-{k}.{jobset}``; every pod gets ``TORCHX_RANK0_HOST`` = that name for
replica 0 of the first role, and ``macros.rank0_env`` names it.

With the run option ``queue`` the JobSet carries Kueue's ``kueue.x-k8s.io/queue-name``
label (the LocalQueue) and is created with ``spec.suspend: true``: Kueue admits the
workload and unsuspends it (https://kueue.sigs.k8s.io/docs/tasks/run/jobsets/).

Its states: a JobSet reports its end in ``status.conditions`` (``Completed`` or
``Failed`` with status ``True``, and ``status.terminalState``), its suspension in
``spec.suspend`` and the ``Suspended`` condition, and its progress per replicated job in
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

from asynctorchx.errors import InvalidAppDefException
from asynctorchx.schedulers.kubernetes._request import (
    LABEL_REPLICA_ID,
    LABEL_ROLE_NAME,
    RANK0_ENV,
    KubernetesJob,
    PodResources,
    clean_name,
    job_request,
    make_job_name,
    pod_labels,
    pod_resources,
    push_images,
    role_to_pod,
    str_option,
    with_overlay,
)
from asynctorchx.schedulers.kubernetes._state import Job, Pod, Replicas, read_role
from asynctorchx.specs.api import AppDef, AppState, CfgVal, RetryPolicy, Role, macros

#: JobSet's API group, version and plural.
JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_VERSION = "v1alpha2"
JOBSET_API_VERSION = f"{JOBSET_GROUP}/{JOBSET_VERSION}"
#: Kueue's label naming the LocalQueue of a workload.
LABEL_KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
#: Labels the JobSet controller sets on the Jobs and pods it creates.
LABEL_JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
LABEL_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
#: The pod annotation the Job controller sets to the pod's index in an Indexed Job.
ANNOTATION_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
#: The env var holding the replica id (the completion index) in every JobSet pod.
REPLICA_ID_ENV = "TORCHX_REPLICA_ID"
#: The longest pod name JobSet's webhook accepts: ``{jobset}-{r}-{job}-{pod}-xxxxx``.
MAX_POD_NAME = 63
#: The random suffix the Job controller adds to a pod's name (``-`` and 5 characters).
POD_SUFFIX = 6


def replicated_job_name(role: Role) -> str:
    """The replicated job (and container) name of a role: its name cleaned to ``[a-z0-9-]``.

    Args:
        role: the role.

    Raises:
        InvalidAppDefException: the cleaned name does not start with a letter (JobSet's
            Job and pod names are RFC 1035 labels).
    """
    name = clean_name(role.name)
    if not name or not name[0].isalpha():
        raise InvalidAppDefException(
            f"role {role.name!r} cannot name a JobSet replicated job: its name cleaned to"
            f" [a-z0-9-] is {name!r}, which must start with a letter; rename the role"
        )
    return name


def hostname(jobset: str, rjob: str, replica_id: int) -> str:
    """A replica's DNS name on the JobSet's headless service: ``{jobset}-{rjob}-0-{k}.{jobset}``.

    Args:
        jobset: the JobSet's name.
        rjob: the replicated job's name.
        replica_id: the replica (the pod's completion index).
    """
    return f"{jobset}-{rjob}-0-{replica_id}.{jobset}"


def name_budget(app: AppDef) -> int:
    """The longest JobSet name whose pods' names stay within :data:`MAX_POD_NAME`.

    JobSet's webhook refuses a JobSet whose longest pod name,
    ``{jobset}-{rjob}-{replicas-1}-{completions-1}`` plus the Job controller's suffix,
    exceeds 63 characters.

    Args:
        app: the app.

    Raises:
        InvalidAppDefException: a role's name leaves no room for a JobSet name.
    """
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


def _pod_template(
    app: AppDef,
    role_index: int,
    name: str,
    account: str | None,
    priority: str | None,
    pod: PodResources,
) -> dict[str, Any]:
    """The pod template of a role's replicas in the JobSet ``name`` (``account``: the
    pods' service account; ``priority``: their ``PriorityClass``; ``None``: none; ``pod``:
    the run options that shape its resources)."""
    role = app.roles[role_index]
    rjob = replicated_job_name(role)
    values = macros.Values(
        img_root="", app_id=name, replica_id=f"$({REPLICA_ID_ENV})", rank0_env=RANK0_ENV
    )
    replica_role = values.apply(role)
    replica_role.env[RANK0_ENV] = hostname(name, replicated_job_name(app.roles[0]), 0)
    template = role_to_pod(rjob, replica_role, account, **pod._asdict())
    index = {"fieldRef": {"fieldPath": f"metadata.annotations['{ANNOTATION_COMPLETION_INDEX}']"}}
    container = template["spec"]["containers"][0]
    container["env"].insert(0, {"name": REPLICA_ID_ENV, "valueFrom": index})
    if priority is not None:  # Kueue reads a workload's priority from its pods
        template["spec"]["priorityClassName"] = priority
    template = with_overlay(role, template)
    labels = pod_labels(app, role_index, role, 0, name)
    del labels[LABEL_REPLICA_ID]  # one template for every replica: the completion index
    template["metadata"]["labels"].update(labels)
    return template


def build_jobset(
    app: AppDef, cfg: Mapping[str, CfgVal], job_name: str | None = None
) -> KubernetesJob:
    """Return the request for ``app`` as a ``JobSet`` (run option ``job_api=jobset``; see
    the module).

    Retries: a role with ``RetryPolicy.REPLICA`` gets its Job's ``backoffLimit`` =
    ``max_retries`` (the Job controller replaces the failed pod alone); with
    ``APPLICATION`` the JobSet's ``failurePolicy.maxRestarts`` is the largest such
    ``max_retries`` (JobSet recreates every Job). ``min_replicas`` is not mapped: a
    JobSet has no gang minimum (Kueue admits a workload whole).

    Args:
        app: the app (local images are renamed in place, see
            :func:`~asynctorchx.schedulers.kubernetes._request.push_images`).
        cfg: the resolved run options; ``queue`` is Kueue's LocalQueue (optional; without
            it the JobSet is not suspended), ``service_account`` and ``priority_class``
            the pods', and the options of
            :class:`~asynctorchx.schedulers.kubernetes._request.PodResources`.
        job_name: the JobSet's name; ``None``: a new unique one within
            :func:`name_budget`.

    Raises:
        InvalidRunConfigException: an option is not a ``str``, a local image has no
            ``image_repo``, ``image_pull_timeout`` is not a positive ``int``, or an option
            of ``PodResources`` is not an ``int`` >= 0.
        InvalidAppDefException: a role's name cannot name a replicated job, or two roles
            clean to one replicated job name.
        TypeError: a mount is not a bind, volume or device mount, or an overlay cannot
            merge with the pod.
    """
    images = push_images(app, str_option(cfg, "image_repo"))
    name = job_name or make_job_name(app.name, name_budget(app), letter_first=True)
    account, priority = str_option(cfg, "service_account"), str_option(cfg, "priority_class")
    pod = pod_resources(cfg)
    rjobs: list[dict[str, Any]] = []
    restarts = 0
    for role_index, role in enumerate(app.roles):
        rjob = replicated_job_name(role)
        if any(existing["name"] == rjob for existing in rjobs):
            raise InvalidAppDefException(
                f"roles of app {app.name!r} clean to one replicated job name {rjob!r};"
                " give them names that differ in [a-z0-9-]"
            )
        replica_retries = role.retry_policy == RetryPolicy.REPLICA
        if not replica_retries:
            restarts = max(restarts, role.max_retries)
        job_spec: dict[str, Any] = {
            "parallelism": role.num_replicas,
            "completions": role.num_replicas,
            "completionMode": "Indexed",
            "backoffLimit": role.max_retries if replica_retries else 0,
            "template": _pod_template(app, role_index, name, account, priority, pod),
        }
        rjobs.append({"name": rjob, "replicas": 1, "template": {"spec": job_spec}})
    spec: dict[str, Any] = {
        "replicatedJobs": rjobs,
        "network": {"enableDNSHostnames": True},
        "successPolicy": {"operator": "All"},
        "failurePolicy": {"maxRestarts": restarts},
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
    return job_request(cfg, jobset, images, "jobset")


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
