"""Benchmark 9: the ``slurm`` scheduler against raw ``squeue`` poll loops and TorchX 0.7.0.

Needs the local cluster (``bash scripts/slurm-cluster.sh start``); without one the whole
benchmark is skipped with one line saying so. Every side polls at the same tick (``TICK``
seconds). Three cases:

* ``end``: a one-replica job whose replica writes the wall clock as its last act
  (``exec date +%s.%N``); ``latency_ms`` = that stamp to ``wait`` returning (ours), to a
  ``squeue -h -t all -j ID`` loop sleeping ``TICK`` between calls seeing it ended (floor),
  to TorchX's ``Runner.wait(wait_interval=TICK)`` returning (torchx). All include Slurm's
  own delay in reporting the end (``COMPLETING``).
* ``start``: ``submit_ms`` = submit returning, ``running_ms`` = submit called to RUNNING
  seen: ours awaits ``wait_for_state_change`` from ``PENDING``; the floor runs
  ``sbatch --parsable`` and polls ``squeue`` every ``TICK``.
* ``watch``: ``apps`` held jobs (``sbatch --hold``: pending, never started) watched for
  ``WINDOW`` seconds; ``squeue_per_s`` and ``squeue_per_tick``: ours (every waiter of one
  scheduler shares one batched ``squeue`` per tick), floor (one ``squeue -j ID`` per app per
  tick, what independent pollers such as TorchX's ``Runner.wait`` do; with many apps the loop
  cannot keep up and the figure is as many calls as ``squeue`` can answer in a row).

* ``forgotten``: ``apps`` jobs watched at once by one scheduler, half of them ended and
  already forgotten by ``squeue`` (past ``MinJobAge``: only ``sacct`` knows them), half held
  and released once the watch began, each writing the clock as its last act;
  ``squeue_per_tick`` and ``sacct_per_tick`` = calls per poll of the scheduler's batched
  poller (the target is at most one of each), ``latency_ms`` = a released job's stamp to its
  ``wait`` returning. Ours only: it needs the cluster's accounting (``MinJobAge=10``).
* ``submit``: ``apps`` one-replica jobs (``SUBMIT_APPS``), each writing the clock as its last
  act, submitted from an empty queue; ``submit_per_s`` = apps over first submit called to last
  submit returned, ``last_end_ms`` = the latest stamp to every job seen ended. Ours: one task
  per app calling ``group.run`` in one ``runner.group()``, the block left after
  ``group.as_completed()`` yielded every app; floor: an ``sbatch --parsable`` loop, then a
  ``squeue --me`` loop every ``TICK`` until none of the user's jobs is active;
  ``floor_parallel``: the same with ``IN_FLIGHT`` sbatch at once (threads); TorchX: a
  ``Runner.run`` loop (no end seen: it has no group). Every side's scripts are TorchX's batch
  script for the same app; the raw sides' are written before the clock starts.

TorchX's side needs ``sacct``: its ``describe`` runs ``sacct --parsable2 -j ID`` with
``check=True``. On a cluster without accounting (``start --no-accounting``) sacct exits 1,
so the side reports itself unavailable with sacct's message, after trying.

Usage: ``.venv/bin/python benchmarks/bench_slurm.py [--smoke] [--trials N]``; prints a table
and writes ``benchmarks/results/slurm.json``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import (
    Unavailable,
    bench_args,
    default_skips,
    driver_main,
    is_driver,
    orchestrate,
    table,
    write_json,
)
from _sides import tmpdir

#: Seconds between two squeue calls, on every side.
TICK = 0.5
#: Seconds the ``watch`` case watches its held jobs.
WINDOW = 5.0
#: The replica's script: ``date`` replaces the shell and writes the clock as its last act.
STAMP = 'exec date +%s.%N > "$0"'
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}
#: The ``submit`` case's apps, and the raw parallel loop's sbatch in flight (ours' default).
SUBMIT_APPS = 1000
IN_FLIGHT = 16
#: Job states of a job not yet ended (squeue ``-t``).
ACTIVE = "PD,R,CG,CF,S,RQ"
START_CLUSTER = "bash scripts/slurm-cluster.sh start"


def cluster_unavailable() -> str | None:
    """``None`` when a Slurm controller answers ``scontrol ping``, else why not."""
    if shutil.which("scontrol") is None:
        return f"no Slurm client tools (scontrol); run: {START_CLUSTER}"
    try:
        ping = subprocess.run(
            ["scontrol", "ping"], capture_output=True, text=True, timeout=15, check=False
        )
    except subprocess.TimeoutExpired:
        return f"scontrol ping did not answer within 15 s; run: {START_CLUSTER}"
    if "is UP" not in ping.stdout:
        return f"no Slurm controller answers scontrol ping; run: {START_CLUSTER}"
    return None


def _check_cluster() -> None:
    reason = cluster_unavailable()
    if reason:
        raise Unavailable(reason)


def _role_fields(script: list[str]) -> dict[str, Any]:
    return {"name": "bench", "image": "", "entrypoint": "sh", "args": script}


def _app(script: list[str]) -> Any:
    from asynctorchx.specs import AppDef, Resource, Role

    role = Role(**_role_fields(script), resource=Resource(cpu=1, gpu=0, memMB=100))
    return AppDef(name="bench", roles=[role])


def _submit_raw(script: list[str], directory: str, *options: str) -> str:
    """Submit the same job as ours, with sbatch directly: the floor needs no scheduler."""
    from asynctorchx.schedulers.slurm_scheduler import build_batch_request

    request = build_batch_request(_app(script), {"time": "5"})
    path = os.path.join(directory, "bench.sh")
    Path(path).write_text(request.materialize())
    done = subprocess.run(
        [*request.cmd, *options, f"--chdir={directory}", path],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().split(";")[0]


def _submit_held(count: int, directory: str) -> list[str]:
    """``count`` jobs that stay PENDING (held) until cancelled."""
    return [
        subprocess.run(
            ["sbatch", "--parsable", "--hold", f"--chdir={directory}", "--wrap", "true"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for _ in range(count)
    ]


def _scancel(job_ids: list[str]) -> None:
    for start in range(0, len(job_ids), 200):
        subprocess.run(["scancel", *job_ids[start : start + 200]], check=False)


def _squeue_states(job_id: str) -> list[str]:
    done = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"], capture_output=True, text=True
    )
    return done.stdout.split()


def _forgotten_jobs(count: int, directory: str) -> list[str]:
    """``count`` ended jobs that ``squeue`` no longer lists (polled for, at most 150 s)."""
    if subprocess.run(["sacct", "-n", "-j", "1"], capture_output=True).returncode != 0:
        raise Unavailable(f"the cluster has no accounting; run: {START_CLUSTER}")
    job_ids = [_submit_raw(["-c", "true"], directory) for _ in range(count)]
    deadline = time.monotonic() + 150
    while subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", ",".join(job_ids), "-o", "%i"],
        capture_output=True,
        text=True,
    ).stdout.strip():
        if time.monotonic() > deadline:
            raise Unavailable("squeue still lists ended jobs after 150 s (MinJobAge too long?)")
        time.sleep(1)
    return job_ids


def _stamp_latency_ms(stamp: str) -> float:
    return (time.time() - float(Path(stamp).read_text())) * 1000.0


def _active_jobs() -> list[str]:
    """The user's jobs not yet ended."""
    done = subprocess.run(
        ["squeue", "--me", "-h", "-t", ACTIVE, "-o", "%i"], capture_output=True, text=True
    )
    return done.stdout.split()


