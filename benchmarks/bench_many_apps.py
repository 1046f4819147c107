"""Benchmark 4: M apps of ``sleep 1`` (or ``true``) submitted and awaited at once from one loop.

M = 50, 500 (smoke: 10). ``seconds``: wall from the first submit to the last wait
returning; ``cpu_ms_per_app``: the driver's own CPU time (user + system, not its
children's) over the same span, per app (on shared cores the steadier figure to compare),
and its two parts, ``user_ms_per_app`` and ``system_ms_per_app`` (``getrusage``: the
system part is mostly the file system's work, which varies with what other programs do
to the disk, the user part is the driver's Python);
``threads``: the most OS threads seen in the driver (sampled every 1 ms for ours and the
floor, threads only, at each poll for TorchX). Ours: one task per app (submit then wait) in
one task group, one runner; ``ours_group``: the same apps started in one ``runner.group()``
(submitted from a task group inside it), awaited by the group's end (``vs_ours``: the
group's cost over ``Runner.wait`` calls in a task group). TorchX: one thread, submit all,
then poll ``describe`` of each every 0.1 s (its ``Runner.wait`` loop). The issue lists no
floor (the ideal is 1 s); we add one to show what bounds the figure: M ``sleep 1`` started
with ``anyio.open_process`` one after the other from one task, then all awaited (asyncio's
default child watcher on 3.11 reaps each with its own thread, so the floor is not one
thread). Starting a process costs 1-6 ms of the loop's time here (``fork_exec`` waits for
the child's ``exec``), so M = 500 cannot finish before ~1 s + 500 starts. Ours runs through
``get_runner()`` with no arguments and ``runner.run(app, "local_cwd")`` with default run
options (a temporary log directory), as a user writes it: its default ``cache_size`` (100)
bounds the finished apps it keeps, never the running ones. The scheduler's modules are
imported before the clock starts (the import is benchmark 6's), and the app records go to a
fresh state directory (``_harness.isolated_state_dir``). TorchX's scheduler is created with
``cache_size=max(100, M)``: at its default 100 it raises ``IndexError`` on the 101st
unfinished app.

Issue 36's cases: M = 500 and 5,000 apps of ``true`` (smoke: 10), ``ours`` and
``ours_group`` only (one trial at 5,000), the same figures and ``peak_rss_mb`` (the
driver's ``ru_maxrss``) and ``rss_kb_per_app`` (that peak's growth over the resident set
just before the first submit, per app); the target is the CPU per app at 5,000 within
1.2x of that at 500. ``4 records``: ``Runner.list("local_cwd")`` and ``Runner.status`` of
one app from a process other than the apps' supervisor (``list_ms``, ``status_ms``) and the
CLI's ``list`` and ``status`` whole process (``cli_list_s``, ``cli_status_s``) with 5,000
finished apps' records in the state directory (smoke: 50) against one (:func:`records`);
each call's answer is checked (every record listed, the app found).

``python benchmarks/bench_many_apps.py [--smoke] [--trials N]`` prints the table and writes
``benchmarks/results/many_apps.json`` (``many_apps-smoke.json``).
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import (
    bench_args,
    default_skips,
    driver_main,
    is_driver,
    isolated_state_dir,
    machine,
    orchestrate,
    sample_usage,
    save,
    self_maxrss_mb,
    table,
    threads_now,
)

#: What every case of M apps reports.
CPU_METRICS = ["seconds", "cpu_ms_per_app", "user_ms_per_app", "system_ms_per_app", "threads"]


def _clock() -> tuple[float, float, float]:
    """Now: wall (``perf_counter``), and this process's user and system CPU seconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return time.perf_counter(), usage.ru_utime, usage.ru_stime


def _res(m: int, start: tuple[float, float, float]) -> dict[str, float]:
    """``seconds`` since ``start`` (a :func:`_clock`), and the CPU per app since then for
    ``m`` apps: ``cpu_ms_per_app`` and its parts ``user_ms_per_app`` and
    ``system_ms_per_app``."""
    wall, user, system = _clock()
    user_ms = (user - start[1]) * 1000.0 / m
    system_ms = (system - start[2]) * 1000.0 / m
    return {
        "seconds": wall - start[0],
        "cpu_ms_per_app": user_ms + system_ms,
        "user_ms_per_app": user_ms,
        "system_ms_per_app": system_ms,
    }


def _argv(p: dict[str, Any]) -> tuple[str, list[str]]:
    """The app's entrypoint and args: ``p["cmd"]`` split on spaces, ``sleep 1`` by default."""
    entrypoint, *args = str(p.get("cmd", "sleep 1")).split()
    return entrypoint, args


def _rss_now_mb() -> float:
    """This process's resident set right now (MB, ``/proc/self/statm``)."""
    resident_pages = int(Path("/proc/self/statm").read_text().split()[1])
    return resident_pages * resource.getpagesize() / 2**20


