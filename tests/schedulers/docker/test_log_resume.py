"""Resuming ``Runner.events`` on ``local_docker`` reads from the engine's stamp, not the start.

A position is the engine's stamp of the last line delivered and how many lines had it,
so a resume near the end of a long log gets only the log's end from the engine: the
bytes the engine sends are counted (a counting wrapper of the log response's body).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping

import pytest

from asynctorchx.runner import LogEvent, get_runner
from asynctorchx.schedulers.docker import _engine
from asynctorchx.specs.api import AppDef, Role, parse_app_handle

LINES = 100_000  # of 60 bytes: a 6 MB log (with the engine's stamps and headers, ~10 MB)


@pytest.fixture
def log_bytes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The bytes of every log response the engine sent (``containers/{id}/logs``)."""
    sent = [0]
    stream = _engine.Engine.stream

    @contextlib.asynccontextmanager
    async def counted(
        engine: _engine.Engine, path: str, params: Mapping[str, str]
    ) -> AsyncIterator[_engine.StreamBody]:
        async with stream(engine, path, params) as body:
            fill = body.fill

            async def fill_counted() -> None:
                before = len(body.buffer)
                await fill()
                if path.endswith("/logs"):
                    sent[0] += len(body.buffer) - before

            body.fill = fill_counted  # type: ignore[method-assign]
            yield body

    monkeypatch.setattr(_engine.Engine, "stream", counted)
    return sent


@pytest.mark.docker
async def test_resume_near_the_end_of_a_long_log_does_not_read_it_again(
    docker_image: str, docker_apps: list[str], log_bytes: list[int]
) -> None:
    script = f'i=0; while [ $i -lt {LINES} ]; do printf "%059d\\n" $i; i=$((i+1)); done'
    role = Role("w", docker_image, entrypoint="sh", args=["-c", script])
    async with get_runner(handle_signals=False) as runner:
        handle = await runner.run(AppDef("long", [role]), "local_docker")
        docker_apps.append(parse_app_handle(handle).app_id)
        await runner.wait(handle)
        lines: list[LogEvent] = []
        async with runner.events(handle) as events:
            async for event in events:
                if isinstance(event, LogEvent) and event.stream == "stdout":
                    lines.append(event)
        whole = log_bytes[0]
        assert [event.line for event in lines] == [f"{n:059d}\n" for n in range(LINES)]
        log_bytes[0] = 0
        resumed: list[str] = []
        async with runner.events(handle, cursor=lines[-3].cursor) as events:
            async for event in events:
                if isinstance(event, LogEvent):
                    resumed.append(event.line)
    assert resumed == [f"{n:059d}\n" for n in range(LINES - 2, LINES)]
    # the whole log was read once; the resume gets at most the engine's last chunk
    assert whole > 6_000_000
    assert log_bytes[0] < 100_000, f"the resume got {log_bytes[0]} of {whole} bytes"
