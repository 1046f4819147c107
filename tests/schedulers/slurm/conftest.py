"""The ``slurm_cluster`` fixture: a Slurm cluster whose controller answers, or a skip.

``bash scripts/slurm-cluster.sh start`` (as root) starts one on this machine. Without a
cluster the tests that use the fixture are skipped with that command, except when the
environment sets ``ASYNCTORCHX_REQUIRE_SLURM=1``: then they fail, so CI cannot pass by
skipping them (as ``ASYNCTORCHX_REQUIRE_DOCKER`` does for the Docker tests).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import NamedTuple

import pytest

from asynctorchx.schedulers.slurm_scheduler import SlurmScheduler

REPO = Path(__file__).resolve().parents[3]
_FIX = "start one with: bash scripts/slurm-cluster.sh start"
_UP_STATES = {
    "idle",
    "mixed",
    "allocated",
    "completing",
    "planned",
}  # planned: held for a pending job


class SlurmCluster(NamedTuple):
    """The cluster the tests submit to: its nodes that are up, by name."""

    nodes: list[str]


def _probe() -> tuple[SlurmCluster | None, str]:
    """Return the cluster, or ``None`` and why no usable cluster answers."""
    if shutil.which("sinfo") is None or shutil.which("scontrol") is None:
        return None, f"Slurm is not installed (no sinfo/scontrol on PATH); {_FIX}"
    try:
        # `scontrol ping` answers at once; sinfo retries a down controller for ~10 s
        ping = subprocess.run(
            ["scontrol", "ping"], capture_output=True, text=True, timeout=15, check=False
        )
        if "is UP" not in ping.stdout:
            answer = (ping.stdout + ping.stderr).strip().splitlines()
            return None, f"slurmctld does not answer ({answer[0] if answer else ''}); {_FIX}"
        done = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N %T"],
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
    except subprocess.TimeoutExpired as err:
        return None, f"{err.cmd[0]} did not answer within 15 s; {_FIX}"
    if done.returncode != 0:
        return None, f"sinfo failed: {done.stderr.strip()}; {_FIX}"
    nodes = sorted(
        {
            name
            for name, _, state in (line.partition(" ") for line in done.stdout.splitlines())
            if state.rstrip("*~#!%$@^-") in _UP_STATES
        }
    )
    if not nodes:
        return None, f"no Slurm node is up: {done.stdout.strip()!r}; {_FIX}"
    return SlurmCluster(nodes), ""


@pytest.fixture(scope="session")
def slurm_cluster() -> SlurmCluster:
    """The local Slurm cluster; skips without one (fails under ASYNCTORCHX_REQUIRE_SLURM=1)."""
    cluster, reason = _probe()
    if cluster is None:
        if os.environ.get("ASYNCTORCHX_REQUIRE_SLURM") == "1":
            pytest.fail(f"ASYNCTORCHX_REQUIRE_SLURM=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return cluster


_FIX_ACCOUNTING = "start it with accounting: bash scripts/slurm-cluster.sh start"


@pytest.fixture(scope="session")
def slurm_accounting(slurm_cluster: SlurmCluster) -> SlurmCluster:
    """The cluster, when it has accounting (``sacct`` answers); else a skip (a failure in CI).

    ``scripts/slurm-cluster.sh start`` starts it with accounting (``--no-accounting``
    without); ``.ci/run`` starts it with.
    """
    done = subprocess.run(
        ["sacct", "-n", "-X", "-j", "1"], capture_output=True, text=True, timeout=15, check=False
    )
    if done.returncode != 0:
        reason = f"the Slurm cluster has no accounting ({done.stderr.strip()}); {_FIX_ACCOUNTING}"
        if os.environ.get("ASYNCTORCHX_REQUIRE_SLURM") == "1":
            pytest.fail(f"ASYNCTORCHX_REQUIRE_SLURM=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return slurm_cluster


@pytest.fixture
def no_accounting_conf(slurm_cluster: SlurmCluster, tmp_path: Path) -> dict[str, str]:
    """An environment whose Slurm commands see the cluster as one without accounting.

    ``SLURM_CONF`` names a copy of the cluster's ``slurm.conf`` with
    ``AccountingStorageType=accounting_storage/none``: the same controller, but ``sacct``
    exits 1 with "Slurm accounting storage is disabled", as on a cluster without
    accounting (sacct(1) decides that from the configuration it reads).
    """
    conf = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"))
    lines = [
        line
        for line in conf.read_text().splitlines()
        if not line.startswith(("AccountingStorage", "JobCompType"))
    ]
    copy = tmp_path / "slurm-no-accounting.conf"
    copy.write_text("\n".join([*lines, "AccountingStorageType=accounting_storage/none", ""]))
    return {**os.environ, "SLURM_CONF": str(copy)}


#: How to get the TorchX 0.7.0 venv the comparison and interop tests run TorchX in.
BUILD_TORCHX_VENV = (
    "python3 -m venv benchmarks/.venv-torchx &&"
    " benchmarks/.venv-torchx/bin/pip install torchx==0.7.0"
    " (or point ASYNCTORCHX_TORCHX_VENV at a venv with torchx 0.7.0)"
)


def torchx_python() -> Path | None:
    """The python of a venv with TorchX 0.7.0, or ``None``.

    ``ASYNCTORCHX_TORCHX_VENV`` names the venv; else ``benchmarks/.venv-torchx`` (what
    ``benchmarks/run.sh`` and CI build). Under ``ASYNCTORCHX_REQUIRE_TORCHX=1`` (CI) a
    missing venv fails the test instead of skipping it.
    """
    venv = os.environ.get("ASYNCTORCHX_TORCHX_VENV")
    python = Path(venv) / "bin" / "python" if venv else REPO / "benchmarks/.venv-torchx/bin/python"
    if python.exists():
        return python
    if os.environ.get("ASYNCTORCHX_REQUIRE_TORCHX"):  # CI builds it: a missing venv fails
        pytest.fail(f"no TorchX 0.7.0 venv at {python}; build it with: {BUILD_TORCHX_VENV}")
    return None


@pytest.fixture
async def scheduler(
    slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[SlurmScheduler]:
    """A scheduler polling every 0.5 s, run from ``tmp_path`` (modules may define their own)."""
    monkeypatch.chdir(tmp_path)
    async with SlurmScheduler("test", poll_interval=0.5) as slurm:
        yield slurm