def _rss(m: int, before_mb: float) -> dict[str, float]:
    """``peak_rss_mb`` (``ru_maxrss``) and ``rss_kb_per_app``: the peak's growth over
    ``before_mb`` (the resident set just before the first submit) per app of ``m``."""
    peak = self_maxrss_mb()
    return {"peak_rss_mb": peak, "rss_kb_per_app": max(0.0, peak - before_mb) * 1024.0 / m}


def ours(p: dict[str, Any]) -> dict[str, Any]:
    """Submit and await ``p["m"]`` apps of ``sleep 1`` from one loop through ``get_runner()``
    (no arguments, default run options, as a user writes it): ``seconds``, peak ``threads``.
    """
    import anyio
    from _sides import ours_app, ours_module

    isolated_state_dir()
    get_runner = ours_module("asynctorchx.runner").get_runner
    argv = _argv(p)

    async def main() -> dict[str, Any]:
        peaks = [(threads_now(), 0)]
        async with get_runner() as runner:
            runner.scheduler_run_opts("local_cwd")  # imports the scheduler's modules first
            rss_before = _rss_now_mb()

            async def one(i: int) -> None:
                handle = await runner.run(ours_app(f"m{i}", *argv), "local_cwd")
                await runner.wait(handle)

            start = _clock()
            async with anyio.create_task_group() as outer:
                outer.start_soon(sample_usage, peaks, False)  # threads only
                async with anyio.create_task_group() as tg:
                    for i in range(int(p["m"])):
                        tg.start_soon(one, i)
                outer.cancel_scope.cancel()
            res = _res(int(p["m"]), start)
        return {**res, **_rss(int(p["m"]), rss_before), "threads": max(t for t, _ in peaks)}

    return anyio.run(main)


def ours_group(p: dict[str, Any]) -> dict[str, Any]:
    """As :func:`ours`, the apps in one ``runner.group()``: the group's follower (one
    ``Runner.wait`` per app) replaces the task's own wait; the block's end awaits them."""
    import anyio
    from _sides import ours_app, ours_module

    isolated_state_dir()
    get_runner = ours_module("asynctorchx.runner").get_runner
    argv = _argv(p)

    async def main() -> dict[str, Any]:
        peaks = [(threads_now(), 0)]
        async with get_runner() as runner:
            runner.scheduler_run_opts("local_cwd")  # imports the scheduler's modules first
            rss_before = _rss_now_mb()
            start = _clock()
            async with anyio.create_task_group() as outer:
                outer.start_soon(sample_usage, peaks, False)  # threads only
                async with runner.group() as group, anyio.create_task_group() as tg:
                    for i in range(int(p["m"])):
                        tg.start_soon(group.run, ours_app(f"m{i}", *argv), "local_cwd")
                outer.cancel_scope.cancel()
            res = _res(int(p["m"]), start)
        return {**res, **_rss(int(p["m"]), rss_before), "threads": max(t for t, _ in peaks)}

    return anyio.run(main)


def floor(p: dict[str, Any]) -> dict[str, Any]:
    """Start ``p["m"]`` ``sleep 1`` with anyio and await them all: ``seconds``, peak ``threads``."""
    import anyio

    async def main() -> dict[str, Any]:
        peaks = [(threads_now(), 0)]

        start = _clock()
        async with anyio.create_task_group() as outer:
            outer.start_soon(sample_usage, peaks, False)  # threads only
            procs = [
                await anyio.open_process(["sleep", "1"], stdin=None, stdout=None, stderr=None)
                for _ in range(int(p["m"]))
            ]
            async with anyio.create_task_group() as tg:
                for proc in procs:
                    tg.start_soon(proc.wait)
            outer.cancel_scope.cancel()
        res = _res(int(p["m"]), start)
        for proc in procs:
            await proc.aclose()
        return {**res, "threads": max(t for t, _ in peaks)}

    return anyio.run(main)


def torchx(p: dict[str, Any]) -> dict[str, Any]:
    """Submit ``p["m"]`` apps to TorchX, poll each every 0.1 s from one thread: ``seconds``, peak
    ``threads``.
    """
    from _sides import tmpdir, tx_app, tx_cwd_scheduler
    from torchx.specs import AppState

    sched = tx_cwd_scheduler(cache_size=max(100, int(p["m"])))
    cfg = {"log_dir": tmpdir()}
    start = _clock()
    ids = [sched.submit(tx_app(f"m{i}", "sleep", ["1"]), cfg) for i in range(int(p["m"]))]
    peak = threads_now()
    pending = set(ids)
    terminal = (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED)
    while pending:
        for app_id in list(pending):
            desc = sched.describe(app_id)
            if desc is not None and desc.state in terminal:
                pending.discard(app_id)
        peak = max(peak, threads_now())
        if pending:
            time.sleep(0.1)
    res = _res(int(p["m"]), start)
    sched.close()
    return {**res, "threads": peak}


#: The child that runs the real app of :func:`records`: ``true`` through ``get_runner()``,
#: its handle printed. Its process supervises the app, so every record names a supervisor
#: that is gone by the time the driver queries them, as a user's earlier ``run`` leaves them.
_FIRST_APP = """
import sys
sys.path.insert(0, sys.argv[1])
import anyio
from _sides import ours_app
from asynctorchx.runner import get_runner

async def main():
    async with get_runner() as runner:
        handle = await runner.run(ours_app("rec", "true", []), "local_cwd")
        await runner.wait(handle)
        print(handle)

anyio.run(main)
"""


