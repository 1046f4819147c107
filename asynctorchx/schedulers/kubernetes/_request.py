"""The Volcano ``Job`` manifest of the ``kubernetes`` scheduler: pure data, no I/O.

The manifest is the one TorchX 0.7.0's ``kubernetes_scheduler`` makes for the same app and
run options (the differences are in ``docs/kubernetes.md``): one task per replica, since
macros differ per replica (https://volcano.sh/en/docs/vcjob/). Rank 0 is found through
Volcano's ``svc`` and ``env`` plugins (``VC_{TASK}_HOSTS``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import attrs

from asynctorchx import __version__
from asynctorchx.errors import (
    InvalidAppDefException,
    InvalidAppIdException,
    InvalidRunConfigException,
)
from asynctorchx.schedulers._structured import StructuredOpts
from asynctorchx.schedulers.toolkit import make_app_id
from asynctorchx.specs.api import (
    AppDef,
    BindMount,
    CfgVal,
    DeviceMount,
    RetryPolicy,
    Role,
    VolumeMount,
    macros,
    runopts,
)
from asynctorchx.specs.named_resources_aws import EFA_DEVICE
from asynctorchx.specs.overlays import apply_overlay, get_overlay

VOLCANO_GROUP = "batch.volcano.sh"
VOLCANO_VERSION = "v1alpha1"
VOLCANO_API_VERSION = f"{VOLCANO_GROUP}/{VOLCANO_VERSION}"

#: Millicores and MB left to the node: a container requests its limit minus these (TorchX's
#: rule for whole-host jobs).
RESERVED_MILLICPU = 100
RESERVED_MEMMB = 1024


class PodResources(NamedTuple):
    """The run options that shape every container's ``resources`` (torchx-nightly's)."""

    reserved_millicpu: int = RESERVED_MILLICPU
    reserved_memmb: int = RESERVED_MEMMB
    efa_device_count: int | None = None


#: Volcano task policies per retry policy (TorchX's): ``APPLICATION`` restarts the whole job.
RETRY_POLICIES: Mapping[RetryPolicy, list[dict[str, str]]] = {
    RetryPolicy.REPLICA: [],
    RetryPolicy.APPLICATION: [
        {"event": "PodEvicted", "action": "RestartJob"},
        {"event": "PodFailed", "action": "RestartJob"},
    ],
}

# TorchX's label keys (torchx.schedulers.kubernetes_scheduler), read by both.
LABEL_VERSION = "torchx.pytorch.org/version"
LABEL_APP_NAME = "torchx.pytorch.org/app-name"
LABEL_ROLE_INDEX = "torchx.pytorch.org/role-index"
LABEL_ROLE_NAME = "torchx.pytorch.org/role-name"
LABEL_REPLICA_ID = "torchx.pytorch.org/replica-id"
LABEL_KUBE_APP_NAME = "app.kubernetes.io/name"
LABEL_ORGANIZATION = "app.kubernetes.io/managed-by"
LABEL_UNIQUE_NAME = "app.kubernetes.io/instance"
ORGANIZATION = "torchx.pytorch.org"
ANNOTATION_ISTIO_SIDECAR = "sidecar.istio.io/inject"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"

ANNOTATION_PULL_TIMEOUT = "asynctorchx/image-pull-timeout"

RANK0_ENV = "TORCHX_RANK0_HOST"
IMAGE_ENV = "TORCHX_IMAGE"  # torchx-nightly's
IMAGE_HASH_PREFIX = "sha256:"  # a workspace's local image
SHM_VOLUME = "dshm"

_OUTSIDE_RFC1123 = re.compile(r"[^a-z0-9\-]")
_NAME = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_APP_ID = re.compile(rf"(?P<namespace>{_NAME}):(?:(?P<api>jobset):)?(?P<name>{_NAME})")
#: The job's headless service is named after it: a DNS label.
MAX_JOB_NAME = 63


def clean_name(name: str) -> str:
    """``name`` lower-cased, outside ``[a-z0-9-]`` removed: TorchX's ``normalize_str``, except
    that every leading ``-`` goes (TorchX drops one, leaving an invalid name)."""
    return _OUTSIDE_RFC1123.sub("", name.lower()).lstrip("-")


def make_job_name(app_name: str, max_length: int = MAX_JOB_NAME, letter_first: bool = False) -> str:
    """A new unique DNS-label job name: the cleaned app name cut to fit, ``-``, a random
    suffix; ``letter_first`` drops leading digits (JobSet's names are RFC 1035 labels)."""
    unique = clean_name(make_app_id(app_name))
    name, _, suffix = unique.rpartition("-")
    name = name[: max_length - len(suffix) - 1].strip("-")
    if letter_first:
        name = name.lstrip("0123456789-")
    return f"{name or 'app'}-{suffix}"


def parse_app_ref(app_id: str) -> tuple[str, str, str]:
    """``(namespace, job API, name)`` of ``{namespace}:{job}`` or ``{namespace}:jobset:{name}``;
    raises ``InvalidAppIdException`` for anything else."""
    match = _APP_ID.fullmatch(app_id) if isinstance(app_id, str) else None
    if match is None:
        raise InvalidAppIdException(str(app_id))
    return match["namespace"], match["api"] or "volcano", match["name"]


@dataclass
class Opts(StructuredOpts):
    """The run options of the ``kubernetes`` scheduler: torchx-nightly's
    ``torchx.schedulers.kubernetes_scheduler.Opts``, plus ``image_pull_timeout`` and
    ``job_api``; each field's text below is its help."""

    namespace: str = "default"
    """Kubernetes namespace of the job"""

    queue: str | None = None
    """job_api=volcano: the Volcano queue (required); job_api=jobset: the Kueue LocalQueue
    (optional; the JobSet is then created suspended for Kueue to admit)"""

    image_repo: str | None = None
    """repository local images (sha256:...: a workspace's) are tagged into as
    `<image_repo>:<hash>` and pushed to at submission"""

    service_account: str | None = None
    """service account of every pod"""

    priority_class: str | None = None
    """PriorityClass name of the job"""

    reserved_millicpu: int = RESERVED_MILLICPU
    """millicores left to the node: each container requests its cpu minus these"""

    reserved_memmb: int = RESERVED_MEMMB
    """MB left to the node: each container requests its memMB minus these"""

    efa_device_count: int | None = None
    """EFA devices of every container, over the resource's (unset: the resource's; 0: none)"""

    image_pull_timeout: int | None = None
    """seconds after a pod's creation when a failing image pull ends the app FAILED (unset:
    the app stays PENDING, showing the pull error)"""

    job_api: str = "volcano"
    """the Kubernetes job API: volcano (a Volcano Job, TorchX's manifest) or jobset (a
    jobset.x-k8s.io/v1alpha2 JobSet, one replicated job per role)"""

    validate_spec: bool = True
    """before creating the job, send it to the API server as a dry run (dryRun=All), whose
    refusal names the fields; with job_api=volcano, the dry run also refuses a pod name
    longer than 63 characters"""


def kubernetes_runopts() -> runopts:
    """The run options of the ``kubernetes`` scheduler, as :class:`Opts` declares them."""
    return Opts.as_runopts()


@attrs.define
class KubernetesJob:
    """What :meth:`KubernetesScheduler.schedule` submits (TorchX's ``KubernetesJob``).

    Args:
        namespace: the namespace the job is created in.
        resource: the manifest (a Volcano ``Job`` or a ``JobSet``), JSON-ready.
        images_to_push: local image -> (repository, tag) pushed at submission.
        job_api: ``volcano`` or ``jobset``.
        validate_spec: send it as a dry run before creating it.
    """

    namespace: str
    resource: dict[str, Any]
    images_to_push: dict[str, tuple[str, str]] = attrs.field(factory=dict)
    job_api: str = "volcano"
    validate_spec: bool = True

    def __str__(self) -> str:
        return json.dumps(self.resource, indent=2)


def _resources(role: Role, pod: PodResources) -> dict[str, dict[str, str]]:
    resource = role.resource
    limits: dict[str, str] = {}
    requests: dict[str, str] = {}
    if resource.cpu > 0:
        millicpu = int(resource.cpu * 1000)
        limits["cpu"] = f"{millicpu}m"
        requests["cpu"] = f"{max(millicpu - pod.reserved_millicpu, 0)}m"
    if resource.memMB > 0:
        limits["memory"] = f"{int(resource.memMB)}M"
        requests["memory"] = f"{max(int(resource.memMB) - pod.reserved_memmb, 0)}M"
    if resource.gpu > 0:
        limits["nvidia.com/gpu"] = requests["nvidia.com/gpu"] = str(resource.gpu)
    for device, count in resource.devices.items():
        limits[device] = str(count)  # a device plugin's resource (EFA, Neuron)
    if pod.efa_device_count == 0:
        limits.pop(EFA_DEVICE, None)
    elif pod.efa_device_count is not None:
        limits[EFA_DEVICE] = str(pod.efa_device_count)
    return {"limits": limits, "requests": requests}


def _mounts(role: Role) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    volumes: list[dict[str, Any]] = [{"emptyDir": {"medium": "Memory"}, "name": SHM_VOLUME}]
    mounts: list[dict[str, Any]] = [{"mountPath": "/dev/shm", "name": SHM_VOLUME}]
    privileged = False
    for index, mount in enumerate(role.mounts):
        name = f"mount-{index}"
        if isinstance(mount, BindMount):
            volumes.append({"hostPath": {"path": mount.src_path}, "name": name})
            read_only = mount.read_only
        elif isinstance(mount, VolumeMount):
            volumes.append({"name": name, "persistentVolumeClaim": {"claimName": mount.src}})
            read_only = mount.read_only
        elif isinstance(mount, DeviceMount):
            volumes.append({"hostPath": {"path": mount.src_path}, "name": name})
            read_only = "w" not in mount.permissions and "m" not in mount.permissions
            privileged = True  # Kubernetes has no --device: the container sees /dev
        else:
            raise TypeError(f"role {role.name!r} has a mount of unknown type: {mount!r}")
        mounts.append({"mountPath": mount.dst_path, "name": name, "readOnly": read_only})
    return volumes, mounts, privileged


def role_to_pod(
    name: str,
    role: Role,
    service_account: str | None,
    reserved_millicpu: int = RESERVED_MILLICPU,
    reserved_memmb: int = RESERVED_MEMMB,
    efa_device_count: int | None = None,
) -> dict[str, Any]:
    """Return the pod template of one replica (TorchX's ``role_to_pod``).

    Args:
        name: the container's name.
        role: the replica's role, its macros substituted.
        service_account: the pods' service account, or ``None``.
        reserved_millicpu: millicores left to the node (:data:`RESERVED_MILLICPU`).
        reserved_memmb: MB left to the node (:data:`RESERVED_MEMMB`).
        efa_device_count: EFA devices of every container (``None``: the resource's; ``0``: none).

    Raises:
        TypeError: a mount is not a bind, volume or device mount.
    """
    volumes, volume_mounts, privileged = _mounts(role)
    container: dict[str, Any] = {
        "command": [role.entrypoint, *role.args],
        "env": [{"name": key, "value": value} for key, value in role.env.items()],
        "image": role.image,
        "name": name,
        "ports": [{"containerPort": port, "name": key} for key, port in role.port_map.items()],
        "resources": _resources(
            role, PodResources(reserved_millicpu, reserved_memmb, efa_device_count)
        ),
        "securityContext": {"privileged": True} if privileged else {},
        "volumeMounts": volume_mounts,
    }
    capabilities = role.resource.capabilities
    spec: dict[str, Any] = {
        "containers": [container],
        "nodeSelector": {k: v for k, v in capabilities.items() if k == LABEL_INSTANCE_TYPE},
        "restartPolicy": "Never",
        "volumes": volumes,
    }
    if service_account is not None:
        spec["serviceAccountName"] = service_account
    return {
        "metadata": {"annotations": {ANNOTATION_ISTIO_SIDECAR: "false"}, "labels": {}},
        "spec": spec,
    }


def pod_labels(
    app: AppDef, role_index: int, role: Role, replica_id: int, job_name: str
) -> dict[str, str]:
    """Return the labels of one replica's pod (TorchX's ``pod_labels``).

    Args:
        app: the app.
        role_index: the role's index in ``app.roles``.
        role: the role.
        replica_id: the replica's id.
        job_name: the job's name.
    """
    return {
        LABEL_VERSION: __version__,
        LABEL_APP_NAME: app.name,
        LABEL_ROLE_INDEX: str(role_index),
        LABEL_ROLE_NAME: role.name,
        LABEL_REPLICA_ID: str(replica_id),
        LABEL_KUBE_APP_NAME: app.name,
        LABEL_ORGANIZATION: ORGANIZATION,
        LABEL_UNIQUE_NAME: job_name,
    }


class Setup(NamedTuple):
    """What both job APIs read of the run options first."""

    images: dict[str, tuple[str, str]]
    account: str | None
    priority: str | None
    pod: PodResources

    @classmethod
    def read(cls, app: AppDef, cfg: Mapping[str, CfgVal]) -> Setup:
        """Read ``cfg``, the roles' local images renamed in place (:func:`push_images`); raises
        ``InvalidRunConfigException`` for a :class:`PodResources` option not an int >= 0."""
        images = push_images(app, str_option(cfg, "image_repo"))
        account, priority = str_option(cfg, "service_account"), str_option(cfg, "priority_class")
        given = {key: _int_option(cfg, key, 0, "an int >= 0") for key in PodResources._fields}
        pod = PodResources(**{key: value for key, value in given.items() if value is not None})
        return cls(images, account, priority, pod)


def replica_pod(
    app: AppDef,
    role_index: int,
    container: str,
    values: macros.Values,
    env: Mapping[str, str],
    setup: Setup,
    replica_id: int | None,
    *,
    field_env: Mapping[str, str] | None = None,
    priority: bool = False,
) -> dict[str, Any]:
    """The pod template of a replica (``replica_id`` ``None``: of every replica of the role,
    without the replica id label): macros, ``env`` and ``field_env`` (name -> field path,
    first) set, then the overlay, then the labels."""
    role = app.roles[role_index]
    replica_role = values.apply(role)
    replica_role.env.update(env)
    template = role_to_pod(container, replica_role, setup.account, **setup.pod._asdict())
    for name, path in (field_env or {}).items():
        entry = {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
        template["spec"]["containers"][0]["env"].insert(0, entry)
    if priority and setup.priority is not None:
        template["spec"]["priorityClassName"] = setup.priority
    if overlay := get_overlay(role, "kubernetes", "V1Pod"):
        apply_overlay(template, overlay)
        template = {"metadata": template.get("metadata") or {}, "spec": template["spec"]}
    labels = pod_labels(app, role_index, role, replica_id or 0, values.app_id)
    if replica_id is None:
        del labels[LABEL_REPLICA_ID]
    template["metadata"].setdefault("labels", {}).update(labels)
    return template


def _task(
    app: AppDef,
    role_index: int,
    replica_id: int,
    job_name: str,
    setup: Setup,
) -> dict[str, Any]:
    role = app.roles[role_index]
    first = role_index == 0 and replica_id == 0
    values = macros.Values(
        img_root="",
        app_id=job_name,
        replica_id=str(replica_id),
        rank0_env=RANK0_ENV if first else f"VC_{clean_name(app.roles[0].name)}_0_HOSTS".upper(),
    )
    env = {RANK0_ENV: "localhost"} if first else {}
    env[IMAGE_ENV] = role.image
    name = clean_name(f"{role.name}-{replica_id}")  # the task's and its container's
    template = replica_pod(app, role_index, name, values, env, setup, replica_id)
    task: dict[str, Any] = {"name": name, "replicas": 1, "template": template}
    if role.max_retries > 0:
        task["maxRetry"] = role.max_retries
        task["policies"] = RETRY_POLICIES[role.retry_policy]
    if role.min_replicas is not None:
        # the first min_replicas tasks are needed to run, the others are optional
        task["minAvailable"] = 1 if replica_id < role.min_replicas else 0
    return task


def app_to_resource(
    app: AppDef,
    queue: str,
    service_account: str | None,
    priority_class: str | None = None,
    reserved_millicpu: int = RESERVED_MILLICPU,
    reserved_memmb: int = RESERVED_MEMMB,
    efa_device_count: int | None = None,
    *,
    job_name: str | None = None,
) -> dict[str, Any]:
    """Return the Volcano ``Job`` manifest of ``app`` (TorchX's ``app_to_resource``). The
    job's ``maxRetry`` is the smallest ``max_retries`` of the roles; each task has its
    role's ``maxRetry`` and :data:`RETRY_POLICIES`.

    Args:
        app: the app.
        queue: the Volcano queue.
        service_account: the pods' service account, or ``None``.
        priority_class: the job's ``PriorityClass``, or ``None``.
        reserved_millicpu: millicores left to the node.
        reserved_memmb: MB left to the node.
        efa_device_count: EFA devices of every container (``None``: the resource's).
        job_name: the job's name; ``None``: a new unique one.

    Raises:
        TypeError: a mount is of no known type, or a pod overlay cannot merge.
    """
    name = job_name if job_name is not None else make_job_name(app.name)
    pod = PodResources(reserved_millicpu, reserved_memmb, efa_device_count)
    setup = Setup({}, service_account, priority_class, pod)
    tasks = [
        _task(app, role_index, replica_id, name, setup)
        for role_index, role in enumerate(app.roles)
        for replica_id in range(role.num_replicas)
    ]
    spec: dict[str, Any] = {
        "maxRetry": min(role.max_retries for role in app.roles),
        # publish-not-ready-addresses: replicas resolve each other before all are ready
        "plugins": {"env": [], "svc": ["--publish-not-ready-addresses"]},
        "queue": queue,
        "schedulerName": "volcano",
        "tasks": tasks,
    }
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": VOLCANO_API_VERSION,
        "kind": "Job",
        "metadata": {"name": name},
        "spec": spec,
    }


def str_option(cfg: Mapping[str, CfgVal], key: str) -> str | None:
    """The run option ``key``, a ``str`` or ``None`` (else ``InvalidRunConfigException``)."""
    value = cfg.get(key)
    if value is None or isinstance(value, str):
        return value
    raise InvalidRunConfigException(f"run option {key!r} must be a str, got {value!r}", key)


def _int_option(cfg: Mapping[str, CfgVal], key: str, least: int, what: str) -> int | None:
    """The run option ``key``, an int >= ``least`` or ``None`` (else
    ``InvalidRunConfigException``: it must be ``what``)."""
    value = cfg.get(key)
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= least):
        return value
    raise InvalidRunConfigException(f"run option {key!r} must be {what}, got {value!r}", key)


