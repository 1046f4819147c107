"""Benchmark 10, a hundred jobs on the real node (``scripts/kube-cluster.sh``, pods really run).

Each trial submits ``apps`` Volcano jobs of ``true`` (image ``asynctorchx-test/busybox:node``)
and waits for all of them; Volcano's job controller is the STAND-IN of
``tests/schedulers/kubernetes/volcano_standin.py`` (run in the side's process), the scheduler,
kubelet and containers are the node's. Sides:

* ``ours``: one ``Runner.group()`` and ``group.run_many`` of the apps (concurrent creates,
  at most ``MAX_REQUESTS`` in flight), then ``group.wait()``;
* ``floor``: the same manifests (our dry run's) created by raw lightkube, all at once, and
  ONE watch of the namespace's jobs read until every job is ``Completed``.

Metrics, from the first create: ``running_s``, until every app's pod was seen started (a
pods watch of the side's process, the same for both); ``terminal_s``, until the side saw
every app terminal; ``watches`` (ours), the most watch connections the API server held
open for the runner (``apiserver_longrunning_gauge`` of namespaced WATCHes of jobs and pods,
less the stand-in's and the observer's open before the trial, sampled every 0.2 s).

Usage: ``ASYNCTORCHX_KUBE_NODE_KUBECONFIG=... .venv/bin/python benchmarks/bench_kubernetes_node.py
[--smoke] [--trials N]``; prints a table and writes ``benchmarks/results/kubernetes-node.json``.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import (
    REPO,
    Unavailable,
    bench_args,
    driver_main,
    is_driver,
    orchestrate,
    table,
    write_json,
)

NODE_KUBECONFIG = os.environ.get("ASYNCTORCHX_KUBE_NODE_KUBECONFIG")
IMAGE = os.environ.get("ASYNCTORCHX_KUBE_NODE_IMAGE", "asynctorchx-test/busybox:node")
NAMESPACE = "default"
CFG = {"queue": "default", "namespace": NAMESPACE}
#: Seconds a trial may take (a hundred pods on a loaded 2-core node).
TRIAL_S = 600


def _trial(side: str, p: dict[str, Any]) -> dict[str, Any]:
    """One trial of ``side`` with ``p["apps"]`` apps."""
    if not NODE_KUBECONFIG:
        raise Unavailable(
            "no node: ASYNCTORCHX_KUBE_NODE_KUBECONFIG="
            "$(bash scripts/kube-cluster.sh start | tail -n 1)"
        )
    import anyio

    sys.path.insert(0, str(REPO))
    from tests.schedulers.kubernetes.bare_cluster import exclusive, http_client, install_crds
    from tests.schedulers.kubernetes.volcano_standin import VolcanoStandIn

    apps = int(p["apps"])
    kubeconfig = NODE_KUBECONFIG

    async def main() -> dict[str, Any]:
        async with exclusive(), http_client(kubeconfig) as http:
            await install_crds(http)
            async with anyio.create_task_group() as tasks:
                await tasks.start(VolcanoStandIn(http, NAMESPACE, node=None).run)
                started: dict[str, float] = {}
                await tasks.start(_observe_pods, http, started)
                baseline = await _open_watches(http)
                most = [0]
                tasks.start_soon(_sample_watches, http, baseline, most)
                t0 = time.perf_counter()
                names, terminal_s = await (_ours if side == "ours" else _floor)(
                    kubeconfig, apps, t0
                )
                with anyio.fail_after(60):  # a pod's start may reach the observer last
                    while not all(name in started for name in names):
                        await anyio.sleep(0.05)
                running_s = max(started[name] for name in names) - t0
                tasks.cancel_scope.cancel()
            await _delete(http, names)
        result = {"running_s": running_s, "terminal_s": terminal_s}
        if side == "ours":
            result["watches"] = most[0]
        return result

    return anyio.run(main)


async def _ours(kubeconfig: str, apps: int, t0: float) -> tuple[list[str], float]:
    import anyio

    from asynctorchx.runner import get_runner
    from asynctorchx.specs import AppDef, Role
    from asynctorchx.specs.api import parse_app_handle

    os.environ["KUBECONFIG"] = kubeconfig
    app = AppDef("many", [Role("r", IMAGE, entrypoint="sh", args=["-c", "true"])])
    with anyio.fail_after(TRIAL_S):
        async with get_runner(handle_signals=False) as runner:
            async with runner.group() as group:
                handles = await group.run_many([app] * apps, "kubernetes", CFG)
                statuses = await group.wait()
            terminal_s = time.perf_counter() - t0
    assert all(status.state.name == "SUCCEEDED" for status in statuses.values()), statuses
    return [parse_app_handle(h).app_id.partition(":")[2] for h in handles], terminal_s


async def _floor(kubeconfig: str, apps: int, t0: float) -> tuple[list[str], float]:
    import anyio
    from lightkube import AsyncClient, KubeConfig
    from lightkube.generic_resource import create_namespaced_resource

    from asynctorchx.schedulers.kubernetes_scheduler import KubernetesScheduler
    from asynctorchx.specs import AppDef, Role

    volcano_job = create_namespaced_resource("batch.volcano.sh", "v1alpha1", "Job", "jobs")
    app = AppDef("many", [Role("r", IMAGE, entrypoint="sh", args=["-c", "true"])])
    async with KubernetesScheduler("bench", kubeconfig=kubeconfig) as scheduler:
        manifests = [scheduler.submit_dryrun(app, CFG).request.resource for _ in range(apps)]
    names = [m["metadata"]["name"] for m in manifests]
    client = AsyncClient(KubeConfig.from_file(kubeconfig))
    try:
        with anyio.fail_after(TRIAL_S):
            async with anyio.create_task_group() as tasks:
                for manifest in manifests:
                    tasks.start_soon(
                        functools.partial(client.create, volcano_job(manifest), namespace=NAMESPACE)
                    )
            done: set[str] = set()
            # without a resourceVersion the watch first sends every job as it is now
            async for _, job in client.watch(volcano_job, namespace=NAMESPACE):
                raw = job.to_dict()
                phase = ((raw.get("status") or {}).get("state") or {}).get("phase")
                name = raw["metadata"]["name"]
                if name in names and phase == "Completed":
                    done.add(name)
                    if len(done) == len(names):
                        break
        return names, time.perf_counter() - t0
    finally:
        await client.close()


async def _observe_pods(http: Any, started: dict[str, float], *, task_status: Any) -> None:
    """Record when each job's pod was first seen started (running or ended), by job name."""
    import json

    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    version = (await http.get(path)).json()["metadata"]["resourceVersion"]
    params = {"watch": "true", "resourceVersion": version, "labelSelector": "volcano.sh/job-name"}
    async with http.stream("GET", path, params=params) as response:
        task_status.started()
        async for line in response.aiter_lines():
            pod = json.loads(line)["object"]
            states = [
                c.get("state") or {}
                for c in (pod.get("status") or {}).get("containerStatuses") or []
            ]
            if any("running" in s or "terminated" in s for s in states):
                job = pod["metadata"]["labels"]["volcano.sh/job-name"]
                started.setdefault(job, time.perf_counter())


