"""Benchmark 12: N browsers following one job of the web example (issue 35).

The server is ``examples.web.app`` under uvicorn, in a process of its own; the load
generator is four other processes that open N ``GET /jobs/{id}/events`` streams between
them on raw sockets and read them to the job's end. The job has two replicas that each print
``RATE`` lines a second for ``SECONDS`` seconds, each line carrying its print time; the
replicas start printing once every client has received its first event.

Sides: ``subscribe`` (the example: one feed per job, ``Runner.subscribe``) and
``per_client`` (the floor it is judged against: each request its own ``Runner.events``
stream, as before the feed). Per row: every client's lines checked complete and each
once (by line number per replica), lag of a line (receipt minus print time) p50/p99,
server CPU per delivered event (user+system, /proc), server RSS growth per client.

Usage: ``.venv/bin/python benchmarks/bench_web_fanout.py [--clients 10,100,1000]
[--seconds 10] [--sides subscribe,per_client] [--profile FILE]``; writes
``benchmarks/results/web_fanout.json`` (``--profile``: the server's cProfile stats, of the
last row run).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RATE = 100  # lines a second per replica
#: a replica: waits for the file argv[1], then prints "k i time" RATE times a second
REPLICA = (
    "import os, sys, time\n"
    "while not os.path.exists(sys.argv[1]): time.sleep(0.01)\n"
    "k, n, t0 = sys.argv[2], int(sys.argv[3]), time.time()\n"
    "for i in range(n):\n"
    "    time.sleep(max(0.0, t0 + i / {rate} - time.time()))\n"
    "    print(k, i, time.time(), flush=True)\n"
)
#: load generator processes, each following its share of the clients: one Python process
#: parsing every frame of 1,000 clients lags behind the server on this machine
LOADERS = 4
LINE = re.compile(rb'"line":"(\d+) (\d+) ([\d.]+)\\n"')


def serve(side: str, port: int, profile: Path | None = None) -> None:
    """Run the example under uvicorn; ``per_client``: each request its own stream;
    ``profile``: under cProfile, its stats written there when the server stops."""
    sys.path.insert(0, str(ROOT))
    import uvicorn

    from asynctorchx.runner import Runner, Subscription

    if side == "per_client":

        @contextlib.asynccontextmanager
        async def per_client(
            self: Runner, app_handle: str, cursor: str | None = None, *, max_buffer: int = 64
        ) -> AsyncIterator[Subscription]:
            del max_buffer
            async with self.events(app_handle, cursor) as events:
                yield Subscription([], events, None, None)

        Runner.subscribe = per_client  # type: ignore[method-assign]
    from examples.web.app import create_app

    if profile is None:
        uvicorn.run(create_app(), port=port, log_level="warning", backlog=4096)
        return
    import cProfile
    import signal

    # uvicorn raises the SIGTERM it stopped on again once stopped: end by SystemExit then
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    profiler = cProfile.Profile()
    try:
        profiler.runcall(uvicorn.run, create_app(), port=port, log_level="warning", backlog=4096)
    finally:
        profiler.dump_stats(profile)


async def load(port: int, job: str, clients: int, ready: Path, out: Path) -> None:
    """Open ``clients`` streams; once each has its first event write ``ready``; read each
    to the job's end; write every client's result to ``out``."""
    first = [asyncio.Event() for _ in range(clients)]
    request = (
        f"GET /jobs/{job}/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Accept: text/event-stream\r\n\r\n"
    ).encode()

    async def client(index: int) -> dict[str, Any]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
        writer.write(request)
        seen: dict[bytes, list[int]] = {}
        lags: list[float] = []
        rest = b""
        while chunk := await reader.read(1 << 16):
            now = time.time()
            data = rest + chunk
            cut = data.rfind(b"\n\n") + 2  # frames end with a blank line
            if cut < 2:
                rest = data
                continue
            frames, rest = data[:cut], data[cut:]
            if b"event: state" in frames:
                first[index].set()
            for k, i, t in LINE.findall(frames):
                seen.setdefault(k, []).append(int(i))
                lags.append(now - float(t))
            if b'"state":"SUCCEEDED"' in frames or b'"state":"FAILED"' in frames:
                break
        writer.close()
        return {"lines": {k.decode(): v for k, v in seen.items()}, "lags": lags}

    tasks = [asyncio.create_task(client(index)) for index in range(clients)]
    await asyncio.gather(*(event.wait() for event in first))
    ready.touch()
    results = await asyncio.gather(*tasks)
    out.write_text(json.dumps(results))


def _cpu_rss(pid: int) -> tuple[float, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    rss = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    return cpu, rss


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _post_job(port: int, seconds: int, go: Path) -> str:
    import httpx

    script = REPLICA.format(rate=RATE)
    lines = RATE * seconds
    command = ["python3", "-c", script, str(go), "${replica_id}", str(lines)]
    body = {"command": command, "replicas": 2}
    reply = httpx.post(f"http://127.0.0.1:{port}/jobs", json=body, timeout=30)
    reply.raise_for_status()
    return str(reply.json()["id"])


def measure(side: str, clients: int, seconds: int, profile: Path | None = None) -> dict[str, Any]:
    """One row: serve, submit, load, judge (``profile``: see :func:`serve`)."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        port = _free_port()
        me = [sys.executable, __file__]
        profiling = [] if profile is None else ["--profile", str(profile.resolve())]
        server = subprocess.Popen([*me, "--serve", side, "--port", str(port), *profiling], cwd=work)
        try:
            deadline = time.monotonic() + 60
            while True:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("the server did not start")
                time.sleep(0.1)
            go = work / "go"
            job = _post_job(port, seconds, go)
            _, rss0 = _cpu_rss(server.pid)
            shares = [clients // LOADERS + (i < clients % LOADERS) for i in range(LOADERS)]
            loaders = []
            for i, share in enumerate(share for share in shares if share):
                args = ["--port", str(port), "--job", job]
                args += ["--ready", str(work / f"ready{i}"), "--out", str(work / f"out{i}.json")]
                loaders.append(subprocess.Popen([*me, "--load", str(share), *args]))
            while not all((work / f"ready{i}").exists() for i in range(len(loaders))):
                if any(loader.poll() is not None for loader in loaders):
                    raise RuntimeError("a load generator ended early")
                time.sleep(0.05)
            cpu0, rss_ready = _cpu_rss(server.pid)
            load0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            go.touch()
            for loader in loaders:
                loader.wait(timeout=seconds * 20 + 600)
            load1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu1, rss1 = _cpu_rss(server.pid)
        finally:
            server.terminate()
            server.wait(timeout=60)
        results = [
            r for i in range(len(loaders)) for r in json.loads((work / f"out{i}.json").read_text())
        ]
    expected = list(range(RATE * seconds))
    whole = sum(all(sorted(r["lines"].get(k, [])) == expected for k in "01") for r in results)
    once = sum(all(len(v) == len(set(v)) for v in r["lines"].values()) for r in results)
    lags = sorted(lag for r in results for lag in r["lags"])
    events = sum(len(r["lags"]) for r in results)

    def rank(q: float) -> float:
        return lags[min(len(lags) - 1, int(q * len(lags)))] if lags else float("nan")

    return {
        "side": side,
        "clients": clients,
        "clients_whole": whole,
        "clients_no_repeat": once,
        "lines_delivered": events,
        "lag_p50_s": round(rank(0.5), 3),
        "lag_p99_s": round(rank(0.99), 3),
        "server_cpu_s": round(cpu1 - cpu0, 2),
        "cpu_us_per_event": round((cpu1 - cpu0) / max(events, 1) * 1e6, 1),
        "rss_growth_mb": round((rss1 - rss0) / 2**20, 1),
        "rss_connected_kb_per_client": round((rss_ready - rss0) / 1024 / clients, 1),
        "loadgen_cpu_s": round(
            load1.ru_utime + load1.ru_stime - load0.ru_utime - load0.ru_stime, 2
        ),
        "rss_kb_per_client": round((rss1 - rss0) / 1024 / clients, 1),
        "loadavg": os.getloadavg(),
    }


SIDES = ("subscribe", "per_client")
#: what run_all.py reports of each measured row (``clients_incomplete``: clients that missed
#: a line or got one twice; every other column is bench_web_fanout.py's own)
METRICS = ("lag_p50_s", "lag_p99_s", "cpu_us_per_event", "rss_kb_per_client", "clients_incomplete")


def run(smoke: bool, trials: int) -> list[dict[str, Any]]:
    """Benchmark 12 for ``run_all.py``: each client count's metrics, medians over
    ``trials`` trials with the sides' order alternating, ``per_client`` the floor."""
    from _harness import stats

    counts, seconds = ((10,), 2) if smoke else ((1000, 100, 10), 10)
    rows: list[dict[str, Any]] = []
    for clients in counts:
        measured: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
        for trial in range(trials):
            for side in SIDES[trial % 2 :] + SIDES[: trial % 2]:
                row = measure(side, clients, seconds)
                row["clients_incomplete"] = clients - min(
                    row["clients_whole"], row["clients_no_repeat"]
                )
                measured[side].append(row)
        for metric in METRICS:
            medians = {side: stats([r[metric] for r in measured[side]]) for side in SIDES}
            for side in SIDES:
                summary: dict[str, Any] = {"bench": "12 web fanout", "case": f"clients={clients}"}
                summary |= {"metric": metric, "side": side, **medians[side]}
                floor = medians["per_client"]["median"]
                if side != "per_client" and floor:
                    summary["vs_floor"] = medians[side]["median"] / floor
                rows.append(summary)
    return rows


def main() -> None:
    """Parse the arguments: orchestrate, or serve, or generate load."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", default="10,100,1000")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--sides", default="subscribe,per_client")
    parser.add_argument("--serve")
    parser.add_argument("--load", type=int)
    parser.add_argument("--port", type=int)
    parser.add_argument("--job")
    parser.add_argument("--ready", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--profile", type=Path, help="cProfile the server, stats to this file")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.profile)
        return
    if args.load:
        asyncio.run(load(args.port, args.job, args.load, args.ready, args.out))
        return
    rows = []
    for clients in map(int, args.clients.split(",")):
        for side in args.sides.split(","):
            row = measure(side, clients, args.seconds, args.profile)
            print(json.dumps(row), flush=True)
            rows.append(row)
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / "web_fanout.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