def push_images(app: AppDef, image_repo: str | None) -> dict[str, tuple[str, str]]:
    """Rename the roles' local images ``image_repo:<hash>`` in place; return local image ->
    (repository, tag) (TorchX's ``DockerWorkspaceMixin.dryrun_push_images``). Raises
    ``InvalidRunConfigException`` for a local image without ``image_repo``."""
    renamed: dict[str, tuple[str, str]] = {}
    for role in app.roles:
        if role.image.startswith(IMAGE_HASH_PREFIX):
            if not image_repo:
                raise InvalidRunConfigException(
                    f"role {role.name!r} runs the local image {role.image!r}: set the run"
                    " option image_repo to the repository the cluster pulls it from",
                    "image_repo",
                )
            tag = role.image[len(IMAGE_HASH_PREFIX) :]
            renamed[role.image] = (image_repo, tag)
            role.image = f"{image_repo}:{tag}"
    return renamed


def build_job(app: AppDef, cfg: Mapping[str, CfgVal], job_name: str | None = None) -> KubernetesJob:
    """The request for ``app`` as a Volcano ``Job`` (local images renamed in place).

    Raises:
        InvalidRunConfigException: ``queue`` is missing, an option has the wrong type, or a
            local image has no ``image_repo``.
        InvalidAppDefException: ``validate_spec`` and a pod name is over 63 characters.
        TypeError: a mount is of no known type, or a pod overlay cannot merge.
    """
    queue = str_option(cfg, "queue")
    if not queue:
        raise InvalidRunConfigException(
            "run option 'queue' (the Volcano queue) is required with job_api=volcano", "queue"
        )
    setup = Setup.read(app, cfg)
    resource = app_to_resource(
        app, queue, setup.account, setup.priority, **setup.pod._asdict(), job_name=job_name
    )
    if cfg.get("validate_spec", True) is not False:
        check_pod_names(resource)
    return job_request(cfg, resource, setup.images, "volcano")


