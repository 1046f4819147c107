"""Runner.log_lines: iterate it, or await it to have the app checked before any line."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from asynctorchx.errors import UnknownAppException
from asynctorchx.runner import Runner
from asynctorchx.specs.api import AppDef, Role, parse_app_handle
from tests.isolation import isolate_from_user_config
from tests.runner.fake_scheduler import create_fake
from tests.schedulers.sync_scheduler import Made, PortedScheduler

LIMIT = 30  # seconds: a safety bound, never a timing guess


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_from_user_config(tmp_path, monkeypatch)


def _app() -> AppDef:
    return AppDef(name="app", roles=[Role(name="r", image=".", entrypoint="true")])


def _runner() -> Runner:
    return Runner("s", {"fake": create_fake}, handle_signals=False, trackers={})


async def test_awaiting_log_lines_raises_for_an_unknown_app_before_any_line() -> None:
    async with _runner() as runner:
        lines = runner.log_lines("fake://s/unknown", "r")  # the call itself checks nothing
        with anyio.fail_after(LIMIT), pytest.raises(UnknownAppException):
            await lines
        with pytest.raises(UnknownAppException):
            await runner.log_lines("fake://s/unknown", "r").__anext__()


async def test_an_awaited_log_is_the_same_iterator_opened() -> None:
    async with _runner() as runner:
        handle = await runner.run(_app(), "fake")
        with anyio.fail_after(LIMIT):
            lines = runner.log_lines(handle, "r")
            assert await lines is lines
            assert await lines is lines  # awaiting again opens nothing more
            app_id = parse_app_handle(handle).app_id
            assert [line async for line in lines] == [f"ran {app_id}\n"]


async def test_closing_an_unopened_log_never_opens_it() -> None:
    factory = Made(PortedScheduler)
    async with Runner("s", {"p": factory}, handle_signals=False, trackers={}) as runner:
        handle = await runner.run(_app(), "p")
        lines = runner.log_lines(handle, "r")
        await lines.aclose()
        assert [line async for line in lines] == []
        assert factory.one.described == 0  # no status was asked
        assert factory.one.followers == []


async def test_two_tasks_cannot_step_one_log_at_once() -> None:
    factory = Made(PortedScheduler)
    async with Runner("s", {"p": factory}, handle_signals=False, trackers={}) as runner:
        handle = await runner.run(_app(), "p")
        lines = await runner.log_lines(handle, "r", should_tail=True)
        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lines.__anext__)  # waits for a line in its thread
                await anyio.wait_all_tasks_blocked()
                with pytest.raises(RuntimeError, match="already"):
                    await lines.__anext__()
                factory.one.write(parse_app_handle(handle).app_id, "line\n")
        await lines.aclose()
