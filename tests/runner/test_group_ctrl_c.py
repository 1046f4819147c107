"""Ctrl-C while a group submits or stops its apps: the app is still followed and stopped.

Ctrl-C in a plain script (``anyio.run``) cancels the main task with asyncio's own
``Task.cancel()``, which anyio's shields do not stop. The scheduler here does that to the
test's task at the worst moments, in the middle of its ``schedule`` and of its
``cancel``, as a user pressing Ctrl-C then would.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

from asynctorchx.runner import Runner
from asynctorchx.schedulers.api import DescribeAppResponse
from asynctorchx.specs import AppDef, AppState, Role
from tests.runner.fake_scheduler import FakeScheduler
from tests.runner.group_apps import LIMIT

APP = AppDef("app", roles=[Role("r", image="", entrypoint="true")])


class Interrupting(FakeScheduler):
    """Its apps run until cancelled; ``interrupt_on`` says where it cancels ``main``."""

    main: asyncio.Task[Any]
    interrupt_on = ""

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__(session_name)
        self.ended: dict[str, anyio.Event] = {}

    async def schedule(self, dryrun_info: Any) -> str:
        if self.interrupt_on == "schedule":
            self.main.cancel()
            await anyio.lowlevel.checkpoint()  # the cancellation reaches the main task now
        app_id = await super().schedule(dryrun_info)
        self.ended[app_id] = anyio.Event()
        return app_id

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        if app_id not in self.apps:
            return None
        state = AppState.CANCELLED if self.ended[app_id].is_set() else AppState.RUNNING
        return DescribeAppResponse(app_id=app_id, state=state)

    async def wait(self, app_id: str, timeout: float | None = None) -> DescribeAppResponse | None:
        await self.ended[app_id].wait()
        return await self.describe(app_id)

    async def _cancel_existing(self, app_id: str) -> None:
        if self.interrupt_on == "cancel":
            self.main.cancel()
            await anyio.lowlevel.checkpoint()
        self.ended[app_id].set()


def _interrupting(on: str) -> type[Interrupting]:
    """The scheduler class, cancelling the calling task during its ``on`` call."""
    task = asyncio.current_task()
    assert task is not None
    return type("Interrupting", (Interrupting,), {"main": task, "interrupt_on": on})


def _consume_the_cancellation() -> None:
    """Count the cancellation as handled (``Task.uncancel``), as a script's end would."""
    current = asyncio.current_task()
    assert current is not None
    uncancel = getattr(current, "uncancel", None)  # Python 3.11+
    if uncancel is not None:
        assert uncancel() == 0


async def test_ctrl_c_during_the_stop_does_not_cut_it_short() -> None:
    interrupting = _interrupting("cancel")
    async with Runner("torchx", {"interrupting": interrupting}) as runner:
        group = runner.group()

        async def block() -> None:
            async with group:
                await group.run(APP, "interrupting")
                raise KeyError("leaving by an error: the group stops its app")

        with pytest.raises(KeyError), anyio.fail_after(LIMIT):
            await block()  # the error, after the stop the Ctrl-C did not cut short
        _consume_the_cancellation()
        (status,) = (await group.wait()).values()
        assert status.state == AppState.CANCELLED


async def test_ctrl_c_during_the_submit_still_stops_the_app() -> None:
    interrupting = _interrupting("schedule")
    async with Runner("torchx", {"interrupting": interrupting}) as runner:
        group = runner.group()

        async def block() -> None:
            async with group:
                await group.run(APP, "interrupting")
                raise AssertionError("run() returned: the cancellation was lost")

        with pytest.raises(asyncio.CancelledError), anyio.fail_after(LIMIT):
            await block()
        _consume_the_cancellation()
        (handle,) = group.handles  # accepted during the Ctrl-C: followed, then cancelled
        status = await runner.status(handle)
        assert status is not None
        assert status.state == AppState.CANCELLED
