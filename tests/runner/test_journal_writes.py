"""The journal's writes: records appended together share a flush, and a failed write stops
the journal instead of leaving a cut line for the next record to follow."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import anyio
import pytest

from asynctorchx.runner._journal import Journal, StatusRecord
from asynctorchx.specs import AppState, AppStatus


def _status(key: str) -> StatusRecord:
    return StatusRecord.of(key, f"local_cwd://s/{key}", AppStatus(AppState.SUCCEEDED), False)


async def test_records_appended_at_once_are_all_durable_with_fewer_flushes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flushes: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (flushes.append(fd), real_fsync(fd))[1])
    path = tmp_path / "sweep.journal"
    journal = Journal.open(path)
    try:
        async with anyio.create_task_group() as task_group:
            for index in range(50):
                task_group.start_soon(journal.append, _status(f"t{index}"))
    finally:
        journal.close()
    keys = [json.loads(line)["key"] for line in path.read_bytes().splitlines()]
    assert sorted(keys) == sorted(f"t{index}" for index in range(50))
    assert 1 <= len(flushes) < 50  # the appends that came during a flush shared the next


async def test_a_failed_write_refuses_every_later_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "sweep.journal"
    journal = Journal.open(path)
    try:
        await journal.append(_status("t0"))
        real_write = os.write

        def full_disk(fd: int, data: bytes) -> int:
            real_write(fd, bytes(data)[:5])  # a cut line, as a full disk leaves it
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(os, "write", full_disk)
        with pytest.raises(OSError, match="No space left"):
            await journal.append(_status("t1"))
        monkeypatch.setattr(os, "write", real_write)
        with pytest.raises(OSError, match="No space left"):
            await journal.append(_status("t2"))
    finally:
        journal.close()
    data = path.read_bytes()
    assert data.count(b"\n") == 1  # t0's whole line, t1's cut start; t2 never written
    assert json.loads(data.splitlines()[0])["key"] == "t0"
