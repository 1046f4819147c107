"""A full submit limit is backpressure: submits wait for the user's jobs to end; a limit no
job can free (zero) is ``SlurmSubmitLimitError`` at once. On the real cluster, whose
accounting enforces QOS limits (``AccountingStorageEnforce=associations,limits,qos``)."""

from __future__ import annotations

import getpass
import logging
import os
import shutil
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import anyio
import pytest

from asynctorchx.errors import SlurmSubmitLimitError
from asynctorchx.runner import Runner
from asynctorchx.schedulers.slurm_scheduler import SlurmCommands, create_scheduler
from asynctorchx.specs import AppDef, AppState, Resource, Role
from tests.schedulers.slurm.conftest import SlurmCluster

APPS = 60
LIMIT = 20


def _sacctmgr(*args: str) -> None:
    subprocess.run(["sacctmgr", "-i", *args], check=True, capture_output=True, timeout=60)


def _qos(name: str, max_submit: int) -> Iterator[str]:
    if shutil.which("sacctmgr") is None:
        pytest.skip("no sacctmgr: bash scripts/slurm-cluster.sh start (accounting is its default)")
    user = getpass.getuser()
    _sacctmgr("add", "qos", name, f"MaxSubmitJobsPerUser={max_submit}")
    _sacctmgr("modify", "user", user, "set", f"qos+={name}")
    yield name
    _sacctmgr("modify", "user", user, "set", f"qos-={name}")
    _sacctmgr("delete", "qos", name)


@pytest.fixture
def qos_of_20(slurm_cluster: SlurmCluster) -> Iterator[str]:
    yield from _qos("atx-submit20", LIMIT)


@pytest.fixture
def qos_of_0(slurm_cluster: SlurmCluster) -> Iterator[str]:
    yield from _qos("atx-submit0", 0)


def _app(name: str) -> AppDef:
    role = Role(name, "", entrypoint="true", resource=Resource(cpu=1, gpu=0, memMB=10))
    return AppDef(name, roles=[role])


