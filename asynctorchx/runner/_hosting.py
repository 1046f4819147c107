"""Scheduler hosting for :class:`~asynctorchx.runner.Runner`: one task per scheduler.

A scheduler is created on first use (a lock makes two tasks share one), as
``torchx.runner.api.Runner`` does, and hosted by a task of the runner's task group inside
``async with scheduler:``, so closing the host closes every scheduler. Capabilities and
run options come from the factory's record, without creating a scheduler.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import TracebackType
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
    """Return the ``TORCHX_*`` environment variables as scheduler factory parameters.

    The name loses its ``TORCHX_`` prefix and is lower-cased (``TORCHX_FOO=1`` ->
    ``foo="1"``), as ``torchx.runner.api.Runner`` does. Never raises.
    """
    return {
        key.lower().removeprefix("torchx_"): value
        for key, value in os.environ.items()
        if key.lower().startswith("torchx_")
    }


class SchedulerHost:
    """Creates the runner's schedulers on first use and hosts each in a task.

    Args:
        session_name: the runner's session name, given to every factory.
        scheduler_factories: scheduler name -> ``factory(session_name, **params)``.
        scheduler_params: keyword arguments given to every factory.

    Use it as ``async with host:`` (the runner enters it in its own ``__aenter__``).
    """

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

    async def __aenter__(self) -> SchedulerHost:
        if self._closed:
            raise SchedulerClosedError("this runner is closed: create a new one with get_runner()")
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Close the schedulers first (shielded: this also runs when the block is being
        # cancelled), then exit the task group without handing it the block's exception,
        # so that exception propagates as itself rather than inside an ExceptionGroup.
        # The task group is exited even when a scheduler's close() raises: left open, its
        # cancel scope would corrupt the scopes of the task that entered the runner.
        try:
            with anyio.CancelScope(shield=True):
                await self.close()
        finally:
            task_group, self._task_group = self._task_group, None
            if task_group is not None:
                await task_group.__aexit__(None, None, None)

    async def close(self) -> None:
        """Close every scheduler it made; idempotent, the host cannot be used afterwards."""
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
        # Shielded: a cancellation of the block that entered the runner must not reach
        # the scheduler's own tasks (a local scheduler's replica watchers), or its close()
        # would wait forever for replicas whose exit nobody observes any more. The host
        # ends when close() sets `_closing`, which __aexit__ always does.
        with anyio.CancelScope(shield=True):
            try:
                async with scheduler:
                    task_status.started()
                    await self._closing.wait()
            finally:
                done.set()

    async def get(self, scheduler: str) -> Scheduler[Any]:
        """Return the open scheduler called ``scheduler``, creating and hosting it on first use.

        Args:
            scheduler: the scheduler's registered name.

        Raises:
            UnknownSchedulerException: ``scheduler`` is not registered.
            SchedulerClosedError: the host is not entered, or it is closed.
        """
        self._factory(scheduler)  # an unknown name is refused first
        if self._task_group is None or self._closed:
            raise SchedulerClosedError(
                "the runner is not open: use it as `async with get_runner() as runner:`"
                " (it was never entered, or it is closed)"
            )
        existing = self._schedulers.get(scheduler)
        if existing is not None:
            return existing
        async with self._lock:
            existing = self._schedulers.get(scheduler)
            if existing is not None:
                return existing
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
        """Ask the hosted scheduler ``scheduler`` for the request of ``app`` (no submit).

        The options are resolved once (``Scheduler.dryrun_resolved``, what
        ``Scheduler.submit_dryrun`` does), and workspaces are built with them before the
        request: ``workspace`` for role 0, each other role's own ``workspace``, one
        build per distinct image and workspace (see :mod:`asynctorchx.schedulers._workspace`).

        Args:
            scheduler: the scheduler's registered name.
            app: the app.
            cfg: the run options as given.
            workspace: a directory or a :class:`~asynctorchx.specs.Workspace` to build
                into role 0's image over its own, or ``None``.

        Raises:
            InvalidRunConfigException: ``cfg`` does not match the scheduler's run options.
            ValueError: the app is not valid for the scheduler.
            UnknownSchedulerException, SchedulerClosedError: as :meth:`get`.
        """
        sched = await self.get(scheduler)
        resolved = sched.run_opts().resolve(cfg)
        await build_workspaces(sched, app, workspace, resolved)
        return sched.dryrun_resolved(app, resolved)

    async def for_handle(
        self, app_handle: AppHandle, check_session: bool = True
    ) -> tuple[Scheduler[Any], str]:
        """Return the hosted scheduler of ``app_handle`` and the app id.

        Args:
            app_handle: ``{scheduler}://{session}/{app_id}``.
            check_session: refuse a handle of another session than this host's.

        Raises:
            MalformedAppHandleException: the handle is malformed.
            SessionMismatchException: ``check_session`` and the handle's session differs.
            UnknownSchedulerException, SchedulerClosedError: as :meth:`get`.
        """
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
        """A new scheduler from the factory of ``scheduler``; a synchronous, TorchX-style
        one (:func:`~asynctorchx.schedulers.is_sync_scheduler`) comes wrapped in a
        :class:`~asynctorchx.schedulers.SyncSchedulerAdapter`."""
        created = self._factory(scheduler)(self._session_name, **self._params)
        return SyncSchedulerAdapter(created) if is_sync_scheduler(created) else created

    def _instance(self, scheduler: str) -> Scheduler[Any]:
        """The hosted scheduler, else one made once and never opened: :meth:`get` hosts
        that one later, :meth:`close` closes it if not (a factory that exposes no capabilities)."""
        sched = self._schedulers.get(scheduler) or self._unopened.get(scheduler)
        if sched is None:
            sched = self._unopened[scheduler] = self._create(scheduler)
        return sched

    def capabilities(self, scheduler: str) -> Capabilities:
        """Return what the scheduler called ``scheduler`` supports, creating none if possible.

        The record its factory exposes
        (:func:`~asynctorchx.schedulers.get_scheduler_capabilities`), else the hosted
        scheduler's; for a factory that exposes none and no hosted scheduler, one
        scheduler is created (not opened), and :meth:`get` later hosts that same one.
        Works without entering the host.

        Args:
            scheduler: the scheduler's registered name.

        Raises:
            UnknownSchedulerException: ``scheduler`` is not registered.
        """
        found = get_scheduler_capabilities(self._factory(scheduler))
        return found or self._instance(scheduler).capabilities

    def run_opts(self, scheduler: str) -> runopts:
        """Return the run options of the scheduler called ``scheduler``.

        Made by its :meth:`capabilities` without creating a scheduler; where the record
        cannot make them (TorchX's ``_run_opts(self)``), asked of the scheduler as in
        :meth:`capabilities`. Works without entering the host.

        Args:
            scheduler: the scheduler's registered name.

        Raises:
            UnknownSchedulerException: ``scheduler`` is not registered.
        """
        make = self.capabilities(scheduler).run_opts
        return make() if make is not None else self._instance(scheduler).run_opts()
