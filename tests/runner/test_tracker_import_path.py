"""The tracker names at TorchX's path ``torchx.tracker.api``, and the env they name.

``Runner.dryrun`` writes them into the request a scheduler runs, so every replica sees
them (the reference is TorchX 0.7.0's ``torchx.runner.api.Runner.dryrun``).
"""

from __future__ import annotations

import pytest

from asynctorchx.runner import Runner
from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
from asynctorchx.specs.api import AppDef, Role
from asynctorchx.tracker import api as tracker_api


def test_the_tracker_env_names_are_torchxs() -> None:
    assert (tracker_api.ENV_TORCHX_JOB_ID, tracker_api.ENV_TORCHX_TRACKERS) == (
        "TORCHX_JOB_ID",
        "TORCHX_TRACKERS",
    )


async def test_dryrun_puts_the_tracker_env_in_each_replicas_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(tracker_api.ENV_TORCHX_PARENT_RUN_ID, raising=False)
    app = AppDef("app", [Role("r", "x", entrypoint="true", num_replicas=2)])
    runner = Runner(
        "sess",
        {"local_cwd": create_cwd_scheduler},
        trackers={"fsspec": "/tmp/trk", "mlflow": None},
        handle_signals=False,
    )
    async with runner:
        info = await runner.dryrun(app, "local_cwd", parent_run_id="parent-1")
    request = info.request
    for param in request.role_params["r"]:
        assert param.env[tracker_api.ENV_TORCHX_JOB_ID] == f"local_cwd://sess/{request.app_id}"
        assert param.env[tracker_api.ENV_TORCHX_TRACKERS] == "fsspec,mlflow"
        assert param.env[tracker_api.tracker_config_env_var_name("fsspec")] == "/tmp/trk"
        assert tracker_api.tracker_config_env_var_name("mlflow") not in param.env
        assert param.env[tracker_api.ENV_TORCHX_PARENT_RUN_ID] == "parent-1"


async def test_a_runner_made_without_trackers_reads_them_at_each_dry_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = AppDef("app", [Role("r", "x", entrypoint="true")])
    runner = Runner("sess", {"local_cwd": create_cwd_scheduler}, handle_signals=False)
    async with runner:
        monkeypatch.setenv(tracker_api.ENV_TORCHX_TRACKERS, "mine")
        monkeypatch.setenv(tracker_api.tracker_config_env_var_name("mine"), "file:///cfg")
        info = await runner.dryrun(app, "local_cwd")
    assert info.app is not None
    assert info.app.roles[0].env[tracker_api.ENV_TORCHX_TRACKERS] == "mine"
    assert info.app.roles[0].env["TORCHX_TRACKER_MINE_CONFIG"] == "file:///cfg"
