"""SharedFeed and BatchedPoller: one reader for every waiter, whatever their number.

Run under trio's MockClock with autojump: sleeps take no real time, and the clock
says exactly when each poll ran, so no assertion guesses at timing.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection

import anyio
import pytest
import trio
import trio.testing

from asynctorchx.errors import SchedulerUnreachableError
from asynctorchx.schedulers.toolkit import BatchedPoller, SharedFeed


class Jobs:
    """A fake batch system: each job's state is the next scripted one at each poll."""

    def __init__(self, scripts: dict[str, list[str]]) -> None:
        self.scripts = scripts
        self.calls: list[tuple[float, frozenset[str]]] = []

    async def fetch(self, keys: Collection[str]) -> dict[str, str]:
        self.calls.append((anyio.current_time(), frozenset(keys)))
        await anyio.sleep(0)
        answer = {}
        for key in keys:
            script = self.scripts.get(key)
            if script:
                answer[key] = script.pop(0) if len(script) > 1 else script[0]
        return answer


def run(main, *args):  # type: ignore[no-untyped-def]
    trio.run(main, *args, clock=trio.testing.MockClock(autojump_threshold=0))


def test_fifty_waiters_share_one_fetch_per_tick() -> None:
    jobs = Jobs({f"job{i}": ["PENDING", "RUNNING", "DONE"] for i in range(50)})
    poller = BatchedPoller(jobs.fetch, interval=2.0)
    results: dict[str, str | None] = {}

    async def main() -> None:
        async def wait(key: str) -> None:
            results[key] = await poller.wait_until(key, lambda value: value == "DONE")

        async with anyio.create_task_group() as task_group:
            for i in range(50):
                task_group.start_soon(wait, f"job{i}")

    run(main)
    assert results == {f"job{i}": "DONE" for i in range(50)}
    # the first waiter polls alone, the other 49 join at once, then one poll a tick for all
    assert poller.polls == len(jobs.calls) <= 4
    assert all(len(keys) >= 49 for _, keys in jobs.calls[1:])
    ticks = [when for when, _ in jobs.calls[1:]]
    assert all(later - earlier >= 2.0 for earlier, later in itertools.pairwise(ticks))
    assert poller.watched == 0


def test_a_new_key_is_polled_at_once_and_an_unknown_key_is_none() -> None:
    jobs = Jobs({"slow": ["RUNNING"], "new": ["DONE"]})
    poller = BatchedPoller(jobs.fetch, interval=5.0)
    joined_at: list[float] = []

    async def main() -> None:
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(poller.wait_until, "slow", lambda value: value == "DONE")
            await anyio.sleep(1.0)  # mid-tick: the poller sleeps towards t=5
            joined_at.append(anyio.current_time())
            assert await poller.wait_until("new", lambda value: value == "DONE") == "DONE"
            assert await poller.wait_until("gone", lambda value: True) is None
            task_group.cancel_scope.cancel()

    run(main)
    assert jobs.calls[1][0] == joined_at[0]  # not at the next tick


def test_cancelling_the_polling_waiter_hands_the_tick_to_another() -> None:
    jobs = Jobs({"a": ["RUNNING", "RUNNING", "RUNNING", "DONE"]})
    poller = BatchedPoller(jobs.fetch, interval=1.0)
    got: list[str | None] = []

    async def main() -> None:
        async with anyio.create_task_group() as task_group:
            leader_scope = anyio.CancelScope()

            async def leader() -> None:
                with leader_scope:
                    await poller.wait_until("a", lambda value: value == "DONE")

            async def follower() -> None:
                got.append(await poller.wait_until("a", lambda value: value == "DONE"))

            task_group.start_soon(leader)
            await anyio.sleep(0.5)
            task_group.start_soon(follower)
            await anyio.sleep(1.0)
            leader_scope.cancel()

    run(main)
    assert got == ["DONE"]


def test_a_fetch_error_reaches_every_waiter_of_that_tick() -> None:
    async def broken(keys: Collection[str]) -> dict[str, str]:
        await anyio.sleep(0)
        raise OSError("squeue: error: slurm_load_jobs error: Unable to contact slurm controller")

    poller: BatchedPoller[str, str] = BatchedPoller(broken)
    errors: list[str] = []

    async def main() -> None:
        async def wait() -> None:
            try:
                await poller.wait_until("a", lambda value: value == "DONE")
            except OSError as error:
                errors.append(str(error))

        async with anyio.create_task_group() as task_group:
            for _ in range(3):
                task_group.start_soon(wait)

    run(main)
    assert len(errors) == 3
    assert "Unable to contact" in errors[0]


