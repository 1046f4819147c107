"""``list`` over the records directory: each finished app's record is read once, then
listed from the list index; the index is a cache that a damaged, missing or unwritable
file never makes wrong.

The state directory is ``tmp_path/state`` (``conftest``); lists from several real
processes at once, while apps end, are in ``tests/faults/test_local_records.py``.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from asynctorchx.schedulers.local import _records
from asynctorchx.schedulers.local._app_views import list_recorded_apps
from asynctorchx.schedulers.local._process_identity import ProcessIdentity, this_process
from asynctorchx.schedulers.local._records import (
    INDEX_NAME,
    AppRecord,
    ListEntry,
    read_index,
    record_path,
    records_directory,
    supervisor_key,
    write_record,
)
from asynctorchx.specs.api import AppState

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc process identities")


def other_process() -> ProcessIdentity:
    """A supervisor that runs and is not this process (the test's parent)."""
    identity = ProcessIdentity.of(os.getppid())
    assert identity is not None
    return identity


def dead_process() -> ProcessIdentity:
    """A supervisor that is gone (this pid at another start time)."""
    me = this_process()
    assert me is not None
    return ProcessIdentity(me.pid, me.start_time - 1, me.boot_id)


def a_record(
    app_id: str, state: AppState, supervisor: ProcessIdentity, session: str = "test"
) -> AppRecord:
    return AppRecord(
        app_id=app_id,
        backend="local_cwd",
        session=session,
        uid=os.geteuid(),
        state=state,
        log_dir="/nonexistent",
        supervisor=supervisor,
        replicas=[],
    )


def listed() -> list[tuple[str, AppState]]:
    """What ``list`` of the session ``test`` reports, as (app id, state)."""
    return [(app.app_id, app.state) for app in list_recorded_apps("local_cwd", "test", ())]


@pytest.fixture
def directory(state: Path) -> str:
    made = records_directory("local_cwd", create=True)
    assert made is not None
    return made


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The app ids whose record ``list`` reads, in order."""
    read: list[str] = []
    real_read = _records.read_record

    def counting_read(path: str) -> AppRecord | None:
        read.append(os.path.basename(path).removesuffix(".json"))
        return real_read(path)

    monkeypatch.setattr("asynctorchx.schedulers.local._app_views.read_record", counting_read)
    return read


def test_a_finished_apps_record_is_read_by_one_list_only(directory: str, reads: list[str]) -> None:
    other, dead = other_process(), dead_process()
    for n in range(20):
        write_record(directory, a_record(f"done-{n:02d}", AppState.SUCCEEDED, other))
    write_record(directory, a_record("died", AppState.RUNNING, dead))  # FAILED, for good
    write_record(directory, a_record("runs", AppState.RUNNING, other))
    write_record(directory, a_record("elsewhere", AppState.SUCCEEDED, other, session="x"))
    me = this_process()
    assert me is not None
    write_record(directory, a_record("mine", AppState.SUCCEEDED, me))
    expected = [
        ("died", AppState.FAILED),
        *[(f"done-{n:02d}", AppState.SUCCEEDED) for n in range(20)],
        ("runs", AppState.RUNNING),
    ]
    assert listed() == expected  # another session's app and this process's own are not
    # every record once; the dead supervisor's twice (it may have recorded an end just
    # before it exited)
    assert sorted(reads) == sorted(
        [*(app_id for app_id, _ in expected), "died", "elsewhere", "mine"]
    )
    reads.clear()
    assert listed() == expected
    assert reads == ["runs"]  # only the running app's record, whose state may change
    # the running app ends: its record, not the index, says so
    write_record(directory, a_record("runs", AppState.CANCELLED, other))
    assert ("runs", AppState.CANCELLED) in listed()
    reads.clear()
    assert ("runs", AppState.CANCELLED) in listed()
    assert reads == []
    index = read_index(directory)
    assert index["died"] == ListEntry("test", AppState.FAILED, supervisor_key(dead))
    assert index["elsewhere"].session == "x"
    assert len(index) == 24
    assert stat.S_IMODE(os.stat(os.path.join(directory, INDEX_NAME)).st_mode) == 0o600


def test_an_end_recorded_just_before_the_supervisor_exits_is_listed(
    directory: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # list read the record while the app ran; the supervisor then recorded the app's
    # end and exited before list looked at it: the app SUCCEEDED, it did not die
    ended = a_record("app", AppState.SUCCEEDED, dead_process())
    write_record(directory, ended)
    stale = [attrs.evolve(ended, state=AppState.RUNNING)]
    real_read = _records.read_record

    def first_read_before_the_end(path: str) -> AppRecord | None:
        return stale.pop() if stale else real_read(path)

    monkeypatch.setattr(
        "asynctorchx.schedulers.local._app_views.read_record", first_read_before_the_end
    )
    assert listed() == [("app", AppState.SUCCEEDED)]
    assert read_index(directory)["app"].state == AppState.SUCCEEDED


def test_an_app_whose_record_is_gone_leaves_the_list_and_the_index(directory: str) -> None:
    for app_id in ("a", "b"):
        write_record(directory, a_record(app_id, AppState.SUCCEEDED, other_process()))
    assert [app_id for app_id, _ in listed()] == ["a", "b"]
    os.unlink(record_path(directory, "a"))  # pruned
    assert [app_id for app_id, _ in listed()] == ["b"]
    assert list(read_index(directory)) == ["b"]


def damage_by_truncation(index: Path) -> None:
    index.write_bytes(index.read_bytes()[: index.stat().st_size // 2])


def damage_by_garbage(index: Path) -> None:
    index.write_bytes(b"\x00\xff not an index")


def damage_by_another_version(index: Path) -> None:
    index.write_text(index.read_text().replace('"version":1', '"version":99'))


def damage_by_a_state_not_finished(index: Path) -> None:
    index.write_text(index.read_text().replace('"SUCCEEDED"', '"RUNNING"', 1))


def damage_by_removal(index: Path) -> None:
    index.unlink()


@pytest.mark.parametrize(
    "damage",
    [
        damage_by_truncation,
        damage_by_garbage,
        damage_by_another_version,
        damage_by_a_state_not_finished,
        damage_by_removal,
    ],
)
def test_a_damaged_or_missing_index_is_rebuilt_from_the_records(
    directory: str, reads: list[str], damage: Callable[[Path], None]
) -> None:
    other = other_process()
    for n in range(5):
        write_record(directory, a_record(f"app-{n}", AppState.SUCCEEDED, other))
    write_record(directory, a_record("app-failed", AppState.FAILED, other))
    expected = listed()
    assert len(expected) == 6
    built = read_index(directory)
    damage(Path(directory, INDEX_NAME))
    reads.clear()
    assert listed() == expected
    assert len(reads) == 6  # every record read again: nothing taken from the damaged file
    assert read_index(directory) == built


def test_a_symlinked_index_is_never_followed(
    directory: str, reads: list[str], tmp_path: Path
) -> None:
    write_record(directory, a_record("app", AppState.SUCCEEDED, other_process()))
    target = tmp_path / "target"
    target.write_text("someone's file")
    Path(directory, INDEX_NAME).symlink_to(target)
    assert listed() == [("app", AppState.SUCCEEDED)]
    assert reads == ["app"]
    assert target.read_text() == "someone's file"  # neither read nor written through
    index = Path(directory, INDEX_NAME)
    assert stat.S_ISREG(index.lstat().st_mode)  # the link itself was replaced
    assert list(read_index(directory)) == ["app"]


def test_an_index_that_cannot_be_written_changes_nothing_listed(
    directory: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = other_process()
    write_record(directory, a_record("first", AppState.SUCCEEDED, other))
    assert listed() == [("first", AppState.SUCCEEDED)]
    built = Path(directory, INDEX_NAME).read_bytes()
    write_record(directory, a_record("second", AppState.FAILED, other))
    real_write = os.write

    def half_then_full_disk(fd: int, data: bytes | memoryview) -> int:
        if len(data) > 1:
            return real_write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(os, "write", half_then_full_disk)
        assert listed() == [("first", AppState.SUCCEEDED), ("second", AppState.FAILED)]
    assert Path(directory, INDEX_NAME).read_bytes() == built  # the old index, whole
    assert sorted(os.listdir(directory)) == sorted(
        ["cancel", INDEX_NAME, "first.json", "second.json"]
    )  # no temporary file left
    assert listed() == [("first", AppState.SUCCEEDED), ("second", AppState.FAILED)]
    assert sorted(read_index(directory)) == ["first", "second"]


def test_a_record_that_is_not_one_is_never_indexed(directory: str, reads: list[str]) -> None:
    write_record(directory, a_record("app", AppState.SUCCEEDED, other_process()))
    Path(directory, "torn.json").write_bytes(b'{"app_id": "torn", "ver')  # a foreign file
    foreign = attrs.evolve(a_record("moved", AppState.SUCCEEDED, other_process()), backend="x")
    write_record(directory, foreign)  # a record of another backend
    assert listed() == [("app", AppState.SUCCEEDED)]
    assert list(read_index(directory)) == ["app"]
