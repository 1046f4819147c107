"""Benchmark 1: replica exit to ``wait`` returning (local_cwd).

The replica is ``date +%s.%N`` writing the wall clock to a file (``sh -c 'exec date ...'``,
so no shell lingers): its write is its last act, and ``date`` exits within a fraction of a
millisecond of it (a Python replica's interpreter shutdown after its stamp took 5-10 ms here,
which would hide what we measure). The latency is the wall time from that stamp to ``wait``
returning. Floor: ``await process.wait()``
on a bare anyio process. TorchX: ``Runner``-free ``LocalScheduler`` polled with
``describe`` every ``wait_interval`` seconds (0.1, as in the issue's 139 ms figure).
Each driver process measures ``exits`` apps one after the other (10 in a full run: 10
trials give the issue's 100 samples, for median and p99). Metric ``latency_ms``
(milliseconds).
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import bench_args, default_skips, driver_main, is_driver, orchestrate, table

#: ``sh -c STAMP <file>``: ``date`` replaces the shell and writes the clock as its last act.
STAMP = 'exec date +%s.%N > "$0"'


def _stamp_file() -> str:
    import tempfile

    fd, path = tempfile.mkstemp(prefix="atx-stamp-")
    os.close(fd)
    atexit.register(os.unlink, path)
    return path


def _latency(path: str, t_done: float) -> float:
    return (t_done - float(Path(path).read_text())) * 1000.0


def ours(p: dict[str, Any]) -> dict[str, Any]:
    """Stamp-to-``wait`` latency of ``p["exits"]`` apps with our ``local_cwd`` scheduler:
    ``latency_ms`` (a list).
    """
    import anyio
    from _sides import ours_app, ours_cwd_scheduler, tmpdir

    async def main() -> dict[str, Any]:
        latencies: list[float] = []
        async with ours_cwd_scheduler() as sched:
            for _ in range(int(p["exits"])):
                stamp = _stamp_file()
                app_id = await sched.submit(
                    ours_app("wl", "sh", ["-c", STAMP, stamp]), {"log_dir": tmpdir()}
                )
                await sched.wait(app_id)
                latencies.append(_latency(stamp, time.time()))
        return {"latency_ms": latencies}

    return anyio.run(main)


def floor(p: dict[str, Any]) -> dict[str, Any]:
    """Stamp-to-``process.wait()`` latency of ``p["exits"]`` bare anyio processes:
    ``latency_ms`` (a list).
    """
    import anyio

    async def main() -> dict[str, Any]:
        latencies: list[float] = []
        for _ in range(int(p["exits"])):
            stamp = _stamp_file()
            async with await anyio.open_process(["sh", "-c", STAMP, stamp]) as proc:
                await proc.wait()
                latencies.append(_latency(stamp, time.time()))
        return {"latency_ms": latencies}

    return anyio.run(main)


def torchx(p: dict[str, Any]) -> dict[str, Any]:
    """Stamp-to-terminal latency of ``p["exits"]`` apps with TorchX polling ``describe`` every
    ``p["wait_interval"]`` s: ``latency_ms`` (a list).
    """
    from _sides import tmpdir, tx_app, tx_cwd_scheduler
    from torchx.specs import AppState

    sched = tx_cwd_scheduler()
    interval = float(p["wait_interval"])
    latencies: list[float] = []
    for _ in range(int(p["exits"])):
        stamp = _stamp_file()
        app_id = sched.submit(tx_app("wl", "sh", ["-c", STAMP, stamp]), {"log_dir": tmpdir()})
        # TorchX's Runner.wait loop: describe, then sleep wait_interval until terminal.
        while True:
            desc = sched.describe(app_id)
            if desc is not None and desc.state in (
                AppState.SUCCEEDED,
                AppState.FAILED,
                AppState.CANCELLED,
            ):
                latencies.append(_latency(stamp, time.time()))
                break
            time.sleep(interval)
    sched.close()
    return {"latency_ms": latencies}


def run(smoke: bool, trials: int) -> list[dict[str, Any]]:
    """Orchestrate benchmark 1; returns summary rows."""
    return orchestrate(
        "1 exit->wait",
        Path(__file__),
        [{"wait_interval": 0.1, "exits": 10}],
        ["latency_ms"],
        trials,
        skip=default_skips(),
    )


if __name__ == "__main__":
    if is_driver():
        driver_main({"ours": ours, "floor": floor, "torchx": torchx})
    else:
        ns = bench_args(default_trials=10)
        print(table(run(ns.smoke, ns.trials)))