def check_pod_names(resource: dict[str, Any]) -> None:
    """Refuse a pod name ``{job}-{task}-{index}`` longer than a DNS label (torchx-nightly's
    ``validate_spec`` check)."""
    job = resource["metadata"]["name"]
    for task in resource["spec"]["tasks"]:
        pod = f"{job}-{task['name']}-{task.get('replicas', 1) - 1}"
        if len(pod) > MAX_JOB_NAME:
            raise InvalidAppDefException(
                f"pod name {pod!r} has {len(pod)} characters, more than the {MAX_JOB_NAME}"
                " of a DNS label: shorten the app's name or the role's"
            )


def job_request(
    cfg: Mapping[str, CfgVal],
    resource: dict[str, Any],
    images: dict[str, tuple[str, str]],
    api: str,
) -> KubernetesJob:
    """The request of a manifest, ``image_pull_timeout`` as its annotation."""
    timeout = _int_option(cfg, "image_pull_timeout", 1, "a positive number of seconds")
    if timeout is not None:
        resource["metadata"]["annotations"] = {ANNOTATION_PULL_TIMEOUT: str(timeout)}
    validate = cfg.get("validate_spec", True) is not False
    namespace = str_option(cfg, "namespace") or "default"
    return KubernetesJob(namespace, resource, images, api, validate_spec=validate)
