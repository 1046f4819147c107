"""``kubernetes``: run an app as a Volcano ``Job`` on a Kubernetes cluster, over lightkube.

The public face of the subpackage; one private module per concern:

- ``_request``: the Volcano ``Job`` manifest (:class:`KubernetesJob`), names, labels and
  run options; no I/O.
"""

from __future__ import annotations

from asynctorchx.schedulers.kubernetes._request import (
    KubernetesJob,
    app_to_resource,
    kubernetes_runopts,
    pod_labels,
    role_to_pod,
)

__all__ = [
    "KubernetesJob",
    "app_to_resource",
    "kubernetes_runopts",
    "pod_labels",
    "role_to_pod",
]
