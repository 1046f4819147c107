"""GPUs per node from Slurm 24.11 on, per task before, from ``sinfo --version`` asked once
per scheduler (TorchX #1101/#1373): the rule beside torchx-nightly's for both sides, the
dry run's reason, and the real (22.05) cluster."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest

from asynctorchx.errors import SlurmSubmitError
from asynctorchx.runner import get_runner
from asynctorchx.schedulers.slurm._request import (
    SlurmVersion,
    build_batch_request,
    parse_slurm_version,
)
from asynctorchx.schedulers.slurm_scheduler import SlurmScheduler
from asynctorchx.specs import AppDef, Resource, Role
from tests.nightly import run_nightly
from tests.schedulers.slurm.conftest import SlurmCluster

LIMIT = 60  # seconds: a safety bound, never a timing guess

NIGHTLY = """
import json, sys
from unittest import mock
from torchx.runner import get_runner
from torchx.schedulers import slurm_scheduler
from torchx.specs import AppDef, Resource, Role
out = []
for version in json.load(sys.stdin):
    with mock.patch.object(slurm_scheduler, "version", return_value=tuple(version)):
        role = Role("t", "/img", entrypoint="true", resource=Resource(cpu=1, gpu=2, memMB=0))
        info = get_runner().dryrun(AppDef("a", [role]), "slurm", cfg={})
        out.append(info.request.replicas["t-0"].sbatch_opts)
print(json.dumps(out))
"""


def _app(gpu: int = 2) -> AppDef:
    return AppDef("a", [Role("t", "/img", entrypoint="true", resource=Resource(1, gpu, 0))])


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("slurm-wlm 22.05.8\n", SlurmVersion(22, 5)),  # Debian's
        ("slurm 24.11.0", SlurmVersion(24, 11)),
        ("slurm 25.05.1 rev1", SlurmVersion(25, 5)),
        ("", None),
        ("slurm", None),
        ("slurm unknown", None),
    ],
)
def test_parse_sinfo_version(text: str, version: SlurmVersion | None) -> None:
    assert parse_slurm_version(text) == version


def test_gpu_options_by_version_beside_torchx_nightly() -> None:
    versions = [SlurmVersion(22, 5), SlurmVersion(24, 5), SlurmVersion(24, 11), SlurmVersion(25, 5)]
    ours = [build_batch_request(_app(), {}, v).replicas["t-0"].sbatch_opts for v in versions]
    assert ours == run_nightly(NIGHTLY, versions)
    assert [("gpus-per-node" in o, o.get("ntasks")) for o in ours] == [
        (False, "1"),
        (False, "1"),
        (True, None),
        (True, None),
    ]


@pytest.mark.parametrize(
    ("version", "reason"),
    [
        (SlurmVersion(22, 5), "--gpus-per-task: Slurm 22.05 (sinfo --version), before 24.11"),
        (SlurmVersion(24, 11), "--gpus-per-node: Slurm 24.11 (sinfo --version), 24.11 or later"),
        (
            None,
            "--gpus-per-task: Slurm 24.05 (assumed: sinfo --version not run or failed),"
            " before 24.11",
        ),
    ],
)
def test_the_dry_run_says_which_option_and_why(version: SlurmVersion | None, reason: str) -> None:
    assert f"\n# GPUs: {reason}\n" in repr(build_batch_request(_app(), {}, version))
    assert "# GPUs:" not in repr(build_batch_request(_app(gpu=0), {}, version))


async def test_sinfo_version_is_asked_once_on_the_cluster(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    real = parse_slurm_version(
        subprocess.run(["sinfo", "--version"], capture_output=True, text=True).stdout
    )
    assert real is not None
    assert real < SlurmVersion(24, 11)  # the cluster of scripts/slurm-cluster.sh is 22.05
    with anyio.fail_after(LIMIT):
        async with SlurmScheduler("t") as sched:
            assert sched.slurm_version == real
            for _ in range(2):
                info = sched.submit_dryrun(_app(gpu=1), {"job_dir": str(tmp_path / "job")})
                assert "--gpus-per-task=1 --ntasks=1" in info.request.materialize()
            assert sched.commands.counts["sinfo"] == 1
            # the option reaches sbatch, which refuses GPUs on this cluster (none configured)
            with pytest.raises(SlurmSubmitError) as caught:
                await sched.schedule(info)
            assert caught.value.cfg_key == "gpu"
        async with get_runner(handle_signals=False) as runner:
            shown = str(await runner.dryrun(_app(gpu=1), "slurm"))
    assert f"# GPUs: --gpus-per-task: Slurm {real} (sinfo --version), before 24.11\n" in shown
