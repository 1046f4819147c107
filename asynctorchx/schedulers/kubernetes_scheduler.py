"""TorchX's import path ``torchx.schedulers.kubernetes_scheduler``: a thin re-export.

The code lives in :mod:`asynctorchx.schedulers.kubernetes` (``_scheduler.py``,
``_request.py``, ``_state.py``, ``_informer.py``, ``_logs.py``, ``_apiserver.py``).
"""

from __future__ import annotations

from asynctorchx.schedulers.kubernetes import (
    JOB_STATE,
    KubernetesJob,
    KubernetesScheduler,
    app_to_resource,
    create_scheduler,
    pod_labels,
    role_to_pod,
)

__all__ = [
    "JOB_STATE",
    "KubernetesJob",
    "KubernetesScheduler",
    "app_to_resource",
    "create_scheduler",
    "pod_labels",
    "role_to_pod",
]
