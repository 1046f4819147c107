"""Scheduler hosting for :class:`~asynctorchx.runner.Runner`: one task per scheduler.

A scheduler is created on first use (from any task; a lock makes two tasks share one)
from its factory, as ``torchx.runner.api.Runner`` does, and hosted by a task of the
runner's task group, inside ``async with scheduler:``. Closing the host closes every
scheduler, which terminates the replicas that local schedulers still run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from asynctorchx.errors import SchedulerClosedError, UnknownSchedulerException
from asynctorchx.schedulers.api import Scheduler, SchedulerFactory


def scheduler_params_from_env() -> dict[str, str]:
    """Return the ``TORCHX_*`` environment variables as scheduler factory parameters.

    The name loses its ``TORCHX_`` prefix and is lower-cased (``TORCHX_FOO=1`` ->
    ``foo="1"``), as ``torchx.runner.api.Runner`` does. Never raises.
    """
    params: dict[str, str] = {}
    for key, value in os.environ.items():
        lower = key.lower()
        if lower.startswith("torchx_"):
            params[lower.removeprefix("torchx_")] = value
    return params


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
        self._opts_only: dict[str, Scheduler[Any]] = {}
        self._task_group: TaskGroup | None = None
        self._closing = anyio.Event()
        self._hosts_done: list[anyio.Event] = []
        self._lock = anyio.Lock()
        self._closed = False

    async def __aenter__(self) -> SchedulerHost:
        if self._closed:
            raise SchedulerClosedError("this runner is closed: create a new one with get_runner()")
        if self._task_group is not None:
            raise SchedulerClosedError("this runner is already entered")
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
        with anyio.CancelScope(shield=True):
            await self.close()
        task_group, self._task_group = self._task_group, None
        if task_group is not None:
            await task_group.__aexit__(None, None, None)

    async def close(self) -> None:
        """Close every hosted scheduler; idempotent, the host cannot be used afterwards."""
        self._closed = True
        self._closing.set()
        for done in list(self._hosts_done):
            await done.wait()

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
        factory = self.factories.get(scheduler)
        if factory is None:
            raise UnknownSchedulerException(scheduler, self.factories)
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
            created: Scheduler[Any] = factory(self._session_name, **self._params)
            done = anyio.Event()
            self._hosts_done.append(done)
            await self._task_group.start(self._host, created, done)
            self._schedulers[scheduler] = created
            return created

    def get_unopened(self, scheduler: str) -> Scheduler[Any]:
        """Return a scheduler called ``scheduler`` to read its run options from.

        The hosted one if there is one, else one created (once) and never opened:
        this works without entering the host.

        Args:
            scheduler: the scheduler's registered name.

        Raises:
            UnknownSchedulerException: ``scheduler`` is not registered.
        """
        sched = self._schedulers.get(scheduler) or self._opts_only.get(scheduler)
        if sched is None:
            factory = self.factories.get(scheduler)
            if factory is None:
                raise UnknownSchedulerException(scheduler, self.factories)
            sched = factory(self._session_name, **self._params)
            self._opts_only[scheduler] = sched
        return sched
