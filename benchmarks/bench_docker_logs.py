"""Benchmark 7 (logs): follow and re-read one ``local_docker`` replica's log (issue 15).

One container (image ``asynctorchx-test/busybox:latest``) writes ``lines`` lines of
``width`` bytes to stdout (``yes`` piped to ``head``), then one line of ``LONG_LINE``
characters: 1 M x 100 B (100 MB) in the full run, 20,000 x 100 B (2 MB) in smoke mode.
Ours is read through the public API users call, a ``Runner`` (``run``, ``log_lines``,
``wait``). In the same driver process, on that container:

* ``follow_mb_per_s``: ``Runner.log_lines(should_tail=True)`` from ``run`` returning until
  the follow ends (the container has exited and every line was yielded);
* ``reread_mb_per_s``: ``Runner.log_lines`` of the exited container (no follow);
* ``docker_logs_mb_per_s``: the floor, ``docker logs <container>`` of the same container
  into a pipe drained in 1 MiB reads (bytes, no lines). The re-read and the floor run in
  turn, in an order that varies from trial to trial (the driver's pid parity).

Two more sides measure the follow's own floors, each on a container of its own submitted
the same way (run in turn with ours, the order rotating per trial: run at once they would
share the two cores and dockerd), timed from the scheduler's ``submit`` returning to the
end of the log:

* ``aiodocker_follow``: the engine's follow read raw through aiodocker, the request ours
  makes (``follow=1``, ``timestamps=1``, both streams), its chunks counted and dropped:
  no frame parsed, no line made. The limit of what our API can do over this engine;
* ``docker_logs_follow``: ``docker logs -f <container>`` into a pipe drained in 1 MiB
  reads.

MB = 10^6 bytes of log text (``lines * width``). Ours' rows carry ``vs_floor`` (ours /
``docker logs``, medians); ours' follow row also ``vs_aiodocker_follow`` and
``vs_docker_logs_follow``. ``peak_rss_mb``: the driver's peak RSS after all three, which
holds the scheduler and one block of lines at a time, never the log (compare the smoke
size with the full one). Every read checks the line count and that each line is whole
(``width`` bytes, the last ``LONG_LINE + 1``: the engine splits lines over 16 KiB into
several frames, which
``tests/schedulers/docker/test_log_frames.py`` covers). TorchX's ``DockerScheduler`` is not
run (its ``log_iter`` reads through docker-py, a different floor). Skipped, with the
reason, when no Docker engine answers.

``python benchmarks/bench_docker_logs.py [--smoke] [--trials N]`` prints the table and
writes ``benchmarks/results/docker_logs.json`` (``docker_logs-smoke.json``).
"""

from __future__ import annotations

import functools
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
LONG_LINE = 40_000  # characters of the log's last line (issue 36: it comes back whole)
FRAME_SPLIT = 16 * 1024  # the engine's most text per frame
METRICS = ["follow_mb_per_s", "reread_mb_per_s", "docker_logs_mb_per_s", "peak_rss_mb"]
SIDES = ("ours", "aiodocker_follow", "docker_logs_follow")
FOLLOW_FLOORS = ("aiodocker_follow", "docker_logs_follow")


def _docker_logs(container: str, follow: bool = False) -> tuple[float, int]:
    """Seconds and bytes of ``docker logs [-f] container`` into a pipe drained in 1 MiB reads."""
    t0 = time.perf_counter()
    size = 0
    argv = ["docker", "logs", *(["-f"] if follow else []), container]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        assert proc.stdout is not None
        while chunk := proc.stdout.read(1 << 20):
            size += len(chunk)
    return time.perf_counter() - t0, size


def _app(p: dict[str, Any]) -> Any:
    """The benchmark's app: one replica writing ``lines`` lines of ``width`` bytes."""
    from _sides import ours_module

    api = ours_module("asynctorchx.specs.api")
    lines, width = int(p["lines"]), int(p["width"])
    script = f"yes {'x' * (width - 1)} | head -n {lines}; printf '%{LONG_LINE}s\\n' '' | tr ' ' y"
    return api.AppDef(
        name="dl",
        roles=[api.Role(name="r", image=IMAGE, entrypoint="sh", args=["-c", script])],
    )


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

    runner_api = ours_module("asynctorchx.runner")
    specs = ours_module("asynctorchx.specs")
    lines, width = int(p["lines"]), int(p["width"])
    mb = (lines * width + LONG_LINE + 1) / 1e6
    app = _app(p)
    problems: list[str] = []

    async def read(runner: Any, handle: str, follow: bool) -> float:
        t0 = time.perf_counter()
        n = bad = 0
        async for line in runner.log_lines(handle, "r", 0, should_tail=follow):
            n += 1
            bad += len(line) != (width if n <= lines else LONG_LINE + 1)
        secs = time.perf_counter() - t0
        if n != lines + 1 or bad:
            problems.append(f"{'follow' if follow else 're-read'}: {n} lines, {bad} not whole")
        return secs

    async def main() -> dict[str, Any]:
        async with runner_api.get_runner("bench", handle_signals=False) as runner:
            handle = await runner.run(app, "local_docker")
            app_id = specs.parse_app_handle(handle).app_id
            try:
                follow = await read(runner, handle, True)
                await runner.wait(handle)
                container = _containers(app_id)[0]
                if os.getpid() % 2:  # the order of the two varies from trial to trial
                    floor, _ = _docker_logs(container)
                    reread = await read(runner, handle, False)
                else:
                    reread = await read(runner, handle, False)
                    floor, _ = _docker_logs(container)
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


