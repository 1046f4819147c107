"""The ``SUCCESS`` file a local app leaves in its log directory when it ends.

TorchX 0.7.0's ``torchx.schedulers.local_scheduler`` writes it once the app's log files
are closed, whatever the final state; tools wait for it before reading the logs.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
from asynctorchx.specs.api import AppDef, AppState, Role

LIMIT = 30  # seconds: a deadline for a hung test, never a guess at timing


def _app(script: str, replicas: int = 2) -> AppDef:
    return AppDef(
        "app", [Role("worker", "x", entrypoint="sh", args=["-c", script], num_replicas=replicas)]
    )


@pytest.mark.parametrize(
    ("script", "state", "exitcode"),
    [("echo out; echo err >&2", AppState.SUCCEEDED, 0), ("exit 3", AppState.FAILED, 3)],
)
async def test_success_file_describes_the_ended_app(
    tmp_path: Path, script: str, state: AppState, exitcode: int
) -> None:
    async with create_cwd_scheduler("sess") as scheduler:
        app_id = await scheduler.submit(_app(script), {"log_dir": str(tmp_path)})
        log_dir = tmp_path / "sess" / app_id
        assert not (log_dir / "SUCCESS").exists()  # not before the end
        status = await scheduler.wait(app_id, timeout=LIMIT)
        assert status is not None
        assert status.state == state
        # there as soon as wait returns
        success = log_dir / "SUCCESS"
        assert stat.S_IMODE(success.lstat().st_mode) == 0o600
        info = json.loads(success.read_text())
    assert info["app_id"] == app_id
    assert info["log_dir"] == str(log_dir)
    assert info["final_state"] == state.name
    assert isinstance(info["last_updated"], float)
    replicas = info["roles"]["worker"]
    assert [replica["replica_id"] for replica in replicas] == [0, 1]
    for k, replica in enumerate(replicas):
        assert replica["exitcode"] == exitcode
        assert isinstance(replica["pid"], int)
        assert replica["stdout"] == str(log_dir / "worker" / str(k) / "stdout.log")
        assert replica["stderr"] == str(log_dir / "worker" / str(k) / "stderr.log")
        assert replica["error_file"] == str(log_dir / "worker" / str(k) / "error.json")
    if state == AppState.SUCCEEDED:
        assert Path(replicas[0]["stdout"]).read_text() == "out\n"
        assert Path(replicas[0]["stderr"]).read_text() == "err\n"


async def test_cancelled_app_leaves_a_success_file_saying_cancelled(tmp_path: Path) -> None:
    async with create_cwd_scheduler("sess") as scheduler:
        app_id = await scheduler.submit(
            _app("exec sleep 600", replicas=1), {"log_dir": str(tmp_path), "stop_timeout": 5.0}
        )
        await scheduler.cancel(app_id)
        status = await scheduler.wait(app_id, timeout=LIMIT)
        assert status is not None
        assert status.state == AppState.CANCELLED
        info = json.loads((tmp_path / "sess" / app_id / "SUCCESS").read_text())
    assert info["final_state"] == "CANCELLED"


async def test_success_file_replaces_a_planted_link_without_following_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    # the replica plants SUCCESS -> victim in its app's log directory
    plant = f'ln -s {victim} "$(dirname "$(dirname "$PET_LOG_DIR")")/SUCCESS"'
    logs = tmp_path / "logs"
    async with create_cwd_scheduler("sess") as scheduler:
        app_id = await scheduler.submit(_app(plant, replicas=1), {"log_dir": str(logs)})
        await scheduler.wait(app_id, timeout=LIMIT)
    success = logs / "sess" / app_id / "SUCCESS"
    assert victim.read_text() == "keep me\n"
    assert not success.is_symlink()
    assert json.loads(success.read_text())["app_id"] == app_id
    assert [name for name in os.listdir(success.parent) if name.startswith(".")] == []


async def test_success_file_is_json_indented_by_two_as_torchx_writes_it(tmp_path: Path) -> None:
    async with create_cwd_scheduler("sess") as scheduler:
        app_id = await scheduler.submit(_app("true", replicas=3), {"log_dir": str(tmp_path)})
        await scheduler.wait(app_id, timeout=LIMIT)
    text = (tmp_path / "sess" / app_id / "SUCCESS").read_text()
    # TorchX writes json.dumps(info, indent=2): the same bytes, key order included
    assert text == json.dumps(json.loads(text), indent=2)
