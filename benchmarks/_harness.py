"""Shared machinery for the asynctorchx benchmarks (issue 6).

Each ``bench_*.py`` script is both an orchestrator and a driver:

* run as ``python bench_x.py [--smoke] [--trials N]`` (our venv) it interleaves
  trials of every *side* (``ours``, ``torchx``, ``floor``), each trial a fresh
  subprocess, then prints a table and returns the rows for ``run_all.py``;
* run as ``python bench_x.py --side S --params JSON`` it executes one trial of
  side ``S`` and prints one JSON object (the measurements) as its last line.

The ``torchx`` side runs under ``benchmarks/.venv-torchx/bin/python`` so TorchX
0.7.0 never shares an interpreter with asynctorchx. Driver mode uses only the
standard library at import time, so this module imports in either venv.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
OUR_PY = REPO / ".venv" / "bin" / "python"
TORCHX_VENV = BENCH_DIR / ".venv-torchx"
TORCHX_PY = TORCHX_VENV / "bin" / "python"
RESULTS = BENCH_DIR / "results"

SIDES = ("ours", "torchx", "floor")
#: Seconds one driver subprocess may take before it is killed and recorded as an error.
DRIVER_TIMEOUT = 600.0


class Unavailable(Exception):
    """A side cannot run on this machine (module missing, no Docker); the message says why."""


def interpreter(side: str) -> Path:
    """The Python that runs ``side``: TorchX's own venv for ``torchx``, ours otherwise."""
    return TORCHX_PY if side == "torchx" else OUR_PY


