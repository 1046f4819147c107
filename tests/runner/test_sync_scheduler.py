"""A synchronous, TorchX-style scheduler driven through the async Runner.

What a TorchX user relies on after porting a scheduler by rewriting its imports: the
Runner runs, describes, waits for, tails, lists, cancels and closes it; a cancelled
caller does not leave a call behind; the scheduler's own errors arrive unchanged.
"""

from __future__ import annotations

import threading
from contextlib import aclosing
from pathlib import Path
from unittest.mock import MagicMock

import anyio
import anyio.lowlevel
import pytest

from asynctorchx.errors import SchedulerClosedError
from asynctorchx.runner import Runner
from asynctorchx.schedulers.api import DescribeAppResponse, Stream
from asynctorchx.specs.api import AppDef, AppState, Role, parse_app_handle
from tests.isolation import isolate_from_user_config
from tests.schedulers.sync_scheduler import Made, PortedScheduler, TorchXShapedScheduler

LIMIT = 30  # seconds: a safety bound, never a timing guess


class Boom(Exception):
    """An error of the synchronous scheduler's own."""


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_from_user_config(tmp_path, monkeypatch)


def _app(name: str = "sleepy") -> AppDef:
    return AppDef(name=name, roles=[Role(name="r", image=".", entrypoint="true")])


def _runner(factory: Made, name: str = "ported") -> Runner:
    return Runner("s", {name: factory}, handle_signals=False, trackers={})  # type: ignore[dict-item]


async def test_run_status_logs_list_cancel_wait_and_close() -> None:
    factory = Made(PortedScheduler)
    async with _runner(factory) as runner:
        with anyio.fail_after(LIMIT):
            handle = await runner.run(_app(), "ported", {"label": "x"})
            sched: PortedScheduler = factory.one
            app_id = parse_app_handle(handle).app_id
            status = await runner.status(handle)
            assert status is not None
            assert status.state == AppState.RUNNING
            sched.write(app_id, "one\n")
            sched.write(app_id, "two\n")
            assert [line async for line in runner.log_lines(handle, "r")] == ["one\n", "two\n"]
            assert [app.app_handle for app in await runner.list("ported")] == [handle]
            await runner.cancel(handle)
            final = await runner.wait(handle)
        assert final is not None
        assert final.state == AppState.CANCELLED
        assert threading.main_thread() not in sched.describe_threads  # the loop never blocked
        assert sched.closes == 0
    assert sched.closes == 1


async def test_the_runner_answers_capability_questions_from_the_wrapped_class() -> None:
    runner = _runner(Made(PortedScheduler))
    caps = runner.scheduler_capabilities("ported")
    assert caps.log_streams == frozenset({Stream.COMBINED})
    assert caps.workspace is None
    assert "label" in runner.scheduler_run_opts("ported")


async def test_wait_and_watch_see_a_change_made_while_they_wait() -> None:
    factory = Made(PortedScheduler)
    async with _runner(factory) as runner:
        handle = await runner.run(_app(), "ported")
        app_id = parse_app_handle(handle).app_id
        seen: list[AppState] = []
        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as tg:

                async def waiter() -> None:
                    status = await runner.wait(handle)
                    assert status is not None
                    seen.append(status.state)

                tg.start_soon(waiter)
                async for status in runner.watch(handle):
                    seen.append(status.state)
                    if status.state == AppState.RUNNING:
                        factory.one.finish(app_id)
        assert sorted(seen) == [AppState.RUNNING, AppState.SUCCEEDED, AppState.SUCCEEDED]


async def test_log_lines_follow_a_sync_log_until_the_app_ends() -> None:
    factory = Made(PortedScheduler)
    async with _runner(factory) as runner:
        handle = await runner.run(_app(), "ported")
        app_id = parse_app_handle(handle).app_id
        sched: PortedScheduler = factory.one
        send, receive = anyio.create_memory_object_stream[str]()
        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as tg:

                async def reader() -> None:
                    async with send:
                        async for line in runner.log_lines(handle, "r", should_tail=True):
                            await send.send(line)

                tg.start_soon(reader)
                sched.write(app_id, "a\n")
                assert await receive.receive() == "a\n"
                sched.write(app_id, "b\n")
                assert await receive.receive() == "b\n"
                sched.finish(app_id)
                assert [line async for line in receive] == []
        assert sched.log_iterators_closed == 1


