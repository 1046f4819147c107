"""A sweep on ``local_cwd``: ``Runner.group(max_concurrent=..., retries=..., retry_backoff=...)``.

The limit is observed through the scheduler (``describe``), never through the group's own
counters; the apps end when the test says (a file appears), so no test guesses at timing.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from asynctorchx.errors import AppGroupFailed
from asynctorchx.runner import Runner, get_runner
from asynctorchx.runner._retries import Backoff, retry_delay
from asynctorchx.specs import AppState
from tests.isolation import isolate_from_user_config
from tests.runner.group_apps import LIMIT, processes_of, sh_app, states

pytestmark = pytest.mark.timeout(2 * LIMIT)

TINY = (0.001, 0.002)  # seconds: backoffs that never slow a test


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_from_user_config(tmp_path, monkeypatch)


def waits_for(path: Path) -> str:
    """A script that runs until ``path`` exists, then exits 0."""
    return f"while [ ! -e {path} ]; do sleep 0.02; done"


def fails_until_attempt(count: int, tmp_path: Path) -> str:
    """A script whose first ``count - 1`` runs exit 1 and the next ones exit 0."""
    script = tmp_path / "attempt.sh"
    script.write_text(
        f"n=$(cat {tmp_path}/runs 2>/dev/null || echo 0); n=$((n + 1))\n"
        f'echo "$n" > {tmp_path}/runs\n'
        f'[ "$n" -ge {count} ]\n'
    )
    return f"sh {script}"


async def not_terminal(runner: Runner, handles: list[str]) -> list[str]:
    """The apps among ``handles`` that their scheduler describes as not terminal."""
    found = []
    for handle in handles:
        status = await runner.status(handle)
        assert status is not None, handle
        if not status.is_terminal():
            found.append(handle)
    return found


def test_retry_delay_grows_exponentially_between_the_bounds() -> None:
    backoff = Backoff(10.0, 600.0)

    def highest(low: float, high: float) -> float:
        return high

    def lowest(low: float, high: float) -> float:
        return low

    assert [retry_delay(retry, backoff, highest) for retry in range(7)] == [
        20.0,
        40.0,
        80.0,
        160.0,
        320.0,
        600.0,
        600.0,
    ]
    assert {retry_delay(retry, backoff, lowest) for retry in range(7)} == {10.0}
    assert retry_delay(10_000, backoff, highest) == 600.0  # no overflow however many retries
    assert 10.0 <= retry_delay(0, backoff) <= 20.0  # the real random source stays inside


async def test_bad_sweep_arguments_are_refused_with_the_value() -> None:
    async with get_runner() as runner:
        for bad in (0, -1, 1.5, True):
            with pytest.raises(ValueError, match="max_concurrent"):
                runner.group(max_concurrent=bad)  # type: ignore[arg-type]
        for bad in (-1, 0.5, None):
            with pytest.raises(ValueError, match="retries"):
                runner.group(retries=bad)  # type: ignore[arg-type]
        for backoff in ((1.0,), (5.0, 1.0), (-1.0, 2.0), (0.0, float("inf")), "10,600"):
            with pytest.raises(ValueError, match="retry_backoff"):
                runner.group(retry_backoff=backoff)  # type: ignore[arg-type]


async def test_at_most_max_concurrent_apps_are_not_terminal(tmp_path: Path) -> None:
    count, limit = 5, 2
    async with get_runner() as runner:
        with anyio.fail_after(LIMIT):
            async with runner.group(max_concurrent=limit) as group:
                send, receive = anyio.create_memory_object_stream[int](count)

                async def start_all() -> None:
                    async with send:
                        for index in range(count):
                            app = sh_app(f"trial{index}", waits_for(tmp_path / str(index)))
                            await group.run(app, "local_cwd")
                            await send.send(index)

                seen_full = 0
                async with anyio.create_task_group() as tasks, receive:
                    tasks.start_soon(start_all)
                    ended = 0
                    async for started in receive:
                        # every run that could go on has gone on: a missing limit shows here
                        await anyio.wait_all_tasks_blocked()
                        running = await not_terminal(runner, group.handles)
                        assert len(running) <= limit
                        if len(running) == limit or started == count - 1:
                            seen_full += len(running) == limit
                            (tmp_path / str(ended)).touch()  # the oldest app ends
                            await runner.wait(group.handles[ended])
                            ended += 1
                for index in range(count):
                    (tmp_path / str(index)).touch()
        assert seen_full >= count - limit
        assert [status.state for status in (await group.wait()).values()] == [
            AppState.SUCCEEDED
        ] * count


async def test_a_run_cancelled_while_it_waits_for_a_slot_submits_nothing(tmp_path: Path) -> None:
    async with get_runner() as runner:
        with anyio.fail_after(LIMIT):
            async with runner.group(max_concurrent=1) as group:
                first = await group.run(sh_app("first", waits_for(tmp_path / "go")), "local_cwd")
                with anyio.CancelScope() as waiting:

                    async def cancel_once_waiting() -> None:
                        await anyio.wait_all_tasks_blocked()
                        waiting.cancel()

                    async with anyio.create_task_group() as tasks:
                        tasks.start_soon(cancel_once_waiting)
                        await group.run(sh_app("second", "exit 0"), "local_cwd")
                assert waiting.cancelled_caught
                assert group.handles == [first]
                listed = await runner.list("local_cwd")
                assert [app.name for app in listed if app.name.startswith("second")] == []
                (tmp_path / "go").touch()
                # the slot is free again: the next run goes through
                third = await group.run(sh_app("third", "exit 0"), "local_cwd")
        assert list(await group.wait()) == [first, third]


async def test_an_app_that_fails_twice_then_succeeds_ends_succeeded(tmp_path: Path) -> None:
    async with get_runner() as runner:
        with anyio.fail_after(LIMIT):
            async with runner.group(retries=3, retry_backoff=TINY) as group:
                first = await group.run(
                    sh_app("flaky", fails_until_attempt(3, tmp_path)), "local_cwd"
                )
                completed = [
                    (handle, status.state) async for handle, status in group.as_completed()
                ]
        attempts = group.attempts(first)
        assert len(attempts) == 3
        assert attempts[0] == first
        assert group.handles == attempts
        assert group.attempts(attempts[-1]) == attempts  # any attempt's handle finds them
        # each attempt is an app of its own, as its scheduler tells it
        assert await states(runner, attempts) == [
            AppState.FAILED,
            AppState.FAILED,
            AppState.SUCCEEDED,
        ]
        assert completed == [(attempts[-1], AppState.SUCCEEDED)]
        assert {handle: status.state for handle, status in (await group.wait()).items()} == {
            attempts[-1]: AppState.SUCCEEDED
        }


async def test_fail_fast_counts_a_failure_once_its_retries_are_spent(tmp_path: Path) -> None:
    async with get_runner() as runner:
        group = runner.group(fail_fast=True, retries=2, retry_backoff=TINY)

        async def block() -> str:
            async with group:
                go = tmp_path / "go"
                sleeper = await group.run(sh_app("sleeper", waits_for(go)), "local_cwd")
                await group.run(sh_app("failing", "exit 5"), "local_cwd")
                await anyio.sleep_forever()  # cancelled by the failure
            return sleeper

        with pytest.raises(AppGroupFailed) as raised, anyio.fail_after(LIMIT):
            await block()
        sleeper, *failing = group.handles
        assert len(failing) == 3
        assert group.attempts(failing[0]) == failing
        assert raised.value.failed == failing[-1]
        assert {handle: status.state for handle, status in raised.value.statuses.items()} == {
            sleeper: AppState.CANCELLED,
            failing[-1]: AppState.FAILED,
        }
        assert await states(runner, failing) == [AppState.FAILED] * 3
        assert processes_of([sleeper]) == []


async def test_leaving_during_a_backoff_submits_nothing_more() -> None:
    async with get_runner() as runner:
        group = runner.group(retries=1, retry_backoff=(3 * LIMIT, 3 * LIMIT))

        async def block() -> None:
            async with group:
                failing = await group.run(sh_app("failing", "exit 5"), "local_cwd")
                await runner.wait(failing)
                await anyio.wait_all_tasks_blocked()  # its follower waits out the backoff
                raise LookupError("left during the backoff")

        # the backoff outlasts this bound: leaving returned because it was cut short
        with pytest.raises(LookupError), anyio.fail_after(LIMIT):
            await block()
        (failing,) = group.handles
        assert group.attempts(failing) == [failing]
        assert (await group.wait())[failing].state == AppState.FAILED


async def test_run_many_on_a_backend_without_arrays_runs_each_app_under_the_limit(
    tmp_path: Path,
) -> None:
    go = tmp_path / "go"
    apps = [sh_app(f"app{index}", waits_for(go)) for index in range(5)]
    async with get_runner() as runner:
        with anyio.fail_after(LIMIT):
            async with runner.group(max_concurrent=2) as group, anyio.create_task_group() as tasks:
                tasks.start_soon(group.run_many, apps, "local_cwd")
                while len(group.handles) < 2:  # the first two take both slots
                    await anyio.sleep(0.02)
                await anyio.wait_all_tasks_blocked()
                assert len(group.handles) == 2  # the third waits for a slot
                assert len(await not_terminal(runner, group.handles)) == 2
                go.touch()
            handles = group.handles
            assert len(handles) == len(set(handles)) == 5
            assert await states(runner, handles) == [AppState.SUCCEEDED] * 5
        with pytest.raises(ValueError, match="one key per app"):
            async with runner.group() as group:
                await group.run_many(apps, "local_cwd", keys=["a"])
