"""The cluster the ``kubernetes`` tests run against: a real API server, the fake only where needed.

``ASYNCTORCHX_KUBECONFIG`` names the cluster (any cluster: its kubeconfig's current
context is used). With ``ASYNCTORCHX_KUBE_BARE=1`` it is a bare API server, as
``scripts/kube-apiserver.sh start`` runs one (no Volcano, scheduler or kubelet): the tests
install minimal CRDs and bring the stand-ins of :mod:`.bare_cluster` (Volcano's job
controller, a kubelet's log endpoint) and move the pods as the kubelet would. Without it
the cluster is a full one (Volcano installed, real nodes): the tests' apps run their
commands on it and the :class:`Cluster` controls do nothing.

Without ``ASYNCTORCHX_KUBECONFIG`` these tests are skipped with the command that provides
a server, and fail under ``ASYNCTORCHX_REQUIRE_KUBERNETES=1`` (``.ci/run`` sets it).
The few tests that need what no real server gives on demand (Volcano's retry logic, a
bookmark now, a refusing admission webhook) run on :class:`FakeApiServer` and say why.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from asynctorchx.schedulers.kubernetes_scheduler import KubernetesScheduler
from tests.schedulers.kubernetes.bare_cluster import (
    BareCluster,
    LoopbackProxy,
    server_port,
    through,
)
from tests.schedulers.kubernetes.fake_apiserver import FakeApiServer

REAL_KUBECONFIG = os.environ.get("ASYNCTORCHX_KUBECONFIG")
#: ``1``: the cluster of ``ASYNCTORCHX_KUBECONFIG`` is a bare API server (stand-ins needed).
BARE = os.environ.get("ASYNCTORCHX_KUBE_BARE") == "1"
#: The image the tests' apps run on a full cluster (any image with a POSIX ``sh``).
IMAGE = os.environ.get("ASYNCTORCHX_K8S_TEST_IMAGE", "busybox:1.36")
#: How to get a real API server for these tests.
START_SERVER = (
    "export ASYNCTORCHX_KUBECONFIG=$(bash scripts/kube-apiserver.sh start | tail -n 1)"
    " ASYNCTORCHX_KUBE_BARE=1 (as root; or point ASYNCTORCHX_KUBECONFIG at any cluster"
    " with Volcano)"
)


def require_real_cluster() -> str:
    """The real cluster's kubeconfig; skip without one (fail under CI's requirement)."""
    if REAL_KUBECONFIG:
        return REAL_KUBECONFIG
    reason = f"no Kubernetes API server for these tests: {START_SERVER}"
    if os.environ.get("ASYNCTORCHX_REQUIRE_KUBERNETES") == "1":
        pytest.fail(f"ASYNCTORCHX_REQUIRE_KUBERNETES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


class Cluster:
    """Moves the pods as the tests' commands would, on a bare or fake server; no-ops on a full one.

    Args:
        kubeconfig: the kubeconfig the scheduler uses.
        fake: the fake server, if the test runs on it.
        bare: the bare server's stand-ins, if the test runs on one.
        proxy: the forwarder the scheduler connects through, if asked for.
    """

    def __init__(
        self,
        kubeconfig: str,
        *,
        fake: FakeApiServer | None = None,
        bare: BareCluster | None = None,
        proxy: LoopbackProxy | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.fake = fake
        self.bare = bare
        self.proxy = proxy

    def pod(self, app_id: str, task: str) -> str:
        """The pod of ``task`` (``{role}-{replica}``) of an app."""
        return f"{app_id.partition(':')[2]}-{task}-0"

    async def start(self, app_id: str, task: str) -> None:
        """The pod's container starts."""
        pod = self.pod(app_id, task)
        if self.fake is not None:
            self.fake.start_pod(pod)
        elif self.bare is not None:
            await self.bare.start_pod(pod)

    async def write_log(
        self,
        app_id: str,
        task: str,
        *lines: str,
        same_time: bool = False,
        container: str | None = None,
    ) -> None:
        """The container writes ``lines`` (the pod's, or the one named: a bare server's)."""
        pod = self.pod(app_id, task)
        if self.fake is not None:
            assert container is None, "the fake server keeps one log per pod"
            self.fake.write_log(pod, *lines, same_time=same_time)
        elif self.bare is not None:
            self.bare.write_log(pod, *lines, same_time=same_time, container=container)

    async def finish(self, app_id: str, task: str, exit_code: int = 0) -> None:
        """The container ends with ``exit_code``."""
        pod = self.pod(app_id, task)
        if self.fake is not None:
            self.fake.finish_pod(pod, exit_code)
        elif self.bare is not None:
            await self.bare.finish_pod(pod, exit_code)

    async def cannot_start(self, app_id: str, task: str, reason: str, message: str) -> None:
        """The pod's container waits for ``reason`` (the kubelet's ``ErrImagePull``...), or
        the scheduler finds it ``Unschedulable``; a full cluster finds the reason itself."""
        if self.bare is not None and reason == "Unschedulable":
            await self.bare.unschedulable(self.pod(app_id, task), message)
        elif self.bare is not None:
            await self.bare.wait_pod(self.pod(app_id, task), reason, message)

    async def run(
        self, app_id: str, task: str, lines: tuple[str, ...] = (), exit_code: int = 0
    ) -> None:
        """Start the pod, write ``lines`` to its log, end it with ``exit_code``."""
        await self.start(app_id, task)
        if lines:
            await self.write_log(app_id, task, *lines)
        await self.finish(app_id, task, exit_code)


@contextlib.asynccontextmanager
async def connected(
    tmp_path: Path, *, fake_only: str | None = None, proxy: bool = False
) -> AsyncIterator[tuple[Cluster, KubernetesScheduler]]:
    """The cluster and a scheduler connected to it.

    A context manager, not a fixture: the stand-ins' task groups must be entered and
    exited in the test's own task.

    Args:
        tmp_path: where kubeconfigs are written.
        fake_only: why the real server cannot serve this test: it runs on the fake.
        proxy: connect the scheduler through a :class:`LoopbackProxy` (``cluster.proxy``)
            so that the test can cut its connections (a bare server only).
    """
    if fake_only is not None:
        async with (
            FakeApiServer().running(tmp_path) as server,
            KubernetesScheduler("test", kubeconfig=str(server.kubeconfig)) as scheduler,
        ):
            yield Cluster(str(server.kubeconfig), fake=server), scheduler
        return
    kubeconfig = require_real_cluster()
    if not BARE:
        if proxy:
            pytest.skip("cuts connections through a loopback proxy: runs on the bare server only")
        async with KubernetesScheduler("test", kubeconfig=kubeconfig) as scheduler:
            yield Cluster(kubeconfig), scheduler
        return
    async with contextlib.AsyncExitStack() as stack:
        bare = await stack.enter_async_context(BareCluster.running(kubeconfig))
        forwarder = None
        used = kubeconfig
        if proxy:
            forwarder = await stack.enter_async_context(
                LoopbackProxy(server_port(kubeconfig)).serving()
            )
            used = through(kubeconfig, forwarder.port, tmp_path)
        scheduler = await stack.enter_async_context(KubernetesScheduler("test", kubeconfig=used))
        yield Cluster(used, bare=bare, proxy=forwarder), scheduler