async def test_leaving_a_log_early_closes_the_sync_iterator() -> None:
    factory = Made(PortedScheduler)
    async with _runner(factory) as runner:
        handle = await runner.run(_app(), "ported")
        app_id = parse_app_handle(handle).app_id
        sched: PortedScheduler = factory.one
        sched.write(app_id, "a\n")
        sched.write(app_id, "b\n")
        with anyio.fail_after(LIMIT):
            async with aclosing(runner.log_lines(handle, "r")) as lines:
                async for line in lines:
                    assert line == "a\n"
                    break
        assert sched.log_iterators_closed == 1  # its finally ran: nothing left open


async def test_a_log_iterator_read_after_the_runner_closed_starts_no_call() -> None:
    factory = Made(PortedScheduler)
    async with _runner(factory) as runner:
        handle = await runner.run(_app(), "ported")
        app_id = parse_app_handle(handle).app_id
        sched: PortedScheduler = factory.one
        sched.write(app_id, "a\n")
        sched.write(app_id, "b\n")
        lines = runner.log_lines(handle, "r")
        assert await anext(lines) == "a\n"
    steps = sched.log_steps
    with pytest.raises(SchedulerClosedError):
        await anext(lines)
    assert sched.log_steps == steps
    assert sched.log_iterators_closed == 1


async def test_a_task_cancelled_during_a_slow_sync_call_waits_for_it_then_is_cancelled() -> None:
    factory = Made(PortedScheduler)
    async with _runner(factory) as runner:
        handle = await runner.run(_app(), "ported")
        sched: PortedScheduler = factory.one
        gate, sched.held = threading.Event(), anyio.Event()
        sched.gate = gate
        outcome: list[object] = []
        scope = anyio.CancelScope()

        async def status_call() -> None:
            with scope:
                status = await runner.status(handle)
                outcome.append(None if status is None else status.state)
                await anyio.lowlevel.checkpoint()
                outcome.append("not cancelled")
            outcome.append("cancelled" if scope.cancelled_caught else "left")

        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(status_call)
                await sched.held.wait()  # describe runs in its thread, held by the gate
                scope.cancel()
                await anyio.wait_all_tasks_blocked()
                assert outcome == []  # the task still waits for the call in flight
                assert sched.described == 0
                sched.gate = None
                gate.set()
        # the call ran to its end and its result was delivered; the cancellation then
        # took effect at the task's next checkpoint
        assert outcome == [AppState.RUNNING, "cancelled"]
        assert sched.described == 1


async def test_an_error_of_the_sync_scheduler_reaches_the_caller_unchanged() -> None:
    factory = Made(PortedScheduler)
    async with _runner(factory) as runner:
        runner.scheduler_run_opts("ported")  # makes the scheduler (not yet opened)
        error = factory.one.error = Boom("the cluster said no")
        with anyio.fail_after(LIMIT), pytest.raises(Boom) as raised:
            await runner.run(_app(), "ported")
        assert raised.value is error


async def test_a_torchx_shaped_scheduler_is_validated_and_dry_run_as_torchx_does() -> None:
    factory = Made(TorchXShapedScheduler)
    async with _runner(factory, "shaped") as runner:
        assert runner.scheduler_capabilities("shaped").workspace == "image"
        with anyio.fail_after(LIMIT):
            app = _app()
            handle = await runner.run(app, "shaped")
            sched: TorchXShapedScheduler = factory.one
            assert [(a.name, s) for a, s in sched.validated] == [(app.name, "shaped")]
            assert sched.dryrun_cfgs == [{"label": "none"}]  # resolved, as TorchX's Runner
            status = await runner.wait(handle)
            assert status is not None
            assert status.state == AppState.SUCCEEDED
            lines = [line async for line in runner.log_lines(handle, "r")]
            assert lines == [f"{parse_app_handle(handle).app_id} says hi\n"]
            with pytest.raises(ValueError, match="refused by _validate"):
                await runner.run(_app("invalid"), "shaped")
    assert sched.closes == 1


async def test_a_magicmock_scheduler_as_torchx_tests_use_one() -> None:
    mock = MagicMock()
    mock.schedule.return_value = "app"
    mock.describe.return_value = DescribeAppResponse(app_id="app", ui_url="https://ui")
    mock.log_iter.return_value = iter(["hello", "world"])
    runner = Runner("s", {"mock": lambda name, **kwargs: mock}, handle_signals=False, trackers={})
    async with runner:
        with anyio.fail_after(LIMIT):
            handle = await runner.run(_app(), "mock")
            status = await runner.status(handle)
            assert status is not None
            assert status.ui_url == "https://ui"
            assert [line async for line in runner.log_lines(handle, "r", 2)] == ["hello", "world"]
        mock.log_iter.assert_called_once_with("app", "r", 2, None, None, None, False, streams=None)
    mock.close.assert_called_once_with()
