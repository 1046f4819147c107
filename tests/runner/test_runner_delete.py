"""``Runner.delete`` and the base ``Scheduler.delete`` (TorchX's API after 0.7.0)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import pytest

from asynctorchx.errors import MalformedAppHandleException, SessionMismatchException
from asynctorchx.runner import Runner
from asynctorchx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler
from asynctorchx.schedulers.toolkit import LogBlock, LogQuery
from asynctorchx.specs.api import AppDef, AppDryRunInfo, AppState, CfgVal, Role

LIMIT = 30  # seconds: a safety bound, never a timing guess


class Recording(Scheduler[AppDef]):
    """Keeps apps in memory (``states``) and records each cancel; no ``delete`` of its own."""

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__("recording", session_name)
        self.states: dict[str, AppState] = {}
        self.cancelled: list[str] = []

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[AppDef]:
        return AppDryRunInfo(app, repr)

    async def schedule(self, dryrun_info: AppDryRunInfo[AppDef]) -> str:
        app_id = f"app-{len(self.states)}"
        self.states[app_id] = AppState.RUNNING
        return app_id

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        state = self.states.get(app_id)
        return None if state is None else DescribeAppResponse(app_id=app_id, state=state)

    async def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        return [ListAppResponse(app_id=a, state=s) for a, s in self.states.items()]

    async def _cancel_existing(self, app_id: str) -> None:
        self.cancelled.append(app_id)
        self.states[app_id] = AppState.CANCELLED

    async def _log_blocks(
        self, app_id: str, query: LogQuery, start: int
    ) -> AsyncIterator[LogBlock]:
        return
        yield 0, ()  # an async generator with no lines


def _app() -> AppDef:
    return AppDef("a", [Role("r", image="", entrypoint="true")])


async def test_base_delete_cancels_a_running_app_once_and_is_idempotent() -> None:
    sched = Recording("s")
    app_id = await sched.submit(_app(), {})
    await sched.delete(app_id)
    assert sched.cancelled == [app_id]
    await sched.delete(app_id)  # a finished app: nothing more
    await sched.delete("unknown")  # an unknown app: a no-op
    assert sched.cancelled == [app_id]


async def test_runner_delete_goes_to_the_scheduler_and_forgets_the_app() -> None:
    made: list[Recording] = []

    def factory(session_name: str, **kwargs: Any) -> Recording:
        made.append(Recording(session_name))
        return made[-1]

    async with Runner("s", {"recording": factory}, handle_signals=False) as runner:
        handle = await runner.run(_app(), "recording")
        assert (await runner.describe(handle)) is not None
        with anyio.fail_after(LIMIT):
            await runner.delete(handle)
        assert made[0].cancelled == [handle.rsplit("/", 1)[-1]]
        made[0].states.clear()  # this scheduler forgets deleted apps
        assert await runner.describe(handle) is None  # the runner's record went too
        await runner.delete(handle)  # idempotent
        with pytest.raises(SessionMismatchException):
            await runner.delete("recording://other/app-0")
        with pytest.raises(MalformedAppHandleException):
            await runner.delete("not a handle")
