"""The cluster the ``kubernetes`` tests run against: the fake API server, or a real one.

Without ``ASYNCTORCHX_KUBECONFIG`` every test gets a :class:`FakeApiServer` (with a fake
Volcano) on 127.0.0.1 and a kubeconfig pointing at it. With it, the tests run against
that cluster (kind with Volcano, see ``docs/kubernetes.md``) and the fake is not
started: the :class:`Cluster` controls that move pods then do nothing, since the real
containers run the commands the tests give them, and the tests that need to break the
server on purpose (drop connections, compact) are skipped.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from asynctorchx.schedulers.kubernetes import KubernetesScheduler
from tests.schedulers.kubernetes.fake_apiserver import FakeApiServer

REAL_KUBECONFIG = os.environ.get("ASYNCTORCHX_KUBECONFIG")
#: The image the tests' apps run on a real cluster (any image with a POSIX ``sh``).
IMAGE = os.environ.get("ASYNCTORCHX_K8S_TEST_IMAGE", "busybox:1.36")


class Cluster:
    """Moves the fake cluster's pods as the tests' commands would; no-ops on a real one.

    Args:
        fake: the fake server, or ``None`` on a real cluster.
        kubeconfig: the kubeconfig the scheduler uses.
    """

    def __init__(self, fake: FakeApiServer | None, kubeconfig: str) -> None:
        self.fake = fake
        self.kubeconfig = kubeconfig

    def pod(self, app_id: str, task: str) -> str:
        """The pod of ``task`` (``{role}-{replica}``) of an app."""
        return f"{app_id.partition(':')[2]}-{task}-0"

    def run(self, app_id: str, task: str, lines: tuple[str, ...] = (), exit_code: int = 0) -> None:
        """On the fake: start the pod, write ``lines`` to its log, end it with ``exit_code``."""
        if self.fake is None:
            return
        pod = self.pod(app_id, task)
        self.fake.start_pod(pod)
        if lines:
            self.fake.write_log(pod, *lines)
        self.fake.finish_pod(pod, exit_code)

    def start(self, app_id: str, task: str) -> None:
        """On the fake: start the pod."""
        if self.fake is not None:
            self.fake.start_pod(self.pod(app_id, task))


@contextlib.asynccontextmanager
async def connected(
    tmp_path: Path, *, fake_only: bool = False
) -> AsyncIterator[tuple[Cluster, KubernetesScheduler]]:
    """The cluster (fake unless ``ASYNCTORCHX_KUBECONFIG``) and a scheduler connected to it.

    A context manager, not a fixture: the fake server's task group must be entered and
    exited in the test's own task.

    Args:
        tmp_path: where the fake's kubeconfig is written.
        fake_only: skip the test on a real cluster (it breaks the server on purpose).
    """
    if REAL_KUBECONFIG:
        if fake_only:
            pytest.skip("breaks the API server on purpose: runs against the fake server only")
        async with KubernetesScheduler("test", kubeconfig=REAL_KUBECONFIG) as scheduler:
            yield Cluster(None, REAL_KUBECONFIG), scheduler
        return
    async with (
        FakeApiServer().running(tmp_path) as server,
        KubernetesScheduler("test", kubeconfig=str(server.kubeconfig)) as scheduler,
    ):
        yield Cluster(server, str(server.kubeconfig)), scheduler
