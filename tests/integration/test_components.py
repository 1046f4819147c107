"""TorchX's component integration tests, run through asynctorchx on every backend of this machine.

As TorchX's ``IntegComponentTest.run_components`` does: every provider's app is dry-run
then scheduled on one runner, all are awaited, their logs are read, and every app must
succeed. Ours also checks what each app printed or left (:class:`ComponentProvider`).

- ``local_cwd`` and the Slurm cluster run every provider. The replicas' ``python`` is
  this venv's (it has torch, for the DDP provider), and TorchX's package is importable
  in it, for the serving app of ``serve.torchserve``, as in TorchX's image.
- ``local_docker`` runs ``sh`` and ``touch``: the test image is busybox, without Python,
  and TorchX's image (``asynctorchx.IMAGE``), where TorchX runs them all, cannot be
  pulled here.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from asynctorchx.runner import get_runner
from asynctorchx.schedulers.api import Stream
from asynctorchx.specs import AppState, AppStatus
from tests.conftest import DOCKER_TEST_IMAGE
from tests.integration.component_provider import PROVIDERS, ComponentProvider
from tests.schedulers.slurm.conftest import (
    BUILD_TORCHX_VENV,
    SlurmCluster,
    slurm_cluster,
    torchx_python,
)

__all__ = ["slurm_cluster"]  # the fixture, for the slurm case

LIMIT = 300  # seconds for every app of one backend; the DDP apps take the longest


async def run_components(
    providers: list[ComponentProvider], scheduler: str, started: list[str]
) -> tuple[dict[str, AppStatus | None], dict[str, str]]:
    """Run every provider's app on ``scheduler``; return their final statuses and logs.

    Submitted one after another, then awaited: the apps run at the same time. Each
    handle is appended to ``started`` as soon as it is scheduled; if this is cancelled
    (the test's time bound) or fails, every app started is cancelled, so no Slurm job
    outlives the test.
    """
    statuses: dict[str, AppStatus | None] = {}
    logs: dict[str, str] = {}
    async with get_runner() as runner:
        try:
            for provider in providers:
                info = await runner.dryrun(provider.get_app_def(), scheduler, cfg={})
                started.append(await runner.schedule(info))
            apart = Stream.COMBINED not in runner.scheduler_capabilities(scheduler).log_streams
            streams = [Stream.STDOUT, Stream.STDERR] if apart else [None]  # slurm: .out, .err
            for handle in started:
                statuses[handle] = await runner.wait(handle)
                logs[handle] = ""
                for stream in streams:
                    async with runner.log_stream(handle, streams=stream) as lines:
                        logs[handle] += "".join([line.line async for line in lines])
        except BaseException:
            with anyio.CancelScope(shield=True):
                for handle in started:
                    await runner.cancel(handle)
            raise
    return statuses, logs


async def _run_and_check(
    scheduler: str, names: list[str], image: str, started: list[str] | None = None
) -> None:
    """Run the providers ``names`` on ``scheduler``; assert each succeeded and did its work.

    Args:
        scheduler: the backend.
        names: keys of :data:`PROVIDERS`.
        image: the image of every app.
        started: receives the app handles as they are scheduled (for a cleanup).
    """
    started = [] if started is None else started
    providers = [PROVIDERS[name](scheduler, image) for name in names]
    for provider in providers:
        provider.setUp()
    try:
        with anyio.fail_after(LIMIT):
            statuses, logs = await run_components(providers, scheduler, started)
        failed = {
            handle: (status.state.name if status else None, logs[handle][-2000:])
            for handle, status in statuses.items()
            if status is None or status.state != AppState.SUCCEEDED
        }
        assert not failed, failed
        for provider, handle in zip(providers, started, strict=True):
            if provider.expected_log is not None:
                # `in`: torchrun's --tee prefixes each line with its local rank ("[0]:")
                said = logs[handle].splitlines()
                assert any(provider.expected_log in line for line in said), (handle, said)
            provider.check()
    finally:
        for provider in providers:
            provider.tearDown()


def _torchx_site_packages() -> Path:
    torchx = torchx_python()
    if torchx is None:
        pytest.skip(f"no TorchX 0.7.0 venv; build it with: {BUILD_TORCHX_VENV}")
    found = subprocess.run(
        [str(torchx), "-c", "import os, torchx; print(os.path.dirname(torchx.__file__))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return Path(found.stdout.strip()).parent


@pytest.fixture
def torchx_importable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Replicas run this venv's ``python`` (first on PATH) with TorchX's package importable,
    as in TorchX's image; the test runs in ``tmp_path``.

    PYTHONPATH gets a directory of links to the top-level packages of TorchX's venv that
    this venv lacks (``torchx`` and its requirements), so none of this venv's is shadowed.
    """
    site = _torchx_site_packages()
    missing = tmp_path / "pythonpath"
    missing.mkdir()
    for entry in site.iterdir():
        name = entry.name.removesuffix(".py")
        if entry.name.endswith((".dist-info", ".pth")) or not name.isidentifier():
            continue
        if importlib.util.find_spec(name) is None:
            (missing / entry.name).symlink_to(entry)
    monkeypatch.setenv("PYTHONPATH", str(missing))
    bin_dir = os.path.dirname(sys.executable)
    monkeypatch.setenv("PATH", os.pathsep.join([bin_dir, os.environ["PATH"]]))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text("the copy provider's source on a cluster\n")


@pytest.mark.torch
async def test_every_provider_on_local_cwd(torchx_importable: None) -> None:
    await _run_and_check("local_cwd", sorted(PROVIDERS), "unused")


@pytest.mark.docker
async def test_the_shell_providers_on_local_docker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, docker_apps: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    handles: list[str] = []
    try:
        await _run_and_check("local_docker", ["sh", "touch"], DOCKER_TEST_IMAGE, handles)
    finally:
        docker_apps.extend(handle.rsplit("/", 1)[-1] for handle in handles)


@pytest.mark.torch
async def test_every_provider_on_slurm(
    torchx_importable: None, slurm_cluster: SlurmCluster
) -> None:
    if len(slurm_cluster.nodes) < 2:
        pytest.skip("the DDP provider's 2x2 needs 2 nodes")
    await _run_and_check("slurm", sorted(PROVIDERS), "unused")
