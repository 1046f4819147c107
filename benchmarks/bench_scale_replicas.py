"""Benchmark 3: N replicas of ``true``, ``submit`` to ``wait`` returning; peak RSS, threads, fds.

N = 1, 10, 100, 300, 1000, 3000 (smoke: 1, 10). ``seconds`` is wall time from submit to
the wait's return, ``ms_per_replica`` the same divided by N (milliseconds),
``cpu_ms_per_replica`` the driver's own CPU time (user + system, not its children's) over
the same span divided by N, which other programs' load on the machine moves far less than
the wall time (a ``fork`` blocks the driver until the child's ``exec`` without it being
the driver's CPU time, so the wall time is the figure judged); ``rss_mb`` the
driver's peak RSS (MB); ``threads`` and ``fds`` the most seen in the driver while the
replicas ran (sampled every 1 ms by a task for ours and the floors, at each ``describe`` poll
for TorchX).

Sides:

* ``ours``: ``get_runner()`` as a user writes it, ``runner.run(app, "local_cwd",
  {"log_dir": ...})`` then ``runner.wait`` (the dry run, the log directories, the app
  record, the replicas' output captured into their log files). The scheduler's modules
  are imported before the clock starts (``runner.scheduler_run_opts``), as the other
  sides import theirs (the import is benchmark 6's), and the app records go to a fresh
  state directory (``_harness.isolated_state_dir``).
* ``ours_next``: the same, for a second app of the same N run right after a first one (not
  measured) through the same runner: what a long-lived process (a service) pays per app,
  beside ``ours``'s first app of a fresh process (which also pays, once per process, the
  record's cattrs hooks and the watchdog's start). Its ``rss_mb`` is the peak over both apps.
* ``floor``: N ``anyio.open_process(["true"])`` with no pipes, started one after the other
  from one task, then all awaited. Python 3.11's asyncio reaps each child with a thread of
  its own (``ThreadedChildWatcher``), so this floor is not one thread.
* ``floor_capture``: the same work as ours does for a replica, done raw: each ``true`` in
  a session of its own with stdin from ``/dev/null`` and its stdout and stderr pipes
  drained by two tasks into ``stdout.log``/``stderr.log`` (opened at the first byte) of
  a directory of its own, started one after the other from one task, reaped through pid
  file descriptors (``asyncio.PidfdChildWatcher``, as ours on 3.11; the default from 3.12).
* ``torchx``: ``LocalScheduler.submit`` then its wait loop at ``wait_interval=0.1``; not
  run above N = 1000 (a thread and 5 fds per replica: ~1 min per trial at N = 1000).

``python benchmarks/bench_scale_replicas.py [--smoke] [--trials N] [--n 1,10]`` prints the
table and writes ``benchmarks/results/scale_replicas.json`` (``scale_replicas-smoke.json``;
with ``--n``, only those N, into ``scale_replicas-n-1-10.json``, leaving the full run's file
alone).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import (
    Unavailable,
    bench_args,
    default_skips,
    driver_main,
    fds_now,
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

METRICS = ["seconds", "ms_per_replica", "cpu_ms_per_replica", "rss_mb", "threads", "fds"]
SIDES = ("ours", "ours_next", "torchx", "floor", "floor_capture")
#: TorchX is not run above this N (one thread per replica; minutes per trial).
TORCHX_MAX_N = 1000


def _res(n: int, t0: float, peaks: list[tuple[int, int]], cpu0: float) -> dict[str, Any]:
    seconds = time.perf_counter() - t0
    return {
        "seconds": seconds,
        "ms_per_replica": seconds * 1000.0 / n,
        "cpu_ms_per_replica": (time.process_time() - cpu0) * 1000.0 / n,
        "rss_mb": self_maxrss_mb(),
        "threads": max(p[0] for p in peaks),
        "fds": max(p[1] for p in peaks),
    }


def ours(p: dict[str, Any]) -> dict[str, Any]:
    """One app of ``p["n"]`` replicas of ``true`` through ``get_runner()``, run to ``wait``:
    ``seconds``, ``ms_per_replica``, ``rss_mb``, ``threads``, ``fds``.
    """
    return _ours_apps(p, apps_before=0)


def ours_next(p: dict[str, Any]) -> dict[str, Any]:
    """As :func:`ours`, measuring a second app of ``p["n"]`` replicas run in the same runner
    right after a first one (not measured): ``seconds``, ``ms_per_replica``, ``rss_mb`` (the
    peak over both apps), ``threads``, ``fds``.
    """
    return _ours_apps(p, apps_before=1)


def _ours_apps(p: dict[str, Any], apps_before: int) -> dict[str, Any]:
    """Run ``apps_before`` apps of ``p["n"]`` replicas through one ``get_runner()``, then
    measure one more (see :func:`ours`)."""
    import anyio
    from _sides import ours_app, ours_module, tmpdir

    isolated_state_dir()
    get_runner = ours_module("asynctorchx.runner").get_runner
    n = int(p["n"])

    async def main() -> dict[str, Any]:
        async with get_runner() as runner:
            runner.scheduler_run_opts("local_cwd")  # imports the scheduler's modules first
            for _ in range(apps_before):
                app = ours_app("sc", "true", [], num_replicas=n)
                await runner.wait(await runner.run(app, "local_cwd", {"log_dir": tmpdir()}))
            app = ours_app("sc", "true", [], num_replicas=n)
            cfg = {"log_dir": tmpdir()}
            t0, cpu0 = time.perf_counter(), time.process_time()
            peaks: list[tuple[int, int]] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(sample_usage, peaks)
                handle = await runner.run(app, "local_cwd", cfg)
                peaks.append((threads_now(), fds_now()))
                await runner.wait(handle)
                tg.cancel_scope.cancel()
            return _res(n, t0, [*peaks, (threads_now(), fds_now())], cpu0)

    return anyio.run(main)


def floor(p: dict[str, Any]) -> dict[str, Any]:
    """Spawn ``p["n"]`` ``true`` with anyio, no pipes, then reap them all: ``seconds``,
    ``ms_per_replica``, ``rss_mb``, ``threads``, ``fds``.
    """
    import anyio

    n = int(p["n"])

    async def main() -> dict[str, Any]:
        peaks: list[tuple[int, int]] = []
        t0, cpu0 = time.perf_counter(), time.process_time()
        procs = []
        async with anyio.create_task_group() as outer:
            outer.start_soon(sample_usage, peaks)
            for _ in range(n):
                procs.append(
                    await anyio.open_process(["true"], stdin=None, stdout=None, stderr=None)
                )
            peaks.append((threads_now(), fds_now()))
            async with anyio.create_task_group() as tg:
                for proc in procs:
                    tg.start_soon(proc.wait)
            outer.cancel_scope.cancel()
        res = _res(n, t0, [*peaks, (threads_now(), fds_now())], cpu0)
        for proc in procs:
            await proc.aclose()
        return res

    return anyio.run(main)


def floor_capture(p: dict[str, Any]) -> dict[str, Any]:
    """Spawn ``p["n"]`` ``true`` with anyio, each in its own session with its stdout and stderr
    drained into files of its own directory, reaped by pidfd: ``seconds``, ``ms_per_replica``,
    ``rss_mb``, ``threads``, ``fds``.
    """
    import asyncio
    import os
    import subprocess

    import anyio
    import anyio.abc
    from _sides import tmpdir

    n = int(p["n"])
    root = tmpdir()

    async def drain(stream: anyio.abc.ByteReceiveStream, path: str) -> None:
        fd = -1
        try:
            async for chunk in stream:
                if fd < 0:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                os.write(fd, chunk)
        finally:
            if fd >= 0:
                os.close(fd)

    async def replica(proc: anyio.abc.Process, directory: str) -> None:
        assert proc.stdout is not None
        assert proc.stderr is not None
        async with anyio.create_task_group() as pumps:
            pumps.start_soon(drain, proc.stdout, os.path.join(directory, "stdout.log"))
            pumps.start_soon(drain, proc.stderr, os.path.join(directory, "stderr.log"))
            await proc.wait()
        await proc.aclose()

    async def main() -> dict[str, Any]:
        if sys.version_info < (3, 12):  # as ours: no thread per child
            watcher = asyncio.PidfdChildWatcher()
            watcher.attach_loop(asyncio.get_running_loop())
            asyncio.set_child_watcher(watcher)
        peaks: list[tuple[int, int]] = []
        t0, cpu0 = time.perf_counter(), time.process_time()
        async with anyio.create_task_group() as outer:
            outer.start_soon(sample_usage, peaks)
            async with anyio.create_task_group() as tg:
                for k in range(n):
                    directory = os.path.join(root, str(k))
                    os.mkdir(directory, 0o700)
                    proc = await anyio.open_process(
                        ["true"],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        start_new_session=True,
                    )
                    tg.start_soon(replica, proc, directory)
                peaks.append((threads_now(), fds_now()))
            outer.cancel_scope.cancel()
        return _res(n, t0, [*peaks, (threads_now(), fds_now())], cpu0)

    return anyio.run(main)


def torchx(p: dict[str, Any]) -> dict[str, Any]:
    """One app of ``p["n"]`` replicas with TorchX, submit then its 0.1 s wait loop: ``seconds``,
    ``ms_per_replica``, ``rss_mb``, ``threads``, ``fds``.

    Raises:
        Unavailable: ``p["n"]`` is above :data:`TORCHX_MAX_N`.
    """
    n = int(p["n"])
    if n > TORCHX_MAX_N:
        raise Unavailable(f"not run above N = {TORCHX_MAX_N} (a thread per replica)")
    from _sides import tmpdir, tx_app, tx_cwd_scheduler
    from torchx.specs import AppState

    sched = tx_cwd_scheduler()
    app = tx_app("sc", "true", [], num_replicas=n)
    t0, cpu0 = time.perf_counter(), time.process_time()
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
    res = _res(n, t0, [*peaks, (threads_now(), fds_now())], cpu0)
    sched.close()
    return res


def run(smoke: bool, trials: int, only_n: list[int] | None = None) -> list[dict[str, Any]]:
    """Orchestrate benchmark 3 (``only_n``: only these N); returns summary rows."""
    ns = only_n or ([1, 10] if smoke else [1, 10, 100, 300, 1000, 3000])
    return orchestrate(
        "3 N replicas",
        Path(__file__),
        # TorchX takes ~1 min at N = 1000 (a thread and 5 fds per replica): 2 trials there.
        [{"n": n, "max_trials_torchx": 2} if n == TORCHX_MAX_N else {"n": n} for n in ns],
        METRICS,
        trials,
        sides=SIDES,
        skip=default_skips(),
        refs=("torchx", "floor", "floor_capture"),
    )


def _take_n_option() -> list[int] | None:
    """Remove ``--n 1,10`` from ``sys.argv`` (the harness parses the rest); return its N."""
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--n", default="")
    known, rest = ap.parse_known_args()
    sys.argv[1:] = rest
    return [int(x) for x in known.n.split(",") if x.strip()] or None


if __name__ == "__main__":
    if is_driver():
        driver_main(
            {
                "ours": ours,
                "ours_next": ours_next,
                "floor": floor,
                "floor_capture": floor_capture,
                "torchx": torchx,
            }
        )
    else:
        only_n = _take_n_option()
        ns = bench_args(default_trials=5)
        desc = machine()
        rows = run(ns.smoke, ns.trials, only_n)
        print(table(rows))
        name = "scale_replicas-smoke" if ns.smoke else "scale_replicas"
        if only_n:
            name += "-n-" + "-".join(str(n) for n in only_n)
        save(name, rows, desc)
