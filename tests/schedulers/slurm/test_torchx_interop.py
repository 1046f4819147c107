"""Interop with TorchX 0.7.0's ``torchx.schedulers.slurm_scheduler`` on the real cluster.

TorchX runs in its own venv (a subprocess per call, from the test's directory so that both
tools share ``.torchxslurmjobdirs``). Checked both ways, through the cluster's real
``sacct`` (``scripts/slurm-cluster.sh start`` runs slurmdbd with MariaDB):

- an app WE submit: TorchX's ``describe``, ``log_iter``, ``list`` and ``cancel``;
- an app TORCHX submits: our ``describe``, ``log_iter``, ``cancel`` and ``wait``.

TorchX reads only ``sacct``: its ``describe`` runs ``sacct --parsable2 -j ID`` with
``check=True``, its ``log_iter`` calls ``describe`` before opening the file
(``LogIterator``), its ``cancel`` calls it through ``exists``, and its ``list`` runs
``sacct --json``. On a cluster without accounting sacct exits 1 ("Slurm accounting storage
is disabled") and all four raise ``CalledProcessError``; only ``submit`` works.
:func:`test_torchx_without_accounting_fails_in_sacct` asserts exactly that, with TorchX's
Slurm commands reading a ``slurm.conf`` without accounting (``no_accounting_conf``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import pytest

from asynctorchx.schedulers.api import Stream
from asynctorchx.schedulers.slurm_scheduler import SlurmScheduler
from asynctorchx.specs import AppDef, AppState, Resource, Role
from tests.schedulers.slurm.conftest import BUILD_TORCHX_VENV, SlurmCluster, torchx_python

LIMIT = 60  # seconds; every job here ends within a few seconds on the local cluster
TICK = 0.2  # seconds between two squeue calls of our scheduler

# Runs in TorchX's venv: one call given as JSON in argv[1]; prints one JSON line.
_TORCHX_CALL = """
import json, subprocess, sys
from torchx import specs
from torchx.schedulers.api import Stream
from torchx.schedulers.slurm_scheduler import create_scheduler

call = json.loads(sys.argv[1])
scheduler = create_scheduler("interop")
try:
    if call["op"] == "describe":
        found = scheduler.describe(call["app_id"])
        result = found and {
            "state": found.state.name,
            "msg": found.msg,
            "roles": {role.name: role.num_replicas for role in found.roles},
            "replicas": [
                [replica.role, replica.id, replica.state.name]
                for status in found.roles_statuses
                for replica in status.replicas
            ],
        }
    elif call["op"] == "log_iter":
        lines = scheduler.log_iter(
            call["app_id"],
            call["role"],
            call["k"],
            streams=Stream(call["streams"]) if call["streams"] else None,
            should_tail=call["should_tail"],
        )
        result = list(lines)
    elif call["op"] == "cancel":
        result = scheduler.cancel(call["app_id"])
    elif call["op"] == "list":
        result = {app.app_id: app.state.name for app in scheduler.list()}
    else:
        role = specs.Role(
            name=call["role"],
            image="",
            entrypoint="sh",
            args=["-c", call["script"]],
            num_replicas=call["num_replicas"],
            resource=specs.Resource(cpu=1, gpu=0, memMB=100),
        )
        result = scheduler.submit(specs.AppDef(name="interop", roles=[role]), call["cfg"])
except subprocess.CalledProcessError as error:
    result = {"CalledProcessError": error.cmd, "returncode": error.returncode}
print(json.dumps(result))
"""


def _role(name: str, script: str, num_replicas: int = 1) -> Role:
    return Role(
        name=name,
        image="",
        entrypoint="sh",
        args=["-c", script],
        num_replicas=num_replicas,
        resource=Resource(cpu=1, gpu=0, memMB=100),
    )


@pytest.fixture
def torchx() -> Path:
    """The python of TorchX 0.7.0's venv; skips without one."""
    python = torchx_python()
    if python is None:
        pytest.skip(f"no TorchX 0.7.0 venv; build it with: {BUILD_TORCHX_VENV}")
    return python


