"""Benchmark 7 (logs): follow and re-read one ``local_docker`` replica's log (issue 15).

One container (image ``asynctorchx-test/busybox:latest``) writes ``lines`` lines of
``width`` bytes to stdout (``yes`` piped to ``head``): 1 M x 100 B (100 MB) in the full
run, 20,000 x 100 B (2 MB) in smoke mode. In the same driver process, on that container:

* ``follow_mb_per_s``: our ``log_iter(should_tail=True)`` from ``submit`` returning until
  the follow ends (the container has exited and every line was yielded);
* ``reread_mb_per_s``: our ``log_iter`` of the exited container (no follow);
* ``docker_logs_mb_per_s``: the floor, ``docker logs <container>`` of the same container
  into a pipe drained in 1 MiB reads (bytes, no lines). The re-read and the floor run in
  turn, in an order that varies from trial to trial (the driver's pid parity).

MB = 10^6 bytes of log text (``lines * width``). Ours' rows carry ``vs_floor`` (ours /
``docker logs``, medians). ``peak_rss_mb``: the driver's peak RSS after all three, which
holds the scheduler and one block of lines at a time, never the log (compare the smoke
size with the full one). Every read checks the line count and that each line is whole
(``width`` bytes; the engine splits lines over 16 KiB into several frames, which
``tests/schedulers/docker/test_logs.py`` covers). TorchX's ``DockerScheduler`` is not
run (its ``log_iter`` reads through docker-py, a different floor). Skipped, with the
reason, when no Docker engine answers.

``python benchmarks/bench_docker_logs.py [--smoke] [--trials N]`` prints the table and
writes ``benchmarks/results/docker_logs.json`` (``docker_logs-smoke.json``).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import (
    Unavailable,
    bench_args,
    docker_available,
    driver_main,
    is_driver,
    machine,
    orchestrate,
    save,
    table,
)

IMAGE = "asynctorchx-test/busybox:latest"
METRICS = ["follow_mb_per_s", "reread_mb_per_s", "docker_logs_mb_per_s", "peak_rss_mb"]


def _docker_logs(container: str) -> float:
    """Seconds for ``docker logs container`` into a pipe drained in 1 MiB reads."""
    t0 = time.perf_counter()
    with subprocess.Popen(
        ["docker", "logs", container], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    ) as proc:
        assert proc.stdout is not None
        while proc.stdout.read(1 << 20):
            pass
    return time.perf_counter() - t0


def ours(p: dict[str, Any]) -> dict[str, Any]:
    """One trial on one container: ``follow_mb_per_s``, ``reread_mb_per_s``,
    ``docker_logs_mb_per_s``, ``peak_rss_mb``. Raises :class:`Unavailable` with no engine.
    """
    reason = docker_available()
    if reason:
        raise Unavailable(reason)
    import anyio
    from _sides import ours_module
    from bench_docker import _containers, _remove

    api = ours_module("asynctorchx.specs.api")
    mod = ours_module("asynctorchx.schedulers.docker_scheduler")
    lines, width = int(p["lines"]), int(p["width"])
    mb = lines * width / 1e6
    script = f"yes {'x' * (width - 1)} | head -n {lines}"
    app = api.AppDef(
        name="dl",
        roles=[api.Role(name="r", image=IMAGE, entrypoint="sh", args=["-c", script])],
    )
    problems: list[str] = []

    async def read(sched: Any, app_id: str, follow: bool) -> float:
        t0 = time.perf_counter()
        n = bad = 0
        async for line in sched.log_iter(app_id, "r", 0, should_tail=follow):
            n += 1
            bad += len(line) != width
        secs = time.perf_counter() - t0
        if n != lines or bad:
            problems.append(f"{'follow' if follow else 're-read'}: {n} lines, {bad} not whole")
        return secs

    async def main() -> dict[str, Any]:
        async with mod.create_scheduler("bench") as sched:
            app_id = await sched.submit(app, {})
            try:
                follow = await read(sched, app_id, True)
                await sched.wait(app_id)
                container = _containers(app_id)[0]
                if os.getpid() % 2:  # the order of the two varies from trial to trial
                    floor = _docker_logs(container)
                    reread = await read(sched, app_id, False)
                else:
                    reread = await read(sched, app_id, False)
                    floor = _docker_logs(container)
            finally:
                _remove([app_id])
        return {
            "follow_mb_per_s": mb / follow,
            "reread_mb_per_s": mb / reread,
            "docker_logs_mb_per_s": mb / floor,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
            "note": "; ".join(problems) or None,
        }

    return anyio.run(main)


def run(smoke: bool, trials: int) -> list[dict[str, Any]]:
    """Orchestrate the Docker logs benchmark; with no engine it says why it was skipped."""
    reason = docker_available()
    skip = {"ours": reason} if reason else {}
    if reason:
        print(f"benchmark 7 logs (local_docker) skipped: {reason}")
    case = {"lines": 20_000 if smoke else 1_000_000, "width": 100}
    rows = orchestrate(
        "7 docker logs", Path(__file__), [case], METRICS, trials, sides=("ours",), skip=skip
    )
    floor = next(
        (r["median"] for r in rows if r["metric"] == "docker_logs_mb_per_s" and "median" in r),
        None,
    )
    for r in rows:
        if floor and r["metric"] in ("follow_mb_per_s", "reread_mb_per_s") and "median" in r:
            r["vs_floor"] = r["median"] / floor
    return rows


if __name__ == "__main__":
    if is_driver():
        driver_main({"ours": ours})
    else:
        ns = bench_args(default_trials=3)
        desc = machine()
        rows = run(ns.smoke, ns.trials)
        print(table(rows))
        save("docker_logs-smoke" if ns.smoke else "docker_logs", rows, desc)
