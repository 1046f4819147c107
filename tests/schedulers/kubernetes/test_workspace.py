"""A workspace on ``kubernetes``: built into an image, renamed to ``image_repo``, pushed, run.

As TorchX's ``DockerWorkspaceMixin``: the workspace is built on the Docker engine, the dry
run renames the image ``<image_repo>:<hash>``, and ``schedule`` pushes it there before it
creates the job. Offline here (a recording engine and API server stand in for both); the
push to a real registry needs a Docker engine and the loopback registry of
``scripts/kube-registry.sh``, and is skipped with that command without one (failing under
``ASYNCTORCHX_REQUIRE_KUBERNETES_NODE=1``). ``test_node.py`` runs the pushed image on the node.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from asynctorchx.errors import DockerEngineError, SchedulerUnavailableError
from asynctorchx.schedulers.kubernetes_scheduler import KubernetesScheduler
from asynctorchx.specs import AppDef, Role

#: The loopback registry (``scripts/kube-registry.sh``), as ``host:port``.
REGISTRY = os.environ.get("ASYNCTORCHX_KUBE_REGISTRY", "127.0.0.1:17500")
START_REGISTRY = "bash scripts/kube-registry.sh start (as root)"
BUILT = "sha256:" + "ab" * 32
CFG = {"queue": "default", "image_repo": "registry.example.com/team/app"}


def require_registry() -> str:
    """The loopback registry's address; skip when it does not answer (fail under the
    node requirement, which CI sets)."""
    try:
        if httpx2.get(f"http://{REGISTRY}/v2/", timeout=2).status_code == 200:
            return REGISTRY
    except httpx2.HTTPError:
        pass
    reason = f"no image registry answers on {REGISTRY}: {START_REGISTRY}"
    if os.environ.get("ASYNCTORCHX_REQUIRE_KUBERNETES_NODE") == "1":
        pytest.fail(f"ASYNCTORCHX_REQUIRE_KUBERNETES_NODE=1 but {reason}", pytrace=False)
    pytest.skip(reason)


class RecordingEngine:
    """A Docker engine that builds every context into :data:`BUILT` and records each call."""

    def __init__(self, calls: list[str], refuse_push: bool = False) -> None:
        self.calls = calls
        self.refuse_push = refuse_push
        self.context = b""

    async def connect(self) -> None:
        pass

    async def build_image(
        self,
        context: bytes,
        dockerfile: str,
        labels: Mapping[str, str],
        output: Callable[[str], None],
    ) -> str:
        self.context = context
        self.calls.append(f"build {dockerfile}")
        return BUILT

    async def push_image(self, image: str, repo: str, tag: str) -> None:
        if self.refuse_push:
            raise DockerEngineError(0, "denied")
        self.calls.append(f"push {image} {repo}:{tag}")

    async def close(self) -> None:
        pass


class RecordingApi:
    """An API server that records each job created (``dry run`` marks the validation)."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    async def create_job(
        self, namespace: str, manifest: dict[str, Any], plural: str = "jobs", dry_run: bool = False
    ) -> dict[str, Any]:
        images = [
            c["image"]
            for t in manifest["spec"]["tasks"]
            for c in t["template"]["spec"]["containers"]
        ]
        self.calls.append(f"create{' dry run' if dry_run else ''} {' '.join(images)}")
        return manifest

    async def close(self) -> None:
        pass


def workspace(tmp_path: Path) -> str:
    (tmp_path / "hello.txt").write_text("hello-workspace\n")
    return str(tmp_path)


def recording(calls: list[str], engine: RecordingEngine | None = None) -> KubernetesScheduler:
    scheduler = KubernetesScheduler("test")
    scheduler._engine = engine or RecordingEngine(calls)  # type: ignore[assignment]
    scheduler.api = RecordingApi(calls)  # type: ignore[assignment]
    return scheduler


