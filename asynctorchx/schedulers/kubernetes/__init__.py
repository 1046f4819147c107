"""``kubernetes``: run an app as a Volcano ``Job`` (or a ``JobSet``) on Kubernetes, over lightkube.

The public face of the subpackage; one private module per concern:

- ``_request``: the Volcano ``Job`` manifest (:class:`KubernetesJob`), names, labels and
  run options; no I/O.
- ``_jobset_request`` and ``_jobset_state``: the ``JobSet`` manifest (run option
  ``job_api=jobset``, Kueue's label with ``queue``) and its state table; no I/O.
- ``_jobapi``: what differs per job API (Volcano, JobSet), one small strategy each.
- ``_apiserver``: the API server connection, the only module that imports lightkube; it
  maps lightkube's and httpx's errors to :mod:`asynctorchx.errors`.
- ``_state``: Volcano job phases and pod phases to app and replica states (pure).
- ``_informer``: one list-then-watch per resource kind and namespace, shared by every
  waiter of a scheduler.
- ``_logs``: a replica's log, read or followed across dropped connections and retries.
- ``_scheduler``: :class:`KubernetesScheduler` composing them, and :func:`create_scheduler`.

TorchX's import path is :mod:`asynctorchx.schedulers.kubernetes_scheduler` (as
``torchx.schedulers.kubernetes_scheduler``); it re-exports the same names.
"""

from __future__ import annotations

from asynctorchx.schedulers.kubernetes._jobset_state import JOBSET_STATE
from asynctorchx.schedulers.kubernetes._request import (
    JOB_APIS,
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
    app_to_resource,
    kubernetes_runopts,
    pod_labels,
    role_to_pod,
)
from asynctorchx.schedulers.kubernetes._scheduler import KubernetesScheduler, create_scheduler
from asynctorchx.schedulers.kubernetes._state import JOB_STATE, POD_STATE

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
    "KubernetesScheduler",
    "app_to_resource",
    "create_scheduler",
    "kubernetes_runopts",
    "pod_labels",
    "role_to_pod",
]