@pytest.fixture
async def scheduler(
    slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[SlurmScheduler]:
    """Our scheduler, run from ``tmp_path`` (where TorchX runs too)."""
    monkeypatch.chdir(tmp_path)
    async with SlurmScheduler("interop", poll_interval=TICK) as slurm:
        yield slurm


async def _torchx_call(
    python: Path, directory: Path, env: dict[str, str] | None = None, **call: Any
) -> tuple[Any, str]:
    """Run one call of TorchX's slurm scheduler in its venv; return its result and stderr."""
    with anyio.fail_after(LIMIT):
        done = await anyio.run_process(
            [str(python), "-c", _TORCHX_CALL, json.dumps(call)],
            cwd=directory,
            env=env,
            check=False,
        )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr
    return json.loads(done.stdout.decode().splitlines()[-1]), stderr


async def _submit_ours(scheduler: SlurmScheduler, tmp_path: Path, script: str) -> str:
    app = AppDef(name="ours", roles=[_role("talker", script, num_replicas=2)])
    job_id = await scheduler.submit(app, {"job_dir": str(tmp_path / "ours"), "time": "5"})
    response = await scheduler.wait(job_id, timeout=LIMIT)
    assert response is not None
    assert response.state == AppState.SUCCEEDED
    return job_id


async def test_torchx_without_accounting_fails_in_sacct(
    scheduler: SlurmScheduler, torchx: Path, tmp_path: Path, no_accounting_conf: dict[str, str]
) -> None:
    job_id = await _submit_ours(scheduler, tmp_path, "echo out $SLURM_PROCID")
    sacct = ["sacct", "--parsable2", "-j", job_id]
    for call in (
        {"op": "describe", "app_id": job_id},
        {"op": "log_iter", "app_id": job_id, "role": "talker", "k": 0, "streams": "stdout"}
        | {"should_tail": False},
        {"op": "cancel", "app_id": job_id},
    ):
        result, stderr = await _torchx_call(torchx, tmp_path, no_accounting_conf, **call)
        assert result == {"CalledProcessError": sacct, "returncode": 1}, call
        assert "Slurm accounting storage is disabled" in stderr
    listed, _ = await _torchx_call(torchx, tmp_path, no_accounting_conf, op="list")
    assert listed == {"CalledProcessError": ["sacct", "--json", "-S1970-01-01-00:00:01"]} | {
        "returncode": 1
    }
    # our own view of the app is unaffected
    response = await scheduler.describe(job_id)
    assert response is not None
    assert response.state == AppState.SUCCEEDED


async def _components_recorded(job_id: str) -> None:
    """Poll sacct until it lists the job's components (``ID+0``).

    For a few seconds after a heterogeneous job ended (4 s measured), sacct lists it as
    one job named ``allocation``, without its components: TorchX then finds no role.
    """
    with anyio.fail_after(LIMIT):
        while True:
            done = await anyio.run_process(["sacct", "-n", "-X", "-o", "JobID", "-j", job_id])
            if f"{job_id}+0" in done.stdout.decode():
                return
            await anyio.sleep(TICK)


async def test_torchx_describes_reads_and_lists_our_app_through_sacct(
    scheduler: SlurmScheduler, slurm_accounting: SlurmCluster, torchx: Path, tmp_path: Path
) -> None:
    script = "echo out ${replica_id}; echo err ${replica_id} >&2"  # macro: the replica id
    job_id = await _submit_ours(scheduler, tmp_path, script)
    await _components_recorded(job_id)
    described, _ = await _torchx_call(torchx, tmp_path, op="describe", app_id=job_id)
    assert described == {
        "state": "SUCCEEDED",
        "msg": "COMPLETED",
        "roles": {"talker": 2},
        "replicas": [["talker", 0, "SUCCEEDED"], ["talker", 1, "SUCCEEDED"]],
    }
    # TorchX finds the job's directory in the .torchxslurmjobdirs we wrote
    for k in (0, 1):
        lines, _ = await _torchx_call(
            torchx,
            tmp_path,
            op="log_iter",
            app_id=job_id,
            role="talker",
            k=k,
            streams="stdout",
            should_tail=True,  # ends: describe says SUCCEEDED
        )
        assert lines == [f"out {k}\n"]
        errors, _ = await _torchx_call(
            torchx,
            tmp_path,
            op="log_iter",
            app_id=job_id,
            role="talker",
            k=k,
            streams=None,  # TorchX's default: stderr, as ours
            should_tail=False,
        )
        assert errors == [f"err {k}\n"]
    listed, _ = await _torchx_call(torchx, tmp_path, op="list")
    assert listed[job_id] == "SUCCEEDED"  # its component 1 is listed too, under its own id


async def test_torchx_cancels_our_running_app(
    scheduler: SlurmScheduler, slurm_accounting: SlurmCluster, torchx: Path, tmp_path: Path
) -> None:
    marker = f"marker-{uuid.uuid4().hex}"
    app = AppDef(name="ours", roles=[_role("sleeper", f": {marker}; echo started; sleep 300")])
    job_id = await scheduler.submit(app, {"job_dir": str(tmp_path / "ours"), "time": "5"})
    try:
        logs = scheduler.log_iter(job_id, "sleeper", streams=Stream.STDOUT, should_tail=True)
        with anyio.fail_after(LIMIT):
            async with aclosing(logs):  # type: ignore[type-var]
                assert await anext(logs) == "started\n"  # it runs
        described, _ = await _torchx_call(torchx, tmp_path, op="describe", app_id=job_id)
        # sacct lags behind squeue: the running job may still be PENDING in accounting
        assert described["state"] in ("PENDING", "RUNNING")
        cancelled, _ = await _torchx_call(torchx, tmp_path, op="cancel", app_id=job_id)
        assert cancelled is None
        response = await scheduler.wait(job_id, timeout=LIMIT)
        assert response is not None
        assert response.state == AppState.CANCELLED
        assert await _processes_with(marker) == []
    finally:
        with anyio.CancelScope(shield=True):
            await scheduler.cancel(job_id)


async def _processes_with(marker: str) -> list[str]:
    done = await anyio.run_process(["ps", "-eww", "-o", "args"])
    return [line for line in done.stdout.decode().splitlines() if marker in line]


async def test_we_describe_read_and_cancel_an_app_torchx_submitted(
    scheduler: SlurmScheduler, slurm_cluster: SlurmCluster, torchx: Path, tmp_path: Path
) -> None:
    if len(slurm_cluster.nodes) < 2:
        pytest.skip("2 replicas need 2 nodes")
    marker = f"marker-{uuid.uuid4().hex}"
    job_dir = tmp_path / "theirs"
    job_dir.mkdir()  # TorchX 0.7.0 writes its script there without creating it
    job_id, _ = await _torchx_call(
        torchx,
        tmp_path,
        op="submit",
        role="sleeper",
        script=f": {marker}; echo started; sleep 300",
        num_replicas=2,
        cfg={"job_dir": str(job_dir), "time": "5"},
    )
    try:
        assert job_id.isdigit()
        for k in (0, 1):  # found through the .torchxslurmjobdirs TorchX wrote
            logs = scheduler.log_iter(job_id, "sleeper", k, streams=Stream.STDOUT, should_tail=True)
            with anyio.fail_after(LIMIT):
                async with aclosing(logs):  # type: ignore[type-var]
                    assert await anext(logs) == "started\n"
        response = await scheduler.describe(job_id)
        assert response is not None
        assert response.state == AppState.RUNNING
        assert [(role.name, role.num_replicas) for role in response.roles] == [("sleeper", 2)]
        (status,) = response.roles_statuses
        assert [(replica.id, replica.state) for replica in status.replicas] == [
            (0, AppState.RUNNING),
            (1, AppState.RUNNING),
        ]
        hosts = {replica.hostname for replica in status.replicas}
        assert len(hosts) == 2
        assert hosts <= set(slurm_cluster.nodes)
        assert len(await _processes_with(marker)) >= 2
        await scheduler.cancel(job_id)
        response = await scheduler.wait(job_id, timeout=LIMIT)
        assert response is not None
        assert response.state == AppState.CANCELLED
        assert await _processes_with(marker) == []
    finally:
        with anyio.CancelScope(shield=True):
            await scheduler.cancel(job_id)