async def _open_watches(http: Any) -> int:
    """The watches of a namespace's jobs and pods the API server holds open now (the node's
    daemons watch the whole cluster)."""
    total = 0
    for line in (await http.get("/metrics")).text.splitlines():
        if (
            line.startswith("apiserver_longrunning_gauge{")
            and 'verb="WATCH"' in line
            and 'scope="namespace"' in line
            and ('resource="jobs"' in line or 'resource="pods"' in line)
        ):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


async def _sample_watches(http: Any, baseline: int, most: list[int]) -> None:
    import anyio

    while True:
        most[0] = max(most[0], await _open_watches(http) - baseline)
        await anyio.sleep(0.2)


async def _delete(http: Any, names: list[str]) -> None:
    base = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NAMESPACE}/jobs"
    for name in names:
        await http.delete(f"{base}/{name}")
    await http.delete(
        f"/api/v1/namespaces/{NAMESPACE}/pods", params={"labelSelector": "volcano.sh/job-name"}
    )


def ours(p: dict[str, Any]) -> dict[str, Any]:
    return _trial("ours", p)


def floor(p: dict[str, Any]) -> dict[str, Any]:
    return _trial("floor", p)


BENCH = "10 kubernetes 100 jobs, real node"


def run(smoke: bool, trials: int) -> list[dict[str, Any]]:
    """The rows of the case (10 apps in smoke mode); none without a node."""
    if not NODE_KUBECONFIG:
        return []
    return orchestrate(
        BENCH,
        Path(__file__),
        [{"case": "group", "apps": 10 if smoke else 100}],
        ["running_s", "terminal_s", "watches"],
        trials,
        sides=("ours", "floor"),
        refs=("floor",),
    )


def target(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Issue 45's target: every app seen terminal within 1.2x of the raw creates and watch,
    through at most 2 watches."""
    target = "100 jobs on the node: all terminal <= 1.2x raw lightkube, <= 2 watches"
    got = {
        (row["metric"], row["side"]): row
        for row in rows
        if row["bench"] == BENCH and "median" in row
    }
    ours, raw = got.get(("terminal_s", "ours")), got.get(("terminal_s", "floor"))
    watches = got.get(("watches", "ours"))
    if ours is None or raw is None or watches is None:
        return {"bench": "10", "target": target, "measured": "not run", "verdict": "n/a"}
    running = got.get(("running_s", "ours")), got.get(("running_s", "floor"))
    ratio = ours["median"] / raw["median"]
    measured = (
        f"terminal {ours['median']:.1f} s vs raw {raw['median']:.1f} s ({ratio:.2f}x),"
        f" every pod started {running[0]['median']:.1f} s vs {running[1]['median']:.1f} s"
        if running[0] and running[1]
        else f"terminal {ratio:.2f}x"
    ) + f", {watches['max']:.0f} watches at most"
    verdict = "met" if ratio <= 1.2 and watches["max"] <= 2 else "MISSED"
    return {"bench": "10", "target": target, "measured": measured, "verdict": verdict}


if __name__ == "__main__":
    if is_driver():
        driver_main({"ours": ours, "floor": floor})
    else:
        ns = bench_args(default_trials=3)
        rows = run(ns.smoke, ns.trials)
        print(table(rows))
        print(" | ".join(target(rows).values()))
        print("wrote", write_json("kubernetes-node-smoke" if ns.smoke else "kubernetes-node", rows))
