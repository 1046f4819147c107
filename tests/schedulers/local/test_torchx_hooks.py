"""TorchX's public names of ``torchx.schedulers.local_scheduler``, and GPU assignment.

``make_unique`` (the app-id generator) and ``LocalScheduler._cuda_device_count`` (how
many GPUs the host has, replaced to test GPU assignment on a host without GPUs).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from unittest.mock import patch

import pytest

from asynctorchx.schedulers import local_scheduler
from asynctorchx.schedulers.local_scheduler import LocalScheduler, create_cwd_scheduler
from asynctorchx.specs.api import AppDef, Resource, Role


def _role(name: str, gpu: int, replicas: int) -> Role:
    return Role(name, "x", entrypoint="true", num_replicas=replicas, resource=Resource(1, gpu, 64))


def _cuda(app: AppDef, gpus: int, auto: bool = True) -> dict[str, list[str | None]]:
    scheduler = create_cwd_scheduler("sess")
    cfg = {"auto_set_cuda_visible_devices": auto}
    with patch.object(LocalScheduler, "_cuda_device_count", return_value=gpus) as count:
        request = scheduler.submit_dryrun(app, cfg).request
    if not auto:
        count.assert_not_called()
    return {
        role: [p.env.get("CUDA_VISIBLE_DEVICES") for p in params]
        for role, params in request.role_params.items()
    }


def test_the_app_id_fills_the_app_id_macro_and_the_job_id() -> None:
    app = AppDef("app", [Role("r", "x", entrypoint="echo", args=["${app_id}"])])
    info = create_cwd_scheduler("sess").submit_dryrun(app, {})
    app_id = info.request.app_id
    assert app_id.startswith("app-")
    param = info.request.role_params["r"][0]
    assert param.args[-1] == app_id
    assert param.env["TORCHX_JOB_ID"] == f"local_cwd://sess/{app_id}"
    assert local_scheduler.make_unique("app") != local_scheduler.make_unique("app")


def test_each_gpu_replica_gets_its_own_devices_in_role_order() -> None:
    app = AppDef("app", [_role("a", 2, 2), _role("cpu", 0, 1), _role("b", 1, 3)])
    assert _cuda(app, gpus=8) == {
        "a": ["0,1", "2,3"],
        "cpu": [None],
        "b": ["4", "5", "6"],
    }


def test_gpus_are_left_unassigned_when_the_host_has_too_few() -> None:
    app = AppDef("app", [_role("a", 2, 2)])
    assert _cuda(app, gpus=3) == {"a": [None, None]}
    assert _cuda(app, gpus=0) == {"a": [None, None]}


def test_gpus_are_left_unassigned_when_the_option_is_off() -> None:
    app = AppDef("app", [_role("a", 1, 2)])
    assert _cuda(app, gpus=8, auto=False) == {"a": [None, None]}


def test_the_default_device_count_is_what_nvidia_smi_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = os.fspath(tmp_path)
    script = os.path.join(bin_dir, "nvidia-smi")
    with open(script, "w") as f:
        f.write("#!/bin/sh\necho 'GPU 0: A (UUID: x)'\necho 'GPU 1: A (UUID: y)'\n")
    os.chmod(script, 0o755)
    monkeypatch.setenv("PATH", bin_dir)
    assert create_cwd_scheduler("sess")._cuda_device_count() == 2
    monkeypatch.setenv("PATH", os.fspath(tmp_path / "empty"))
    assert create_cwd_scheduler("sess")._cuda_device_count() == 0


def test_the_device_count_asks_nvidia_smi_through_subprocess_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # TorchX code fakes a GPU host by replacing subprocess.run; no nvidia-smi needed
    monkeypatch.setenv("PATH", os.fspath(tmp_path))
    listing = subprocess.CompletedProcess(["nvidia-smi", "-L"], 0, "GPU 0: A\nGPU 1: B\n", "")
    with patch("subprocess.run", return_value=listing) as run:
        assert create_cwd_scheduler("sess")._cuda_device_count() == 2
    assert run.call_args.args[0] == ["nvidia-smi", "-L"]
    failed = subprocess.CalledProcessError(9, "nvidia-smi")
    with patch("subprocess.run", side_effect=failed):
        assert create_cwd_scheduler("sess")._cuda_device_count() == 0
    assert local_scheduler.ENV_CUDA_VISIBLE_DEVICES == "CUDA_VISIBLE_DEVICES"
