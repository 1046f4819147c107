"""Faults on ``local_docker`` against a real Docker engine (issue 12's fault matrix).

Each case counts what is ours on the engine (containers by TorchX's app-id label, cancel
marker volumes, networks) before and after, and asserts what a user relies on: a log
follow ends when its container is removed under it, an app deleted leaves nothing of
its own behind, and leaving the runner does what the ``cancel_on_close`` run option says.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator

import anyio
import pytest

from asynctorchx.schedulers.docker_scheduler import container_name, create_scheduler
from asynctorchx.specs.api import AppDef, Role

LIMIT = 60.0  # seconds: a safety bound on awaits, never a timing guess
LABEL = "torchx.pytorch.org/app-id"


def _docker(*args: str) -> list[str]:
    out = subprocess.run(
        ["docker", *args], capture_output=True, text=True, check=True, timeout=LIMIT
    ).stdout
    return out.split()


def containers(app_id: str, *, running: bool = False) -> list[str]:
    """The ids of the app's containers (only the running ones with ``running``)."""
    return _docker("ps", *([] if running else ["-a"]), "-q", "--filter", f"label={LABEL}={app_id}")


def volumes(app_id: str) -> list[str]:
    """The app's volumes (its cancel marker)."""
    return _docker("volume", "ls", "-q", "--filter", f"label={LABEL}={app_id}")


def networks() -> list[str]:
    return sorted(_docker("network", "ls", "-q"))


def sleeper(image: str, name: str = "sleeper", replicas: int = 2) -> AppDef:
    return AppDef(name, [Role("r", image, entrypoint="sleep", args=["600"], num_replicas=replicas)])


@pytest.fixture
async def apps() -> AsyncIterator[list[str]]:
    """App ids to delete after the test (whatever it asserted)."""
    started: list[str] = []
    yield started
    async with create_scheduler("cleanup") as sched:
        for app_id in started:
            await sched.delete(app_id)


# --------------------------------------------------------------------------- item 9


@pytest.mark.docker
async def test_docker_rm_during_a_log_follow_ends_the_follow(
    docker_image: str, apps: list[str]
) -> None:
    """`docker rm -f` at any moment of a follow ends it cleanly (issue 12, item 9).

    The removal races the follow's inspect, its log request and its open stream; every
    order must end the iteration without an error, and leave no container.
    """
    script = "while true; do echo hi; sleep 0.01; done"
    async with create_scheduler("t") as sched:
        for attempt in range(8):
            app = AppDef("rmf", [Role("r", docker_image, entrypoint="sh", args=["-c", script])])
            app_id = await sched.submit(app, {})
            apps.append(app_id)
            name = container_name(app_id, "r", 0)

            async def remove(delay: float = attempt * 0.005, name: str = name) -> None:
                await anyio.sleep(delay)  # spreads the removal over the follow's steps
                await anyio.run_process(["docker", "rm", "-f", name])

            lines: list[str] = []
            with anyio.fail_after(LIMIT):
                async with anyio.create_task_group() as task_group:
                    task_group.start_soon(remove)
                    async for line in sched.log_iter(app_id, "r", 0, should_tail=True):
                        lines.append(line)
            assert set(lines) <= {"hi\n"}
            assert containers(app_id) == []
            assert await sched.describe(app_id) is None


@pytest.mark.docker
async def test_docker_rm_after_the_first_line_ends_the_follow(
    docker_image: str, apps: list[str]
) -> None:
    app = AppDef(
        "rmf", [Role("r", docker_image, entrypoint="sh", args=["-c", "echo hi; sleep 600"])]
    )
    async with create_scheduler("t") as sched:
        app_id = await sched.submit(app, {})
        apps.append(app_id)
        lines = []
        with anyio.fail_after(LIMIT):
            async for line in sched.log_iter(app_id, "r", 0, should_tail=True):
                lines.append(line)
                await anyio.run_process(["docker", "rm", "-f", container_name(app_id, "r", 0)])
        assert lines == ["hi\n"]
        assert (await sched.describe(app_id)) is None
