"""The Runner's schedulers: each made on first use (as TorchX) and hosted in a task."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from asynctorchx.errors import (
    SchedulerClosedError,
    SessionMismatchException,
    UnknownSchedulerException,
)
from asynctorchx.schedulers import (
    SyncSchedulerAdapter,
    get_scheduler_capabilities,
    is_sync_scheduler,
)
from asynctorchx.schedulers._workspace import build_workspaces
from asynctorchx.schedulers.api import Capabilities, Scheduler, SchedulerFactory
from asynctorchx.schedulers.toolkit import background_tasks
from asynctorchx.specs.api import (
    AppDef,
    AppDryRunInfo,
    AppHandle,
    CfgVal,
    Workspace,
    parse_app_handle,
    runopts,
)


def scheduler_params_from_env() -> dict[str, str]:
    """``TORCHX_FOO=1`` as ``foo="1"``, as ``torchx.runner.api.Runner`` does."""
    return {
        key.lower().removeprefix("torchx_"): value
        for key, value in os.environ.items()
        if key.lower().startswith("torchx_")
    }


class SchedulerHost(anyio.AsyncContextManagerMixin):
    """Creates the runner's schedulers on first use and hosts each in a task."""

    def __init__(
        self,
        session_name: str,
        scheduler_factories: Mapping[str, SchedulerFactory],
        scheduler_params: Mapping[str, Any],
    ) -> None:
        self.factories: dict[str, SchedulerFactory] = dict(scheduler_factories)
        self._session_name = session_name
        self._params = dict(scheduler_params)
        self._schedulers: dict[str, Scheduler[Any]] = {}
        self._unopened: dict[str, Scheduler[Any]] = {}
        self._task_group: TaskGroup | None = None
        self._closing = anyio.Event()
        self._hosts_done: list[anyio.Event] = []
        self._lock = anyio.Lock()
        self._closed = False

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[SchedulerHost]:
        if self._closed:
            raise SchedulerClosedError("this runner is closed: create a new one with get_runner()")
        async with background_tasks() as self._task_group:
            try:
                yield self
            finally:
                with anyio.CancelScope(shield=True):
                    await self.close()

    async def close(self) -> None:
        """Close every scheduler it made; idempotent."""
        self._closed = True
        self._closing.set()
        for done in list(self._hosts_done):
            await done.wait()
        while self._unopened:
            _, sched = self._unopened.popitem()
            await sched.close()

    async def _host(
        self,
        scheduler: Scheduler[Any],
        done: anyio.Event,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        # shielded: cancelled replica watchers would leave the scheduler's close() waiting
        with anyio.CancelScope(shield=True):
            try:
                async with scheduler:
                    task_status.started()
                    await self._closing.wait()
            finally:
                done.set()

    async def get(self, scheduler: str) -> Scheduler[Any]:
        """The open scheduler called ``scheduler``, made and hosted on first use."""
        self._factory(scheduler)  # an unknown name is refused first
        if self._task_group is None or self._closed:
            raise SchedulerClosedError(
                "the runner is not open: use it as `async with get_runner() as runner:`"
                " (it was never entered, or it is closed)"
            )
        if scheduler in self._schedulers:
            return self._schedulers[scheduler]
        async with self._lock:
            if scheduler in self._schedulers:
                return self._schedulers[scheduler]
            created = self._unopened.pop(scheduler, None) or self._create(scheduler)
            done = anyio.Event()
            self._hosts_done.append(done)
            await self._task_group.start(self._host, created, done)
            self._schedulers[scheduler] = created
            return created

    async def dryrun(
        self,
        scheduler: str,
        app: AppDef,
        cfg: Mapping[str, CfgVal],
        workspace: Workspace | str | None,
    ) -> AppDryRunInfo[Any]:
        """The request of ``app``, its workspaces built with the options resolved once."""
        sched = await self.get(scheduler)
        resolved = sched.run_opts().resolve(cfg)
        await build_workspaces(sched, app, workspace, resolved)
        return sched.dryrun_resolved(app, resolved)

    async def for_handle(
        self, app_handle: AppHandle, check_session: bool = True
    ) -> tuple[Scheduler[Any], str]:
        """The hosted scheduler of ``app_handle`` and the app id."""
        parsed = parse_app_handle(app_handle)
        if check_session and parsed.session_name != self._session_name:
            raise SessionMismatchException(app_handle, parsed.session_name, self._session_name)
        return await self.get(parsed.scheduler_backend), parsed.app_id

    def _factory(self, scheduler: str) -> SchedulerFactory:
        factory = self.factories.get(scheduler)
        if factory is None:
            raise UnknownSchedulerException(scheduler, self.factories)
        return factory

    def _create(self, scheduler: str) -> Scheduler[Any]:
        """A new scheduler; a synchronous TorchX-style one comes wrapped."""
        created = self._factory(scheduler)(self._session_name, **self._params)
        return SyncSchedulerAdapter(created) if is_sync_scheduler(created) else created

    def _instance(self, scheduler: str) -> Scheduler[Any]:
        """The hosted scheduler, else one made once and not opened (hosted later by :meth:`get`)."""
        sched = self._schedulers.get(scheduler) or self._unopened.get(scheduler)
        if sched is None:
            sched = self._unopened[scheduler] = self._create(scheduler)
        return sched

    def capabilities(self, scheduler: str) -> Capabilities:
        """What ``scheduler`` supports, from its factory's record where it has one."""
        found = get_scheduler_capabilities(self._factory(scheduler))
        return found or self._instance(scheduler).capabilities

    def run_opts(self, scheduler: str) -> runopts:
        """The run options of ``scheduler``, made without a scheduler where possible."""
        make = self.capabilities(scheduler).run_opts
        return make() if make is not None else self._instance(scheduler).run_opts()
