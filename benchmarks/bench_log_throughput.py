"""Benchmark 5: reading back a finished replica's log with ``log_iter`` (throughput).

The replica writes ``lines`` lines of ``width`` bytes to stdout (100,000 x 80 B; and
1 GB as 10 M x 100 B in the full run only); once it has exited the log is read back.
Metric ``mb_per_s`` (MB/s of log text read, higher is better) and ``seconds``.
Two floors, the same log bytes written the same way in the same run:

* ``floor``: ``cat`` of the log file into a pipe drained by the driver (bytes, no lines);
* ``async_floor``: the limit of ``log_iter``'s contract (one ``str`` per line through an
  async generator): a bare async generator yielding the lines of the file as Python's
  own text file makes them (``newline="\\n"``, ``errors="replace"``, 1 MiB buffer,
  64 KiB decode chunks: the fastest of the sizes tried, 256 KiB chunks cross glibc's
  mmap threshold and ran 30-50% slower), with no follow, no filter, no line-length
  limit.

Ours' rows carry ``vs_async_floor`` (ours / async floor, medians). TorchX:
``LocalScheduler.log_iter`` (non-tailing).

Beside ``log_iter`` (``ours``), the paths a user of the Runner takes, each through
``get_runner()`` with its defaults over the same finished app (issue 21):

* ``runner_log_lines``: ``Runner.log_lines`` of the replica;
* ``runner_events``: ``Runner.events`` of the app, to its end (state events too, one log
  event per line);
* ``runner_resume``: ``Runner.events`` resumed from the cursor of the event two before
  the end, to the end (``seconds`` only: the cost of a resume, which must not grow with
  the log).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import SIDES, bench_args, default_skips, driver_main, is_driver, orchestrate, table

WRITE = (
    "import sys\n"
    "n, w = int(sys.argv[1]), int(sys.argv[2])\n"
    "line = ('x' * (w - 1) + '\\n').encode()\n"
    "out = sys.stdout.buffer\n"
    "for _ in range(n // 1000):\n"
    "    out.write(line * 1000)\n"
    "out.write(line * (n % 1000))\n"
)


def _mb(p: dict[str, Any]) -> float:
    return int(p["lines"]) * int(p["width"]) / 1e6


def ours(p: dict[str, Any]) -> dict[str, Any]:
    """Read back ``p["lines"]`` lines of ``p["width"]`` bytes with our ``log_iter``: ``seconds``,
    ``mb_per_s`` (MB = 10^6 B).
    """
    import anyio
    from _sides import ours_app, ours_cwd_scheduler, tmpdir

    async def main() -> dict[str, Any]:
        app = ours_app("tp", sys.executable, ["-c", WRITE, str(p["lines"]), str(p["width"])])
        logs = tmpdir()
        async with ours_cwd_scheduler() as sched:
            app_id = await sched.submit(app, {"log_dir": logs})
            await sched.wait(app_id)
            t0 = time.perf_counter()
            n = 0
            async for _line in sched.log_iter(app_id, "r", 0):
                n += 1
            secs = time.perf_counter() - t0
        shutil.rmtree(logs, ignore_errors=True)
        return {
            "seconds": secs,
            "mb_per_s": _mb(p) / secs,
            "note": None if n == p["lines"] else f"read {n} lines",
        }

    return anyio.run(main)


async def _finished_app(runner: Any, p: dict[str, Any], logs: str) -> str:
    """Run the writer through ``runner`` (``local_cwd``) to its end; return its handle."""
    from _sides import ours_app

    app = ours_app("tp", sys.executable, ["-c", WRITE, str(p["lines"]), str(p["width"])])
    handle: str = await runner.run(app, "local_cwd", {"log_dir": logs})
    await runner.wait(handle, wait_interval=0.1)
    return handle


def _runner_side(read: Any) -> Any:
    """A side reading a finished app with ``read(runner, handle)`` through ``get_runner()``:
    ``seconds``, ``mb_per_s``."""

    def side(p: dict[str, Any]) -> dict[str, Any]:
        import anyio
        from _sides import ours_module, tmpdir

        get_runner = ours_module("asynctorchx.runner").get_runner

        async def main() -> dict[str, Any]:
            logs = tmpdir()
            async with get_runner() as runner:
                handle = await _finished_app(runner, p, logs)
                t0 = time.perf_counter()
                n = await read(runner, handle)
                secs = time.perf_counter() - t0
            shutil.rmtree(logs, ignore_errors=True)
            return {
                "seconds": secs,
                "mb_per_s": _mb(p) / secs,
                "note": None if n == p["lines"] else f"read {n} lines",
            }

        return anyio.run(main)

    return side


async def _log_lines(runner: Any, handle: str) -> int:
    n = 0
    async for _line in runner.log_lines(handle, "r", 0):
        n += 1
    return n


async def _events(runner: Any, handle: str) -> int:
    n = 0
    async with runner.events(handle) as events:
        async for event in events:
            n += event.kind == "log"
    return n


def runner_resume(p: dict[str, Any]) -> dict[str, Any]:
    """Resume ``Runner.events`` two events before the end of a finished app: ``seconds``
    of each of 5 resumes, after a garbage collection (reading the whole stream first made
    a million events, whose collection would otherwise land in the first resume)."""
    import gc

    import anyio
    from _sides import ours_module, tmpdir

    get_runner = ours_module("asynctorchx.runner").get_runner

    async def main() -> dict[str, Any]:
        logs = tmpdir()
        async with get_runner() as runner:
            handle = await _finished_app(runner, p, logs)
            cursors = []
            async with runner.events(handle) as events:
                async for event in events:
                    cursors.append(event.cursor)
                    del cursors[:-3]
            gc.collect()
            secs = []
            for _ in range(5):
                t0 = time.perf_counter()
                async with runner.events(handle, cursor=cursors[0]) as events:
                    rest = [event async for event in events]
                secs.append(time.perf_counter() - t0)
        shutil.rmtree(logs, ignore_errors=True)
        return {
            "seconds": secs,
            "note": None if len(rest) == 2 else f"resumed with {len(rest)} events, not 2",
        }

    return anyio.run(main)


def floor(p: dict[str, Any]) -> dict[str, Any]:
    """``cat`` the same amount of log into a pipe drained in 1 MiB reads: ``seconds``,
    ``mb_per_s``.
    """
    from _sides import tmpdir

    path = os.path.join(tmpdir(), "stdout")
    with open(path, "wb") as f:
        subprocess.run(
            [sys.executable, "-c", WRITE, str(p["lines"]), str(p["width"])], stdout=f, check=True
        )
    t0 = time.perf_counter()
    with subprocess.Popen(["cat", path], stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        while proc.stdout.read(1 << 20):
            pass
    secs = time.perf_counter() - t0
    os.unlink(path)
    return {"seconds": secs, "mb_per_s": _mb(p) / secs}


async def _bare_lines(path: str) -> Any:
    """The async-generator floor: the file's lines, as Python's text file makes them."""
    with open(path, encoding="utf-8", errors="replace", newline="\n", buffering=1 << 20) as f:
        f._CHUNK_SIZE = 1 << 16  # type: ignore[attr-defined]  # decode 64 KiB at a time
        for line in f:
            yield line


def async_floor(p: dict[str, Any]) -> dict[str, Any]:
    """Read the same amount of log with a bare async generator (:func:`_bare_lines`):
    ``seconds``, ``mb_per_s``.
    """
    import anyio
    from _sides import tmpdir

    path = os.path.join(tmpdir(), "stdout")
    with open(path, "wb") as f:
        subprocess.run(
            [sys.executable, "-c", WRITE, str(p["lines"]), str(p["width"])], stdout=f, check=True
        )

    async def main() -> tuple[float, int]:
        t0 = time.perf_counter()
        n = 0
        async for _line in _bare_lines(path):
            n += 1
        return time.perf_counter() - t0, n

    secs, n = anyio.run(main)
    os.unlink(path)
    return {
        "seconds": secs,
        "mb_per_s": _mb(p) / secs,
        "note": None if n == p["lines"] else f"read {n} lines",
    }


def torchx(p: dict[str, Any]) -> dict[str, Any]:
    """Read back the log with TorchX's ``log_iter``: ``seconds``, ``mb_per_s``."""
    from _sides import tmpdir, tx_app, tx_cwd_scheduler
    from torchx.specs import AppState

    sched = tx_cwd_scheduler()
    app = tx_app("tp", sys.executable, ["-c", WRITE, str(p["lines"]), str(p["width"])])
    logs = tmpdir()
    app_id = sched.submit(app, {"log_dir": logs})
    while True:
        desc = sched.describe(app_id)
        if desc is not None and desc.state in (
            AppState.SUCCEEDED,
            AppState.FAILED,
            AppState.CANCELLED,
        ):
            break
        time.sleep(0.1)
    t0 = time.perf_counter()
    n = sum(1 for _ in sched.log_iter(app_id, "r", 0))
    secs = time.perf_counter() - t0
    sched.close()
    shutil.rmtree(logs, ignore_errors=True)
    return {
        "seconds": secs,
        "mb_per_s": _mb(p) / secs,
        "note": None if n == p["lines"] else f"read {n} lines",
    }