def records(p: dict[str, Any]) -> dict[str, Any]:
    """Query a state directory holding ``p["records"]`` finished apps' records of
    ``local_cwd``: one real record (a ``true`` run to its end by a child process, so that
    the records are another process's, whose apps ``list`` and ``status`` report) and
    copies of it under other app ids (the same bytes a finished app leaves, written
    directly: running 5,000 apps first is the other rows' work). From a runner of the
    driver, as another process of the user does: ``list_ms`` (``Runner.list("local_cwd")``,
    every record listed) and ``status_ms`` (``Runner.status`` of the real app, found
    ``SUCCEEDED``), five calls each; ``cli_list_s`` and ``cli_status_s``: the CLI's
    ``asynctorchx list -s local_cwd`` (every record a row) and ``asynctorchx status
    <handle>`` (exit 0: found), whole process, three runs each.

    Raises:
        AssertionError: a call missed a record or the app (its row would time an empty answer).
    """
    import subprocess

    import anyio
    from _sides import ours_module

    state = Path(isolated_state_dir())
    get_runner = ours_module("asynctorchx.runner").get_runner
    cli = [sys.executable, "-m", "asynctorchx.cli.main"]
    n = int(p["records"])

    first = [sys.executable, "-c", _FIRST_APP, str(Path(__file__).resolve().parent)]
    handle = subprocess.run(first, check=True, capture_output=True, text=True).stdout.strip()
    app_id = handle.rsplit("/", 1)[1]
    text = (state / "local_cwd" / f"{app_id}.json").read_text()
    for i in range(n - 1):
        copy = f"rec-copy{i:05d}"
        (state / "local_cwd" / f"{copy}.json").write_text(text.replace(app_id, copy))

    async def queries() -> tuple[list[float], list[float]]:
        lists, statuses = [], []
        async with get_runner() as runner:
            for _ in range(5):
                t0 = time.perf_counter()
                listed = await runner.list("local_cwd")
                lists.append((time.perf_counter() - t0) * 1000.0)
                assert len(listed) == n, f"list returned {len(listed)} apps of {n}"
                t0 = time.perf_counter()
                status = await runner.status(handle)
                statuses.append((time.perf_counter() - t0) * 1000.0)
                assert status is not None, f"status of {handle}: not found"
                assert status.state.name == "SUCCEEDED", status
        return lists, statuses

    lists, statuses = anyio.run(queries)

    def whole(args: list[str]) -> tuple[float, str]:
        t0 = time.perf_counter()
        out = subprocess.run(cli + args, check=True, capture_output=True, text=True).stdout
        return time.perf_counter() - t0, out

    def cli_list() -> float:
        seconds, out = whole(["list", "-s", "local_cwd", "--all"])
        rows = sum(line.startswith("local_cwd://") for line in out.splitlines())
        assert rows == n, f"the CLI listed {rows} apps of {n}"
        return seconds

    return {
        "list_ms": lists,
        "status_ms": statuses,
        "cli_list_s": [cli_list() for _ in range(3)],
        "cli_status_s": [whole(["status", handle])[0] for _ in range(3)],  # exit 1: not found
        "note": f"{n} records, each listed",
    }


def run(smoke: bool, trials: int) -> list[dict[str, Any]]:
    """Orchestrate benchmark 4; returns summary rows."""
    ms = [10] if smoke else [50, 500]
    many = (
        [{"m": 10, "cmd": "true"}]
        if smoke
        else [
            {"m": 500, "cmd": "true"},
            {"m": 5000, "cmd": "true", "max_trials": 1},
        ]
    )
    sleeps = orchestrate(
        "4 M apps",
        Path(__file__),
        [{"m": m} for m in ms],
        CPU_METRICS,
        trials,
        sides=("ours", "ours_group", "torchx", "floor"),
        skip=default_skips(),
        refs=("torchx", "floor", "ours"),
    )
    trues = orchestrate(
        "4 M apps",
        Path(__file__),
        many,
        [*CPU_METRICS, "peak_rss_mb", "rss_kb_per_app"],
        trials,
        sides=("ours", "ours_group"),
        refs=("ours",),
    )
    kept = orchestrate(
        "4 records",
        Path(__file__),
        [{"records": n} for n in ((1, 50) if smoke else (1, 5000))],
        ["list_ms", "status_ms", "cli_list_s", "cli_status_s"],
        trials,
        sides=("records",),
        refs=(),
    )
    return sleeps + trues + kept


if __name__ == "__main__":
    if is_driver():
        driver_main(
            {
                "ours": ours,
                "ours_group": ours_group,
                "torchx": torchx,
                "floor": floor,
                "records": records,
            }
        )
    else:
        ns = bench_args(default_trials=3)
        desc = machine()
        rows = run(ns.smoke, ns.trials)
        print(table(rows))
        save("many_apps-smoke" if ns.smoke else "many_apps", rows, desc)
