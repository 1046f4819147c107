"""The JobSet manifest of the ``kubernetes`` scheduler (run option ``job_api=jobset``): pure data.

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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asynctorchx.errors import InvalidAppDefException
from asynctorchx.schedulers.kubernetes._request import (
    LABEL_REPLICA_ID,
    RANK0_ENV,
    KubernetesJob,
    clean_name,
    job_request,
    make_job_name,
    pod_labels,
    push_images,
    role_to_pod,
    str_option,
    with_overlay,
)
from asynctorchx.specs.api import AppDef, CfgVal, RetryPolicy, Role, macros

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
    service_account: str | None,
    priority_class: str | None,
) -> dict[str, Any]:
    role = app.roles[role_index]
    rjob = replicated_job_name(role)
    values = macros.Values(
        img_root="", app_id=name, replica_id=f"$({REPLICA_ID_ENV})", rank0_env=RANK0_ENV
    )
    replica_role = values.apply(role)
    replica_role.env[RANK0_ENV] = hostname(name, replicated_job_name(app.roles[0]), 0)
    template = role_to_pod(rjob, replica_role, service_account)
    index = {"fieldRef": {"fieldPath": f"metadata.annotations['{ANNOTATION_COMPLETION_INDEX}']"}}
    container = template["spec"]["containers"][0]
    container["env"].insert(0, {"name": REPLICA_ID_ENV, "valueFrom": index})
    if priority_class is not None:  # Kueue reads a workload's priority from its pods
        template["spec"]["priorityClassName"] = priority_class
    template = with_overlay(role, template)
    labels = pod_labels(app, role_index, role, 0, name)
    del labels[LABEL_REPLICA_ID]  # one template for every replica: the completion index
    template["metadata"]["labels"].update(labels)
    return template


def jobset_resource(
    app: AppDef,
    name: str,
    queue: str | None,
    service_account: str | None,
    priority_class: str | None,
) -> dict[str, Any]:
    """Return the ``JobSet`` manifest of ``app`` (see the module).

    Retries: a role with ``RetryPolicy.REPLICA`` gets its Job's ``backoffLimit`` =
    ``max_retries`` (the Job controller replaces the failed pod alone); with
    ``APPLICATION`` the JobSet's ``failurePolicy.maxRestarts`` is the largest such
    ``max_retries`` (JobSet recreates every Job). ``min_replicas`` is not mapped: a
    JobSet has no gang minimum (Kueue admits a workload whole).

    Args:
        app: the app.
        name: the JobSet's name (at most :func:`name_budget` characters).
        queue: the Kueue LocalQueue, or ``None`` (no Kueue: not suspended).
        service_account: the pods' service account, or ``None``.
        priority_class: the pods' ``PriorityClass``, or ``None``.

    Raises:
        InvalidAppDefException: two roles clean to one replicated job name, or a role's
            name does not start with a letter.
        TypeError: a mount is not a bind, volume or device mount, or an overlay cannot
            merge with the pod.
    """
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
        template = _pod_template(app, role_index, name, service_account, priority_class)
        job_spec: dict[str, Any] = {
            "parallelism": role.num_replicas,
            "completions": role.num_replicas,
            "completionMode": "Indexed",
            "backoffLimit": role.max_retries if replica_retries else 0,
            "template": template,
        }
        rjobs.append({"name": rjob, "replicas": 1, "template": {"spec": job_spec}})
    spec: dict[str, Any] = {
        "replicatedJobs": rjobs,
        "network": {"enableDNSHostnames": True},
        "successPolicy": {"operator": "All"},
        "failurePolicy": {"maxRestarts": restarts},
    }
    metadata: dict[str, Any] = {"name": name}
    if queue:
        metadata["labels"] = {LABEL_KUEUE_QUEUE: queue}
        spec["suspend"] = True
    return {"apiVersion": JOBSET_API_VERSION, "kind": "JobSet", "metadata": metadata, "spec": spec}


def build_jobset(
    app: AppDef, cfg: Mapping[str, CfgVal], job_name: str | None = None
) -> KubernetesJob:
    """Return the request for ``app`` as a JobSet (run option ``job_api=jobset``).

    Args:
        app: the app (local images are renamed in place, see
            :func:`~asynctorchx.schedulers.kubernetes._request.push_images`).
        cfg: the resolved run options; ``queue`` is Kueue's LocalQueue (optional).
        job_name: the JobSet's name; ``None``: a new unique one within
            :func:`name_budget`.

    Raises:
        InvalidRunConfigException: an option is not a ``str``, a local image has no
            ``image_repo``, or ``image_pull_timeout`` is not a positive ``int``.
        InvalidAppDefException: a role's name cannot name a replicated job.
        TypeError: a mount is not a bind, volume or device mount.
    """
    images = push_images(app, str_option(cfg, "image_repo"))
    name = job_name or make_job_name(app.name, name_budget(app), letter_first=True)
    resource = jobset_resource(
        app,
        name,
        str_option(cfg, "queue"),
        str_option(cfg, "service_account"),
        str_option(cfg, "priority_class"),
    )
    return job_request(cfg, resource, images, "jobset")