def follow_floor(p: dict[str, Any], side: str) -> dict[str, Any]:
    """One trial of a follow floor (``side``) on a container of its own, submitted as ours
    is: ``follow_mb_per_s`` from ``submit`` returning to the log's end. Raises
    :class:`Unavailable` with no engine."""
    reason = docker_available()
    if reason:
        raise Unavailable(reason)
    import json

    import aiodocker
    import anyio
    from _sides import ours_module
    from bench_docker import _remove

    mod = ours_module("asynctorchx.schedulers.docker_scheduler")
    lines, width = int(p["lines"]), int(p["width"])
    text = lines * width + LONG_LINE + 1
    # the whole frames: header, stamp and space (aiodocker), or the text alone (docker logs)
    frames = lines + -(-(LONG_LINE + 1) // FRAME_SPLIT)
    expected = text + frames * (8 + 31) if side == "aiodocker_follow" else text

    async def main() -> dict[str, Any]:
        docker = aiodocker.Docker()
        try:
            async with mod.create_scheduler("bench") as sched:
                app_id = await sched.submit(_app(p), {})
                t0 = time.perf_counter()
                try:
                    label = f"torchx.pytorch.org/app-id={app_id}"
                    found = await docker._query_json(
                        "containers/json",
                        params={"all": "1", "filters": json.dumps({"label": [label]})},
                    )
                    cid = found[0]["Id"]
                    if side == "docker_logs_follow":
                        secs, size = _docker_logs(cid, follow=True)
                    else:
                        size = 0
                        params = {"follow": "1", "stdout": "1", "stderr": "1", "timestamps": "1"}
                        path = f"containers/{cid}/logs"
                        async with docker._query(path, params=params, timeout=None) as response:
                            while chunk := await response.content.readany():
                                size += len(chunk)
                        secs = time.perf_counter() - t0
                finally:
                    _remove([app_id])
        finally:
            await docker.close()
        note = None if size == expected else f"{size} bytes, expected {expected}"
        return {"follow_mb_per_s": text / 1e6 / secs, "note": note}

    return anyio.run(main)


def run(smoke: bool, trials: int) -> list[dict[str, Any]]:
    """Orchestrate the Docker logs benchmark; with no engine it says why it was skipped."""
    reason = docker_available()
    skip = {"ours": reason} if reason else {}
    if reason:
        print(f"benchmark 7 logs (local_docker) skipped: {reason}")
    case = {"lines": 20_000 if smoke else 1_000_000, "width": 100}
    if reason:
        skip.update(dict.fromkeys(FOLLOW_FLOORS, reason))
    rows = orchestrate(
        "7 docker logs",
        Path(__file__),
        [case],
        METRICS,
        trials,
        sides=SIDES,
        skip=skip,
        refs=FOLLOW_FLOORS,
    )
    # the follow floors measure the follow only: no re-read, docker logs or RSS rows of theirs
    rows = [r for r in rows if r["side"] == "ours" or r["metric"] == "follow_mb_per_s"]
    floor = next(
        (
            r["median"]
            for r in rows
            if r["metric"] == "docker_logs_mb_per_s" and r["side"] == "ours" and "median" in r
        ),
        None,
    )
    for r in rows:
        if r["side"] != "ours":
            continue
        if floor and r["metric"] in ("follow_mb_per_s", "reread_mb_per_s") and "median" in r:
            r["vs_floor"] = r["median"] / floor
        if r["metric"] != "follow_mb_per_s":
            for ref in FOLLOW_FLOORS:
                r.pop(f"vs_{ref}", None)
    return rows


if __name__ == "__main__":
    if is_driver():
        driver_main(
            {
                "ours": ours,
                **{side: functools.partial(follow_floor, side=side) for side in FOLLOW_FLOORS},
            }
        )
    else:
        ns = bench_args(default_trials=3)
        desc = machine()
        rows = run(ns.smoke, ns.trials)
        print(table(rows))
        save("docker_logs-smoke" if ns.smoke else "docker_logs", rows, desc)
