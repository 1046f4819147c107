"""Bad inputs to the local schedulers are refused with a typed error, nothing created.

TorchX 0.7.0's ``torchx.schedulers.local_scheduler`` lets ``os.makedirs``' ``OSError``
through (and accepts ``stop_timeout``-like values it never checks); here each bad value is
named in an error that says how to fix it, raised before anything starts or is created.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from asynctorchx.errors import (
    InvalidLogDirError,
    InvalidNameException,
    InvalidRunConfigException,
    UnsafeLogPathError,
)
from asynctorchx.schedulers.local import create_cwd_scheduler
from asynctorchx.specs.api import AppDef, AppState, Role

LIMIT = 30  # seconds: a deadline for a hung test, never a guess at timing


def _app(marker: Path | None = None, role: str = "worker", name: str = "app") -> AppDef:
    script = f"touch {marker}" if marker is not None else "true"
    return AppDef(name, [Role(role, "unused", entrypoint="sh", args=["-c", script])])


@pytest.mark.parametrize("stop_timeout", [math.nan, math.inf, -1.0])
async def test_stop_timeout_must_be_finite_and_not_negative(
    tmp_path: Path, stop_timeout: float
) -> None:
    marker = tmp_path / "started"
    async with create_cwd_scheduler("test") as scheduler:
        with pytest.raises(InvalidRunConfigException, match="stop_timeout") as caught:
            await scheduler.submit(
                _app(marker), {"stop_timeout": stop_timeout, "log_dir": str(tmp_path / "logs")}
            )
        assert caught.value.cfg_key == "stop_timeout"
        assert repr(stop_timeout) in str(caught.value)
        assert "finite number of seconds" in str(caught.value)
        assert await scheduler.list() == []
    assert not marker.exists()
    assert not (tmp_path / "logs").exists()


async def test_stop_timeout_zero_kills_at_once(tmp_path: Path) -> None:
    app = AppDef("trap", [Role("r", "x", entrypoint="sh", args=["-c", "trap '' TERM; sleep 600"])])
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(app, {"stop_timeout": 0})
        await scheduler.cancel(app_id)
        status = await scheduler.wait(app_id, timeout=LIMIT)
        assert status is not None
        assert status.state == AppState.CANCELLED


def _file_in_the_way(tmp_path: Path) -> Path:
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("")
    return in_the_way


@pytest.mark.parametrize(
    ("log_dir", "reason"),
    [
        (lambda tmp: _file_in_the_way(tmp), "it is not a directory"),
        (lambda tmp: _file_in_the_way(tmp) / "below", "is a file"),
        # not writable, even by root (procfs)
        (lambda tmp: Path("/proc/sys/asynctorchx-logs"), "cannot create files in '/proc/sys'"),
        (lambda tmp: tmp / ("x" * 300), "more than the file system's"),
    ],
    ids=["a-file", "below-a-file", "unwritable", "too-long"],
)
async def test_a_log_dir_that_cannot_hold_logs_is_refused_at_dry_run(
    tmp_path: Path, log_dir: object, reason: str
) -> None:
    path = log_dir(tmp_path)  # type: ignore[operator]
    before = sorted(os.listdir(tmp_path))
    marker = tmp_path / "started"
    async with create_cwd_scheduler("test") as scheduler:
        with pytest.raises(InvalidLogDirError, match=reason) as caught:
            scheduler.submit_dryrun(_app(marker), {"log_dir": str(path)})
        assert caught.value.cfg_key == "log_dir"
        assert repr(str(path)) in str(caught.value)
        assert "choose a log_dir" in str(caught.value) or "shorten" in str(caught.value)
        with pytest.raises(InvalidLogDirError):
            await scheduler.submit(_app(marker), {"log_dir": str(path)})
        assert await scheduler.list() == []
    assert sorted(os.listdir(tmp_path)) == before
    assert not marker.exists()


async def test_a_submit_refused_midway_removes_the_directories_it_created(
    tmp_path: Path,
) -> None:
    app = AppDef(
        "two",
        [Role(name, "unused", entrypoint="true") for name in ("a", "b")],
    )
    async with create_cwd_scheduler("test") as scheduler:
        info = scheduler.submit_dryrun(app, {"log_dir": str(tmp_path)})
        app_dir = Path(info.request.log_dir)
        app_dir.mkdir(parents=True)
        (app_dir / "b").write_text("")  # in the way of role b's directory, after the dry run
        with pytest.raises(UnsafeLogPathError, match="is not a directory"):
            await scheduler.schedule(info)
        assert await scheduler.list() == []
    assert os.listdir(app_dir) == ["b"]  # role a's directories, made first, are gone


async def test_a_log_dir_the_kernel_refuses_is_a_typed_error() -> None:
    # sysfs: root passes the access check, mkdir still fails (EPERM)
    async with create_cwd_scheduler("test") as scheduler:
        with pytest.raises(InvalidLogDirError, match="/sys/asynctorchx-logs") as caught:
            await scheduler.submit(_app(), {"log_dir": "/sys/asynctorchx-logs"})
        assert caught.value.cfg_key == "log_dir"
        assert await scheduler.list() == []
    assert not os.path.lexists("/sys/asynctorchx-logs")


async def test_a_300_character_session_or_role_name_is_refused(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    async with create_cwd_scheduler("s" * 300) as scheduler:
        with pytest.raises(InvalidNameException, match="session name"):
            await scheduler.submit(_app(), {"log_dir": str(log_dir)})
    async with create_cwd_scheduler("test") as scheduler:
        with pytest.raises(InvalidNameException, match="role name"):
            await scheduler.submit(_app(role="r" * 300), {"log_dir": str(log_dir)})
        assert await scheduler.list() == []
    assert not log_dir.exists()


async def test_a_300_character_app_name_runs_under_a_shortened_app_id(tmp_path: Path) -> None:
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(_app(name="a" * 300), {"log_dir": str(tmp_path)})
        status = await scheduler.wait(app_id, timeout=LIMIT)
        assert status is not None
        assert status.state == AppState.SUCCEEDED
    assert len(app_id) <= 111
