"""Benchmark 7: local_docker with 8 replicas: start to all running, exit to ``wait``, cancel.

Image ``asynctorchx-test/busybox:latest`` (``scripts/docker-engine.sh start`` imports it).
* ``start_s``: submit of one app of 8 replicas to all 8 containers running (seconds;
  observed with ``describe`` every 10 ms: instrumentation, the same for both sides).
  Floor: 8 ``docker run -d`` in parallel, all returned.
* ``exit_ms``: a 1-replica app running ``sleep 1``; from the container's ``FinishedAt``
  (``docker inspect``) to ``wait`` returning (ms). Floor: the engine's own ``die`` event
  for that container arriving on the raw events API (aiodocker), the earliest moment any
  client can know; on this engine it comes 50-150 ms after ``FinishedAt`` (``docker wait``
  returns later still), which bounds every side.
* ``cancel_s``: cancel of the 8 running replicas, each ``sh`` trapping SIGTERM to exit,
  with the default grace, until the app is over (seconds): ours ``cancel`` then ``wait``
  (our ``cancel`` does not wait), TorchX ``cancel`` (it stops each container in turn,
  blocking) then ``describe`` until terminal. Floor: 8 ``docker stop`` in parallel.
* the log of one container, followed and re-read: ``bench_docker_logs.py`` (its rows
  come with these).
Skipped, with the reason printed, when no Docker engine answers.
"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import (
    Unavailable,
    bench_args,
    default_skips,
    docker_available,
    driver_main,
    is_driver,
    orchestrate,
    table,
)

IMAGE = "asynctorchx-test/busybox:latest"
TRAP = ["-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
METRICS = ["start_s", "exit_ms", "cancel_s"]


def _finished_at(container: str) -> float:
    out = subprocess.run(
        ["docker", "inspect", "-f", "{{.State.FinishedAt}}", container],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # RFC 3339 with nanoseconds: trim to microseconds for fromisoformat.
    head, _, frac = out.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}+00:00").timestamp()


def _check() -> None:
    reason = docker_available()
    if reason:
        raise Unavailable(reason)


def _parallel(cmds: list[list[str]]) -> None:
    """Start every docker CLI command at once, then reap them all (the floor's parallelism)."""
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for c in cmds]
    for proc, c in zip(procs, cmds, strict=False):
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(c)} failed: {err.decode(errors='replace').strip()}")


def floor(p: dict[str, Any]) -> dict[str, Any]:
    """One trial with the Docker CLI and raw API (``p["n"]`` containers): ``start_s``,
    ``cancel_s``, ``exit_ms``. Raises :class:`Unavailable` with no engine.
    """
    _check()
    n = int(p["n"])
    names = [f"atx-bench-floor-{i}-{time.time_ns()}" for i in range(n)]
    t0 = time.perf_counter()
    _parallel([["docker", "run", "-d", "--name", nm, IMAGE, "sh", *TRAP] for nm in names])
    start = time.perf_counter() - t0
    t0 = time.perf_counter()
    _parallel([["docker", "stop", nm] for nm in names])
    cancel = time.perf_counter() - t0
    one, t_die = _die_event()
    exit_ms = (t_die - _finished_at(one)) * 1000.0
    subprocess.run(["docker", "rm", "-f", *names, one], capture_output=True)
    return {"start_s": start, "cancel_s": cancel, "exit_ms": exit_ms}


def _die_event() -> tuple[str, float]:
    """Run ``sleep 1`` through the raw API; return its id and when its ``die`` event arrived."""
    import aiodocker
    import anyio

    async def main() -> tuple[str, float]:
        async with aiodocker.Docker() as docker:
            sub = docker.events.subscribe(filters={"event": ["die"]})  # type: ignore[no-untyped-call]
            container = await docker.containers.run({"Image": IMAGE, "Cmd": ["sleep", "1"]})
            while True:
                event = await sub.get()
                if event is None:
                    raise RuntimeError("Docker events stream closed before the die event")
                if event.get("id") == container.id:
                    return container.id, time.time()

    return anyio.run(main)


def _containers(app_id: str) -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "-a", "-q", "--filter", f"label=torchx.pytorch.org/app-id={app_id}"],
        capture_output=True,
        text=True,
    ).stdout.split()
    if not out:
        out = subprocess.run(
            ["docker", "ps", "-a", "-q", "--filter", f"name={app_id}"],
            capture_output=True,
            text=True,
        ).stdout.split()
    return out


def _remove(app_ids: list[str]) -> None:
    """Remove the benchmark's containers and our cancel-marker volumes
    (``asynctorchx-cancelled-<app_id>``; TorchX's apps have none, and the error is ignored):
    the engine is shared with other users' tests."""
    ids = [c for a in app_ids for c in _containers(a)]
    if ids:
        subprocess.run(["docker", "rm", "-f", *ids], capture_output=True)
    markers = [f"asynctorchx-cancelled-{a}" for a in app_ids]
    if markers:
        subprocess.run(["docker", "volume", "rm", *markers], capture_output=True)


