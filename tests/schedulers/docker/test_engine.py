"""``local_docker``'s engine boundary: aiodocker's errors leave it as :mod:`asynctorchx.errors`."""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

import anyio
import anyio.abc
import pytest

from asynctorchx.errors import DockerEngineError, SchedulerUnavailableError
from asynctorchx.schedulers.docker._engine import Engine
from asynctorchx.schedulers.docker._request import LABEL_APP_ID, LABEL_ROLE_NAME
from asynctorchx.schedulers.docker_scheduler import create_scheduler
from asynctorchx.specs.api import AppDef, Resource, Role
from tests.conftest import DOCKER_TEST_IMAGE


@pytest.mark.docker
async def test_an_engine_refusal_is_a_docker_engine_error_with_its_status() -> None:
    engine = Engine(None, "t")
    missing = f"asynctorchx-missing-{uuid.uuid4().hex[:8]}"
    try:
        with pytest.raises(DockerEngineError) as caught:
            await engine.tag_image(missing, "asynctorchx-test/tagged", "t")
    finally:
        await engine.close()
    assert caught.value.status == 404
    assert missing in caught.value.message  # the engine's own words
    assert caught.value.request == f"POST images/{missing}/tag"
    assert isinstance(caught.value, RuntimeError)


@pytest.mark.docker
async def test_submitting_an_image_the_engine_cannot_get_says_how_to_fix_it() -> None:
    image = f"asynctorchx-test/missing-{uuid.uuid4().hex[:8]}:latest"
    app = AppDef("no-image", [Role("r", image, entrypoint="true")])
    async with create_scheduler("t") as sched:
        with pytest.raises(DockerEngineError, match="build or load it first") as caught:
            await sched.submit(app, {})
    assert caught.value.status >= 400
    assert image in str(caught.value)


@pytest.mark.docker
@pytest.mark.parametrize(
    ("resource", "engine_words", "value"),
    [
        (Resource(cpu=1, gpu=0, memMB=1), "Minimum memory limit allowed is", "Resource(memMB=1)"),
        (Resource(cpu=4096, gpu=0, memMB=64), "Range of CPUs is from", "Resource(cpu=4096)"),
    ],
)
async def test_a_refused_resource_names_the_replica_and_the_value_in_the_engines_words(
    resource: Resource, engine_words: str, value: str
) -> None:
    role = f"trainer-{uuid.uuid4().hex[:8]}"
    app = AppDef("refused", [Role(role, DOCKER_TEST_IMAGE, entrypoint="true", resource=resource)])
    async with create_scheduler("t") as sched:
        with pytest.raises(DockerEngineError) as caught:
            await sched.submit(app, {})
    message = caught.value.message
    assert message.startswith(engine_words)
    assert message.endswith(f" (replica {role}/0: {value}); change it and submit again")
    assert (caught.value.status, caught.value.request) == (400, "POST containers/create")
    engine = Engine(None, "t")
    try:
        left = await engine.containers(f"{LABEL_ROLE_NAME}={role}")
    finally:
        await engine.close()
    assert left == []


async def test_no_engine_on_a_request_is_unavailable_not_an_aiodocker_error(
    tmp_path: Path,
) -> None:
    engine = Engine(f"unix://{tmp_path}/no-docker.sock", "t")
    with pytest.raises(SchedulerUnavailableError, match="no Docker engine"):
        await engine.containers(LABEL_APP_ID)
    await engine.close()


async def _serve_proxy(path: Path, *, task_status: anyio.abc.TaskStatus[None]) -> None:
    """Forward connections on unix socket ``path`` to the engine until cancelled."""
    engine = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    assert engine.startswith("unix://"), "this test proxies a unix socket engine"

    async def handle(client: anyio.abc.SocketStream) -> None:
        async with client, await anyio.connect_unix(engine[len("unix://") :]) as upstream:

            async def pump(src: anyio.abc.SocketStream, dst: anyio.abc.SocketStream) -> None:
                with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                    while True:
                        await dst.send(await src.receive())
                tg.cancel_scope.cancel()

            async with anyio.create_task_group() as tg:
                tg.start_soon(pump, client, upstream)
                tg.start_soon(pump, upstream, client)

    async with await anyio.create_unix_listener(path) as listener:
        task_status.started()
        await listener.serve(handle)


@pytest.mark.docker
async def test_an_engine_gone_mid_session_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "engine.sock"
    engine = Engine(f"unix://{path}", "t")
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(_serve_proxy, path)
            await engine.connect()  # the engine answered once
            tg.cancel_scope.cancel()  # then it is gone: its connections and socket closed
        with pytest.raises(SchedulerUnavailableError, match="Docker engine"):
            await engine.containers(LABEL_APP_ID)
    finally:
        await engine.close()
