"""Benchmark 11: a sweep, M apps of ``true`` at most ``limit`` at a time, from one event loop.

M = 1000, limit = 50 (smoke: M = 20, limit = 5). ``seconds``: wall from the first submit to
the last app seen terminal; ``cpu_ms_per_app``: the driver's own CPU time (user + system)
over the same span, per app; ``threads``: the most OS threads seen in the driver (sampled
every 1 ms). Sides: ``ours_group`` is ``runner.group(max_concurrent=limit)``, the apps
started by ``await group.run(...)`` in a loop (each waits for a slot) and awaited by the
block's end; ``limiter`` is the loop a user writes without it: one task per app in a task
group, each ``async with anyio.CapacityLimiter(limit)`` around ``Runner.run`` and
``Runner.wait``. Issue 32's target: ``ours_group`` takes at most 1.2x ``limiter``'s
``seconds``, with one thread. Both run through ``get_runner()`` with default run options on
``local_cwd``, the scheduler's modules imported before the clock starts, app records in a
fresh state directory (``_harness.isolated_state_dir``).

``python benchmarks/bench_sweep.py [--smoke] [--trials N]`` prints the table and writes
``benchmarks/results/sweep.json`` (``sweep-smoke.json``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import (
    bench_args,
    driver_main,
    is_driver,
    isolated_state_dir,
    machine,
    orchestrate,
    sample_usage,
    save,
    table,
    threads_now,
)
from bench_many_apps import _clock, _res


def _sweep(p: dict[str, Any], group: bool) -> dict[str, Any]:
    """Run ``p["m"]`` apps of ``true``, ``p["limit"]`` at a time, through a group's
    ``max_concurrent`` (``group``) or a hand-written ``CapacityLimiter`` loop."""
    import anyio
    from _sides import ours_app, ours_module

    isolated_state_dir()
    get_runner = ours_module("asynctorchx.runner").get_runner
    m, limit = int(p["m"]), int(p["limit"])

    async def main() -> dict[str, Any]:
        peaks = [(threads_now(), 0)]
        async with get_runner() as runner:
            runner.scheduler_run_opts("local_cwd")  # imports the scheduler's modules first
            limiter = anyio.CapacityLimiter(limit)

            async def one(i: int) -> None:
                async with limiter:
                    handle = await runner.run(ours_app(f"s{i}", "true", []), "local_cwd")
                    await runner.wait(handle)

            start = _clock()
            async with anyio.create_task_group() as outer:
                outer.start_soon(sample_usage, peaks, False)  # threads only
                if group:
                    async with runner.group(max_concurrent=limit) as sweep:
                        for i in range(m):
                            await sweep.run(ours_app(f"s{i}", "true", []), "local_cwd")
                else:
                    async with anyio.create_task_group() as tasks:
                        for i in range(m):
                            tasks.start_soon(one, i)
                outer.cancel_scope.cancel()
            res = _res(m, start)
        return {**res, "threads": max(t for t, _ in peaks)}

    return anyio.run(main)


def ours_group(p: dict[str, Any]) -> dict[str, Any]:
    """The sweep through ``runner.group(max_concurrent=limit)``."""
    return _sweep(p, group=True)


def limiter(p: dict[str, Any]) -> dict[str, Any]:
    """The sweep through a hand-written ``anyio.CapacityLimiter`` loop."""
    return _sweep(p, group=False)


def run(smoke: bool, trials: int) -> list[dict[str, Any]]:
    """Orchestrate benchmark 11; returns summary rows."""
    case = {"m": 20, "limit": 5} if smoke else {"m": 1000, "limit": 50}
    return orchestrate(
        "11 sweep",
        Path(__file__),
        [case],
        ["seconds", "cpu_ms_per_app", "threads"],
        trials,
        sides=("ours_group", "limiter"),
        refs=("limiter",),
    )


if __name__ == "__main__":
    if is_driver():
        driver_main({"ours_group": ours_group, "limiter": limiter})
    else:
        ns = bench_args(default_trials=3)
        desc = machine()
        rows = run(ns.smoke, ns.trials)
        print(table(rows))
        save("sweep-smoke" if ns.smoke else "sweep", rows, desc)
