"""What ``close()`` removes: the temporary log directory (used only when there is no records
directory to keep the logs in), never the kept logs nor a given ``log_dir``.

TorchX 0.7.0 keeps one ``_base_log_dir`` that each submit overwrites, so after a submit
without ``log_dir`` and one with it, its ``close()`` deletes the user's ``log_dir``.
"""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import anyio
import pytest

from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
from asynctorchx.specs.api import AppState
from tests.schedulers.local.test_scheduler import LIMIT, sh_app


async def test_close_keeps_the_logs_kept_with_the_records() -> None:
    async with create_cwd_scheduler("test") as scheduler:
        with anyio.fail_after(LIMIT):
            status = await scheduler.wait(await scheduler.submit(sh_app("echo kept"), {}))
    assert status is not None
    assert status.ui_url is not None
    kept = Path(status.ui_url.removeprefix("file://"))
    assert kept.parent.parent.name == "logs"
    assert [log.read_text() for log in kept.rglob("combined.log")] == ["kept\n"]


@pytest.mark.usefixtures("no_records")
async def test_close_removes_the_temporary_log_dir_and_keeps_a_given_one(tmp_path: Path) -> None:
    given = tmp_path / "logs"
    given.mkdir()
    (given / "precious.txt").write_text("kept")
    async with create_cwd_scheduler("test") as scheduler:
        with anyio.fail_after(LIMIT):
            temporary_id = await scheduler.submit(sh_app("echo temporary"), {})
            given_id = await scheduler.submit(sh_app("echo given"), {"log_dir": str(given)})
            temporary = await scheduler.wait(temporary_id)
            assert await scheduler.wait(given_id) is not None
        assert temporary is not None
        assert temporary.ui_url is not None
        temporary_dir = Path(temporary.ui_url.removeprefix("file://"))
        assert temporary_dir.is_dir()
        assert not temporary_dir.is_relative_to(given)
    assert not temporary_dir.exists()
    assert (given / "precious.txt").read_text() == "kept"
    assert [log.read_text() for log in given.rglob("combined.log")] == ["given\n"]


@pytest.mark.usefixtures("no_records")
async def test_a_removed_temporary_log_dir_is_made_again_by_the_next_submit() -> None:
    """The temporary log directory and its session directory are made and checked once:
    when this user removes them between two submits, the next submit makes them again
    (0700) and its logs land where its ``ui_url`` says."""
    async with create_cwd_scheduler("test") as scheduler:
        with anyio.fail_after(LIMIT):
            first = await scheduler.wait(await scheduler.submit(sh_app("echo first"), {}))
            assert first is not None
            assert first.ui_url is not None
            first_dir = Path(first.ui_url.removeprefix("file://"))
            temporary = first_dir.parent.parent
            shutil.rmtree(temporary)
            second = await scheduler.wait(await scheduler.submit(sh_app("echo second"), {}))
        assert second is not None
        assert second.ui_url is not None
        second_dir = Path(second.ui_url.removeprefix("file://"))
        assert second_dir.parent.parent == temporary
        assert second.state == AppState.SUCCEEDED
        assert [log.read_text() for log in second_dir.rglob("combined.log")] == ["second\n"]
        assert stat.S_IMODE(temporary.stat().st_mode) == 0o700
        assert stat.S_IMODE(second_dir.parent.stat().st_mode) == 0o700
    assert not temporary.exists()
