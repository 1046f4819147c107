"""The app records of the local schedulers: written by the supervisor, pruned, refused
when unsafe, and a cancel request left by another process honoured by the supervisor.

The state directory is ``tmp_path/state`` (``conftest``); the cross-process cases with
real second processes are in ``tests/faults/test_local_records.py``.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import time
from pathlib import Path

import anyio
import attrs
import pytest

from asynctorchx.schedulers.local import _records
from asynctorchx.schedulers.local._process_identity import ProcessIdentity, this_process
from asynctorchx.schedulers.local._records import (
    MAX_RECORD_AGE,
    AppRecord,
    prune_records,
    read_record,
    record_path,
    records_directory,
    write_record,
)
from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
from asynctorchx.specs.api import AppDef, AppState, Role

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc and inotify")


def sh_app(script: str) -> AppDef:
    return AppDef("rec", [Role("worker", "x", entrypoint="sh", args=["-c", script])])


def a_record(app_id: str, state: AppState, supervisor: ProcessIdentity | None) -> AppRecord:
    return AppRecord(
        app_id=app_id,
        backend="local_cwd",
        session="test",
        uid=os.geteuid(),
        state=state,
        log_dir="/nonexistent",
        supervisor=supervisor,
        replicas=[],
    )


async def test_the_supervisor_records_the_app_from_start_to_end(
    state: Path, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    script = f"while [ ! -e {go} ]; do sleep 0.05; done; exit 4"
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app(script), {})
        path = state / "local_cwd" / f"{app_id}.json"
        started = read_record(str(path))  # written before submit returned
        assert started is not None
        assert started.session == "test"
        assert started.supervisor == this_process()
        (replica,) = started.replicas
        assert replica.pid is not None
        assert replica.pgid == replica.pid
        assert replica.process is not None
        assert replica.process.pid == replica.pid
        go.touch()
        await scheduler.wait(app_id)
        ended = read_record(str(path))  # written before wait returned
        assert ended is not None
        assert ended.state == AppState.FAILED
        assert ended.replicas[0].exit_code == 4
        assert [role.name for role in ended.roles] == ["worker"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_a_cancel_request_file_ends_the_app_cancelled(state: Path) -> None:
    # the replica ignores SIGTERM: only the supervisor's SIGKILL after stop_timeout ends it
    script = "trap '' TERM; echo ready; while :; do sleep 1; done"
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app(script), {"stop_timeout": 0.2})
        with anyio.fail_after(30):
            async for line in scheduler.log_iter(app_id, "worker", should_tail=True):
                assert line == "ready\n"
                break
            (state / "local_cwd" / "cancel" / app_id).touch()  # what another process leaves
            final = await scheduler.wait(app_id)
        assert final is not None
        assert final.state == AppState.CANCELLED
        assert not (state / "local_cwd" / "cancel" / app_id).exists()  # consumed


def test_finished_records_are_pruned_by_age_and_count(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("asynctorchx.schedulers.local._records.MAX_RECORDS", 3)
    directory = records_directory("local_cwd", create=True)
    assert directory is not None
    me = this_process()
    gone = ProcessIdentity(me.pid, me.start_time - 1, me.boot_id) if me else None
    now = time.time()
    ages = {
        "old-done": (AppState.SUCCEEDED, me, MAX_RECORD_AGE + 60),
        "old-dead": (AppState.RUNNING, gone, MAX_RECORD_AGE + 60),  # supervisor died
        "old-running": (AppState.RUNNING, me, MAX_RECORD_AGE + 60),  # still supervised
        **{f"done-{n}": (AppState.FAILED, me, 100.0 * (5 - n)) for n in range(5)},
    }
    for app_id, (app_state, supervisor, age) in ages.items():
        write_record(directory, a_record(app_id, app_state, supervisor))
        os.utime(record_path(directory, app_id), (now - age, now - age))
    prune_records(directory, now)
    kept = sorted(name[: -len(".json")] for name in os.listdir(directory) if name != "cancel")
    # the running one is kept whatever its age and counts towards the 3; of the
    # finished, the latest that fit
    assert kept == ["done-3", "done-4", "old-running"]


def test_a_pruned_record_takes_the_logs_kept_with_it_and_no_others(
    state: Path, tmp_path: Path
) -> None:
    directory = records_directory("local_cwd", create=True)
    assert directory is not None
    kept = Path(directory) / "logs" / "test" / "kept"
    chosen = tmp_path / "chosen" / "test" / "chosen"  # a log_dir the user gave
    now = time.time()
    for app_id, log_dir in (("kept", kept), ("chosen", chosen)):
        (log_dir / "worker" / "0").mkdir(parents=True)
        (log_dir / "worker" / "0" / "combined.log").write_text("a line\n")
        record = attrs.evolve(a_record(app_id, AppState.SUCCEEDED, None), log_dir=str(log_dir))
        write_record(directory, record)
        old = now - MAX_RECORD_AGE - 60
        os.utime(record_path(directory, app_id), (old, old))
    prune_records(directory, now)
    assert not Path(record_path(directory, "kept")).exists()
    assert not kept.exists()
    assert (chosen / "worker" / "0" / "combined.log").read_text() == "a line\n"


def test_a_full_records_directory_reads_only_the_records_that_go(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a user past MAX_RECORDS gains one record per app: the first submit of each process
    # must not read and decode every record to remove the oldest one
    monkeypatch.setattr("asynctorchx.schedulers.local._records.MAX_RECORDS", 5)
    directory = records_directory("local_cwd", create=True)
    assert directory is not None
    now = time.time()
    for n in range(7):
        write_record(directory, a_record(f"done-{n}", AppState.SUCCEEDED, this_process()))
        os.utime(record_path(directory, f"done-{n}"), (now - 100 + n, now - 100 + n))
    read: list[str] = []
    real_read = _records.read_record

    def counting_read(path: str) -> AppRecord | None:
        read.append(os.path.basename(path))
        return real_read(path)

    monkeypatch.setattr("asynctorchx.schedulers.local._records.read_record", counting_read)
    prune_records(directory, now)
    assert read == ["done-0.json", "done-1.json"]
    kept = sorted(name[: -len(".json")] for name in os.listdir(directory) if name != "cancel")
    assert kept == [f"done-{n}" for n in range(2, 7)]


def test_an_unsafe_state_directory_is_never_used(state: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state.symlink_to(elsewhere)
    assert records_directory("local_cwd", create=True) is None
    assert records_directory("local_cwd", create=False) is None


async def test_an_app_runs_without_records_when_the_state_directory_is_unsafe(
    state: Path, tmp_path: Path
) -> None:
    state.symlink_to(tmp_path)
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app("true"), {})
        final = await scheduler.wait(app_id)
    assert final is not None
    assert final.state == AppState.SUCCEEDED
    assert not (tmp_path / "local_cwd").exists()


async def test_a_change_the_start_or_end_record_holds_is_not_written_again(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the coalesced write never comes within the test: only the writes made at once
    monkeypatch.setattr("asynctorchx.schedulers.local._records.COALESCE_SECONDS", 3600.0)
    written: list[AppState] = []
    real_write = _records.write_record

    def counting_write(directory: str, record: AppRecord) -> None:
        written.append(record.state)
        real_write(directory, record)

    monkeypatch.setattr("asynctorchx.schedulers.local._records.write_record", counting_write)
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app("true"), {})
        final = await scheduler.wait(app_id)
    assert final is not None
    assert final.state == AppState.SUCCEEDED
    # the replica's start and exit changed the app too: each is in the record written
    # at once after it (the app's start, its end), never in a write of its own
    assert written == [AppState.RUNNING, AppState.SUCCEEDED]


async def test_a_change_between_start_and_end_is_written_while_the_app_runs(
    state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("asynctorchx.schedulers.local._records.COALESCE_SECONDS", 0.01)
    go = tmp_path / "go"
    app = AppDef(
        "rec",
        [
            Role("quick", "x", entrypoint="true"),
            Role(
                "slow",
                "x",
                entrypoint="sh",
                args=["-c", f"while [ ! -e {go} ]; do sleep 0.05; done"],
            ),
        ],
    )
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(app, {})
        path = state / "local_cwd" / f"{app_id}.json"
        with anyio.fail_after(30):
            while True:  # the quick replica's exit reaches the record on its own
                record = read_record(str(path))
                assert record is not None
                states = {replica.role: replica.state for replica in record.replicas}
                if states["quick"] == AppState.SUCCEEDED:
                    break
                await anyio.sleep(0.01)
        assert record.state == AppState.RUNNING
        assert states["slow"] == AppState.RUNNING
        go.touch()
        final = await scheduler.wait(app_id)
    assert final is not None
    assert final.state == AppState.SUCCEEDED


def test_a_record_whose_write_fails_halfway_leaves_the_old_record_whole(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = records_directory("local_cwd", create=True)
    assert directory is not None
    write_record(directory, a_record("app-1", AppState.RUNNING, this_process()))
    real_write = os.write

    def half_then_full_disk(fd: int, data: bytes | memoryview) -> int:
        if len(data) > 1:
            return real_write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    ended = a_record("app-1", AppState.SUCCEEDED, this_process())
    with monkeypatch.context() as patch:
        patch.setattr(os, "write", half_then_full_disk)
        with pytest.raises(OSError, match="No space left"):
            write_record(directory, ended)
    record = read_record(record_path(directory, "app-1"))
    assert record is not None
    assert record.state == AppState.RUNNING  # the old one, whole
    assert sorted(os.listdir(directory)) == ["app-1.json", "cancel"]  # no temporary left


async def test_the_record_carries_each_replicas_error_file_to_other_processes(
    state: Path,
) -> None:
    failing = 'printf boom > "$TORCHELASTIC_ERROR_FILE"; exit 1'
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app(failing), {})
        final = await scheduler.wait(app_id)
    assert final is not None
    assert final.state == AppState.FAILED
    assert final.structured_error_msg == "boom"
    record = read_record(str(state / "local_cwd" / f"{app_id}.json"))
    assert record is not None
    assert [replica.error for replica in record.replicas] == ["boom"]
