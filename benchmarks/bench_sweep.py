"""Benchmark 11: a sweep, M apps of ``true`` at most ``limit`` at a time, from one event loop.

M = 1000, limit = 50 (smoke: M = 20, limit = 5). ``seconds``: wall from the first submit to
the last app seen terminal; ``cpu_ms_per_app``: the driver's own CPU time (user + system)
over the same span, per app; ``threads``: the most OS threads seen in the driver (sampled
every 1 ms). Sides: ``ours_group`` is ``runner.group(max_concurrent=limit)``, the apps
started by ``await group.run(...)`` in a loop (each waits for a slot) and awaited by the
block's end; ``limiter`` is the loop a user writes without it: one task per app in a task
group, each ``async with anyio.CapacityLimiter(limit)`` around ``Runner.run`` and
``Runner.wait``. Issue 32's target: ``ours_group`` takes at most 1.2x ``limiter``'s
``seconds``, with one thread. ``sweep_journal`` is ``ours_group`` with ``journal=`` (a file
in the trial's state directory, on the same file system as the app records) and
``key=f"s{i}"``: issue 42's target is at most 1.15x ``ours_group``'s ``seconds``. All run
through ``get_runner()`` with default run options on ``local_cwd``, the scheduler's modules
imported before the clock starts, app records in a fresh state directory
(``_harness.isolated_state_dir``).

``11 sweep resume`` (side ``journal_reopen``): the script of a sweep of N = 10,000 trials
(smoke: 200) run again on its journal once every trial has ended: entering
``runner.group(max_concurrent=50, journal=...)``, the N ``group.run(..., key=...)`` calls
(their ``AppDef`` made before the clock, as the script's own work) and ``as_completed`` to
its end, then leaving the block: ``seconds`` (issue 42: under 1 s), and its parts
``open_s``, ``run_s``, ``iterate_s``. The journal is not made by a sweep of N apps (minutes
of work per trial): its first trial is a real one, run into it by a group on ``local_cwd``,
and the other N - 1 are that trial's three records (trial, attempt, status) with the key,
the app's name and the handle changed, written by the journal's own ``encode``. The driver
checks that the resumed group submitted nothing (every handle it returns is the journal's)
and that every trial is yielded once, ``SUCCEEDED``.

``python benchmarks/bench_sweep.py [--smoke] [--trials N]`` prints the table and writes
``benchmarks/results/sweep.json`` (``sweep-smoke.json``).
"""

from __future__ import annotations

import os
import sys
import time
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


def _sweep(p: dict[str, Any], group: bool, journal: bool = False) -> dict[str, Any]:
    """Run ``p["m"]`` apps of ``true``, ``p["limit"]`` at a time, through a group's
    ``max_concurrent`` (``group``; with ``journal``, into a journal, each app keyed) or a
    hand-written ``CapacityLimiter`` loop."""
    import anyio
    from _sides import ours_app, ours_module

    state = isolated_state_dir()
    path = os.path.join(state, "sweep.journal") if journal else None
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
                    async with runner.group(max_concurrent=limit, journal=path) as sweep:
                        for i in range(m):
                            app = ours_app(f"s{i}", "true", [])
                            await sweep.run(app, "local_cwd", key=f"s{i}" if journal else None)
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


def sweep_journal(p: dict[str, Any]) -> dict[str, Any]:
    """The group's sweep with a journal, each app keyed."""
    return _sweep(p, group=True, journal=True)


def _finished_journal(path: str, n: int) -> list[str]:
    """Make at ``path`` the journal of a sweep of ``n`` trials of ``true`` (``s0``...) that all
    ended ``SUCCEEDED``; return their handles. Trial ``s0`` is run into it by a real group;
    the others are its records with the key, app name and handle changed."""
    import anyio
    import attrs
    from _sides import ours_app, ours_module

    get_runner = ours_module("asynctorchx.runner").get_runner
    journal = ours_module("asynctorchx.runner._journal")
    make_unique = ours_module("asynctorchx.schedulers.ids").make_unique

    async def first() -> None:
        async with get_runner() as runner, runner.group(journal=path) as group:
            await group.run(ours_app("s0", "true", []), "local_cwd", key="s0")

    anyio.run(first)
    real = journal.read(path)["s0"]
    (attempt,), (status,) = real.attempts, real.statuses.values()
    assert status.state == "SUCCEEDED", status
    session = attempt.handle.rsplit("/", 1)[0]
    handles = [attempt.handle]
    with open(path, "ab") as out:
        for i in range(1, n):
            key, handle = f"s{i}", f"{session}/{make_unique(f's{i}')}"
            app = {**real.trial.app, "name": key}
            handles.append(handle)
            out.write(
                journal.encode(attrs.evolve(real.trial, key=key, app=app))
                + journal.encode(attrs.evolve(attempt, key=key, handle=handle))
                + journal.encode(attrs.evolve(status, key=key, handle=handle))
            )
        out.flush()
        os.fsync(out.fileno())
    return handles


def journal_reopen(p: dict[str, Any]) -> dict[str, Any]:
    """The script of a finished sweep of ``p["trials"]`` trials run again on its journal."""
    import anyio
    from _sides import ours_app, ours_module

    state = isolated_state_dir()
    get_runner = ours_module("asynctorchx.runner").get_runner
    n = int(p["trials"])
    path = os.path.join(state, "sweep.journal")
    recorded = _finished_journal(path, n)
    apps = [ours_app(f"s{i}", "true", []) for i in range(n)]

    async def main() -> dict[str, Any]:
        async with get_runner() as runner:
            runner.scheduler_run_opts("local_cwd")  # imports the scheduler's modules first
            start = _clock()
            async with runner.group(max_concurrent=50, journal=path) as sweep:
                opened = time.perf_counter()
                handles = [
                    await sweep.run(app, "local_cwd", key=f"s{i}") for i, app in enumerate(apps)
                ]
                ran = time.perf_counter()
                ended = [(h, s.state.name) async for h, s in sweep.as_completed()]
                iterated = time.perf_counter()
            res = _res(n, start)
        assert handles == recorded, "the resumed group submitted an app"
        assert sorted(ended) == sorted((h, "SUCCEEDED") for h in recorded), "not each once"
        return {
            **res,
            "open_s": opened - start[0],
            "run_s": ran - opened,
            "iterate_s": iterated - ran,
        }

    return anyio.run(main)


def run(smoke: bool, trials: int) -> list[dict[str, Any]]:
    """Orchestrate benchmark 11; returns summary rows."""
    case = {"m": 20, "limit": 5} if smoke else {"m": 1000, "limit": 50}
    rows = orchestrate(
        "11 sweep",
        Path(__file__),
        [case],
        ["seconds", "cpu_ms_per_app", "threads"],
        trials,
        sides=("ours_group", "limiter", "sweep_journal"),
        refs=("limiter", "ours_group"),
    )
    return rows + orchestrate(
        "11 sweep resume",
        Path(__file__),
        [{"trials": 200 if smoke else 10_000}],
        ["seconds", "open_s", "run_s", "iterate_s", "cpu_ms_per_app"],
        trials,
        sides=("journal_reopen",),
        refs=(),
    )


if __name__ == "__main__":
    if is_driver():
        driver_main(
            {
                "ours_group": ours_group,
                "limiter": limiter,
                "sweep_journal": sweep_journal,
                "journal_reopen": journal_reopen,
            }
        )
    else:
        ns = bench_args(default_trials=3)
        desc = machine()
        rows = run(ns.smoke, ns.trials)
        print(table(rows))
        save("sweep-smoke" if ns.smoke else "sweep", rows, desc)