def _most_at_once(job_ids: list[str]) -> int:
    """The most of ``job_ids`` submitted and not yet ended at one time, by accounting."""
    done = subprocess.run(
        ["sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), "-o", "JobID,Submit,End"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    spans = [
        (datetime.fromisoformat(submit), datetime.fromisoformat(end))
        for _, submit, end in (line.split("|") for line in done.stdout.split())
    ]
    assert len(spans) == len(job_ids)
    return max(sum(start <= at < end for start, end in spans) for at, _ in spans)


def _waits(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The messages of the submits' warnings that they wait."""
    return [
        record.getMessage()
        for record in caplog.records
        if record.name.startswith("asynctorchx.schedulers.slurm") and "waits" in record.msg
    ]


async def test_a_full_submit_limit_makes_submits_wait(
    qos_of_20: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.chdir(tmp_path)  # where .torchxslurmjobdirs goes
    caplog.set_level(logging.WARNING, logger="asynctorchx.schedulers.slurm")
    cfg = {"qos": qos_of_20, "job_dir": str(tmp_path)}
    async with Runner("torchx", {"slurm": create_scheduler}, scheduler_params={}) as runner:
        with anyio.fail_after(600):
            async with runner.group() as group:
                for n in range(APPS):
                    await group.run(_app(f"t{n}"), "slurm", cfg=cfg)
                ended = [status async for _, status in group.as_completed()]
    assert [status.state for status in ended] == [AppState.SUCCEEDED] * APPS
    job_ids = [handle.rsplit("/", 1)[1] for handle in group.handles]
    assert 1 < _most_at_once(job_ids) <= LIMIT
    # each app that waited said so once, naming itself and the limit; the first 20 never wait
    waits = _waits(caplog)
    waited = [message.split("'")[1] for message in waits]
    assert waits
    assert len(set(waited)) == len(waited), waits
    assert set(waited) <= {f"t{n}" for n in range(LIMIT, APPS)}, waits
    assert all("QOSMaxSubmitJobPerUserLimit" in message for message in waits), waits


def _fake_slurm(bin_dir: Path, refusals: int) -> dict[str, str]:
    """An ``sbatch`` on ``PATH`` refused by a full QOS submit limit ``refusals`` times, then
    printing job id 123; a ``squeue`` listing one job (under the limit)."""
    bin_dir.mkdir()
    limit = "QOSMaxSubmitJobPerUserLimit"
    (bin_dir / "sbatch").write_text(
        f"#!/bin/sh\necho x >> {bin_dir}/calls\n"
        f"if [ $(wc -l < {bin_dir}/calls) -le {refusals} ]; then\n"
        f"  echo 'sbatch: error: {limit}' >&2\n"
        "  echo 'sbatch: error: Batch job submission failed: Job violates accounting/QOS"
        " policy (job submit limit, user'\\''s size and/or time limits)' >&2; exit 1; fi\n"
        "echo 123\n"
    )
    (bin_dir / "squeue").write_text("#!/bin/sh\necho 7\n")
    for command in ("sbatch", "squeue"):
        (bin_dir / command).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


async def test_a_waiting_submit_warns_once_naming_its_app_and_the_limit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="asynctorchx.schedulers.slurm")
    commands = SlurmCommands(environment=_fake_slurm(tmp_path / "bin", refusals=3))
    job_id = await commands.sbatch(["sbatch", "--parsable", "job.sh"], {"qos": "q"}, "t21")
    assert job_id == "123"
    assert commands.counts["sbatch"] == 4
    [message] = _waits(caplog)
    assert "'t21'" in message
    assert "QOSMaxSubmitJobPerUserLimit is full" in message


async def test_a_zero_submit_limit_is_refused_at_once(
    qos_of_0: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = {"qos": qos_of_0, "job_dir": str(tmp_path)}
    async with Runner("torchx", {"slurm": create_scheduler}, scheduler_params={}) as runner:
        with anyio.fail_after(30), pytest.raises(SlurmSubmitLimitError) as refused:
            await runner.run(_app("zero"), "slurm", cfg=cfg)
    assert refused.value.cfg_key == "qos"
    assert refused.value.limit == "QOSMaxSubmitJobPerUserLimit"
    assert "'time'" not in str(refused.value)


def _flaky_sbatch(bin_dir: Path, first_call: str) -> dict[str, str]:
    """An ``sbatch`` on ``PATH`` whose first call does ``first_call`` (shell) and fails as a
    controller that did not answer; later calls are the real sbatch."""
    real = shutil.which("sbatch")
    assert real is not None
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(
        f"#!/bin/sh\nif [ ! -e {bin_dir}/called ]; then touch {bin_dir}/called; {first_call}\n"
        f"  echo 'sbatch: error: Socket timed out on send/recv operation' >&2; exit 1; fi\n"
        f'exec {real} "$@"\n'
    )
    (bin_dir / "sbatch").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


@pytest.mark.parametrize("taken", [True, False], ids=["job-taken", "job-not-taken"])
async def test_a_submit_the_controller_did_not_answer_runs_once(
    slurm_cluster: SlurmCluster, tmp_path: Path, taken: bool
) -> None:
    first = f'{shutil.which("sbatch")} "$@" >/dev/null' if taken else ":"
    environment = _flaky_sbatch(tmp_path / "bin", first)
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/sh\necho ran >> {tmp_path}/ran\n")
    commands = SlurmCommands(environment=environment)
    job_id = await commands.sbatch(["sbatch", "--parsable", f"--chdir={tmp_path}", str(script)], {})
    with anyio.fail_after(120):
        while not (tmp_path / "ran").exists():
            await anyio.sleep(0.2)  # the job ran its script
    listed = subprocess.run(  # the controller lists ended jobs for MinJobAge seconds
        ["squeue", "--me", "-h", "-t", "all", "-o", "%i|%o"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    submitted = [line.split("|")[0] for line in listed.stdout.splitlines() if str(script) in line]
    assert submitted == [job_id]  # one job, the one sbatch's answer was lost for or not
    assert (tmp_path / "ran").read_text() == "ran\n"