def test_an_unreachable_engine_keeps_the_waiters_waiting_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers: list[str | None] = [None, None, None, "DONE"]  # None: the engine does not answer

    async def restarting(keys: Collection[str]) -> dict[str, str]:
        await anyio.sleep(0)
        answer = answers.pop(0)
        if answer is None:
            raise SchedulerUnreachableError("slurmctld does not answer")
        return dict.fromkeys(keys, answer)

    poller: BatchedPoller[str, str] = BatchedPoller(restarting, interval=1.0)
    results: list[str | None] = []

    async def main() -> None:
        async with anyio.create_task_group() as task_group:
            for _ in range(3):
                task_group.start_soon(wait_done, poller, results)

    run(main)
    assert results == ["DONE"] * 3
    assert poller.polls == 4
    said = [record.getMessage() for record in caplog.records]
    assert said == [
        "slurmctld does not answer; waiting for it to answer again",
        "the scheduler answers again",
    ]


async def wait_done(poller: BatchedPoller[str, str], results: list[str | None]) -> None:
    results.append(await poller.wait_until("a", lambda value: value == "DONE"))


def test_the_tick_backs_off_while_nothing_changes_and_bad_intervals_are_refused() -> None:
    jobs = Jobs({"a": ["RUNNING"]})
    poller = BatchedPoller(jobs.fetch, interval=1.0, max_interval=8.0, idle_after=10.0)

    async def main() -> None:
        with anyio.move_on_after(100):
            await poller.wait_until("a", lambda value: value == "DONE")

    run(main)
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(jobs.calls)]
    assert gaps[:5] == [1.0] * 5
    assert max(gaps) == 8.0
    assert len(jobs.calls) < 100 / 1.0 / 2
    with pytest.raises(ValueError, match="interval=0"):
        BatchedPoller(jobs.fetch, interval=0)
    with pytest.raises(ValueError, match="below interval"):
        BatchedPoller(jobs.fetch, interval=2.0, max_interval=1.0)


def test_a_caller_looping_on_next_poll_is_served_once_per_tick() -> None:
    jobs = Jobs({"a": ["RUNNING"] * 5 + ["DONE"]})
    poller = BatchedPoller(jobs.fetch, interval=3.0)
    seen: list[tuple[float, str | None]] = []

    async def main() -> None:
        while not seen or seen[-1][1] != "DONE":
            value = await poller.next_poll("a")
            seen.append((anyio.current_time(), value))

    run(main)
    assert [value for _, value in seen] == ["RUNNING"] * 5 + ["DONE"]
    times = [when for when, _ in seen]
    assert times == [0.0, 3.0, 6.0, 9.0, 12.0, 15.0]  # the first at once, then one a tick
    assert poller.polls == 6


class Counter(SharedFeed):
    """A feed whose every step takes one second and counts up; it notes going idle."""

    def __init__(self) -> None:
        super().__init__()
        self.value = 0
        self.idled = 0

    async def _read(self) -> None:
        await anyio.sleep(1.0)
        self.value += 1

    async def _idle(self) -> None:
        self.idled += 1


def test_a_shared_feed_steps_once_for_all_waiters_and_idles_when_the_last_leaves() -> None:
    feed = Counter()
    got: list[int] = []

    async def main() -> None:
        async def wait(target: int) -> None:
            got.append(await feed.wait_for(lambda: feed.value if feed.value >= target else None))

        async with anyio.create_task_group() as task_group:
            for target in (3, 1, 2, 3):
                task_group.start_soon(wait, target)
        assert anyio.current_time() == 3.0  # three steps of one second, shared by all four
        assert feed.reads == 3
        assert feed.idled == 1  # once, when the last of the four left
        with pytest.raises(TimeoutError):  # the only waiter leaves mid-step
            await feed.wait_for(lambda: None, timeout=0.5)
        assert feed.idled == 2
        assert await feed.wait_for(lambda: feed.value or None) == 3  # no step needed

    run(main)
    assert got == [1, 2, 3, 3]
