"""``local_docker`` names and behaviours taken from TorchX 0.7.0's
``torchx.schedulers.docker_scheduler`` (and its workspace mixin,
``torchx.workspace.docker_workspace``)."""

from __future__ import annotations

import logging
import socket
import subprocess
import typing
from pathlib import Path

import pytest

from asynctorchx.schedulers import docker_scheduler
from asynctorchx.schedulers.docker_scheduler import (
    DockerOpts,
    DockerScheduler,
    create_scheduler,
    has_docker,
)
from asynctorchx.specs.api import AppDef, Resource, Role

LIMIT = 120.0  # seconds: a safety bound on a build, never a timing guess


def test_docker_opts_types_every_run_option() -> None:
    hints = typing.get_type_hints(DockerOpts)
    opts = DockerScheduler("test").run_opts()
    assert set(hints) == {name for name, _ in opts}
    # TorchX's DockerOpts keys, and the workspace options it adds
    assert {"copy_env", "env", "privileged", "image_repo", "quiet"} <= set(hints)
    assert DockerOpts.__total__ is False
    cfg: DockerOpts = {"privileged": True, "quiet": True}
    assert cfg["quiet"] is True


def test_quiet_is_a_bool_run_option_off_by_default() -> None:
    opts = DockerScheduler("test").run_opts()
    quiet = opts.get("quiet")
    assert quiet is not None
    assert quiet.opt_type is bool
    assert quiet.default is False
    assert opts.resolve({"quiet": True})["quiet"] is True


def test_has_docker_is_false_where_no_engine_answers(tmp_path: Path) -> None:
    assert has_docker(f"unix://{tmp_path}/none.sock") is False
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    assert has_docker(f"tcp://127.0.0.1:{port}") is False
    assert has_docker("ssh://user@host") is False


def test_has_docker_is_false_for_a_socket_that_is_no_engine(tmp_path: Path) -> None:
    path = tmp_path / "not-docker.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen(1)
        # it accepts the connection (the backlog) but never answers: not an engine
        assert has_docker(f"unix://{path}", timeout=0.5) is False


@pytest.mark.docker
def test_has_docker_is_true_with_the_engine() -> None:
    assert has_docker() is True


def test_a_gpu_request_asks_for_compute_and_utility() -> None:
    # TorchX's DeviceRequest(count=gpu, capabilities=[["compute", "utility"]]): utility
    # is what makes nvidia-smi (and NVML) work in the container
    role = Role("r", "img", entrypoint="true", resource=Resource(cpu=1, gpu=2, memMB=64))
    config = DockerScheduler("t").submit_dryrun(AppDef("gpu", [role]), {}).request
    host = config.containers[0].config["HostConfig"]
    assert host["DeviceRequests"] == [{"Count": 2, "Capabilities": [["compute", "utility"]]}]
    no_gpu = Role("r", "img", entrypoint="true", resource=Resource(cpu=1, gpu=0, memMB=64))
    config = DockerScheduler("t").submit_dryrun(AppDef("cpu", [no_gpu]), {}).request
    assert "DeviceRequests" not in config.containers[0].config["HostConfig"]


def test_the_app_id_fills_the_app_id_macro() -> None:
    app = AppDef("app", [Role("r", "img", entrypoint="echo", args=["${app_id}"])])
    job = DockerScheduler("t").submit_dryrun(app, {}).request
    assert job.app_id.startswith("app-")
    config = job.containers[0].config
    assert [*config["Entrypoint"], *config["Cmd"]] == ["echo", job.app_id]
    assert docker_scheduler.make_unique("app") != docker_scheduler.make_unique("app")


def test_port_map_is_exposed_not_published_on_the_host() -> None:
    # dist.ddp's c10d port would otherwise take a host port per replica; replicas reach
    # each other by name on the app's network (TorchX publishes nothing)
    role = Role("r", "img", entrypoint="true", port_map={"c10d": 29500, "tb": 6006})
    container = DockerScheduler("t").submit_dryrun(AppDef("ports", [role]), {}).request
    config = container.containers[0].config
    assert config["ExposedPorts"] == {"29500/tcp": {}, "6006/tcp": {}}
    assert "PortBindings" not in config["HostConfig"]
    assert "PublishAllPorts" not in config["HostConfig"]


def _workspace(tmp_path: Path, image: str, marker: str) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "Dockerfile.torchx").write_text(f"FROM {image}\nRUN echo {marker}\n")
    return workspace


@pytest.mark.docker
@pytest.mark.parametrize("quiet", [False, True])
async def test_quiet_suppresses_the_build_output_in_the_log(
    docker_image: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, quiet: bool
) -> None:
    marker = f"asynctorchx-build-marker-{quiet}"
    workspace = _workspace(tmp_path, docker_image, marker)
    role = Role("r", docker_image, entrypoint="true")
    caplog.set_level(logging.INFO, logger="asynctorchx.workspace.docker_workspace")
    async with create_scheduler("t") as sched:
        await sched.build_workspace_and_update_role(role, str(workspace), {"quiet": quiet})
    try:
        logged = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
        assert any(marker in message for message in logged) is not quiet
        if quiet:
            assert logged == []
    finally:
        subprocess.run(["docker", "rmi", role.image], capture_output=True, check=False)
