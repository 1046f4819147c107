"""tail_blocks: a log file followed by notification, never by a timer."""

from __future__ import annotations

import os
from datetime import UTC
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from asynctorchx.schedulers.toolkit import LogQuery, Notifier, lines_of, tail_blocks


class Writer:
    """Appends to a log file and notifies, as an output pump does."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.notifier = Notifier()
        self.finished = False
        self._seen: anyio.Event | None = None

    def write(self, data: bytes) -> None:
        with self.path.open("ab") as file:
            file.write(data)
        self.notifier.notify()

    def finish(self) -> None:
        self.finished = True
        self.notifier.notify()

    async def changed(self) -> None:
        """Return once notified since the last return (or since the tail started)."""
        assert self._seen is not None, "tail() first"
        await self._seen.wait()
        self._seen = self.notifier.event

    def tail(self, query: LogQuery, **kwargs: object):  # type: ignore[no-untyped-def]
        self._seen = self.notifier.event  # taken before the first look at the file
        return lines_of(
            tail_blocks(
                str(self.path),
                query,
                wait_for_change=self.changed,
                is_finished=lambda: self.finished,
                **kwargs,  # type: ignore[arg-type]
            )
        )


@pytest.mark.parametrize("offload_reads", [False, True])
async def test_a_follower_gets_each_line_as_written_and_ends_with_the_writer(
    tmp_path: Path, offload_reads: bool
) -> None:
    writer = Writer(tmp_path / "out.log")  # the file does not exist yet
    got: list[str] = []
    arrived = Notifier()

    async def follow() -> None:
        query = LogQuery("r", should_tail=True)
        async for line in writer.tail(query, offload_reads=offload_reads):
            got.append(line)
            arrived.notify()

    async def wait_for(count: int) -> None:
        while len(got) < count:
            await arrived.event.wait()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(follow)
            writer.write(b"one\ntw")
            await wait_for(1)
            writer.write(b"o\nthree")
            await wait_for(2)
            writer.finish()
    assert got == ["one\n", "two\n", "three"]


async def test_without_tail_the_lines_there_now_then_stop(tmp_path: Path) -> None:
    writer = Writer(tmp_path / "out.log")
    writer.write(b"a1\nb2\na3")
    query = LogQuery("r", regex="^a")
    assert [line async for line in writer.tail(query)] == ["a1\n", "a3"]
    missing = Writer(tmp_path / "never.log")
    assert [line async for line in missing.tail(LogQuery("r"))] == []


async def test_since_and_until_use_the_writers_time_index(tmp_path: Path) -> None:
    writer = Writer(tmp_path / "out.log")
    writer.write(b"early\nmiddle\nlate\nlater\n")
    times = {0: 10.0, 6: 20.0, 13: 30.0, 18: 40.0}  # byte offset of each line -> when
    from datetime import datetime

    def at(seconds: float) -> datetime:
        return datetime.fromtimestamp(seconds, UTC)

    query = LogQuery("r", since=at(15), until=at(30))
    got = [line async for line in writer.tail(query, time_of=times.get)]
    assert got == ["middle\n", "late\n"]
    assert os.path.getsize(writer.path) == 24


async def test_a_writer_that_cannot_notify_is_followed_at_each_change_it_reports(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cluster.log"  # written by "the cluster"; we only learn of it by polling
    polls: list[int] = []
    script = [b"one\n", b"two\nthr", b"ee\n"]

    async def next_poll() -> None:
        await anyio.lowlevel.checkpoint()
        polls.append(len(polls))
        if script:
            with path.open("ab") as file:
                file.write(script.pop(0))

    query = LogQuery("r", should_tail=True)
    lines = lines_of(
        tail_blocks(str(path), query, is_finished=lambda: not script, wait_for_change=next_poll)
    )
    with anyio.fail_after(10):
        got = [line async for line in lines]
    assert got == ["one\n", "two\n", "three\n"]
    assert len(polls) == 3


async def test_a_notifier_wakes_who_took_its_event_before_the_notify() -> None:
    notifier = Notifier()
    notifier.notify()  # nobody waits: nothing is latched for later
    before = notifier.event
    assert not before.is_set()
    assert notifier.event is before  # every waiter until the notify shares it
    notifier.notify()
    assert before.is_set()
    after = notifier.event
    assert after is not before
    assert not after.is_set()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(after.wait)
            await anyio.lowlevel.checkpoint()
            notifier.notify()