def torchx_available() -> str | None:
    """``None`` when TorchX 0.7.0 imports in its venv, else the reason it does not."""
    if not TORCHX_PY.exists():
        return f"{TORCHX_PY} missing (the TorchX venv was not built)"
    proc = subprocess.run(
        [str(TORCHX_PY), "-c", "import torchx, torchx.runner; print(torchx.__version__)"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return f"torchx does not import in {TORCHX_PY}: {tail}"
    return None


def docker_available() -> str | None:
    """``None`` when a Docker engine answers ``docker info``, else why not."""
    try:
        proc = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=20)
    except (FileNotFoundError, subprocess.TimeoutExpired) as exc:
        return f"docker CLI unusable: {exc}"
    if proc.returncode != 0:
        return "no Docker engine: " + (proc.stderr.strip().splitlines() or ["?"])[-1]
    return None


def stats(values: Sequence[float]) -> dict[str, float]:
    """Median, p90, p99 (nearest rank), min and max of ``values`` (any unit, kept as given);
    ``n`` is how many samples there were."""
    ordered = sorted(values)

    def rank(q: float) -> float:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    return {
        "median": statistics.median(ordered),
        "p90": rank(0.9),
        "p99": rank(0.99),
        "min": ordered[0],
        "max": ordered[-1],
        "n": len(ordered),
    }


def children_rusage_maxrss_mb() -> float:
    """Peak RSS (MB) of the largest reaped child so far (``ru_maxrss`` is KB on Linux)."""
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


def self_maxrss_mb() -> float:
    """Peak RSS (MB) of this process."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def threads_now() -> int:
    """OS threads of this process right now (``/proc/self/task``)."""
    return len(os.listdir("/proc/self/task"))


def fds_now() -> int:
    """Open file descriptors of this process right now (``/proc/self/fd``)."""
    return len(os.listdir("/proc/self/fd"))


async def sample_usage(peaks: list[tuple[int, int]], fds: bool = True) -> None:
    """Append this process's (threads, fds) to ``peaks`` every millisecond until cancelled.

    Benchmark instrumentation for the async sides (anyio is imported here, not at module
    import, so the harness still imports in TorchX's venv). With ``fds=False`` the fd
    count is recorded as 0 and never listed: listing ``/proc/self/fd`` every millisecond
    costs the measured loop time in proportion to its open fds (0.1-0.2 ms at 1500).
    """
    import anyio

    while True:
        peaks.append((threads_now(), fds_now() if fds else 0))
        await anyio.sleep(0.001)


def timed_process(argv: Sequence[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``argv`` as a whole process: wall seconds (``wall``), exit code (``rc``), output.

    ``stdout`` and ``stderr`` are captured as text; see :func:`timed_process_rss` for RSS.
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    )
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    return {"wall": wall, "rc": proc.returncode, "stdout": out, "stderr": err}


def timed_process_rss(argv: Sequence[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Like :func:`timed_process`, reaped with ``os.wait4``: adds the child's own max RSS (MB)."""
    import tempfile

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        pid = os.posix_spawnp(
            argv[0],
            list(argv),
            env if env is not None else dict(os.environ),
            file_actions=[
                (os.POSIX_SPAWN_DUP2, out.fileno(), 1),
                (os.POSIX_SPAWN_DUP2, err.fileno(), 2),
            ],
        )
        _, status, ru = os.wait4(pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        return {
            "wall": wall,
            "max_rss_mb": ru.ru_maxrss / 1024.0,
            "rc": os.waitstatus_to_exitcode(status),
            "stdout": out.read().decode(errors="replace"),
            "stderr": err.read().decode(errors="replace"),
        }


def machine() -> dict[str, Any]:
    """The machine's description for the JSON: cores, memory, Python, Docker, package versions,
    and ``commit``, the measured checkout's ``git describe --always --dirty`` (``unknown``
    outside a git checkout)."""
    mem_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    docker = "absent"
    try:
        proc = subprocess.run(
            ["docker", "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        docker = proc.stdout.strip() or ("no engine: " + proc.stderr.strip()[-200:])
    except (FileNotFoundError, subprocess.TimeoutExpired) as exc:
        docker = f"absent ({exc})"
    versions: dict[str, str] = {}
    for py, names in ((OUR_PY, "asynctorchx anyio aiodocker attrs cattrs"), (TORCHX_PY, "torchx")):
        if not py.exists():
            continue
        code = (
            "import importlib.metadata as m, json, sys\n"
            "d={}\n"
            "for n in sys.argv[1:]:\n"
            "    try: d[n]=m.version(n)\n"
            "    except Exception: d[n]='absent'\n"
            "print(json.dumps(d))"
        )
        proc = subprocess.run([str(py), "-c", code, *names.split()], capture_output=True, text=True)
        if proc.returncode == 0:
            versions.update(json.loads(proc.stdout))
    try:
        described = subprocess.run(
            ["git", "-C", str(REPO), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        commit = described.stdout.strip() or "unknown"
    except (FileNotFoundError, subprocess.TimeoutExpired):
        commit = "unknown"
    try:
        load = os.getloadavg()
    except OSError:
        load = (0.0, 0.0, 0.0)
    return {
        "cores": os.cpu_count(),
        "memory_mb": mem_kb // 1024,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "docker": docker,
        "packages": versions,
        "commit": commit,
        "loadavg_at_start": load,
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def run_driver(script: Path, side: str, params: dict[str, Any]) -> dict[str, Any]:
    """Run one trial of ``side`` in its own interpreter; its last stdout line is JSON."""
    argv = [str(interpreter(side)), str(script), "--side", side, "--params", json.dumps(params)]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=DRIVER_TIMEOUT, cwd=REPO
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {DRIVER_TIMEOUT} s"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        return {"error": f"rc={proc.returncode}: {tail}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def driver_main(sides: dict[str, Callable[[dict[str, Any]], dict[str, Any]]]) -> None:
    """Entry for driver mode: ``--side S --params JSON``; prints the side's JSON result.

    A side raising :class:`Unavailable` prints ``{"unavailable": reason}`` and exits 0.
    """
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", required=True)
    ap.add_argument("--params", required=True)
    ns = ap.parse_args()
    try:
        out = sides[ns.side](json.loads(ns.params))
    except Unavailable as exc:
        out = {"unavailable": str(exc)}
    print(json.dumps(out))


def is_driver() -> bool:
    """True when the script was started as a driver (``--side`` present)."""
    return "--side" in sys.argv


def orchestrate(
    name: str,
    script: Path,
    cases: list[dict[str, Any]],
    metrics: list[str],
    trials: int,
    sides: Sequence[str] = SIDES,
    skip: dict[str, str] | None = None,
    refs: Sequence[str] = ("torchx", "floor"),
) -> list[dict[str, Any]]:
    """Interleave ``trials`` trials of every side of every case; summarise ``metrics``.

    Each round of trials runs every case, and within a case every side, so that a ratio
    between two cases (1,000 records against none, M = 5,000 against 500) compares trials
    of the same minutes, as a ratio between sides does. Sides rotate order per round so no
    side always runs first. A driver returns one value per metric, or a list of values when
    one trial measures several samples (every one counts in the statistics; ``n`` is the
    number of samples). A case may carry ``max_trials`` (an int) to cap its trials when one
    trial takes minutes, or ``max_trials_<side>`` to cap one side's (TorchX at N = 1000);
    these keys are not shown as parameters in the table. ``skip`` maps a side to the reason
    it is not run (e.g. TorchX venv missing). Returns one row per (case, side, metric) with
    median/p90/max and its ratio to each side of ``refs`` (``vs_<side>``: TorchX and the
    floor by default); a side whose driver crashed or timed out has ``error: True`` (one
    that said it cannot run here, :class:`Unavailable`, has only ``skipped``).
    """
    skip = dict(skip or {})
    order = [s for s in sides if s not in skip]
    all_samples: list[dict[str, dict[str, list[float]]]] = [
        {s: {m: [] for m in metrics} for s in sides} for _ in cases
    ]
    all_notes: list[dict[str, str]] = [{} for _ in cases]
    for t in range(trials):
        rot = order[t % len(order) :] + order[: t % len(order)] if order else []
        for case, samples, notes in zip(cases, all_samples, all_notes, strict=True):
            if t >= int(case.get("max_trials", trials)):
                continue
            for side in rot:
                if side in notes or t >= int(case.get(f"max_trials_{side}", trials)):
                    continue
                res = run_driver(script, side, case)
                if "unavailable" in res or "error" in res:
                    notes[side] = res.get("unavailable") or res["error"]
                    if "error" in res:
                        notes[side + ":error"] = "1"
                    continue
                for m in metrics:
                    value = res.get(m)
                    if isinstance(value, list):  # a trial that measured several samples
                        samples[side][m].extend(float(v) for v in value)
                    elif value is not None:
                        samples[side][m].append(float(value))
                if res.get("note"):
                    notes.setdefault(side + ":note", str(res["note"]))
    rows: list[dict[str, Any]] = []
    for case, samples, notes in zip(cases, all_samples, all_notes, strict=True):
        for m in metrics:
            per_side = {s: stats(v[m]) for s, v in samples.items() if v[m]}
            for s in sides:
                row: dict[str, Any] = {
                    "bench": name,
                    "case": _case_str(case),
                    "metric": m,
                    "side": s,
                }
                if s in per_side:
                    row.update(per_side[s])
                    for ref in refs:
                        if ref != s and ref in per_side and per_side[ref]["median"]:
                            row[f"vs_{ref}"] = per_side[s]["median"] / per_side[ref]["median"]
                else:
                    row["skipped"] = skip.get(s) or notes.get(s) or "no value"
                    if s not in skip and notes.get(s + ":error"):
                        row["error"] = True
                if notes.get(s + ":note"):
                    row["note"] = notes[s + ":note"]
                rows.append(row)
    return rows


def _case_str(case: dict[str, Any]) -> str:
    return " ".join(
        f"{k}={v}" for k, v in case.items() if k != "smoke" and not k.startswith("max_trials")
    )


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a ``tabulate`` table (times as given by each benchmark's metric name)."""
    from tabulate import tabulate

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4g}"
        return "" if v is None else str(v)

    head = [
        "bench",
        "case",
        "metric",
        "side",
        "median",
        "p90",
        "p99",
        "max",
        "n",
        "vs_torchx",
        "vs_floor",
    ]
    for r in rows:  # further ratios a benchmark asked for (e.g. vs_floor_capture)
        head.extend(k for k in r if k.startswith("vs_") and k not in head)
    head.append("skipped/note")
    body = [
        [fmt(r.get(h)) for h in head[:-1]] + [(r.get("skipped") or r.get("note") or "")[:70]]
        for r in rows
    ]
    return str(tabulate(body, headers=head))


def bench_args(default_trials: int = 5) -> argparse.Namespace:
    """Orchestrator options: ``--smoke`` (1 trial, small N) and ``--trials``."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--trials", type=int, default=None)
    ns = ap.parse_args()
    if ns.trials is None:
        ns.trials = 1 if ns.smoke else default_trials
    return ns


def save(name: str, rows: list[dict[str, Any]], desc: dict[str, Any]) -> Path:
    """Write a standalone run's ``results/<name>.json``: ``desc`` (from :func:`machine`,
    taken at the start) gets the load average at the end, then :func:`write_json`."""
    with contextlib.suppress(OSError):
        desc["loadavg_at_end"] = os.getloadavg()
    path = write_json(name, rows, None, desc)
    print(f"wrote {path}")
    return path


def remove_at_exit(path: str) -> None:
    """Remove ``path`` when this driver exits, then flush the file system (``os.sync``).

    A trial's removed files are written back and journalled by the kernel after its driver
    has exited; without the flush that work lands in the next trial, of any case or side
    (with cases interleaved, the 1,000 records benchmark 6's ``records=1000`` case writes
    and removes would land in its ``script=1`` and ``records=0`` trials).
    """
    import atexit
    import shutil

    def remove() -> None:
        shutil.rmtree(path, ignore_errors=True)
        os.sync()

    atexit.register(remove)


def isolated_state_dir() -> str:
    """Point ``ASYNCTORCHX_STATE_DIR`` at a fresh directory for this driver; return it.

    The local schedulers keep app records in the user's state directory and prune it at
    their first submit (reading every record): on a machine where other programs of the
    same user leave records there, that cost would vary from trial to trial. This one
    is a returning user's with no record left: its backends' directories exist (0700,
    as the schedulers make them once per user: three ``mkdir``, ~1.7 ms of CPU on the
    build VM's ext4 that a trial would otherwise pay and a user pays once) and are empty.
    """
    import tempfile

    path = tempfile.mkdtemp(prefix="atx-bench-state-")
    remove_at_exit(path)
    for backend in ("local_cwd", "local_dir"):
        os.mkdir(os.path.join(path, backend), 0o700)
        os.mkdir(os.path.join(path, backend, "cancel"), 0o700)
    os.environ["ASYNCTORCHX_STATE_DIR"] = path
    return path


def default_skips() -> dict[str, str]:
    """Sides to skip on this machine, with the reason (currently: TorchX unusable)."""
    reason = torchx_available()
    return {"torchx": reason} if reason else {}


def write_json(
    name: str,
    rows: list[dict[str, Any]],
    extra: dict[str, Any] | None = None,
    desc: dict[str, Any] | None = None,
) -> Path:
    """Write ``benchmarks/results/<name>.json``: ``machine`` (``desc``, else :func:`machine`
    now), ``rows`` (as from :func:`orchestrate`) and ``extra``'s keys. Returns the path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    body = {"machine": desc or machine(), "rows": rows, **(extra or {})}
    path.write_text(json.dumps(body, indent=2))
    return path
