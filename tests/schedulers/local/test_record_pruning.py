"""When the app records are pruned: at a scheduler's first submit, at most once an hour per
backend across the user's processes once the backend has records (a full directory costs
its 1000 records' times to prune, which every process's first app would otherwise pay).

What a pruning removes is in ``test_records.py``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from asynctorchx.schedulers.local import _records
from asynctorchx.schedulers.local._process_identity import this_process
from asynctorchx.schedulers.local._records import (
    PRUNE_INTERVAL,
    AppRecord,
    RecordKeeper,
    prune_due,
    records_directory,
    write_record,
)
from asynctorchx.specs.api import AppState


@pytest.fixture(name="prunings")
def _count_prunings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The directories pruned, in order (each pruned for real)."""
    pruned: list[str] = []
    real_prune = _records.prune_records

    def counting_prune(directory: str, now: float | None = None) -> None:
        pruned.append(directory)
        real_prune(directory, now)

    monkeypatch.setattr(_records, "prune_records", counting_prune)
    return pruned


def first_submit(backend: str = "local_cwd") -> str:
    """What a new scheduler (in a new process) does at its first submit; its directory."""
    directory = RecordKeeper(backend, "session").directory
    assert directory is not None
    return directory


def a_finished_record(directory: str, app_id: str) -> None:
    record = AppRecord(
        app_id=app_id,
        backend="local_cwd",
        session="s",
        uid=os.geteuid(),
        state=AppState.SUCCEEDED,
        log_dir="/nonexistent",
        supervisor=this_process(),
        replicas=[],
    )
    write_record(directory, record)


def test_a_backend_with_records_is_pruned_once_within_the_hour(
    state: Path, prunings: list[str]
) -> None:
    directory = first_submit()
    # nothing to prune yet: no stamp made, the next first submit looks again
    assert not (state / ".local_cwd.pruned").exists()
    a_finished_record(directory, "app-1")
    assert first_submit() == directory
    assert (state / ".local_cwd.pruned").is_file()
    assert prunings == [directory, directory]
    # another process a minute later does not prune; another backend has its own stamp
    assert first_submit() == directory
    other = first_submit("local_dir")
    assert prunings == [directory, directory, other]


def test_a_backend_is_pruned_again_once_its_last_pruning_is_an_hour_old(
    state: Path, prunings: list[str]
) -> None:
    directory = records_directory("local_cwd", create=True)
    assert directory is not None
    a_finished_record(directory, "app-1")
    first_submit()
    hour_ago = time.time() - PRUNE_INTERVAL - 1
    os.utime(state / ".local_cwd.pruned", (hour_ago, hour_ago))
    first_submit()
    first_submit()
    assert prunings == [directory, directory]


def test_a_pruning_stamped_in_the_future_does_not_stop_pruning(state: Path) -> None:
    directory = records_directory("local_cwd", create=True)
    assert directory is not None
    a_finished_record(directory, "app-1")
    now = time.time()
    assert prune_due(directory, now)
    _records.prune_records(directory, now)
    assert not prune_due(directory, now + 10)
    # the clock went back a day: the stamp is in the future, so it is not believed
    assert prune_due(directory, now - 24 * 3600)
