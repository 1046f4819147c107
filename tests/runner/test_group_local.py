"""``Runner.group()`` on ``local_cwd`` and ``local_dir``: real processes, none left behind.

Every test asserts, right after the group's block and while the runner is still open
(leaving a runner ends local replicas anyway), that no process of the group's apps is
left: the group, not the runner, stopped them.
"""

from __future__ import annotations

import logging
import signal
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from asynctorchx.errors import AppGroupFailed, AppGroupStopTimeout, SchedulerClosedError
from asynctorchx.runner import AppGroup, Runner, get_runner
from asynctorchx.schedulers import get_scheduler_factories
from asynctorchx.specs import AppState
from tests.isolation import isolate_from_user_config
from tests.processes import killed_on_exit
from tests.runner.fake_scheduler import FakeScheduler
from tests.runner.group_apps import (
    LIMIT,
    PRINTS_PID_AND_SLEEPS,
    first_line,
    processes_of,
    sh_app,
    states,
)

pytestmark = pytest.mark.timeout(2 * LIMIT)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user .torchxconfig, no TORCHX_* from the outer environment."""
    isolate_from_user_config(tmp_path, monkeypatch)


@pytest.fixture(params=["local_cwd", "local_dir"])
def scheduler(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def _start_sleepers(runner: Runner, group: AppGroup, scheduler: str, count: int) -> list[str]:
    """Start ``count`` apps that sleep; return once each runs (its pid printed)."""
    handles = [
        await group.run(sh_app(f"sleeper{index}", PRINTS_PID_AND_SLEEPS), scheduler)
        for index in range(count)
    ]
    for handle in handles:
        await first_line(runner, handle)
    assert len(processes_of(handles)) == count
    return handles


async def test_leaving_normally_waits_for_every_app(scheduler: str) -> None:
    async with get_runner() as runner:
        with anyio.fail_after(LIMIT):
            async with runner.group() as group:
                ok = await group.run(sh_app("ok", "sleep 0.5; exit 0"), scheduler)
                bad = await group.run(sh_app("bad", "sleep 0.5; exit 3"), scheduler)
                assert group.handles == [ok, bad]
            # the block returned only once both ended; a failure raises nothing
            assert await states(runner, [ok, bad]) == [AppState.SUCCEEDED, AppState.FAILED]
            statuses = await group.wait()
            assert list(statuses) == [ok, bad]
            assert [status.state for status in statuses.values()] == [
                AppState.SUCCEEDED,
                AppState.FAILED,
            ]
            assert statuses[bad].roles[0].replicas[0].exit_code == 3


async def test_as_completed_yields_each_app_as_it_ends(scheduler: str, tmp_path: Path) -> None:
    go = tmp_path / "go"
    async with get_runner() as runner:
        with anyio.fail_after(LIMIT):
            async with runner.group() as group:
                first = await group.run(sh_app("first", "exit 0"), scheduler)
                script = f"echo waiting; while [ ! -e {go} ]; do sleep 0.05; done; exit 4"
                second = await group.run(sh_app("second", script), scheduler)
                seen = []
                async for handle, status in group.as_completed():
                    seen.append((handle, status.state))
                    if handle == first:  # the second app ends only now
                        go.touch()
                assert seen == [(first, AppState.SUCCEEDED), (second, AppState.FAILED)]
                assert [handle async for handle, _ in group.as_completed()] == [first, second]


async def test_an_exception_in_the_block_cancels_every_app_and_propagates(
    scheduler: str,
) -> None:
    class Boom(Exception):
        pass

    async with get_runner() as runner:
        boom = Boom("raised in the block")
        group = runner.group()

        async def block() -> None:
            async with group:
                await _start_sleepers(runner, group, scheduler, 2)
                raise boom

        with pytest.raises(Boom) as raised, anyio.fail_after(LIMIT):
            await block()
        handles = group.handles
        assert raised.value is boom  # as itself, never in an ExceptionGroup
        assert processes_of(handles) == []
        assert await states(runner, handles) == [AppState.CANCELLED] * 2


async def test_an_enclosing_cancel_scope_cancels_every_app(scheduler: str) -> None:
    async with get_runner() as runner:
        with anyio.CancelScope() as enclosing:
            async with runner.group() as group:
                handles = await _start_sleepers(runner, group, scheduler, 2)
                enclosing.cancel()
                await anyio.sleep_forever()
        assert enclosing.cancelled_caught
        assert processes_of(handles) == []
        assert await states(runner, handles) == [AppState.CANCELLED] * 2


async def test_an_expiring_fail_after_cancels_every_app_and_times_out(scheduler: str) -> None:
    async with get_runner() as runner:
        group = runner.group()

        async def block(deadline: anyio.CancelScope) -> None:
            async with group:
                await _start_sleepers(runner, group, scheduler, 2)
                deadline.deadline = anyio.current_time()  # expires now
                await anyio.sleep_forever()

        with pytest.raises(TimeoutError), anyio.fail_after(LIMIT) as deadline:
            await block(deadline)
        handles = group.handles
        assert processes_of(handles) == []
        assert await states(runner, handles) == [AppState.CANCELLED] * 2


async def test_fail_fast_cancels_the_others_and_raises_every_status(scheduler: str) -> None:
    async with get_runner() as runner:
        group = runner.group(fail_fast=True)

        async def block() -> None:
            async with group:
                await _start_sleepers(runner, group, scheduler, 1)
                await group.run(sh_app("failing", "exit 7"), scheduler)
                await anyio.sleep_forever()  # cancelled by the failure

        with pytest.raises(AppGroupFailed) as raised, anyio.fail_after(LIMIT):
            await block()
        sleeper, failing = group.handles
        error = raised.value
        assert error.failed == failing
        assert {handle: status.state for handle, status in error.statuses.items()} == {
            sleeper: AppState.CANCELLED,
            failing: AppState.FAILED,
        }
        assert error.stragglers == []
        assert failing in str(error)
        assert processes_of([sleeper]) == []


async def test_without_fail_fast_a_failure_cancels_nothing(scheduler: str) -> None:
    async with get_runner() as runner:
        with anyio.fail_after(LIMIT):
            async with runner.group() as group:
                failing = await group.run(sh_app("failing", "exit 7"), scheduler)
                waiting = await group.run(sh_app("later", "sleep 0.5"), scheduler)
                async for handle, status in group.as_completed():
                    if handle == failing:
                        assert status.state == AppState.FAILED
        assert (await group.wait())[waiting].state == AppState.SUCCEEDED


async def test_an_app_that_outlives_the_stop_timeout_is_named(
    scheduler: str, caplog: pytest.LogCaptureFixture
) -> None:
    # the replica ignores SIGTERM: the scheduler kills it only after its own 5 s grace
    stubborn = sh_app("stubborn", "trap '' TERM; " + PRINTS_PID_AND_SLEEPS)
    cfg = {"stop_timeout": 5}
    caplog.set_level(logging.ERROR, "asynctorchx.runner._group")
    async with get_runner() as runner:

        async def stubborn_group(leave: str, group: AppGroup) -> None:
            with anyio.CancelScope() as enclosing:
                async with group:
                    await first_line(runner, await group.run(stubborn, scheduler, cfg))
                    if leave == "error":
                        raise KeyError("the block's error wins")
                    if leave == "failure":
                        await group.run(sh_app("failing", "exit 1"), scheduler)
                    else:
                        enclosing.cancel()
                    await anyio.sleep_forever()  # cancelled by the failure or the scope

        # left by a cancellation: the stragglers are the error
        group = runner.group(stop_timeout=0.2)
        with pytest.raises(AppGroupStopTimeout) as raised, anyio.fail_after(LIMIT):
            await stubborn_group("cancel", group)
        (cancelled,) = group.handles
        assert raised.value.stragglers == [cancelled]
        assert cancelled in str(raised.value)
        assert isinstance(raised.value, TimeoutError)

        # left by an error: it propagates, the stragglers are logged
        group = runner.group(stop_timeout=0.2)
        with pytest.raises(KeyError), anyio.fail_after(LIMIT):
            await stubborn_group("error", group)
        (errored,) = group.handles
        assert errored in caplog.text

        # a fail_fast failure: AppGroupFailed, which names them too
        group = runner.group(fail_fast=True, stop_timeout=0.2)
        with pytest.raises(AppGroupFailed) as failed, anyio.fail_after(LIMIT):
            await stubborn_group("failure", group)
        failing = group.handles[0]
        assert failed.value.stragglers == [failing]
        assert failing in str(failed.value)

        with anyio.fail_after(LIMIT):
            for straggler in (cancelled, errored, failing):
                status = await runner.wait(straggler)  # the scheduler's grace, then SIGKILL
                assert status is not None
                assert status.state == AppState.CANCELLED
        assert processes_of([cancelled, errored, failing]) == []


async def test_a_group_refuses_apps_outside_its_block_and_bad_timeouts() -> None:
    async with get_runner() as runner:
        group = runner.group()
        with pytest.raises(SchedulerClosedError, match=r"async with runner\.group"):
            await group.run(sh_app("early", "true"), "local_cwd")
        async with group:
            pass
        with pytest.raises(SchedulerClosedError, match=r"async with runner\.group"):
            await group.run(sh_app("late", "true"), "local_cwd")
        with pytest.raises(RuntimeError, match="entered once"):
            async with group:
                pass
        with pytest.raises(RuntimeError, match="already been entered"):
            async with runner.group() as fresh, fresh:
                pass
        for bad in (0, -1.0, float("inf"), float("nan")):
            with pytest.raises(ValueError, match="stop_timeout"):
                runner.group(stop_timeout=bad)
        with pytest.raises(TypeError, match="stop_timeout"):
            runner.group(stop_timeout="60")  # type: ignore[arg-type]


async def test_run_component_starts_an_app_of_the_group() -> None:
    async with get_runner() as runner:
        with anyio.fail_after(LIMIT):
            async with runner.group() as group:
                handle = await group.run_component("utils.sh", ["exit", "0"], "local_cwd")
            assert group.handles == [handle]
            assert (await group.wait())[handle].state == AppState.SUCCEEDED


SCRIPT = textwrap.dedent(
    """
    import anyio
    from asynctorchx.runner import get_runner
    from tests.runner.group_apps import PRINTS_PID_AND_SLEEPS, first_line, sh_app

    async def main():
        async with get_runner() as runner, runner.group() as group:
            for index in range(2):
                handle = await group.run(sh_app(f"s{index}", PRINTS_PID_AND_SLEEPS), "local_cwd")
                await first_line(runner, handle)
                print(handle, flush=True)
            print("ready", flush=True)
            await anyio.sleep_forever()

    anyio.run(main)
    """
)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_a_signal_to_a_plain_script_stops_the_group(
    signum: signal.Signals, tmp_path: Path
) -> None:
    repo = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-c", SCRIPT]
    async with killed_on_exit(command, cwd=repo, stderr=None) as process:
        assert process.stdout is not None
        with anyio.fail_after(LIMIT):
            output = b""
            async for chunk in process.stdout:
                output += chunk
                if output.endswith(b"ready\n"):
                    break
            handles = output.decode().split()[:-1]
            assert len(handles) == 2
            assert len(processes_of(handles)) == 2
            process.send_signal(signum)
            assert await process.wait() == -signum
    assert processes_of(handles) == []


class _LostScheduler(FakeScheduler):
    """Its ``wait`` fails, as a cluster whose API server went away."""

    async def wait(self, app_id: str, timeout: float | None = None) -> None:
        raise ConnectionError(f"lost the API server while waiting for {app_id}")


async def test_an_app_that_cannot_be_followed_stops_the_group_with_its_error() -> None:
    factories = {**get_scheduler_factories(), "lost": _LostScheduler}
    async with Runner("torchx", factories) as runner:
        group = runner.group()

        async def block() -> None:
            async with group:
                await _start_sleepers(runner, group, "local_cwd", 1)
                await group.run(sh_app("lost", "true"), "lost")
                await anyio.sleep_forever()  # cancelled by the follower's error

        with pytest.raises(ConnectionError, match="lost the API server"), anyio.fail_after(LIMIT):
            await block()
        sleeper, _ = group.handles
        assert processes_of([sleeper]) == []
        assert await states(runner, [sleeper]) == [AppState.CANCELLED]


class _ForgetfulScheduler(FakeScheduler):
    """Forgets each app at once, as a cluster that purged a job's record."""

    async def describe(self, app_id: str) -> None:
        return None


async def test_an_app_its_scheduler_forgets_ends_unknown_and_fails_a_fail_fast_group() -> None:
    factories = {**get_scheduler_factories(), "forgetful": _ForgetfulScheduler}
    async with Runner("torchx", factories) as runner:
        async with runner.group() as group:
            forgotten = await group.run(sh_app("forgotten", "true"), "forgetful")
        assert (await group.wait())[forgotten].state == AppState.UNKNOWN

        group = runner.group(fail_fast=True)

        async def block() -> None:
            async with group:
                await _start_sleepers(runner, group, "local_cwd", 1)
                await group.run(sh_app("forgotten", "true"), "forgetful")
                await anyio.sleep_forever()  # cancelled by the UNKNOWN app

        with pytest.raises(AppGroupFailed) as raised, anyio.fail_after(LIMIT):
            await block()
        sleeper, forgotten = group.handles
        assert raised.value.failed == forgotten
        assert raised.value.statuses[forgotten].state == AppState.UNKNOWN
        assert raised.value.statuses[sleeper].state == AppState.CANCELLED
        assert processes_of([sleeper]) == []
