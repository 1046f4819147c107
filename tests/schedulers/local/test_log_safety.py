"""Log directories and files in a shared ``log_dir``: private, ours, never through a link.

Another local user may create names in a shared ``log_dir`` (``/tmp/logs``) first: a
symbolic link at a log path, or the directory itself. The tests run as root and plant
what such a user would, with ``os.chown`` to ``nobody`` standing for the other user.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import anyio
import pytest

from asynctorchx.errors import UnsafeLogPathError
from asynctorchx.schedulers.local._log_files import LogFile
from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
from asynctorchx.schedulers.toolkit import LogQuery, lines_of, tail_blocks
from asynctorchx.specs.api import AppDef, Role

NOBODY = 65534


def echo_app(marker: Path | None = None) -> AppDef:
    """One replica printing ``hello`` (and creating ``marker`` first when given)."""
    script = "echo hello" if marker is None else f"touch {marker}; echo hello"
    return AppDef("safe", [Role("worker", "unused", entrypoint="sh", args=["-c", script])])


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


async def test_a_symlink_planted_at_a_log_path_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"root's own\n")
    secret.chmod(0o600)
    marker = tmp_path / "started"
    log_dir = tmp_path / "logs"
    async with create_cwd_scheduler("test") as scheduler:
        info = scheduler.submit_dryrun(echo_app(marker), {"log_dir": str(log_dir)})
        combined = Path(info.request.role_params["worker"][0].combined or "")
        combined.parent.mkdir(parents=True)
        combined.symlink_to(secret)
        with pytest.raises(UnsafeLogPathError, match="symbolic link") as caught:
            await scheduler.schedule(info)
        assert caught.value.path == str(combined)
        assert await scheduler.list() == []
    assert not marker.exists()  # the replica never started
    assert secret.read_bytes() == b"root's own\n"
    assert combined.is_symlink()


async def test_a_log_file_never_appends_through_a_link_planted_later(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"keep\n")
    (tmp_path / "combined.log").symlink_to(secret)
    log_file = LogFile(str(tmp_path / "combined.log"))
    with pytest.raises(UnsafeLogPathError, match="symbolic link"):
        log_file.write(b"output\n")
    log_file.close()
    assert secret.read_bytes() == b"keep\n"
    other = tmp_path / "stdout.log"
    other.write_bytes(b"not ours\n")
    os.chown(other, NOBODY, NOBODY)
    with pytest.raises(UnsafeLogPathError, match="not a log file of this user"):
        LogFile(str(other)).write(b"output\n")
    assert other.read_bytes() == b"not ours\n"


async def test_created_directories_are_0700_and_log_files_0600(tmp_path: Path) -> None:
    log_dir = tmp_path / "shared" / "logs"  # neither exists yet
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(echo_app(), {"log_dir": str(log_dir)})
        await scheduler.wait(app_id)
        assert [line async for line in scheduler.log_iter(app_id, "worker")] == ["hello\n"]
    replica_dir = log_dir / "test" / app_id / "worker" / "0"
    directories = [tmp_path / "shared", log_dir, log_dir / "test", log_dir / "test" / app_id]
    directories += [replica_dir.parent, replica_dir]
    assert {str(d): mode(d) for d in directories} == {str(d): 0o700 for d in directories}
    files = sorted(replica_dir.glob("*.log*"))
    assert [f.name for f in files] == [
        "combined.log",
        "combined.log.idx",
        "stdout.log",
        "stdout.log.idx",
    ]
    assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}


@pytest.mark.parametrize("level", ["log_dir", "session"])
async def test_a_directory_owned_by_another_user_is_refused(tmp_path: Path, level: str) -> None:
    log_dir = tmp_path / "logs"
    planted = log_dir if level == "log_dir" else log_dir / "test"
    planted.mkdir(parents=True)
    os.chown(planted, NOBODY, NOBODY)
    async with create_cwd_scheduler("test") as scheduler:
        with pytest.raises(UnsafeLogPathError, match="owned by uid 65534") as caught:
            await scheduler.submit(echo_app(), {"log_dir": str(log_dir)})
        assert caught.value.path == str(planted)
        assert "log_dir of your own" in str(caught.value)
        assert await scheduler.list() == []
    assert list(planted.iterdir()) == []  # nothing created in it


async def test_a_world_writable_log_dir_without_sticky_bit_is_refused(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    log_dir.chmod(0o777)
    async with create_cwd_scheduler("test") as scheduler:
        with pytest.raises(UnsafeLogPathError, match="writable by every user"):
            await scheduler.submit(echo_app(), {"log_dir": str(log_dir)})
        log_dir.chmod(0o1777)  # sticky, as /tmp: another user cannot replace our entries
        app_id = await scheduler.submit(echo_app(), {"log_dir": str(log_dir)})
        await scheduler.wait(app_id)
    assert mode(log_dir / "test") == 0o700


async def test_a_log_dir_given_through_a_link_of_ours_is_resolved_once(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    async with create_cwd_scheduler("test") as scheduler:
        info = scheduler.submit_dryrun(echo_app(), {"log_dir": str(tmp_path / "link")})
        assert info.request.log_dir.startswith(str(real) + os.sep)
        app_id = await scheduler.schedule(info)
        await scheduler.wait(app_id)
    assert (real / "test" / app_id / "worker" / "0" / "stdout.log").read_bytes() == b"hello\n"


async def test_reading_refuses_to_follow_a_symlink(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"private\n")
    link = tmp_path / "combined.log"
    link.symlink_to(secret)
    done = anyio.Event()
    done.set()
    lines = lines_of(
        tail_blocks(
            str(link), LogQuery("worker"), wait_for_change=done.wait, is_finished=lambda: True
        )
    )
    with pytest.raises(UnsafeLogPathError, match="symbolic link"):
        [line async for line in lines]


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip("O_NOFOLLOW and uid checks are tested on Linux")
