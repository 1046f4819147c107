"""The cost of tying replicas to the host: N replicas of ``true``, with and without the
watchdog (issue 12, item 6; issue 15).

N = 1, 100, 1000 (smoke: 1, 100). Both sides run our ``local_cwd`` scheduler under
asyncio: one app of N replicas of ``true``, ``seconds`` from ``submit`` to ``wait``
returning, and ``spawn_ms`` the same per replica (milliseconds). ``watchdog`` ties
each replica's process group to the host through its watchdog process (the default, see
``asynctorchx.schedulers.local._parent_death``: one write to a pipe per start and one
per reap, the watchdog itself started once per process, inside the timing);
``direct`` starts replicas untied (the switch off). TorchX does not tie its replicas:
its side is not run.

``python benchmarks/bench_spawn.py [--smoke] [--trials N]`` prints the table and writes
``benchmarks/results/spawn.json`` (``spawn-smoke.json``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import (
    Unavailable,
    bench_args,
    driver_main,
    is_driver,
    orchestrate,
    table,
    write_json,
)

METRICS = ["seconds", "spawn_ms"]
SIDES = ("watchdog", "direct")


def _trial(p: dict[str, Any], tied: bool) -> dict[str, Any]:
    """One app of ``p["n"]`` replicas of ``true``, submit to ``wait``."""
    import anyio
    from _sides import ours_app, ours_cfg, ours_cwd_scheduler, ours_module

    parent_death = ours_module("asynctorchx.schedulers.local._parent_death")
    parent_death.enabled = tied
    n = int(p["n"])

    async def main() -> dict[str, Any]:
        app = ours_app("spawn", "true", [], num_replicas=n)
        async with ours_cwd_scheduler() as scheduler:
            t0 = time.perf_counter()
            app_id = await scheduler.submit(app, ours_cfg())
            response = await scheduler.wait(app_id)
            seconds = time.perf_counter() - t0
        if tied and parent_death.watchdog_pid() is None:
            raise Unavailable("no watchdog on this machine")
        if response is None or response.state.name != "SUCCEEDED":
            raise RuntimeError(f"the app did not succeed: {response}")
        return {"seconds": seconds, "spawn_ms": seconds * 1000.0 / n}

    result: dict[str, Any] = anyio.run(main)
    return result


def watchdog(p: dict[str, Any]) -> dict[str, Any]:
    """Replicas tied to the host by its watchdog: ``seconds``, ``spawn_ms``."""
    return _trial(p, tied=True)


def direct(p: dict[str, Any]) -> dict[str, Any]:
    """Replicas started directly: ``seconds``, ``spawn_ms``."""
    return _trial(p, tied=False)


def overhead(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per case: the watchdog's median cost over the direct start (ratio, ms per replica)."""
    medians = {
        (r["case"], r["side"]): r["median"]
        for r in rows
        if r["metric"] == "spawn_ms" and "median" in r
    }
    result: dict[str, dict[str, float]] = {}
    for case in sorted({case for case, _ in medians}):
        tied, plain = medians.get((case, "watchdog")), medians.get((case, "direct"))
        if tied is not None and plain:
            result[case] = {"ratio": tied / plain, "extra_ms_per_replica": tied - plain}
    return result


def run(smoke: bool, trials: int) -> list[dict[str, Any]]:
    """Orchestrate the spawn benchmark; returns summary rows."""
    ns = [1, 100] if smoke else [1, 100, 1000]
    return orchestrate(
        "spawn cost", Path(__file__), [{"n": n} for n in ns], METRICS, trials, sides=SIDES
    )


if __name__ == "__main__":
    if is_driver():
        driver_main({"watchdog": watchdog, "direct": direct})
    else:
        ns = bench_args(default_trials=5)
        rows = run(ns.smoke, ns.trials)
        print(table(rows))
        extra = {"overhead": overhead(rows)}
        for case, cost in extra["overhead"].items():
            print(
                f"{case}: watchdog x{cost['ratio']:.3f},"
                f" {cost['extra_ms_per_replica']:+.3f} ms per replica"
            )
        print("wrote", write_json("spawn-smoke" if ns.smoke else "spawn", rows, extra))
