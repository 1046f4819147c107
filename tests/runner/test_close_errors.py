"""A scheduler whose close() raises: the error reaches the caller, the caller's task is intact."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from asynctorchx.runner import Runner
from tests.runner.fake_scheduler import FakeScheduler


class FailingClose(FakeScheduler):
    async def close(self) -> None:
        raise OSError("close failed")


def _factory(session_name: str, **kwargs: Any) -> FailingClose:
    return FailingClose(session_name)


async def test_a_failing_close_raises_and_leaves_the_callers_cancel_scopes_intact() -> None:
    with anyio.CancelScope() as outer:  # exiting it checks the task's scope stack
        runner = Runner("s", {"failing": _factory}, handle_signals=False)
        with pytest.raises(OSError, match="close failed"):
            async with runner:
                runner.scheduler_run_opts("failing")  # made to ask, never opened
    assert not outer.cancel_called
