"""``Runner.events`` delivers every line exactly once across dropped and restarted readers.

The app writes while a reader takes a random number of events, drops the stream, and
resumes from the last cursor it got; some of the resumes happen in a new process (a
reader restarted elsewhere, as a web server behind a load balancer). Every stream must
come out whole, in order, each line once. The app writes lines of varied length (some
over one 64 KiB read) to stdout and stderr, so the resumes land inside read blocks.
"""

from __future__ import annotations

import json
import os
import random
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

import anyio
import pytest

from asynctorchx.runner import LogEvent, Runner, StateEvent, get_runner
from asynctorchx.specs.api import AppDef, AppState, Role, is_terminal
from tests.isolation import isolate_from_user_config

LIMIT = 120  # seconds: a safety bound, never a timing guess
LINES = 20_000  # per stream

#: Writes LINES numbered lines to stdout and to stderr, interleaved, in bursts; every
#: 500th line is 100 kB (longer than a read block), so blocks and lines do not align.
#: Halfway it waits for the file ``go`` (the test's signal that its readers were
#: dropped while the app was still writing), then writes the rest.
WRITER = textwrap.dedent(
    """
    import os, sys, time
    lines = int(sys.argv[1])
    for i in range(lines):
        if i == lines // 2:
            sys.stdout.flush()
            sys.stderr.flush()
            while not os.path.exists("go"):
                time.sleep(0.01)
        pad = "x" * (100_000 if i % 500 == 7 else i % 50)
        sys.stdout.write(f"out {i} {pad}\\n")
        sys.stderr.write(f"err {i} {pad}\\n")
        if i % 100 == 99:
            sys.stdout.flush()
            sys.stderr.flush()
            time.sleep(0.002)
    """
)

#: A reader in a process of its own: reads ``count`` events from ``cursor`` (``-``: the
#: start) and prints them as JSON lines, then leaves the stream.
READER = textwrap.dedent(
    """
    import json, sys
    import anyio
    from asynctorchx.runner import get_runner

    handle, cursor, count = sys.argv[1], sys.argv[2], int(sys.argv[3])

    async def main():
        async with get_runner(handle_signals=False) as runner:
            async with runner.events(handle, cursor=None if cursor == "-" else cursor) as events:
                taken = 0
                async for event in events:
                    print(event.to_json(), flush=True)
                    taken += 1
                    if taken == count:
                        return

    anyio.run(main)
    """
)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_from_user_config(tmp_path, monkeypatch)


def _expected(lines: int) -> dict[str, list[str]]:
    def pad(i: int) -> str:
        return "x" * (100_000 if i % 500 == 7 else i % 50)

    return {
        stream: [f"{name} {i} {pad(i)}\n" for i in range(lines)]
        for stream, name in (("stdout", "out"), ("stderr", "err"))
    }


class _Collected:
    """What a reader got so far: the lines per stream, the last cursor, the end."""

    def __init__(self) -> None:
        self.lines: dict[str, list[str]] = defaultdict(list)
        self.cursor: str | None = None
        self.cursors: list[str] = []
        self.final: AppState | None = None

    @property
    def line_count(self) -> int:
        return sum(map(len, self.lines.values()))

    def take(self, kind: str, cursor: str, stream: str, line: str, state: str) -> None:
        assert self.final is None, "an event after the terminal state"
        self.cursor = cursor
        self.cursors.append(cursor)
        if kind == "log":
            self.lines[stream].append(line)
        elif is_terminal(AppState[state]):
            self.final = AppState[state]


async def _read_here(runner: Runner, handle: str, got: _Collected, count: int) -> None:
    with anyio.fail_after(LIMIT):
        async with runner.events(handle, cursor=got.cursor) as events:
            taken = 0
            async for event in events:
                if isinstance(event, LogEvent):
                    got.take("log", event.cursor, event.stream, event.line, "")
                else:
                    assert isinstance(event, StateEvent)
                    got.take("state", event.cursor, "", "", event.state.name)
                taken += 1
                if got.line_count == LINES:  # the first half of both streams: let it go on
                    Path("go").touch()
                if taken == count:
                    return  # the reader drops the stream


async def _read_elsewhere(handle: str, got: _Collected, count: int) -> None:
    with anyio.fail_after(LIMIT):
        done = await anyio.run_process(
            [sys.executable, "-c", READER, handle, got.cursor or "-", str(count)],
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
    for text in done.stdout.decode().splitlines():
        event = json.loads(text)
        got.take(
            event["type"],
            event["cursor"],
            event.get("stream", ""),
            event.get("line", ""),
            event.get("state", ""),
        )


async def test_local_readers_dropped_and_restarted_anywhere_get_every_line_once() -> None:
    seed = random.randrange(1 << 32)
    chooser = random.Random(seed)
    app = AppDef(
        "once",
        [Role("w", ".", entrypoint=sys.executable, args=["-c", WRITER, str(LINES)])],
    )
    async with get_runner(handle_signals=False) as runner:
        handle = await runner.run(app, "local_cwd")
        got = _Collected()
        drops = running_drops = 0
        elsewhere = set(chooser.sample(range(40), 3))  # readers restarted in a new process
        while got.final is None:
            count = chooser.choice([1, 2, 7, chooser.randrange(1, 1000)])
            if drops in elsewhere:
                count = min(count, 50)
                if got.line_count + count >= LINES:  # it might wait for the second half
                    Path("go").touch()
                await _read_elsewhere(handle, got, count)
            else:
                await _read_here(runner, handle, got, count)
            drops += 1
            if not Path("go").exists():
                running_drops = drops
    assert got.final == AppState.SUCCEEDED, f"seed {seed}"
    assert running_drops >= 20, f"seed {seed}: {running_drops} drops while the app wrote"
    assert got.cursors == sorted(got.cursors), f"seed {seed}: cursors out of order"
    assert len(set(got.cursors)) == len(got.cursors), f"seed {seed}: an event twice"
    expected = _expected(LINES)
    for stream in ("stdout", "stderr"):
        lines = got.lines[stream]
        assert len(lines) == len(expected[stream]), f"seed {seed}, {stream}, {drops} drops"
        assert lines == expected[stream], f"seed {seed}, {stream}"