def run(smoke: bool, trials: int) -> list[dict[str, Any]]:
    """Orchestrate benchmark 5; returns summary rows."""
    cases = [{"lines": 10_000 if smoke else 100_000, "width": 80}]
    if not smoke:
        cases.append({"lines": 10_000_000, "width": 100, "max_trials": 2})  # 1 GB
    rows = orchestrate(
        "5 log throughput",
        Path(__file__),
        cases,
        ["mb_per_s", "seconds"],
        trials,
        sides=(*SIDES, "async_floor"),
        skip=default_skips(),
    )
    # the Runner's paths beside log_iter and the floor, 1,000,000 x 100 B (issue 21), and
    # the resume at 1,000 lines, whose time the resume at 1,000,000 must stay within 2x of
    runner_cases: list[dict[str, Any]] = [
        {"lines": 1_000 if smoke else 1_000_000, "width": 100},
        {"lines": 1_000, "width": 100, "runner": "resume only"},
    ]
    runner_sides = ("ours", "async_floor", "runner_log_lines", "runner_events", "runner_resume")
    rows += orchestrate(
        "5 log throughput",
        Path(__file__),
        runner_cases[:1],
        ["mb_per_s", "seconds"],
        trials,
        sides=runner_sides,
        refs=("async_floor",),
    )
    if not smoke:
        rows += orchestrate(
            "5 log throughput",
            Path(__file__),
            runner_cases[1:],
            ["seconds"],
            trials,
            sides=("runner_resume",),
            refs=(),
        )
    _add_async_floor_ratio(rows)
    return rows


def _add_async_floor_ratio(rows: list[dict[str, Any]]) -> None:
    """Give ours' ``mb_per_s`` rows ``vs_async_floor`` (ours / async floor, medians) and a note."""
    floors = {
        r["case"]: r["median"]
        for r in rows
        if r["side"] == "async_floor" and r["metric"] == "mb_per_s" and r.get("median")
    }
    for r in rows:
        if r["side"] != "async_floor" and r["metric"] == "mb_per_s" and "median" in r:
            floor_mb = floors.get(r["case"])
            if floor_mb:
                r["vs_async_floor"] = r["median"] / floor_mb
                r.setdefault("note", f"{r['vs_async_floor']:.0%} of the async-generator floor")


if __name__ == "__main__":
    if is_driver():
        driver_main(
            {
                "ours": ours,
                "floor": floor,
                "torchx": torchx,
                "async_floor": async_floor,
                "runner_log_lines": _runner_side(_log_lines),
                "runner_events": _runner_side(_events),
                "runner_resume": runner_resume,
            }
        )
    else:
        ns = bench_args(default_trials=3)
        print(table(run(ns.smoke, ns.trials)))
