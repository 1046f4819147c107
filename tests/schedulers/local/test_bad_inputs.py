"""Bad inputs to the local schedulers are refused with a typed error, nothing created.

TorchX 0.7.0's ``torchx.schedulers.local_scheduler`` lets ``os.makedirs``' ``OSError``
through (and accepts ``stop_timeout``-like values it never checks); here each bad value is
named in an error that says how to fix it, raised before anything starts or is created.
"""

from __future__ import annotations

import errno
import math
import os
from pathlib import Path

import attrs
import pytest

from asynctorchx.errors import (
    InvalidLogDirError,
    InvalidNameException,
    InvalidRunConfigException,
    ReplicaLaunchError,
    UnsafeLogPathError,
)
from asynctorchx.schedulers.api import Stream
from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler, create_dir_scheduler
from asynctorchx.specs.api import AppDef, AppState, RetryPolicy, Role
from tests.processes import alive

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


# ---------------------------------------------------------------------- entrypoints


def _processes_marked(marker: str) -> list[int]:
    """The live processes whose environment has ``MARKER=marker``."""
    wanted = f"MARKER={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                environment = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            except OSError:  # gone, or not ours to read
                continue
            if wanted in environment and alive(int(entry)):
                found.append(int(entry))
    return found


def _with_a_running_role(bad: Role, marker: str) -> AppDef:
    """An app of ``bad`` after a role of two replicas that run until stopped."""
    env = {"MARKER": marker}
    sleeper = Role("ok", bad.image, entrypoint="sleep", args=["600"], num_replicas=2, env=env)
    return AppDef("launch", [sleeper, attrs.evolve(bad, env={**bad.env, "MARKER": marker})])


async def test_a_missing_entrypoint_names_the_replica_the_path_and_the_fix(
    tmp_path: Path,
) -> None:
    path = f"{tmp_path / 'bin'}:/usr/bin:/bin"
    bad = Role("trainer", "x", entrypoint="fz-no-such-binary", env={"PATH": path})
    async with create_cwd_scheduler("test") as scheduler:
        with pytest.raises(ReplicaLaunchError) as caught:
            await scheduler.submit(_with_a_running_role(bad, tmp_path.name), {})
        assert await scheduler.list() == []
    assert _processes_marked(tmp_path.name) == []
    error = caught.value
    assert (error.errno, error.filename) == (errno.ENOENT, "fz-no-such-binary")
    assert (error.role, error.replica_id, error.entrypoint) == ("trainer", 0, "fz-no-such-binary")
    # the role's PATH comes first, then this process's (the local schedulers' rule)
    prefix = "replica trainer/0 could not start 'fz-no-such-binary': no program of that name"
    assert str(error).startswith(f"{prefix} on the replica's PATH '{path}:")
    assert str(error).endswith(
        "'; install it, give the entrypoint as an absolute path, or put its directory on"
        " the role's PATH (Role.env)"
    )


@pytest.mark.parametrize(
    ("mode", "content", "errno_value", "words"),
    [
        (
            0o644,
            "#!/bin/sh\necho hi\n",
            errno.EACCES,
            "is not executable (mode 100644); make it"
            " executable (`chmod +x {file}`), or make the entrypoint its interpreter",
        ),
        (
            0o755,
            "echo hi\n",
            errno.ENOEXEC,
            "is executable but not a program this machine can"
            " run (no '#!' line, or built for another machine); begin it with a '#!' line",
        ),
    ],
)
async def test_an_image_file_that_cannot_run_names_the_file_and_the_fix(
    tmp_path: Path, mode: int, content: str, errno_value: int, words: str
) -> None:
    image = tmp_path / "image"
    image.mkdir()
    file = image / "train.sh"
    file.write_text(content)
    file.chmod(mode)
    bad = Role("trainer", str(image), entrypoint="train.sh")
    async with create_dir_scheduler("test") as scheduler:
        with pytest.raises(ReplicaLaunchError) as caught:
            await scheduler.submit(_with_a_running_role(bad, tmp_path.name), {})
        assert await scheduler.list() == []
    assert _processes_marked(tmp_path.name) == []
    assert caught.value.errno == errno_value
    expected = f"replica trainer/0 could not start {str(file)!r}: {str(file)!r} "
    assert str(caught.value).startswith(expected + words.format(file=file))


async def test_a_restart_that_cannot_start_says_why_in_the_replicas_stderr(
    tmp_path: Path,
) -> None:
    # the first attempt runs, removes its own program and fails: the restart finds none
    program = tmp_path / "once.sh"
    program.write_text(f"#!/bin/sh\nrm {program}\nexit 1\n")
    program.chmod(0o755)
    role = Role(
        "trainer", "x", entrypoint=str(program), max_retries=1, retry_policy=RetryPolicy.REPLICA
    )
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(AppDef("restart", [role]), {})
        status = await scheduler.wait(app_id, timeout=LIMIT)
        assert status is not None
        assert status.state == AppState.FAILED
        stderr = [
            line async for line in scheduler.log_iter(app_id, "trainer", 0, streams=Stream.STDERR)
        ]
    assert stderr == [
        f"asynctorchx: replica trainer/0 could not start {str(program)!r}: there is no file"
        f" {str(program)!r}; fix the role's entrypoint, or create that file\n"
    ]
