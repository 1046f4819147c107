"""The ``kubernetes`` scheduler's errors (re-exported by :mod:`asynctorchx.errors`)."""

from __future__ import annotations

from asynctorchx._error_bases import (
    SchedulerRequestError,
    SchedulerUnavailableError,
    SchedulerUnreachableError,
)


class KubernetesConfigError(SchedulerUnavailableError):
    """No usable kubeconfig: the scheduler does not know which cluster to use."""

    def __init__(self, detail: str) -> None:
        super().__init__(
            f"no usable Kubernetes configuration: {detail}. Point KUBECONFIG (or the"
            " scheduler's `kubeconfig` parameter) at a kubeconfig file, or run inside a pod"
            " with a service account"
        )
        self.detail = detail


class KubernetesUnreachableError(SchedulerUnreachableError):
    """The kubeconfig's API server does not answer (down, or restarting)."""

    def __init__(self, server: str, detail: str) -> None:
        super().__init__(
            f"the Kubernetes API server {server} does not answer ({detail}): check that the"
            " cluster is up and that the kubeconfig's current context points at it"
        )
        self.server = server
        self.detail = detail


class KubernetesApiError(SchedulerRequestError):
    """The API server refused a request; keeps its status, ``Status.reason`` and message."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        request: str = "",
        causes: tuple[tuple[str, str], ...] = (),
    ) -> None:
        where = f" to {request}" if request else ""
        why = f" {reason}" if reason else ""
        super().__init__(f"the Kubernetes API server answered {status}{why}{where}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.request = request
        self.causes = causes

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields the server named (``spec.tasks[0].name``); empty when it named none."""
        return tuple(field for field, _ in self.causes if field)


class InvalidJobSpecError(KubernetesApiError, ValueError):
    """The server refused the job in ``validate_spec``'s ``dryRun=All`` request; nothing exists."""


class VolcanoNotInstalledError(SchedulerUnavailableError):
    """The cluster has no Volcano ``batch.volcano.sh/v1alpha1`` ``Job`` resource."""

    def __init__(self, server: str) -> None:
        super().__init__(
            f"Volcano is not installed on the cluster at {server}: the API has no"
            " batch.volcano.sh/v1alpha1 jobs. Install it (see https://volcano.sh/en/docs/"
            "installation/, e.g. `kubectl apply -f https://raw.githubusercontent.com/"
            "volcano-sh/volcano/master/installer/volcano-development.yaml`)"
        )
        self.server = server


class JobSetNotInstalledError(SchedulerUnavailableError):
    """The cluster has no ``jobset.x-k8s.io/v1alpha2`` ``JobSet`` (for ``job_api=jobset``)."""

    def __init__(self, server: str) -> None:
        super().__init__(
            f"JobSet is not installed on the cluster at {server}: the API has no"
            " jobset.x-k8s.io/v1alpha2 jobsets. Install it (see"
            " https://jobset.sigs.k8s.io/docs/installation/), or use the run option"
            " job_api=volcano"
        )
        self.server = server
