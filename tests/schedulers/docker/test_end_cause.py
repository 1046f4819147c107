"""Why a ``local_docker`` app ended, from the engine: ``State.OOMKilled`` is
``OUT_OF_MEMORY``, a plain failure its own exit, a cancel the user's; through ``wait``
(the events path) as through ``describe`` (an inspect)."""

from __future__ import annotations

import anyio
import pytest

from asynctorchx.schedulers.docker_scheduler import create_scheduler
from asynctorchx.specs.api import AppDef, AppState, EndCause, Resource, Role

LIMIT = 60  # seconds; each step awaits an event, this only bounds a hang

# a shell variable of 64 MB in a container limited to 16 MB: the kernel's OOM killer ends it
GREEDY = "x=$(head -c 67108864 /dev/zero | tr '\\0' a); echo survived"


@pytest.mark.docker
@pytest.mark.parametrize(
    ("script", "memory_mb", "cause"),
    [(GREEDY, 16, EndCause.OUT_OF_MEMORY), ("exit 3", 0, EndCause.EXITED)],
    ids=["oom", "exit"],
)
async def test_a_failed_container_says_why(
    docker_image: str, docker_apps: list[str], script: str, memory_mb: int, cause: EndCause
) -> None:
    resource = Resource(cpu=1, gpu=0, memMB=memory_mb)
    role = Role("r", docker_image, entrypoint="sh", args=["-c", script], resource=resource)
    async with create_scheduler("t") as sched:
        app_id = await sched.submit(AppDef("cause", [role]), {})
        docker_apps.append(app_id)
        with anyio.fail_after(LIMIT):
            waited = await sched.wait(app_id)
            described = await sched.describe(app_id)
    assert waited is not None
    assert described is not None
    assert (waited.state, waited.cause) == (AppState.FAILED, cause)
    assert (described.state, described.cause) == (AppState.FAILED, cause)


@pytest.mark.docker
async def test_a_cancelled_container_says_a_user_cancelled_it(
    docker_image: str, docker_apps: list[str]
) -> None:
    role = Role("r", docker_image, entrypoint="sleep", args=["600"])
    async with create_scheduler("t", stop_timeout=1) as sched:
        app_id = await sched.submit(AppDef("cause", [role]), {})
        docker_apps.append(app_id)
        with anyio.fail_after(LIMIT):
            await sched.cancel(app_id)
            ended = await sched.wait(app_id)
    assert ended is not None
    assert (ended.state, ended.cause) == (AppState.CANCELLED, EndCause.CANCELLED)


@pytest.mark.docker
async def test_an_ended_container_says_when_it_was_created_started_and_finished(
    docker_image: str, docker_apps: list[str]
) -> None:
    from datetime import UTC, datetime, timedelta

    role = Role("r", docker_image, entrypoint="sh", args=["-c", "true"], num_replicas=2)
    before = datetime.now(UTC) - timedelta(seconds=1)  # the engine's clock may lag ours
    async with create_scheduler("t") as sched:
        app_id = await sched.submit(AppDef("timed", [role]), {})
        docker_apps.append(app_id)
        with anyio.fail_after(LIMIT):
            await sched.wait(app_id)
            done = await sched.describe(app_id)
    assert done is not None
    assert done.state == AppState.SUCCEEDED
    assert done.submitted is not None
    assert done.started is not None
    assert done.ended is not None
    assert before <= done.submitted <= done.started <= done.ended
    for replica in done.roles_statuses[0].replicas:
        assert replica.started is not None
        assert replica.ended is not None
        assert done.started <= replica.started <= replica.ended <= done.ended
