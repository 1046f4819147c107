"""Why an app ended (``AppStatus.cause``) through the Runner on ``local_cwd`` (real
processes): its own exit, success or failure, and a user's cancel; ``to_json`` carries it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from asynctorchx.runner import get_runner
from asynctorchx.specs.api import AppDef, AppState, EndCause, Role
from tests.isolation import isolate_from_user_config

LIMIT = 30  # seconds: a safety bound, never a timing guess


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_from_user_config(tmp_path, monkeypatch)


def _sh(script: str) -> AppDef:
    return AppDef("sh", roles=[Role("sh", ".", entrypoint="sh", args=["-c", script])])


@pytest.mark.parametrize(
    ("script", "state"), [("exit 0", AppState.SUCCEEDED), ("exit 3", AppState.FAILED)]
)
async def test_an_app_that_exited_by_itself_says_so(script: str, state: AppState) -> None:
    async with get_runner() as runner:
        handle = await runner.run(_sh(script), "local_cwd")
        with anyio.fail_after(LIMIT):
            status = await runner.wait(handle)
    assert status is not None
    assert (status.state, status.cause) == (state, EndCause.EXITED)
    assert status.to_json()["cause"] == "EXITED"


async def test_a_cancelled_app_says_a_user_cancelled_it() -> None:
    async with get_runner() as runner:
        handle = await runner.run(_sh("sleep 60"), "local_cwd")
        with anyio.fail_after(LIMIT):
            running = await runner.status(handle)
            assert running is not None
            assert running.cause is None  # not ended
            await runner.cancel(handle)
            status = await runner.wait(handle)
    assert status is not None
    assert (status.state, status.cause) == (AppState.CANCELLED, EndCause.CANCELLED)