async def test_a_workspace_is_built_renamed_to_image_repo_and_pushed_before_the_job(
    tmp_path: Path,
) -> None:
    calls: list[str] = []
    async with recording(calls) as scheduler:
        role = Role("trainer", image="base:1", entrypoint="cat", args=["hello.txt"])
        app = AppDef("ws", [role])
        await scheduler.build_workspace_and_update_role(role, workspace(tmp_path), {})
        assert role.image == BUILT
        info = scheduler.submit_dryrun(app, CFG)
        remote = f"{CFG['image_repo']}:{BUILT.removeprefix('sha256:')}"
        assert role.image == remote
        assert info.request.images_to_push == {BUILT: (CFG["image_repo"], BUILT[7:])}
        container = info.request.resource["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
        assert container["image"] == remote
        await scheduler.schedule(info)
    assert calls == [
        "build Dockerfile.torchx",
        f"create dry run {remote}",
        f"push {BUILT} {remote}",
        f"create {remote}",
    ]
    with tarfile.open(fileobj=io.BytesIO(scheduler._engine.context)) as tar:  # type: ignore[attr-defined]
        dockerfile = tar.extractfile("Dockerfile.torchx")
        assert dockerfile is not None
        assert dockerfile.read() == b"FROM base:1\nCOPY . .\n"
        assert "hello.txt" in tar.getnames()


async def test_a_refused_push_creates_no_job(tmp_path: Path) -> None:
    calls: list[str] = []
    async with recording(calls, RecordingEngine(calls, refuse_push=True)) as scheduler:
        role = Role("trainer", image="base:1", entrypoint="true")
        await scheduler.build_workspace_and_update_role(role, workspace(tmp_path), {})
        info = scheduler.submit_dryrun(AppDef("ws", [role]), CFG)
        with pytest.raises(DockerEngineError, match="denied"):
            await scheduler.schedule(info)
    assert not [call for call in calls if call.startswith("create ") and "dry run" not in call]


@pytest.mark.docker
async def test_the_workspace_image_is_pushed_to_the_loopback_registry(
    docker_image: str, tmp_path: Path
) -> None:
    registry = require_registry()
    calls: list[str] = []
    scheduler = KubernetesScheduler("test")
    scheduler.api = RecordingApi(calls)  # type: ignore[assignment]
    repo = f"{registry}/asynctorchx-test/workspace"
    role = Role("trainer", image=docker_image, entrypoint="cat", args=["hello.txt"])
    async with scheduler:
        await scheduler.build_workspace_and_update_role(role, workspace(tmp_path), {})
        built = role.image
        try:
            info = scheduler.submit_dryrun(AppDef("ws", [role]), {**CFG, "image_repo": repo})
            await scheduler.schedule(info)
            tag = built.removeprefix("sha256:")
            assert calls[-1] == f"create {repo}:{tag}"
            async with httpx2.AsyncClient(base_url=f"http://{registry}") as http:
                listed = await http.get("/v2/asynctorchx-test/workspace/tags/list")
            assert tag in listed.json()["tags"]
        finally:
            subprocess.run(["docker", "rmi", "-f", built], capture_output=True, check=False)


@pytest.mark.docker
async def test_a_push_the_registry_refuses_names_the_image_and_the_fix(docker_image: str) -> None:
    scheduler = KubernetesScheduler("test")
    repo = "127.0.0.1:1/asynctorchx-test/nowhere"  # a closed loopback port: no registry
    async with scheduler:
        try:
            with pytest.raises(DockerEngineError, match=rf"pushing {repo}:t failed .*image_repo"):
                await scheduler._engine.push_image(docker_image, repo, "t")
        finally:
            subprocess.run(["docker", "rmi", f"{repo}:t"], capture_output=True, check=False)


def test_a_workspace_under_trio_is_refused_naming_the_scheduler_and_the_fix(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        async with KubernetesScheduler("test") as scheduler:
            role = Role("trainer", image="base:1", entrypoint="true")
            await scheduler.build_workspace_and_update_role(role, workspace(tmp_path), {})

    with pytest.raises(
        SchedulerUnavailableError, match=r"^kubernetes needs an asyncio .* anyio\.run"
    ):
        anyio.run(main, backend="trio")