def _drain(timeout: float = 300.0) -> None:
    """Wait until no job of the user is active: a trial starts from an empty queue."""
    deadline = time.monotonic() + timeout
    while _active_jobs():
        if time.monotonic() > deadline:
            raise Unavailable(f"the user's jobs still run after {timeout:.0f} s: squeue --me")
        time.sleep(TICK)


def _stamps(count: int, directory: str) -> list[str]:
    return [os.path.join(directory, f"stamp{index}") for index in range(count)]


def _last_end_ms(stamps: list[str], seen: float) -> float:
    """Wall time from the latest of ``stamps`` to ``seen`` (``time.time()``)."""
    return (seen - max(float(Path(stamp).read_text()) for stamp in stamps)) * 1000.0


def _raw_submits(stamps: list[str], directory: str) -> list[list[str]]:
    """The sbatch command of each stamp's job, its script written (as ours writes it)."""
    from asynctorchx.schedulers.slurm_scheduler import build_batch_request

    commands = []
    for index, stamp in enumerate(stamps):
        request = build_batch_request(_app(["-c", STAMP, stamp]), {"time": "5"})
        path = os.path.join(directory, f"bench{index}.sh")
        Path(path).write_text(request.materialize())
        commands.append([*request.cmd, f"--chdir={directory}", path])
    return commands


