"""Run every benchmark (interleaved sides, several trials), print one table, write JSON.

Usage: ``.venv/bin/python benchmarks/run_all.py [--smoke] [--trials N] [--only 1,3]``.
Writes ``benchmarks/results/all.json`` (or ``smoke.json``; with ``--only 1,3``,
``all-only-1-3.json``) with the machine's description.
Exits 1 when a side's driver crashed or timed out (so CI's smoke run keeps the benchmarks
working); a side that cannot run here (no Docker engine, no TorchX venv, no Slurm cluster)
is only reported. Benchmark 10 (Kubernetes, issue 11) judges its own targets
(``bench_kubernetes.targets``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_cli
import bench_docker
import bench_kubernetes
import bench_lines_lost
import bench_log_tail
import bench_log_throughput
import bench_many_apps
import bench_scale_replicas
import bench_slurm
import bench_sweep
import bench_wait_latency
import bench_web_fanout
from _harness import machine, table, torchx_available, write_json
from _targets import verdicts
from tabulate import tabulate

#: benchmark number -> (module, full-run trials)
BENCHES: dict[int, tuple[Any, int]] = {
    1: (bench_wait_latency, 10),
    2: (bench_log_tail, 7),
    3: (bench_scale_replicas, 5),
    4: (bench_many_apps, 3),
    5: (bench_log_throughput, 3),
    6: (bench_cli, 10),
    7: (bench_docker, 3),
    8: (bench_lines_lost, 1),
    9: (bench_slurm, 3),
    10: (bench_kubernetes, 3),
    11: (bench_sweep, 3),
    12: (bench_web_fanout, 3),
}


def main() -> None:
    """Parse options, run the selected benchmarks in order, print and save the results."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true", help="one trial, small N: seconds, not minutes")
    ap.add_argument(
        "--trials", type=int, default=None, help="override every benchmark's trial count"
    )
    ap.add_argument("--only", default="", help="comma-separated benchmark numbers, e.g. 1,3")
    ns = ap.parse_args()
    only = {int(x) for x in ns.only.split(",") if x.strip()} or set(BENCHES)
    reason = torchx_available()
    if reason:
        print(f"TorchX side skipped: {reason}")
    desc = machine()
    print("machine:", desc)
    rows: list[dict[str, Any]] = []
    timings: dict[str, float] = {}
    for num in sorted(only):
        mod, trials = BENCHES[num]
        n = ns.trials or (1 if ns.smoke else trials)
        t0 = time.perf_counter()
        got = mod.run(ns.smoke, n)
        timings[str(num)] = time.perf_counter() - t0
        print(table(got), flush=True)
        rows.extend(got)
    print()
    print(table(rows))
    judged = verdicts(rows)
    if 10 in only:  # issue 11's targets live with their benchmark
        judged.extend(bench_kubernetes.targets(rows))
    print()
    print(tabulate([list(v.values()) for v in judged], headers=["#", "target", "measured", ""]))
    desc["loadavg_at_end"] = os.getloadavg()
    extra = {"bench_seconds": timings, "targets": judged}
    name = "smoke" if ns.smoke else "all"
    if ns.only.strip():  # a partial run must not overwrite the full run's results
        name += "-only-" + "-".join(str(n) for n in sorted(only))
    path = write_json(name, rows, extra, desc)
    print(f"wrote {path}")
    broken = sorted({f"{r['bench']} ({r['side']})" for r in rows if r.get("error")})
    if broken:
        print("benchmarks that crashed:", ", ".join(broken), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
