"""Benchmark 3: N replicas of ``true``, ``submit`` to ``wait`` returning; peak RSS, threads, fds.

N = 1, 10, 100, 1000 (smoke: 1, 10). ``seconds`` is wall time from submit to the
wait's return; ``rss_mb`` the driver's peak RSS (MB); ``threads`` and ``fds`` the most
seen in the driver while the replicas ran (sampled every 1 ms by a task for ours and the floor,
at each ``describe`` poll for TorchX). Python 3.11's asyncio reaps children with one thread per
child (``ThreadedChildWatcher``), so the anyio floor itself is not one thread.
Floor: spawning N ``true`` with ``anyio.open_process`` in one task group and reaping them.
TorchX: ``LocalScheduler.submit`` then its wait loop at ``wait_interval=0.1``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import (
    bench_args,
    default_skips,
    driver_main,
    fds_now,
    is_driver,
    orchestrate,
    sample_usage,
    self_maxrss_mb,
    table,
    threads_now,
)

METRICS = ["seconds", "rss_mb", "threads", "fds"]


def _res(t0: float, peaks: list[tuple[int, int]]) -> dict[str, Any]:
    return {
        "seconds": time.perf_counter() - t0,
        "rss_mb": self_maxrss_mb(),
        "threads": max(p[0] for p in peaks),
        "fds": max(p[1] for p in peaks),
    }


def ours(p: dict[str, Any]) -> dict[str, Any]:
    """One app of ``p["n"]`` replicas of ``true``, submit to ``wait``, with our scheduler:
    ``seconds``, ``rss_mb``, ``threads``, ``fds``.
    """
    import anyio
    from _sides import ours_app, ours_cwd_scheduler, tmpdir

    async def main() -> dict[str, Any]:
        app = ours_app("sc", "true", [], num_replicas=int(p["n"]))
        async with ours_cwd_scheduler() as sched:
            t0 = time.perf_counter()
            peaks: list[tuple[int, int]] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(sample_usage, peaks)
                app_id = await sched.submit(app, {"log_dir": tmpdir()})
                peaks.append((threads_now(), fds_now()))
                await sched.wait(app_id)
                tg.cancel_scope.cancel()
            res = _res(t0, [*peaks, (threads_now(), fds_now())])
        return res

    return anyio.run(main)


def floor(p: dict[str, Any]) -> dict[str, Any]:
    """Spawn and reap ``p["n"]`` ``true`` with anyio: ``seconds``, ``rss_mb``, ``threads``,
    ``fds``.
    """
    import anyio

    async def main() -> dict[str, Any]:
        peaks: list[tuple[int, int]] = []
        t0 = time.perf_counter()
        procs = []
        async with anyio.create_task_group() as outer:
            outer.start_soon(sample_usage, peaks)
            for _ in range(int(p["n"])):
                procs.append(
                    await anyio.open_process(["true"], stdin=None, stdout=None, stderr=None)
                )
            peaks.append((threads_now(), fds_now()))
            async with anyio.create_task_group() as tg:
                for proc in procs:
                    tg.start_soon(proc.wait)
            outer.cancel_scope.cancel()
        res = _res(t0, [*peaks, (threads_now(), fds_now())])
        for proc in procs:
            await proc.aclose()
        return res

    return anyio.run(main)


def torchx(p: dict[str, Any]) -> dict[str, Any]:
    """One app of ``p["n"]`` replicas with TorchX, submit then its 0.1 s wait loop: ``seconds``,
    ``rss_mb``, ``threads``, ``fds``.
    """
    from _sides import tmpdir, tx_app, tx_cwd_scheduler
    from torchx.specs import AppState

    sched = tx_cwd_scheduler()
    app = tx_app("sc", "true", [], num_replicas=int(p["n"]))
    t0 = time.perf_counter()
    app_id = sched.submit(app, {"log_dir": tmpdir()})
    peaks = [(threads_now(), fds_now())]
    while True:
        desc = sched.describe(app_id)
        peaks.append((threads_now(), fds_now()))
        if desc is not None and desc.state in (
            AppState.SUCCEEDED,
            AppState.FAILED,
            AppState.CANCELLED,
        ):
            break
        time.sleep(0.1)
    res = _res(t0, [*peaks, (threads_now(), fds_now())])
    sched.close()
    return res


def run(smoke: bool, trials: int) -> list[dict[str, Any]]:
    """Orchestrate benchmark 3; returns summary rows."""
    ns = [1, 10] if smoke else [1, 10, 100, 1000]
    return orchestrate(
        "3 N replicas",
        Path(__file__),
        # TorchX takes ~1 min at N = 1000 (a thread and 5 fds per replica): 2 trials there.
        [{"n": n, "max_trials": 2} if n >= 1000 else {"n": n} for n in ns],
        METRICS,
        trials,
        skip=default_skips(),
    )


if __name__ == "__main__":
    if is_driver():
        driver_main({"ours": ours, "floor": floor, "torchx": torchx})
    else:
        ns = bench_args(default_trials=5)
        print(table(run(ns.smoke, ns.trials)))
