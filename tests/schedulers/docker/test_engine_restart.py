"""The Docker engine restarted under a running app (``scripts/docker-engine.sh restart``):
``wait``, a followed log and ``Runner.events`` go on through it. With ``--live-restore`` the
container runs on and every line arrives once, then its real end; without, the engine's
shutdown kills the container, and ``wait`` says so (``EndCause.ENGINE_RESTARTED``) with the
lines it wrote until then, each once. ``status`` while the engine is down raises the typed
:class:`DockerEngineUnreachableError`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import pytest

from asynctorchx.errors import (
    DockerEngineError,
    DockerEngineUnreachableError,
    SchedulerUnreachableError,
)
from asynctorchx.runner import Runner, get_runner
from asynctorchx.specs.api import AppDef, AppState, EndCause, Role, parse_app_handle
from tests.engine_restart import through_restart

SCRIPT = Path(__file__).parents[3] / "scripts/docker-engine.sh"
PIDFILE = Path("/tmp/asynctorchx-dockerd.pid")  # the script's: it restarts only its own dockerd
LINES = 150  # one each 0.2 s: the app outlives the restart, and the shutdown's 10 s kill
DOWN_S = 3  # seconds the engine stays down, for status to find it so
LIMIT = 120  # seconds; every step awaits the engine, this only bounds a hang


def _restart(live_restore: bool, down_s: float = 0) -> list[str]:
    flags = ["--live-restore"] if live_restore else []
    return ["bash", str(SCRIPT), "restart", *flags, "--down", str(down_s)]


async def _status_while_down(runner: Runner, handle: str) -> DockerEngineUnreachableError:
    """The error ``status`` raises once the engine stops answering (while it shuts down, it
    answers some requests 500: ``database not open``)."""
    while True:
        try:
            await runner.status(handle)
        except DockerEngineUnreachableError as error:
            return error
        except DockerEngineError as error:
            if error.status != 500:
                raise
        await anyio.sleep(0.05)


@pytest.fixture
def engine_of_the_script() -> None:
    if not PIDFILE.exists() or os.geteuid() != 0:
        reason = (
            "the Docker engine was not started by `bash scripts/docker-engine.sh start` as root"
        )
        if os.environ.get("ASYNCTORCHX_REQUIRE_DOCKER"):
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.mark.docker
@pytest.mark.parametrize("live_restore", [True, False], ids=["live-restore", "plain"])
async def test_wait_logs_and_events_outlive_an_engine_restart(
    docker_image: str, docker_apps: list[str], engine_of_the_script: None, live_restore: bool
) -> None:
    if live_restore:  # the engine that restarts must have it: it decides at its shutdown
        subprocess.run(_restart(live_restore=True), check=True, stdout=subprocess.DEVNULL)
    try:
        script = f"for i in $(seq 1 {LINES}); do echo line $i; sleep 0.2; done"
        role = Role("ticker", docker_image, entrypoint="sh", args=["-c", script])
        async with get_runner(handle_signals=False) as runner:
            handle = await runner.run(AppDef("ticker", [role]), "local_docker")
            docker_apps.append(parse_app_handle(handle).app_id)

            async def while_down() -> None:
                assert isinstance(
                    await _status_while_down(runner, handle), SchedulerUnreachableError
                )

            with anyio.fail_after(LIMIT):
                restart = _restart(live_restore, down_s=DOWN_S)
                seen = await through_restart(runner, handle, "ticker", restart, while_down)
    finally:
        if live_restore:  # back to the engine the other tests expect
            subprocess.run(_restart(live_restore=False), check=True, stdout=subprocess.DEVNULL)
    status = seen.ended[0]
    assert status is not None
    followed = seen.followed
    every = [f"line {i}\n" for i in range(1, LINES + 1)]
    if live_restore:
        assert (status.state, status.cause) == (AppState.SUCCEEDED, EndCause.EXITED)
        assert followed == every
    else:
        assert (status.state, status.cause) == (AppState.FAILED, EndCause.ENGINE_RESTARTED)
        assert "stopped by the engine's restart" in status.msg
        assert 10 <= len(followed) < LINES
        assert followed == every[: len(followed)]
    assert seen.streamed == followed
    assert seen.states[-1] == status.state
