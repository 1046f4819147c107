"""Benchmark: the ``slurm`` scheduler's ``wait`` against a raw ``squeue`` poll loop.

Needs the local cluster (``bash scripts/slurm-cluster.sh start``); without it every side
reports itself unavailable. Two cases, each at the same tick (``TICK`` seconds):

* ``end``: a one-replica job whose replica writes the wall clock as its last act
  (``exec date +%s.%N``); metric ``latency_ms`` = that stamp to ``wait`` returning (ours) or
  to a ``squeue -h -t all -j ID`` loop sleeping ``TICK`` between calls seeing it ended
  (floor). Both include Slurm's own delay in reporting the end (``COMPLETING``).
* ``watch``: ``apps`` jobs of ``sleep 3`` awaited together; metric ``squeue_per_s`` = squeue
  calls per second while they are awaited: ours (every waiter shares one batched poll) and
  floor (one poll loop per app, what each ``Runner.wait`` of TorchX does on its own).

TorchX 0.7.0 is not a side: its ``describe`` reads ``sacct``, which fails on a cluster
without accounting (see ``docs/slurm-cluster.md``).

Usage: ``.venv/bin/python benchmarks/bench_slurm.py [--smoke] [--trials N]``; prints a table
and writes ``benchmarks/results/slurm.json``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
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

#: Seconds between two squeue calls, on both sides.
TICK = 0.5
#: The replica's script: ``date`` replaces the shell and writes the clock as its last act.
STAMP = 'exec date +%s.%N > "$0"'
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


def _check_cluster() -> None:
    if shutil.which("scontrol") is None:
        raise Unavailable("no Slurm client tools; run: bash scripts/slurm-cluster.sh start")
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, check=False)
    if "is UP" not in ping.stdout:
        raise Unavailable("no Slurm controller answers; run: bash scripts/slurm-cluster.sh start")


def _app(script: list[str]) -> Any:
    from asynctorchx.specs import AppDef, Resource, Role

    role = Role(
        name="bench",
        image="",
        entrypoint="sh",
        args=script,
        resource=Resource(cpu=1, gpu=0, memMB=100),
    )
    return AppDef(name="bench", roles=[role])


def _submit_raw(script: list[str], directory: str) -> str:
    """Submit the same job as ours, with sbatch directly: the floor needs no scheduler."""
    from asynctorchx.schedulers.slurm import build_batch_request

    request = build_batch_request(_app(script), {"time": "5"})
    path = os.path.join(directory, "bench.sh")
    Path(path).write_text(request.materialize())
    done = subprocess.run(
        [*request.cmd, f"--chdir={directory}", path], capture_output=True, text=True, check=True
    )
    return done.stdout.strip().split(";")[0]


def _squeue_ended(job_id: str) -> bool:
    done = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"], capture_output=True, text=True
    )
    states = done.stdout.split()
    return bool(states) and all(state in FINISHED for state in states)


def ours(p: dict[str, Any]) -> dict[str, Any]:
    """One trial of our scheduler: ``latency_ms`` (case ``end``) or ``squeue_per_s``."""
    _check_cluster()
    import anyio

    from asynctorchx.schedulers.slurm import SlurmScheduler

    directory = tempfile.mkdtemp(prefix="atx-bench-slurm-")
    os.chdir(directory)

    async def end() -> dict[str, Any]:
        latencies: list[float] = []
        async with SlurmScheduler("bench", poll_interval=TICK) as slurm:
            for index in range(int(p["exits"])):
                stamp = os.path.join(directory, f"stamp{index}")
                job_id = await slurm.submit(_app(["-c", STAMP, stamp]), {"time": "5"})
                await slurm.wait(job_id)
                latencies.append((time.time() - float(Path(stamp).read_text())) * 1000.0)
        return {"latency_ms": latencies}

    async def watch() -> dict[str, Any]:
        async with SlurmScheduler("bench", poll_interval=TICK) as slurm:
            app = _app(["-c", "sleep 3"])
            job_ids = [await slurm.submit(app, {"time": "5"}) for _ in range(int(p["apps"]))]
            before = slurm.commands.counts["squeue"]
            started = time.perf_counter()
            async with anyio.create_task_group() as task_group:
                for job_id in job_ids:
                    task_group.start_soon(slurm.wait, job_id)
            elapsed = time.perf_counter() - started
            return {"squeue_per_s": (slurm.commands.counts["squeue"] - before) / elapsed}

    return anyio.run(end if p["case"] == "end" else watch)


def floor(p: dict[str, Any]) -> dict[str, Any]:
    """One trial of raw ``squeue`` loops at the same tick: ``latency_ms`` or ``squeue_per_s``."""
    _check_cluster()
    directory = tempfile.mkdtemp(prefix="atx-bench-slurm-")
    if p["case"] == "end":
        latencies: list[float] = []
        for index in range(int(p["exits"])):
            stamp = os.path.join(directory, f"stamp{index}")
            job_id = _submit_raw(["-c", STAMP, stamp], directory)
            while not _squeue_ended(job_id):
                time.sleep(TICK)
            latencies.append((time.time() - float(Path(stamp).read_text())) * 1000.0)
        return {"latency_ms": latencies}
    job_ids = [_submit_raw(["-c", "sleep 3"], directory) for _ in range(int(p["apps"]))]
    calls = 0
    started = time.perf_counter()
    pending = set(job_ids)
    while pending:  # one poll per app per tick, as independent waiters do
        for job_id in sorted(pending):
            calls += 1
            if _squeue_ended(job_id):
                pending.discard(job_id)
        time.sleep(TICK)
    return {"squeue_per_s": calls / (time.perf_counter() - started)}


def run(smoke: bool, trials: int) -> list[dict[str, Any]]:
    """Orchestrate the Slurm benchmark; returns summary rows."""
    exits = 3 if smoke else 10
    return [
        *orchestrate(
            "slurm end->wait",
            Path(__file__),
            [{"case": "end", "exits": exits, "tick": TICK}],
            ["latency_ms"],
            trials,
            sides=("ours", "floor"),
        ),
        *orchestrate(
            "slurm squeue/s",
            Path(__file__),
            [{"case": "watch", "apps": apps, "tick": TICK} for apps in (1, 10 if smoke else 100)],
            ["squeue_per_s"],
            trials,
            sides=("ours", "floor"),
        ),
    ]


if __name__ == "__main__":
    if is_driver():
        driver_main({"ours": ours, "floor": floor})
    else:
        ns = bench_args(default_trials=3)
        rows = run(ns.smoke, ns.trials)
        print(table(rows))
        print("wrote", write_json("slurm-smoke" if ns.smoke else "slurm", rows))
