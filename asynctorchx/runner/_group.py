"""Apps under structured concurrency: :meth:`Runner.group` returns an :class:`AppGroup`.

The rule of ``anyio.create_task_group()``, for apps on any scheduler: leaving the block
normally waits for every app started in it; leaving it by an exception or a
cancellation cancels every app that is not terminal and waits, shielded, until each has
ended (at most ``stop_timeout`` seconds), then lets the exception through as itself.

One task per app, its follower, submits it and then follows it with one ``Runner.wait``
(an event on the backends that have events, else the scheduler's one batched poll);
with a recording OpenTelemetry tracer (the ``otel`` extra,
:mod:`asynctorchx.runner._tracing`) it follows each change of state instead
(``Runner.watch``), to give each its span event. Each follower runs in a shielded scope
of its own, so that a cancellation of the block does not stop the submits and waits the
stop needs; the group cancels those scopes when it ends. The tasks that wait for
followers and cancels (``run``, the stop) wait through asyncio's own cancellation too
(Ctrl-C), which anyio's shields do not stop (:func:`_wait_through`).
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import aclosing, asynccontextmanager, nullcontext
from typing import TYPE_CHECKING, Any

import anyio
import attrs
from anyio.abc import TaskGroup

from asynctorchx.errors import AppGroupFailed, AppGroupStopTimeout, SchedulerClosedError
from asynctorchx.runner._tracing import AppTrace, GroupTrace, open_group_trace
from asynctorchx.schedulers.toolkit import Notifier, gather
from asynctorchx.specs.api import AppDef, AppDryRunInfo, AppHandle, AppState, AppStatus, CfgVal

if TYPE_CHECKING:
    from asynctorchx.runner._runner import Runner
    from asynctorchx.specs.api import Workspace

logger = logging.getLogger(__name__)

#: The final states that stop a ``fail_fast`` group.
FAILING_STATES = frozenset({AppState.FAILED, AppState.UNKNOWN})


class AppGroup(anyio.AsyncContextManagerMixin):
    """Apps started together and stopped together: ``async with runner.group() as group:``.

    Made by :meth:`Runner.group`, which documents the arguments. Start apps with
    :meth:`run` and :meth:`run_component`; follow them with :meth:`wait` and
    :meth:`as_completed`. A group is entered once, as a task group: entering it again
    raises ``RuntimeError``.

    Leaving the block:

    - normally: waits until every app started in it is terminal, as a task group waits
      for its tasks;
    - by an exception or a cancellation (an enclosing ``anyio.move_on_after`` or
      ``fail_after``, Ctrl-C): cancels every app that is not terminal, on whatever
      scheduler it runs, and waits until each is terminal, shielded from the
      cancellation, at most ``stop_timeout`` seconds; then the exception propagates as
      itself. Apps still running then are logged when an error propagates, and raised
      as :class:`~asynctorchx.errors.AppGroupStopTimeout` (from the cancellation) when
      the block was cancelled;
    - ``fail_fast=True`` and an app ended ``FAILED`` or ``UNKNOWN``: the block is
      cancelled (as a task group cancels its host on a task's error), the other apps
      are cancelled as above, and :class:`~asynctorchx.errors.AppGroupFailed` is raised
      with every app's final status.

    Raises:
        AppGroupFailed: on leaving, ``fail_fast`` and an app failed.
        AppGroupStopTimeout: on leaving by a cancellation, some apps were still not
            terminal ``stop_timeout`` seconds after being cancelled.
        Exception: on leaving, the first error of a follower (the scheduler could not
            be asked about an app), as itself; the other apps are cancelled first.
    """

    def __init__(
        self,
        runner: Runner,
        open_groups: set[AppGroup],
        fail_fast: bool = False,
        stop_timeout: float = 60.0,
    ) -> None:
        if isinstance(stop_timeout, bool) or not isinstance(stop_timeout, (int, float)):
            raise TypeError(f"stop_timeout={stop_timeout!r}: give the seconds as a number")
        if not (stop_timeout > 0 and math.isfinite(stop_timeout)):
            raise ValueError(
                f"stop_timeout={stop_timeout!r}: give a positive, finite number of seconds"
                " (how long leaving the block waits for cancelled apps to end)"
            )
        self._runner = runner
        self._open_groups = open_groups
        self._fail_fast = fail_fast
        self._stop_timeout = float(stop_timeout)
        self._handles: list[AppHandle] = []
        self._final: dict[AppHandle, AppStatus] = {}  # in the order the apps ended
        self._following: set[_Submit] = set()  # the apps not yet ended, by their submit
        self._cancelling = 0  # cancel requests in flight
        self._changed = Notifier()
        self._tasks: TaskGroup | None = None
        self._scope: anyio.CancelScope | None = None  # the block, then the final wait
        self._trace: GroupTrace | None = None
        self._failed: AppHandle | None = None
        self._error: Exception | None = None
        self._stopping = False
        self._entered = False

    @property
    def handles(self) -> list[AppHandle]:
        """The handles of the apps started in the group, in start order (a copy)."""
        return list(self._handles)

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[AppGroup]:
        if self._entered:
            raise RuntimeError("an app group is entered once: make another with runner.group()")
        self._entered = True
        self._trace = open_group_trace(self._fail_fast, self._stop_timeout)
        error: BaseException | None = None
        stragglers: list[AppHandle] = []
        self._open_groups.add(self)
        try:
            async with anyio.create_task_group() as self._tasks:
                # The block's exception is caught inside the task group and raised after
                # it: a task group would wrap it in an ExceptionGroup.
                try:
                    with self._trace.current() if self._trace else nullcontext():
                        with anyio.CancelScope() as self._scope:
                            yield self
                            await self._all_followed()
                except BaseException as exc:
                    error = exc
                if error is not None or self._failed is not None or self._error is not None:
                    try:
                        stragglers = await self._stop()
                    except BaseException as exc:  # cancelled (Ctrl-C) while it stopped them
                        error = error or exc
                        stragglers = self._stragglers()
                for submit in list(self._following):
                    submit.scope.cancel()
        finally:
            self._tasks = None
            self._open_groups.discard(self)
            if self._trace is not None:
                self._trace.end(error or self._error, self._failed)
            # Here too when exiting the task group raised the enclosing scope's
            # cancellation again: the stragglers must not be lost with it.
            self._raise(error, stragglers)

    def _raise(self, error: BaseException | None, stragglers: list[AppHandle]) -> None:
        """Raise what leaving the block raises (as a task group: an error wins over a
        cancellation): the block's error, else a follower's, else the ``fail_fast``
        failure, the stragglers then only logged; else the stragglers, else the block's
        cancellation."""
        first = error if isinstance(error, Exception) else None
        first = first or self._error
        if first is None and self._failed is not None:
            first = AppGroupFailed(self._failed, self._statuses(), stragglers)
        if first is not None:
            if stragglers:
                logger.error("%s", AppGroupStopTimeout(stragglers, self._stop_timeout))
            if self._error is not None and first is not self._error:
                logger.error("an app of the group could not be followed", exc_info=self._error)
            raise first
        if stragglers:
            raise AppGroupStopTimeout(stragglers, self._stop_timeout) from error
        if error is not None:
            raise error

    # ------------------------------------------------------------------ start apps

    async def run(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: Workspace | str | None = None,
    ) -> AppHandle:
        """Start ``app`` on ``scheduler`` in the group, as :meth:`Runner.run`; return its handle.

        The dry run (and a workspace build) can be cancelled; the submit itself is
        shielded, so an app the scheduler accepted is always followed and stopped with
        the group, never left behind by a cancellation.

        Args:
            app (AppDef): the app.
            scheduler (str): the scheduler's registered name (``local_cwd``, ``slurm``...).
            cfg (Mapping[str, CfgVal] | None): the scheduler's run options; ``None``: its
                defaults.
            workspace (Workspace | str | None): as :meth:`Runner.run`.

        Raises:
            SchedulerClosedError: the group is not entered, or it is stopping its apps.
            ValueError, UnknownSchedulerException, InvalidRunConfigException: as
                :meth:`Runner.dryrun`.
        """
        self._check_open()
        return await self._schedule(await self._runner.dryrun(app, scheduler, cfg, workspace))

    async def run_component(
        self,
        component: str,
        component_args: list[str] | Mapping[str, Any],
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: Workspace | str | None = None,
    ) -> AppHandle:
        """Start component ``component`` in the group, as :meth:`Runner.run_component`.

        Args:
            component (str): a builtin (``utils.sh``), an entry point or ``path.py:fn``.
            component_args (list[str] | Mapping[str, Any]): the component's arguments.
            scheduler (str): the scheduler's registered name.
            cfg (Mapping[str, CfgVal] | None): the scheduler's run options.
            workspace (Workspace | str | None): as :meth:`Runner.run_component`.

        Returns:
            The app handle (str).

        Raises:
            SchedulerClosedError: as :meth:`run`.
            ComponentNotFoundException, ComponentValidationException, ValueError: as
                :meth:`Runner.run_component`.
        """
        self._check_open()
        info = await self._runner.dryrun_component(
            component, component_args, scheduler, cfg, workspace
        )
        return await self._schedule(info)

    def _check_open(self) -> None:
        if self._tasks is None:
            raise SchedulerClosedError(
                "this app group is not open: start apps inside"
                " `async with runner.group() as group:`"
            )
        if self._stopping:
            raise SchedulerClosedError(
                "this app group is stopping its apps (an app failed, or the block is being"
                " left): start no more apps in it"
            )

    async def _schedule(self, info: AppDryRunInfo[Any]) -> AppHandle:
        """Submit ``info`` from the app's follower task; return the handle once accepted.

        The submit runs in the follower (shielded), and this task waits for it through
        any cancellation (raised afterwards): an app the scheduler accepted is always
        followed and stopped with the group, even on Ctrl-C.
        """
        self._check_open()
        assert self._tasks is not None
        assert info.app is not None
        assert info.scheduler is not None
        submit = _Submit(info, self._trace.app(info.app, info.scheduler) if self._trace else None)
        self._following.add(submit)  # a submit in flight is waited for as an app is
        self._tasks.start_soon(self._follow, submit)
        interrupted = await _wait_through(submit.done.wait, submit.done.is_set)
        if submit.error is not None:
            raise submit.error
        if interrupted is not None:
            raise interrupted
        assert submit.handle is not None
        return submit.handle

    # ------------------------------------------------------------------ follow apps

    async def _follow(self, submit: _Submit) -> None:
        """Submit the app, then wait for its end and record it (one task per app)."""
        trace = submit.trace
        try:
            with submit.scope:
                try:
                    handle = submit.handle = await self._runner.schedule(submit.info)
                except Exception as exc:  # refused: run() raises it
                    submit.error = exc
                    return
                self._handles.append(handle)
                submit.done.set()
                if trace is not None:
                    trace.submitted(handle)
                if self._stopping:  # the group is stopping: this app stops too
                    await self._cancel(handle, math.inf)
                status = await self._final_status(handle, trace)
                self._final[handle] = status
                if trace is not None:
                    trace.ended(status)
                if self._fail_fast and status.state in FAILING_STATES and not self._failed:
                    self._failed = handle
                    self._interrupt()
        except Exception as exc:
            if self._error is None:
                self._error = exc
            self._interrupt()
        finally:
            if submit.handle is None:
                if submit.error is None:  # cut short by the group's end
                    submit.error = SchedulerClosedError(
                        "the group ended before the app was submitted"
                    )
                if trace is not None:
                    trace.not_submitted(submit.error)
            elif trace is not None and submit.handle not in self._final:
                trace.ended(None)  # not followed to its end: a straggler, or an error
            submit.done.set()
            self._following.discard(submit)
            self._changed.notify()

    async def _final_status(self, handle: AppHandle, trace: AppTrace | None) -> AppStatus:
        status = None
        if trace is None:
            status = await self._runner.wait(handle)
        else:
            async with aclosing(self._runner.watch(handle)) as statuses:  # type: ignore[type-var]
                async for status in statuses:
                    trace.changed(status)
        if status is None or not status.is_terminal():  # the scheduler forgot the app
            return AppStatus(AppState.UNKNOWN, msg="the scheduler no longer knows this app")
        return status

    def _interrupt(self) -> None:
        """Cancel the block (or the wait for every app that follows it)."""
        if self._scope is not None:
            self._scope.cancel()

    def _settled(self) -> bool:
        """No app is followed any more (each ended, or its follower failed), and no cancel
        request is in flight: a scheduler may call an app cancelled before its cancel
        returns (``local_docker`` does, while its containers stop)."""
        return not self._following and not self._cancelling

    async def _all_followed(self) -> None:
        """Return once :meth:`_settled`."""
        while True:
            changed = self._changed.event
            if self._settled():
                return
            await changed.wait()

    async def _cancel(self, handle: AppHandle, deadline: float) -> None:
        self._cancelling += 1
        try:
            with anyio.CancelScope(shield=True, deadline=deadline):
                await self._runner.cancel(handle)
        except Exception:  # the app stays a straggler, named with the others
            logger.warning("could not cancel %s", handle, exc_info=True)
        finally:
            self._cancelling -= 1
            self._changed.notify()

    async def _stop(self) -> list[AppHandle]:
        """Cancel every app not terminal; wait for them at most ``stop_timeout`` s.

        The cancels run in tasks of the group, shielded; this task waits through any
        cancellation, and raises it once the wait is over.

        Returns:
            The handles of the apps still not terminal (the stragglers).
        """
        self._stopping = True
        deadline = anyio.current_time() + self._stop_timeout
        if self._tasks is not None:
            for handle in self._handles:
                if handle not in self._final:
                    self._tasks.start_soon(self._cancel, handle, deadline)
        interrupted = await _wait_through(self._all_followed, self._settled, deadline)
        if interrupted is not None:
            raise interrupted
        return self._stragglers()

    def _stragglers(self) -> list[AppHandle]:
        return [handle for handle in self._handles if handle not in self._final]

    def _statuses(self) -> dict[AppHandle, AppStatus]:
        return {handle: self._final[handle] for handle in self._handles if handle in self._final}

    # ------------------------------------------------------------------ await apps

    async def wait(self) -> dict[AppHandle, AppStatus]:
        """Wait until every app started so far is terminal; return their final statuses.

        Returns:
            ``{handle: AppStatus}`` in start order. An app its scheduler no longer knows
            ends ``UNKNOWN``.
        """
        await self._all_followed()
        return self._statuses()

    async def as_completed(self) -> AsyncIterator[tuple[AppHandle, AppStatus]]:
        """Yield ``(handle, final AppStatus)`` as each app of the group ends.

        Ends once every app started so far, including those started while iterating, has
        been yielded. Several iterations may run at once; each sees every app.
        """
        yielded = 0
        while True:
            changed = self._changed.event
            ended = list(self._final.items())[yielded:]
            for handle, status in ended:
                yielded += 1
                yield handle, status
            if ended:  # more may have ended while the caller held an app: look again
                continue
            if not self._following:
                return
            await changed.wait()


@attrs.define(eq=False)
class _Submit:
    """One app of a group, from its submit: the request and its span, the shielded scope
    its follower runs in, then its handle or the error."""

    info: AppDryRunInfo[Any]
    trace: AppTrace | None
    scope: anyio.CancelScope = attrs.field(factory=lambda: anyio.CancelScope(shield=True))
    done: anyio.Event = attrs.field(factory=anyio.Event)  # set once the handle or error is known
    handle: AppHandle | None = None
    error: Exception | None = None


async def _wait_through(
    wait: Callable[[], Awaitable[None]], finished: Callable[[], bool], deadline: float = math.inf
) -> BaseException | None:
    """Await ``wait()`` until ``finished()`` (or ``deadline``), through any cancellation.

    anyio's shield stops anyio's cancellations, not asyncio's own ``Task.cancel()``, which
    is what Ctrl-C does to the main task of ``anyio.run``: such a cancellation is kept
    and the wait resumed.

    Returns:
        The last cancellation (or ``KeyboardInterrupt``) that came meanwhile, for the
        caller to raise once its work is done; ``None`` if none came.
    """
    interrupted: BaseException | None = None
    while not finished() and anyio.current_time() < deadline:
        try:
            with anyio.CancelScope(shield=True, deadline=deadline):
                await wait()
        except BaseException as exc:
            interrupted = exc
    return interrupted


async def stop_groups(groups: Iterable[AppGroup]) -> None:
    """Cancel the apps of open groups and wait for them (a runner closing, a signal).

    Never raises: the apps still running after each group's ``stop_timeout`` are logged.

    Args:
        groups: the groups still open.
    """

    async def stop(group: AppGroup) -> None:
        stragglers = await group._stop()
        if stragglers:
            logger.error("%s", AppGroupStopTimeout(stragglers, group._stop_timeout))

    with anyio.CancelScope(shield=True):
        await gather(functools.partial(stop, group) for group in list(groups))