def ours(p: dict[str, Any]) -> dict[str, Any]:
    """One trial of our ``local_docker`` scheduler (``p["n"]`` replicas): ``start_s``,
    ``cancel_s``, ``exit_ms``. Raises :class:`Unavailable` with no engine or no scheduler
    module.
    """
    _check()
    import anyio
    from _sides import ours_module

    api = ours_module("asynctorchx.specs.api")
    mod = ours_module("asynctorchx.schedulers.docker_scheduler")

    def app(name: str, ep: str, args: list[str], n: int) -> Any:
        return api.AppDef(
            name=name,
            roles=[api.Role(name="r", image=IMAGE, entrypoint=ep, args=args, num_replicas=n)],
        )

    async def main() -> dict[str, Any]:
        async with mod.create_scheduler("bench") as sched:
            t0 = time.perf_counter()
            app_id = await sched.submit(app("dk", "sh", TRAP, int(p["n"])), {})
            while True:
                desc = await sched.describe(app_id)
                reps = [r for rs in desc.roles_statuses for r in rs.replicas] if desc else []
                if len(reps) == int(p["n"]) and all(r.state == api.AppState.RUNNING for r in reps):
                    break
                await anyio.sleep(0.01)
            start = time.perf_counter() - t0
            t0 = time.perf_counter()
            await sched.cancel(app_id)
            await sched.wait(app_id)
            cancel = time.perf_counter() - t0
            one = await sched.submit(app("dx", "sleep", ["1"], 1), {})
            await sched.wait(one)
            t_done = time.time()
            cs = _containers(one)
            exit_ms = (t_done - _finished_at(cs[0])) * 1000.0 if cs else None
        _remove([app_id, one])
        note = None if cs else f"no container found for {one}: exit_ms not measured"
        return {"start_s": start, "cancel_s": cancel, "exit_ms": exit_ms, "note": note}

    return anyio.run(main)


def torchx(p: dict[str, Any]) -> dict[str, Any]:
    """One trial of TorchX 0.7.0's ``DockerScheduler`` (``p["n"]`` replicas): ``start_s``,
    ``cancel_s``, ``exit_ms``. Raises :class:`Unavailable` with no engine.
    """
    _check()
    from torchx import specs
    from torchx.schedulers.docker_scheduler import create_scheduler

    def app(name: str, ep: str, args: list[str], n: int) -> Any:
        return specs.AppDef(
            name=name,
            roles=[specs.Role(name="r", image=IMAGE, entrypoint=ep, args=args, num_replicas=n)],
        )

    sched = create_scheduler("bench")
    t0 = time.perf_counter()
    app_id = sched.submit(app("dk", "sh", TRAP, int(p["n"])), {})
    while True:
        desc = sched.describe(app_id)
        reps = [r for rs in desc.roles_statuses for r in rs.replicas] if desc else []
        if len(reps) == int(p["n"]) and all(r.state == specs.AppState.RUNNING for r in reps):
            break
        time.sleep(0.01)
    start = time.perf_counter() - t0
    terminal = (specs.AppState.SUCCEEDED, specs.AppState.FAILED, specs.AppState.CANCELLED)
    t0 = time.perf_counter()
    sched.cancel(app_id)
    while True:
        desc = sched.describe(app_id)
        if desc is None or desc.state in terminal:
            break
        time.sleep(0.01)
    cancel = time.perf_counter() - t0
    one = sched.submit(app("dx", "sleep", ["1"], 1), {})
    while True:  # Runner.wait's loop at wait_interval=0.1
        desc = sched.describe(one)
        if desc is not None and desc.state in terminal:
            break
        time.sleep(0.1)
    t_done = time.time()
    cs = _containers(one)
    exit_ms = (t_done - _finished_at(cs[0])) * 1000.0 if cs else None
    _remove([app_id, one])
    note = None if cs else f"no container found for {one}: exit_ms not measured"
    return {"start_s": start, "cancel_s": cancel, "exit_ms": exit_ms, "note": note}


def run(smoke: bool, trials: int) -> list[dict[str, Any]]:
    """Orchestrate benchmark 7; with no engine every side reports why it was skipped."""
    reason = docker_available()
    skip = default_skips()
    if reason:
        print(f"benchmark 7 (local_docker) skipped: {reason}")
        skip = {s: reason for s in ("ours", "torchx", "floor")}
    rows = orchestrate("7 local_docker", Path(__file__), [{"n": 8}], METRICS, trials, skip=skip)
    import bench_docker_logs  # one container's log, followed and re-read (issue 15)

    return rows + bench_docker_logs.run(smoke, trials)


if __name__ == "__main__":
    if is_driver():
        driver_main({"ours": ours, "floor": floor, "torchx": torchx})
    else:
        ns = bench_args(default_trials=3)
        print(table(run(ns.smoke, ns.trials)))
