"""``Runner.events`` delivers every line exactly once across dropped and restarted readers.

The app writes while a reader takes a random number of events, drops the stream, and
resumes from the last cursor it got; some of the resumes happen in a new process (a
reader restarted elsewhere, as a web server behind a load balancer). Every stream must
come out whole, in order, each line once. The app writes lines of varied length (some
over one 124 KiB read) to stdout and stderr, so the resumes land inside read blocks.
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
from asynctorchx.specs.api import (
    AppDef,
    AppState,
    BindMount,
    Resource,
    Role,
    is_terminal,
    parse_app_handle,
)
from tests.isolation import isolate_from_user_config
from tests.schedulers.kubernetes.bare_cluster import BareCluster
from tests.schedulers.kubernetes.conftest import BARE, IMAGE, require_real_cluster
from tests.schedulers.slurm.conftest import SlurmCluster
from tests.schedulers.slurm.conftest import slurm_cluster as slurm_cluster  # the fixture

LIMIT = 120  # seconds: a safety bound, never a timing guess
LINES = 10_000  # per stream

#: Writes LINES numbered lines to stdout and to stderr, interleaved, in bursts; every
#: 500th line is 200 kB (longer than a read block), so blocks and lines do not align.
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
        pad = "x" * (200_000 if i % 500 == 7 else i % 50)
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
                    print(json.dumps(event.to_json()), flush=True)
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
        return "x" * (200_000 if i % 500 == 7 else i % 50)

    return {
        stream: [f"{name} {i} {pad(i)}\n" for i in range(lines)]
        for stream, name in (("stdout", "out"), ("stderr", "err"))
    }


class _Collected:
    """What a reader got so far: the lines per stream, the last cursor, the end.

    Args:
        go: the file whose creation lets the app write its second half.
        half: the lines of both streams before the app waits for ``go``.
    """

    def __init__(self, go: Path, half: int) -> None:
        self.go = go
        self.half = half
        self.lines: dict[str, list[str]] = defaultdict(list)
        self.cursor: str | None = None
        self.cursors: list[str] = []
        self.final: AppState | None = None
        self._progress = anyio.Event()

    async def wait_for_lines(self, count: int) -> None:
        """Await the reader having ``count`` lines (of every stream together)."""
        while self.line_count < count:
            progress = self._progress = anyio.Event()
            await progress.wait()

    @property
    def line_count(self) -> int:
        return sum(map(len, self.lines.values()))

    def take(self, kind: str, cursor: str, stream: str, line: str, state: str) -> None:
        assert self.final is None, "an event after the terminal state"
        self.cursor = cursor
        self.cursors.append(cursor)
        self._progress.set()
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
                if got.line_count == got.half:  # the first half of both streams: go on
                    got.go.touch()
                if taken == count:
                    return  # the reader drops the stream


async def _read_elsewhere(handle: str, got: _Collected, count: int) -> None:
    with anyio.fail_after(LIMIT):
        done = await anyio.run_process(
            [sys.executable, "-c", READER, handle, got.cursor or "-", str(count)],
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    for text in done.stdout.decode().splitlines():
        event = json.loads(text)
        got.take(
            event["type"],
            event["cursor"],
            event.get("stream", ""),
            event.get("line", ""),
            event.get("state", ""),
        )


async def _drop_and_resume(
    runner: Runner, handle: str, got: _Collected, restarts: int = 3, among: int = 40
) -> tuple[int, int]:
    """Read the app's events to their end, dropping the stream after a random number
    of events each time and resuming from the last cursor; ``restarts`` of the resumes
    (among the first ``among``) in a new process. Returns the seed and how many drops
    came before ``got.go`` existed (while the app was still writing)."""
    seed = random.randrange(1 << 32)
    chooser = random.Random(seed)
    drops = running_drops = 0
    elsewhere = set(chooser.sample(range(among), restarts))
    while got.final is None:
        # under 200 events a read, so the thresholds on drops below hold for every seed
        count = chooser.choice([1, 2, 7, chooser.randrange(1, 200)])
        if drops in elsewhere:
            count = min(count, 50)
            if got.line_count + count >= got.half:  # it might wait for the second half
                got.go.touch()
            await _read_elsewhere(handle, got, count)
        else:
            await _read_here(runner, handle, got, count)
        drops += 1
        if not got.go.exists():
            running_drops = drops
    return seed, running_drops


def _assert_once(got: _Collected, expected: dict[str, list[str]], seed: int) -> None:
    assert got.final == AppState.SUCCEEDED, f"seed {seed}"
    assert got.cursors == sorted(got.cursors), f"seed {seed}: cursors out of order"
    assert len(set(got.cursors)) == len(got.cursors), f"seed {seed}: an event twice"
    for stream, lines in expected.items():
        assert len(got.lines[stream]) == len(lines), f"seed {seed}, {stream}"
        assert got.lines[stream] == lines, f"seed {seed}, {stream}"


async def test_local_readers_dropped_and_restarted_anywhere_get_every_line_once() -> None:
    app = AppDef(
        "once",
        [Role("w", ".", entrypoint=sys.executable, args=["-c", WRITER, str(LINES)])],
    )
    async with get_runner(handle_signals=False) as runner:
        handle = await runner.run(app, "local_cwd")
        got = _Collected(Path("go"), LINES)
        seed, running_drops = await _drop_and_resume(runner, handle, got)
    assert running_drops >= 20, f"seed {seed}: {running_drops} drops while the app wrote"
    _assert_once(got, _expected(LINES), seed)


#: The shell's writer (a container or a cluster node has no Python): ``$1`` numbered
#: lines to stdout and stderr, waiting halfway for the file ``$2``.
SH_WRITER = (
    'i=0; while [ "$i" -lt "$1" ]; do'
    ' if [ "$i" -eq $(($1 / 2)) ]; then while [ ! -e "$2" ]; do sleep 0.05; done; fi;'
    ' echo "out $i"; echo "err $i" >&2; i=$((i + 1)); done'
)
SH_LINES = 1000  # per stream


def _sh_expected() -> dict[str, list[str]]:
    return {
        stream: [f"{name} {i}\n" for i in range(SH_LINES)]
        for stream, name in (("stdout", "out"), ("stderr", "err"))
    }


@pytest.mark.docker
async def test_local_docker_readers_dropped_and_restarted_get_every_line_once(
    docker_image: str, docker_apps: list[str], tmp_path: Path
) -> None:
    signal = tmp_path / "signal"
    signal.mkdir()
    role = Role(
        "w",
        docker_image,
        entrypoint="sh",
        args=["-c", SH_WRITER, "sh", str(SH_LINES), "/signal/go"],
        mounts=[BindMount(str(signal), "/signal")],
    )
    async with get_runner(handle_signals=False) as runner:
        handle = await runner.run(AppDef("once", [role]), "local_docker")
        docker_apps.append(parse_app_handle(handle).app_id)
        got = _Collected(signal / "go", SH_LINES)
        seed, running_drops = await _drop_and_resume(runner, handle, got)
    assert running_drops >= 5, f"seed {seed}: {running_drops} drops while the app wrote"
    _assert_once(got, _sh_expected(), seed)


async def test_slurm_readers_dropped_and_restarted_get_every_line_once(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    job_dir = tmp_path / "job"
    role = Role(
        "w",
        "",
        entrypoint="sh",
        args=["-c", SH_WRITER, "sh", str(SH_LINES), str(tmp_path / "go")],
        resource=Resource(cpu=1, gpu=0, memMB=100),
    )
    async with get_runner(handle_signals=False) as runner:
        handle = await runner.run(AppDef("once", [role]), "slurm", {"job_dir": str(job_dir)})
        try:
            got = _Collected(tmp_path / "go", SH_LINES)
            seed, running_drops = await _drop_and_resume(runner, handle, got, restarts=1)
        finally:
            with anyio.CancelScope(shield=True):
                await runner.cancel(handle)
    assert running_drops >= 2, f"seed {seed}: {running_drops} drops while the app wrote"
    _assert_once(got, _sh_expected(), seed)


async def test_kubernetes_readers_dropped_and_restarted_while_the_pod_logs_get_every_line_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the real API server, its log proxy in front of the kubelet stand-in; two of the
    first five resumes in a new process, which finds the cluster through ``KUBECONFIG``."""
    kubeconfig = require_real_cluster()
    if not BARE:
        pytest.skip("writes the pod's log through the kubelet stand-in: a bare server only")
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    lines = 1000
    app = AppDef("once", [Role("role0", IMAGE, entrypoint="sh", args=["-c", "true"])])
    async with (
        BareCluster.running(kubeconfig) as cluster,
        get_runner(handle_signals=False) as runner,
    ):
        handle = await runner.run(app, "kubernetes", {"queue": "default"})
        app_id = parse_app_handle(handle).app_id
        pod = f"{app_id.partition(':')[2]}-role0-0-0"
        got = _Collected(tmp_path / "go", 2 * lines)  # never reached: the writer ends it
        try:
            async with anyio.create_task_group() as app_side:

                async def write() -> None:
                    """The pod logs in bursts, some lines sharing one time, each burst once
                    the reader is within 50 lines of the last; then it ends."""
                    await cluster.start_pod(pod)
                    for first in range(0, lines, 40):
                        burst = [str(n) for n in range(first, first + 40)]
                        cluster.write_log(pod, *burst[:20])
                        cluster.write_log(pod, *burst[20:], same_time=True)
                        await got.wait_for_lines(first + 40 - 50)
                    got.go.touch()
                    await cluster.finish_pod(pod, 0)

                app_side.start_soon(write)
                seed, running_drops = await _drop_and_resume(
                    runner, handle, got, restarts=2, among=5
                )
        finally:
            with anyio.CancelScope(shield=True):
                await runner.delete(handle)
    # the restarts were among the first five drops, all while the pod logged
    assert running_drops >= 5, f"seed {seed}: {running_drops} drops while the pod logged"
    _assert_once(got, {"combined": [f"{n}\n" for n in range(lines)]}, seed)
