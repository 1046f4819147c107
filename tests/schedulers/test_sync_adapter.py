"""SyncSchedulerAdapter: which schedulers are synchronous, and how each call is made."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any
from unittest.mock import AsyncMock, MagicMock

import anyio
import pytest

from asynctorchx.errors import InvalidRunConfigException, SchedulerClosedError
from asynctorchx.schedulers import SyncSchedulerAdapter, is_sync_scheduler
from asynctorchx.schedulers.api import DescribeAppResponse, Stream
from asynctorchx.specs.api import AppDef, AppDryRunInfo, AppState, CfgVal, Role
from tests.runner.fake_scheduler import FakeScheduler
from tests.schedulers.sync_scheduler import PortedScheduler, TorchXShapedScheduler

LIMIT = 30  # seconds: a safety bound, never a timing guess


def _info(name: str = "app") -> AppDryRunInfo[AppDef]:
    app = AppDef(name=name, roles=[Role(name="r", image=".", entrypoint="true")])
    return AppDryRunInfo(app, repr)


class HalfPorted(PortedScheduler):
    """A partly ported scheduler: ``describe`` is already a coroutine, the rest is not."""

    async def describe(self, app_id: str) -> DescribeAppResponse | None:  # type: ignore[override]
        self.describe_threads.append(threading.current_thread())
        state = self.states.get(app_id)
        return None if state is None else DescribeAppResponse(app_id=app_id, state=state)


class Workspaced(PortedScheduler):
    def build_workspace_and_update_role(  # type: ignore[override]
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        role.image = workspace


@pytest.mark.parametrize(
    ("scheduler", "expected"),
    [
        (FakeScheduler("s"), False),
        (AsyncMock(), False),
        (PortedScheduler("s"), True),
        (HalfPorted("s"), True),
        (TorchXShapedScheduler("s"), True),
        (MagicMock(), True),
        (SyncSchedulerAdapter(PortedScheduler("s")), False),
    ],
    ids=["async", "AsyncMock", "ported", "half-ported", "torchx-shaped", "MagicMock", "adapter"],
)
def test_is_sync_scheduler_checks_each_torchx_method(scheduler: object, expected: bool) -> None:
    assert is_sync_scheduler(scheduler) is expected


def test_the_adapter_answers_for_the_wrapped_class() -> None:
    ported = SyncSchedulerAdapter(PortedScheduler("s"))
    assert ported.capabilities.log_streams == frozenset({Stream.COMBINED})
    assert ported.capabilities.workspace is None
    assert not ported.capabilities.apps_live_in_process
    assert ported.capabilities.run_opts is not None  # the wrapped instance's _run_opts
    assert "label" in ported.capabilities.run_opts()
    assert "label" in ported.run_opts()
    assert ported.poll_interval == PortedScheduler.poll_interval
    assert (ported.backend, ported.session_name) == ("ported", "s")
    assert SyncSchedulerAdapter(Workspaced("s")).capabilities.workspace == "image"
    shaped = SyncSchedulerAdapter(TorchXShapedScheduler("s"))
    assert shaped.capabilities.workspace == "image"  # TorchX's WorkspaceMixin method
    assert shaped.capabilities.log_streams == frozenset(Stream)
    assert "label" in shaped.run_opts()
    assert SyncSchedulerAdapter(MagicMock()).capabilities.workspace is None


@pytest.mark.parametrize("kwargs", [{"max_threads": 0}, {"poll_interval": 0.0}])
def test_bad_limits_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        SyncSchedulerAdapter(PortedScheduler("s"), **kwargs)


async def test_sync_methods_run_in_threads_and_coroutines_on_the_loop() -> None:
    sched = HalfPorted("s")
    adapter = SyncSchedulerAdapter(sched)
    with anyio.fail_after(LIMIT):
        app_id = await adapter.schedule(_info())
        response = await adapter.describe(app_id)
    assert response is not None
    assert response.state == AppState.RUNNING
    assert sched.describe_threads == [threading.current_thread()]  # awaited, no thread


async def test_one_thread_serializes_the_calls() -> None:
    sched = PortedScheduler("s")
    adapter = SyncSchedulerAdapter(sched, max_threads=1)
    app_id = await adapter.schedule(_info())
    gate, sched.held = threading.Event(), anyio.Event()
    sched.gate = gate
    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(adapter.describe, app_id)
            tg.start_soon(adapter.describe, app_id)
            await sched.held.wait()
            await anyio.wait_all_tasks_blocked()
            assert len(sched.describe_threads) == 1  # the second waits for the thread
            gate.set()
    assert sched.described == 2


async def test_cancel_uses_the_sync_describe_and_cancel_existing() -> None:
    sched = PortedScheduler("s")
    adapter = SyncSchedulerAdapter(sched)
    with anyio.fail_after(LIMIT):
        await adapter.cancel("unknown")  # a no-op, as TorchX's Scheduler.cancel
        app_id = await adapter.schedule(_info())
        assert await adapter.exists(app_id)
        await adapter.cancel(app_id)
        response = await adapter.wait(app_id)
    assert response is not None
    assert response.state == AppState.CANCELLED


@pytest.mark.parametrize("cls", [PortedScheduler, HalfPorted])
async def test_close_forwards_once_and_later_calls_are_refused(cls: type[PortedScheduler]) -> None:
    sched = cls("s")
    async with SyncSchedulerAdapter(sched) as adapter:
        app_id = await adapter.schedule(_info())
    await adapter.close()
    assert sched.closes == 1
    with pytest.raises(SchedulerClosedError):
        await adapter.describe(app_id)


async def test_the_dry_run_of_a_ported_scheduler_is_its_own() -> None:
    adapter = SyncSchedulerAdapter(PortedScheduler("s"))
    info = _info()
    dryrun = adapter.submit_dryrun(info.request, {"label": "x"})
    assert dryrun.request == info.request
    with pytest.raises(InvalidRunConfigException, match="labl"):
        adapter.submit_dryrun(info.request, {"labl": "x"})


class TorchX07Validate(PortedScheduler):
    """Ported from TorchX 0.7.0: ``_validate(app, scheduler)``, two arguments."""

    def _validate(self, app: AppDef, scheduler: str) -> None:  # type: ignore[override]
        if app.name == "refused":
            raise ValueError(f"{scheduler} refuses {app.name}")


def test_a_torchx_070_validate_of_two_arguments_is_called_with_two() -> None:
    adapter = SyncSchedulerAdapter(TorchX07Validate("s"))
    assert adapter.submit_dryrun(_info("ok").request, {}).request.name == "ok"
    with pytest.raises(ValueError, match="ported refuses refused"):
        adapter.submit_dryrun(_info("refused").request, {})
