"""``kubernetes`` at TorchX's import path ``torchx.schedulers.kubernetes_scheduler``."""

from __future__ import annotations

from asynctorchx.schedulers.kubernetes._jobapi import JOB_APIS
from asynctorchx.schedulers.kubernetes._jobset import JOBSET_STATE
from asynctorchx.schedulers.kubernetes._request import (
    LABEL_APP_NAME,
    LABEL_INSTANCE_TYPE,
    LABEL_KUBE_APP_NAME,
    LABEL_ORGANIZATION,
    LABEL_REPLICA_ID,
    LABEL_ROLE_INDEX,
    LABEL_ROLE_NAME,
    LABEL_UNIQUE_NAME,
    LABEL_VERSION,
    RESERVED_MEMMB,
    RESERVED_MILLICPU,
    RETRY_POLICIES,
    KubernetesJob,
    Opts,
    app_to_resource,
    kubernetes_runopts,
    pod_labels,
    role_to_pod,
)
from asynctorchx.schedulers.kubernetes._scheduler import KubernetesScheduler, create_scheduler
from asynctorchx.schedulers.kubernetes._state import JOB_STATE, POD_STATE

#: torchx-nightly's second name of :class:`Opts`.
KubernetesOpts = Opts

__all__ = [
    "JOBSET_STATE",
    "JOB_APIS",
    "JOB_STATE",
    "LABEL_APP_NAME",
    "LABEL_INSTANCE_TYPE",
    "LABEL_KUBE_APP_NAME",
    "LABEL_ORGANIZATION",
    "LABEL_REPLICA_ID",
    "LABEL_ROLE_INDEX",
    "LABEL_ROLE_NAME",
    "LABEL_UNIQUE_NAME",
    "LABEL_VERSION",
    "POD_STATE",
    "RESERVED_MEMMB",
    "RESERVED_MILLICPU",
    "RETRY_POLICIES",
    "KubernetesJob",
    "KubernetesOpts",
    "KubernetesScheduler",
    "Opts",
    "app_to_resource",
    "create_scheduler",
    "kubernetes_runopts",
    "pod_labels",
    "role_to_pod",
]
