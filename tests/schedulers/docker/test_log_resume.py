"""Resuming a ``local_docker`` log reads from the engine's stamps, not the start.

A position is, per stream, the engine's stamp of the last line delivered and how many
lines had it, so a resume near the end of a long log gets only the log's end from the
engine (``Runner.events``, stdout and stderr apart), and a combined read resumes from any
block's position with that block's lines then the rest: the bytes the engine sends are
counted (a counting wrapper of the log response's body). A read whose connection breaks
raises, and a read from its last block's position gives the rest, each line once.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping

import pytest

from asynctorchx.errors import SchedulerUnavailableError
from asynctorchx.runner import LogEvent, get_runner
from asynctorchx.schedulers.api import Stream
from asynctorchx.schedulers.docker import _engine
from asynctorchx.schedulers.docker_scheduler import create_scheduler
from asynctorchx.schedulers.toolkit import LogPosition, LogQuery
from asynctorchx.specs.api import AppDef, Role, parse_app_handle

LINES = 100_000  # of 60 bytes: a 6 MB log (with the engine's stamps and headers, ~10 MB)


@pytest.fixture
def log_bytes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The bytes of every log response the engine sent (``containers/{id}/logs``)."""
    sent = [0]
    stream = _engine.Engine.stream

    @contextlib.asynccontextmanager
    async def counted(
        engine: _engine.Engine, path: str, params: Mapping[str, str], **kwargs: bool
    ) -> AsyncIterator[_engine.StreamBody]:
        async with stream(engine, path, params, **kwargs) as body:
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
    # the whole log was read once; the resume gets the frames from the cursor's stamp on
    # (the engine's since sends some frames before it: a bounded few), not the log again
    assert whole > 6_000_000
    assert log_bytes[0] < 200_000, f"the resume got {log_bytes[0]} of {whole} bytes"


#: stdout and stderr interleaved, 3,000 lines each, and six lines longer than the engine's
#: 16 KiB frames (40,000 x's) on stdout
INTERLEAVED = (
    'i=0; while [ $i -lt 3000 ]; do echo "out $i"; echo "err $i" >&2;'
    ' [ $((i % 500)) -eq 7 ] && head -c 40000 /dev/zero | tr "\\0" x && echo;'
    " i=$((i+1)); done"
)


@pytest.mark.docker
async def test_a_combined_read_resumes_from_any_blocks_position(
    docker_image: str, docker_apps: list[str], log_bytes: list[int]
) -> None:
    role = Role("r", docker_image, entrypoint="sh", args=["-c", INTERLEAVED])
    async with create_scheduler("t") as sched:
        app_id = await sched.submit(AppDef("combined", [role]), {})
        docker_apps.append(app_id)
        await sched.wait(app_id)
        query = LogQuery("r", 0, streams=Stream.COMBINED)

        async def read(start: LogPosition) -> list[tuple[LogPosition, list[str]]]:
            return [(at, list(lines)) async for at, lines in sched.log_blocks(app_id, query, start)]

        blocks = await read(0)
        every = [line for _, lines in blocks for line in lines]
        assert sorted(every) == sorted(
            [f"out {i}\n" for i in range(3000)]
            + [f"err {i}\n" for i in range(3000)]
            + ["x" * 40000 + "\n"] * 6
        )
        whole = log_bytes[0]
        for index in range(1, len(blocks), max(len(blocks) // 7, 1)):
            position = blocks[index][0]
            first = next(i for i, (at, _) in enumerate(blocks) if at == position)
            before = sum(len(lines) for _, lines in blocks[:first])
            log_bytes[0] = 0
            again = [line for _, lines in await read(position) for line in lines]
            assert again == every[before:], (index, position)
        # near the end, the engine sends the log from the earlier stream's stamp (written
        # in one burst, stdout may run a pipe's read ahead of stderr), not from the start
        assert log_bytes[0] < whole / 2, (log_bytes[0], whole)


@pytest.mark.docker
async def test_a_read_whose_connection_breaks_raises_and_resumes_from_its_last_block(
    docker_image: str, docker_apps: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    role = Role("r", docker_image, entrypoint="sh", args=["-c", INTERLEAVED])
    async with create_scheduler("t") as sched:
        app_id = await sched.submit(AppDef("cut", [role]), {})
        docker_apps.append(app_id)
        await sched.wait(app_id)
        query = LogQuery("r", 0, streams=Stream.COMBINED)
        whole = [line async for _, lines in sched.log_blocks(app_id, query) for line in lines]
        stream = _engine.Engine.stream
        cuts: list[int] = []

        @contextlib.asynccontextmanager
        async def cut_short(
            engine: _engine.Engine, path: str, params: Mapping[str, str]
        ) -> AsyncIterator[_engine.StreamBody]:
            async with stream(engine, path, params) as body:
                fill, received = body.fill, [0]

                async def fill_then_break() -> None:
                    before = len(body.buffer)
                    await fill()
                    received[0] += len(body.buffer) - before
                    if not cuts and path.endswith("/logs") and received[0] > 100_000:
                        del body.buffer[-37:]  # the connection broke inside a frame
                        cuts.append(received[0])
                        raise SchedulerUnavailableError("the connection broke")

                body.fill = fill_then_break  # type: ignore[method-assign]
                yield body

        monkeypatch.setattr(_engine.Engine, "stream", cut_short)
        got: list[tuple[LogPosition, list[str]]] = []

        async def read_until_cut() -> None:
            async for at, lines in sched.log_blocks(app_id, query):
                got.append((at, list(lines)))

        with pytest.raises(SchedulerUnavailableError):
            await read_until_cut()
        assert cuts, "no read was cut"
        last = got[-1][0]  # its block's lines come again from there
        rest = [line async for _, lines in sched.log_blocks(app_id, query, last) for line in lines]
    assert [line for _, lines in got[:-1] for line in lines] + rest == whole