def _sbatch(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return done.stdout.strip().split(";")[0]


def _raw_submit_case(p: dict[str, Any], in_flight: int) -> dict[str, Any]:
    """The ``submit`` case's raw side: ``in_flight`` sbatch at once (1: a loop)."""
    directory = tmpdir("atx-bench-slurm-")
    stamps = _stamps(int(p["apps"]), directory)
    commands = _raw_submits(stamps, directory)
    _drain()
    started = time.perf_counter()
    if in_flight == 1:
        for argv in commands:
            _sbatch(argv)
    else:
        with ThreadPoolExecutor(in_flight) as pool:
            list(pool.map(_sbatch, commands))
    submit_s = time.perf_counter() - started
    while _active_jobs():
        time.sleep(TICK)
    seen = time.time()
    return {"submit_per_s": len(commands) / submit_s, "last_end_ms": _last_end_ms(stamps, seen)}


def ours(p: dict[str, Any]) -> dict[str, Any]:
    """One trial of our scheduler for case ``p["case"]``."""
    _check_cluster()
    import anyio

    from asynctorchx.schedulers.slurm_scheduler import SlurmScheduler
    from asynctorchx.specs import AppState

    directory = tmpdir("atx-bench-slurm-")
    os.chdir(directory)

    async def end() -> dict[str, Any]:
        latencies: list[float] = []
        async with SlurmScheduler("bench", poll_interval=TICK) as slurm:
            for index in range(int(p["exits"])):
                stamp = os.path.join(directory, f"stamp{index}")
                job_id = await slurm.submit(_app(["-c", STAMP, stamp]), {"time": "5"})
                await slurm.wait(job_id)
                latencies.append(_stamp_latency_ms(stamp))
        return {"latency_ms": latencies}

    async def start() -> dict[str, Any]:
        submit_ms: list[float] = []
        running_ms: list[float] = []
        async with SlurmScheduler("bench", poll_interval=TICK) as slurm:
            for _ in range(int(p["starts"])):
                started = time.perf_counter()
                job_id = await slurm.submit(_app(["-c", "sleep 30"]), {"time": "5"})
                submit_ms.append((time.perf_counter() - started) * 1000.0)
                state = AppState.PENDING
                while state == AppState.PENDING:
                    response = await slurm.wait_for_state_change(job_id, state)
                    assert response is not None
                    state = response.state
                running_ms.append((time.perf_counter() - started) * 1000.0)
                await slurm.cancel(job_id)
                await slurm.wait(job_id)
        return {"submit_ms": submit_ms, "running_ms": running_ms}

    async def watch() -> dict[str, Any]:
        job_ids = _submit_held(int(p["apps"]), directory)
        try:
            async with SlurmScheduler("bench", poll_interval=TICK) as slurm:
                before = slurm.commands.counts["squeue"]
                started = time.perf_counter()
                with anyio.move_on_after(WINDOW):
                    async with anyio.create_task_group() as task_group:
                        for job_id in job_ids:
                            task_group.start_soon(slurm.wait, job_id)
                elapsed = time.perf_counter() - started
                calls = slurm.commands.counts["squeue"] - before
        finally:
            _scancel(job_ids)
        return {"squeue_per_s": calls / elapsed, "squeue_per_tick": calls * TICK / elapsed}

    async def forgotten() -> dict[str, Any]:
        old = _forgotten_jobs(int(p["apps"]) // 2, directory)
        stamps = [os.path.join(directory, f"stamp{index}") for index in range(len(old))]
        held = {_submit_raw(["-c", STAMP, stamp], directory, "--hold"): stamp for stamp in stamps}
        latencies: list[float] = []
        try:
            slurm = SlurmScheduler("bench", poll_interval=TICK)
            async with slurm:

                async def wait(job_id: str) -> None:
                    await slurm.wait(job_id)
                    if job_id in held:
                        latencies.append(_stamp_latency_ms(held[job_id]))

                async with anyio.create_task_group() as task_group:
                    for job_id in [*old, *held]:
                        task_group.start_soon(wait, job_id)
                    await anyio.run_process(["scontrol", "release", ",".join(held)])
                polls = slurm._poller().polls
                counts = slurm.commands.counts
        finally:
            _scancel(list(held))
        return {
            "squeue_per_tick": counts["squeue"] / polls,
            "sacct_per_tick": counts["sacct"] / polls,
            "latency_ms": latencies,
        }

    async def submit() -> dict[str, Any]:
        from asynctorchx.runner import Runner
        from asynctorchx.schedulers.slurm_scheduler import create_scheduler

        stamps = _stamps(int(p["apps"]), directory)
        apps = [_app(["-c", STAMP, stamp]) for stamp in stamps]
        _drain()
        factories = {"slurm": create_scheduler}
        async with Runner("bench", factories, scheduler_params={"poll_interval": TICK}) as runner:
            runner.scheduler_run_opts("slurm")  # the scheduler's modules imported first
            async with runner.group() as group:
                started = time.perf_counter()
                async with anyio.create_task_group() as submits:
                    for app in apps:
                        submits.start_soon(group.run, app, "slurm", {"time": "5"})
                submit_s = time.perf_counter() - started
                ended = [status.state async for _, status in group.as_completed()]
                seen = time.time()
        assert ended == [AppState.SUCCEEDED] * len(apps), ended
        return {"submit_per_s": len(apps) / submit_s, "last_end_ms": _last_end_ms(stamps, seen)}

    async def array() -> dict[str, Any]:
        from asynctorchx.runner import Runner
        from asynctorchx.schedulers.slurm_scheduler import create_scheduler

        apps = [_app(["-c", "true"]) for _ in range(int(p["apps"]))]
        _drain()
        factories = {"slurm": create_scheduler}
        async with Runner("bench", factories, scheduler_params={"poll_interval": TICK}) as runner:
            runner.scheduler_run_opts("slurm")  # the scheduler's modules imported first
            async with runner.group() as group:
                started = time.perf_counter()
                handles = await group.run_many(apps, "slurm", {"time": "5"})
                submit_s = time.perf_counter() - started
            ended = [status.state for status in (await group.wait()).values()]
        assert len({handle.rpartition("_")[0] for handle in handles}) == 1, handles[:3]
        assert ended == [AppState.SUCCEEDED] * len(apps), ended
        return {"submit_s": submit_s}

    cases = {
        "array": array,
        "end": end,
        "start": start,
        "watch": watch,
        "forgotten": forgotten,
        "submit": submit,
    }
    return anyio.run(cases[p["case"]])


def floor(p: dict[str, Any]) -> dict[str, Any]:
    """One trial of raw ``sbatch``/``squeue`` loops at the same tick."""
    _check_cluster()
    if p["case"] == "submit":
        return _raw_submit_case(p, 1)
    directory = tmpdir("atx-bench-slurm-")
    if p["case"] == "end":
        latencies: list[float] = []
        for index in range(int(p["exits"])):
            stamp = os.path.join(directory, f"stamp{index}")
            job_id = _submit_raw(["-c", STAMP, stamp], directory)
            states = _squeue_states(job_id)
            while not states or not set(states) <= FINISHED:
                time.sleep(TICK)
                states = _squeue_states(job_id)
            latencies.append(_stamp_latency_ms(stamp))
        return {"latency_ms": latencies}
    if p["case"] == "start":
        submit_ms: list[float] = []
        running_ms: list[float] = []
        for _ in range(int(p["starts"])):
            started = time.perf_counter()
            job_id = _submit_raw(["-c", "sleep 30"], directory)
            submit_ms.append((time.perf_counter() - started) * 1000.0)
            while _squeue_states(job_id) in ([], ["PENDING"]):
                time.sleep(TICK)
            running_ms.append((time.perf_counter() - started) * 1000.0)
            _scancel([job_id])
        return {"submit_ms": submit_ms, "running_ms": running_ms}
    job_ids = _submit_held(int(p["apps"]), directory)
    calls = 0
    try:
        started = time.perf_counter()
        while time.perf_counter() - started < WINDOW:  # one poll per app per tick
            for job_id in job_ids:
                calls += 1
                _squeue_states(job_id)
                if time.perf_counter() - started >= WINDOW:
                    break
            time.sleep(TICK)
        elapsed = time.perf_counter() - started
    finally:
        _scancel(job_ids)
    return {"squeue_per_s": calls / elapsed, "squeue_per_tick": calls * TICK / elapsed}


def floor_parallel(p: dict[str, Any]) -> dict[str, Any]:
    """One trial of the ``submit`` case's raw side, ``IN_FLIGHT`` sbatch at once."""
    _check_cluster()
    return _raw_submit_case(p, int(p["in_flight"]))


def _tx_app(script: list[str]) -> Any:
    from torchx.specs import AppDef, Resource, Role

    role = Role(**_role_fields(script), resource=Resource(cpu=1, gpu=0, memMB=100))
    return AppDef(name="bench", roles=[role])


# Runs in TorchX's venv (``torchx`` side, cases ``end`` and ``submit``).
def torchx(p: dict[str, Any]) -> dict[str, Any]:
    """One trial of TorchX 0.7.0's ``Runner.wait(wait_interval=TICK)`` (needs sacct), or of
    its ``Runner.run`` loop (case ``submit``)."""
    _check_cluster()
    from torchx.runner import get_runner

    directory = tmpdir("atx-bench-slurm-")
    os.chdir(directory)
    if p["case"] == "submit":
        apps = [_tx_app(["-c", STAMP, stamp]) for stamp in _stamps(int(p["apps"]), directory)]
        _drain()
        with get_runner("bench") as runner:
            started = time.perf_counter()
            for app in apps:
                runner.run(app, "slurm", {"time": "5"})
            submit_s = time.perf_counter() - started
        _drain()  # not timed: the next trial starts from an empty queue
        return {"submit_per_s": len(apps) / submit_s}
    latencies: list[float] = []
    with get_runner("bench") as runner:
        for index in range(int(p["exits"])):
            stamp = os.path.join(directory, f"stamp{index}")
            handle = runner.run(_tx_app(["-c", STAMP, stamp]), "slurm", {"time": "5"})
            try:
                runner.wait(handle, wait_interval=TICK)
            except subprocess.CalledProcessError as error:
                job_id = handle.rsplit("/", 1)[-1]
                sacct = subprocess.run(["sacct", "-j", job_id], capture_output=True, text=True)
                raise Unavailable(
                    f"its describe runs {' '.join(error.cmd)}, which exits {error.returncode}:"
                    f" {sacct.stderr.strip() or sacct.stdout.strip()}"
                ) from None
            latencies.append(_stamp_latency_ms(stamp))
    return {"latency_ms": latencies}


def run(smoke: bool, trials: int) -> list[dict[str, Any]]:
    """Orchestrate the Slurm benchmark; returns summary rows (skipped ones without a cluster)."""
    reason = cluster_unavailable()
    if reason:
        print(f"9 slurm: skipped, {reason}", flush=True)
    everything = {side: reason for side in ("ours", "torchx", "floor")} if reason else {}
    exits = 3 if smoke else 10
    script = Path(__file__)
    return [
        *orchestrate(
            "9 slurm end->wait",
            script,
            [{"case": "end", "exits": exits, "tick": TICK}],
            ["latency_ms"],
            trials,
            skip=everything or default_skips(),
        ),
        *orchestrate(
            "9 slurm submit->RUNNING",
            script,
            [{"case": "start", "starts": 3 if smoke else 10, "tick": TICK}],
            ["submit_ms", "running_ms"],
            trials,
            sides=("ours", "floor"),
            skip=everything,
        ),
        *orchestrate(
            "9 slurm squeue/s",
            script,
            [
                {"case": "watch", "apps": apps, "tick": TICK, "window": WINDOW}
                for apps in ((1, 10) if smoke else (1, 100, 1000))
            ],
            ["squeue_per_s", "squeue_per_tick"],
            trials,
            sides=("ours", "floor"),
            skip=everything,
        ),
        *orchestrate(
            "9 slurm half forgotten",
            script,
            [{"case": "forgotten", "apps": 10 if smoke else 100, "tick": TICK}],
            ["squeue_per_tick", "sacct_per_tick", "latency_ms"],
            trials,
            sides=("ours",),
            skip=everything,
            refs=(),
        ),
        *submit_rows(smoke, trials, everything or default_skips()),
        *orchestrate(
            "9 slurm array",
            script,
            [{"case": "array", "apps": 20 if smoke else SUBMIT_APPS, "tick": TICK}],
            ["submit_s"],
            trials,
            sides=("ours",),
            skip=everything,
            refs=(),
        ),
    ]


def submit_rows(smoke: bool, trials: int, skip: dict[str, str]) -> list[dict[str, Any]]:
    """The ``9 slurm submit`` rows (case ``submit``); TorchX's loop runs one trial."""
    case = {
        "case": "submit",
        "apps": 20 if smoke else SUBMIT_APPS,
        "in_flight": IN_FLIGHT,
        "tick": TICK,
        "max_trials_torchx": 1,
    }
    return orchestrate(
        "9 slurm submit",
        Path(__file__),
        [case],
        ["submit_per_s", "last_end_ms"],
        trials,
        sides=("ours", "floor", "floor_parallel", "torchx"),
        skip=skip,
        refs=("torchx", "floor", "floor_parallel"),
    )


if __name__ == "__main__":
    if is_driver():
        driver_main(
            {"ours": ours, "floor": floor, "floor_parallel": floor_parallel, "torchx": torchx}
        )
    else:
        ns = bench_args(default_trials=3)
        rows = run(ns.smoke, ns.trials)
        print(table(rows))
        print("wrote", write_json("slurm-smoke" if ns.smoke else "slurm", rows))
