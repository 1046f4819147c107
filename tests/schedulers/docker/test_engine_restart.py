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
from asynctorchx.runner import LogEvent, Runner, StateEvent, get_runner
from asynctorchx.specs.api import AppDef, AppState, AppStatus, EndCause, Role, parse_app_handle

SCRIPT = Path(__file__).parents[3] / "scripts/docker-engine.sh"
PIDFILE = Path("/tmp/asynctorchx-dockerd.pid")  # the script's: it restarts only its own dockerd
LINES = 150  # one each 0.2 s: the app outlives the restart, and the shutdown's 10 s kill
DOWN_S = 3  # seconds the engine stays down, for status to find it so
LIMIT = 120  # seconds; every step awaits the engine, this only bounds a hang


def _restart(live_restore: bool, down_s: float = 0) -> subprocess.Popen[bytes]:
    flags = ["--live-restore"] if live_restore else []
    argv = ["bash", str(SCRIPT), "restart", *flags, "--down", str(down_s)]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL)


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
        assert _restart(live_restore=True).wait() == 0
    restart = None
    try:
        script = f"for i in $(seq 1 {LINES}); do echo line $i; sleep 0.2; done"
        role = Role("ticker", docker_image, entrypoint="sh", args=["-c", script])
        ended: list[AppStatus | None] = []
        followed: list[str] = []
        streamed: list[str] = []
        states: list[AppState] = []
        async with get_runner(handle_signals=False) as runner:
            handle = await runner.run(AppDef("ticker", [role]), "local_docker")
            docker_apps.append(parse_app_handle(handle).app_id)

            async def wait() -> None:
                ended.append(await runner.wait(handle))

            async def follow() -> None:
                async for line in runner.log_lines(handle, "ticker", should_tail=True):
                    followed.append(line)

            async def stream() -> None:
                async with runner.events(handle) as events:
                    async for event in events:
                        if isinstance(event, LogEvent):
                            streamed.append(event.line)
                        elif isinstance(event, StateEvent):
                            states.append(event.state)

            with anyio.fail_after(LIMIT):
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(wait)
                    tasks.start_soon(follow)
                    tasks.start_soon(stream)
                    while len(followed) < 10 or len(streamed) < 10:
                        await anyio.sleep(0.1)
                    restart = _restart(live_restore, down_s=DOWN_S)
                    unreachable = await _status_while_down(runner, handle)
                    assert isinstance(unreachable, SchedulerUnreachableError)
                    assert not ended  # wait goes on
                    assert await anyio.to_thread.run_sync(restart.wait) == 0
    finally:
        if restart is not None:
            restart.wait()
        if live_restore:  # back to the engine the other tests expect
            assert _restart(live_restore=False).wait() == 0
    status = ended[0]
    assert status is not None
    every = [f"line {i}\n" for i in range(1, LINES + 1)]
    if live_restore:
        assert (status.state, status.cause) == (AppState.SUCCEEDED, EndCause.EXITED)
        assert followed == every
    else:
        assert (status.state, status.cause) == (AppState.FAILED, EndCause.ENGINE_RESTARTED)
        assert "stopped by the engine's restart" in status.msg
        assert 10 <= len(followed) < LINES
        assert followed == every[: len(followed)]
    assert streamed == followed
    assert states[-1] == status.state
