"""Benchmark 2: a line printed by a replica to ``log_iter(should_tail=True)`` yielding it.

The replica prints ``K`` lines, each carrying its ``time.time()``, 20 ms apart (the gap is
the workload's, so each line is read on its own). Latency per line = yield time minus stamp;
every line is a sample (a full run: 7 trials of 50 lines, 350 samples, for median and
p99). Floor: reading the child's stdout pipe directly.
TorchX: ``LocalScheduler.log_iter(should_tail=True)`` (it re-reads the file on a poll).
Metric ``latency_ms`` (milliseconds).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import bench_args, default_skips, driver_main, is_driver, orchestrate, table

EMIT = (
    "import time,sys\n"
    "for i in range(int(sys.argv[1])):\n"
    "    print(repr(time.time()), flush=True); time.sleep(0.02)\n"
)


def _lat(lines: list[tuple[str, float]], k: int) -> dict[str, Any]:
    """Every line's (yield time - stamp) in ms; a note when not all ``k`` lines came back."""
    vals = [(t - float(s)) * 1000.0 for s, t in lines if s.strip()]
    note = None if len(vals) == k else f"got {len(vals)} of {k} lines"
    return {"latency_ms": vals, "lines": len(vals), "note": note}


def ours(p: dict[str, Any]) -> dict[str, Any]:
    """Tail ``p["k"]`` stamped lines with our ``log_iter(should_tail=True)``: each line's
    ``latency_ms``.
    """
    import anyio
    from _sides import ours_app, ours_cwd_scheduler, tmpdir

    async def main() -> dict[str, Any]:
        app = ours_app("lt", sys.executable, ["-u", "-c", EMIT, str(p["k"])])
        got: list[tuple[str, float]] = []
        async with ours_cwd_scheduler() as sched:
            app_id = await sched.submit(app, {"log_dir": tmpdir()})
            async for line in sched.log_iter(app_id, "r", 0, should_tail=True):
                got.append((line.strip(), time.time()))
        return _lat(got, int(p["k"]))

    return anyio.run(main)


def floor(p: dict[str, Any]) -> dict[str, Any]:
    """Read ``p["k"]`` stamped lines from the child's stdout pipe (anyio): each line's
    ``latency_ms``.
    """
    import anyio
    from anyio.streams.text import TextReceiveStream

    async def main() -> dict[str, Any]:
        got: list[tuple[str, float]] = []
        async with await anyio.open_process(
            [sys.executable, "-u", "-c", EMIT, str(p["k"])]
        ) as proc:
            assert proc.stdout is not None
            buf = ""
            async for chunk in TextReceiveStream(proc.stdout):
                t = time.time()
                buf += chunk
                *done, buf = buf.split("\n")
                got.extend((d, t) for d in done)
            await proc.wait()
        return _lat(got, int(p["k"]))

    return anyio.run(main)


def torchx(p: dict[str, Any]) -> dict[str, Any]:
    """Tail ``p["k"]`` stamped lines with TorchX's ``log_iter(should_tail=True)``: each line's
    ``latency_ms``.
    """
    from _sides import tmpdir, tx_app, tx_cwd_scheduler

    sched = tx_cwd_scheduler()
    app = tx_app("lt", sys.executable, ["-u", "-c", EMIT, str(p["k"])])
    app_id = sched.submit(app, {"log_dir": tmpdir()})
    got = [(line.strip(), time.time()) for line in sched.log_iter(app_id, "r", 0, should_tail=True)]
    sched.close()
    return _lat(got, int(p["k"]))


def run(smoke: bool, trials: int) -> list[dict[str, Any]]:
    """Orchestrate benchmark 2; returns summary rows."""
    return orchestrate(
        "2 line->log_iter",
        Path(__file__),
        [{"k": 10 if smoke else 50}],
        ["latency_ms"],
        trials,
        skip=default_skips(),
    )


if __name__ == "__main__":
    if is_driver():
        driver_main({"ours": ours, "floor": floor, "torchx": torchx})
    else:
        ns = bench_args(default_trials=7)
        print(table(run(ns.smoke, ns.trials)))
