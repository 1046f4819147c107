"""Apps under the rule of ``anyio.create_task_group()``: :class:`AppGroup`."""

from __future__ import annotations

import functools
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager, nullcontext
from typing import TYPE_CHECKING, Any

import anyio
import attrs
from anyio.abc import TaskGroup

from asynctorchx.errors import (
    AppGroupFailed,
    AppGroupStopTimeout,
    SchedulerClosedError,
    TrialKeyError,
    UnknownAppException,
)
from asynctorchx.runner._retries import (
    FAILING_STATES,
    PREEMPTION_CAUSES,
    backoff_of,
    is_count,
    retry_delay,
)
from asynctorchx.schedulers.toolkit import Notifier, gather
from asynctorchx.specs.api import (
    AppDef,
    AppDryRunInfo,
    AppHandle,
    AppState,
    AppStatus,
    CfgVal,
    parse_app_handle,
)

if TYPE_CHECKING:
    from asynctorchx.runner._journal import Journal, TrialHistory
    from asynctorchx.runner._runner import Runner
    from asynctorchx.runner._tracing import AppTrace, GroupTrace
    from asynctorchx.specs.api import Workspace

logger = logging.getLogger(__name__)


class AppGroup(anyio.AsyncContextManagerMixin):
    """Apps started and stopped together: ``async with runner.group() as group:``, entered once.

    Made by :meth:`Runner.group`, which documents the arguments. ``max_concurrent`` bounds
    the apps submitted and not terminal (:meth:`run` waits for a slot; a trial keeps it
    through its retries). ``retries`` submits an app that ended ``FAILED`` or ``UNKNOWN``
    again as a new app, after :func:`retry_delay`, unless the group is stopping;
    ``preemption_retries`` does the same, with ``preemption_backoff``, for one that failed
    by :data:`PREEMPTION_CAUSES`, spending none of ``retries`` while it lasts; a trial
    (an app and its retries) is reported once, by its last attempt. If the driver dies
    inside the block, a reaper process cancels the apps that outlive it (with ``journal``,
    after ``adopt_within`` seconds, and none if another driver opens the journal by then;
    a driver that dies while the group cancels its apps is not waited for). Leaving the block
    normally waits until every app is terminal; by an exception or a cancellation, it cancels
    every app not terminal, waits (shielded) at most ``stop_timeout`` seconds, and the
    exception propagates as itself. With ``fail_fast``, a failed trial cancels the block.
    With ``journal``, trials are named by ``key`` and the same block run again resumes them.

    Raises:
        AppGroupFailed: on leaving, ``fail_fast`` and an app failed.
        AppGroupStopTimeout: on leaving by a cancellation, apps outlived ``stop_timeout``.
        Exception: on leaving, the first error of following an app, as itself.
    """

    def __init__(
        self,
        runner: Runner,
        open_groups: set[AppGroup],
        fail_fast: bool = False,
        stop_timeout: float = 60.0,
        max_concurrent: int | None = None,
        retries: int = 0,
        retry_backoff: tuple[float, float] = (10.0, 600.0),
        journal: str | os.PathLike[str] | None = None,
        preemption_retries: int = 3,
        preemption_backoff: tuple[float, float] = (1.0, 60.0),
        adopt_within: float = 300.0,
    ) -> None:
        if isinstance(stop_timeout, bool) or not isinstance(stop_timeout, (int, float)):
            raise TypeError(f"stop_timeout={stop_timeout!r}: give the seconds as a number")
        if not (stop_timeout > 0 and math.isfinite(stop_timeout)):
            raise ValueError(
                f"stop_timeout={stop_timeout!r}: give a positive, finite number of seconds"
                " (how long leaving the block waits for cancelled apps to end)"
            )
        if max_concurrent is not None and not is_count(max_concurrent, 1):
            raise ValueError(
                f"max_concurrent={max_concurrent!r}: give how many apps may run at once"
                " (an int >= 1), or None for no limit"
            )
        for name, count in (("retries", retries), ("preemption_retries", preemption_retries)):
            if not is_count(count, 0):
                raise ValueError(
                    f"{name}={count!r}: give how many times a failed app is submitted again"
                    " (an int >= 0)"
                )
        if isinstance(adopt_within, bool) or not isinstance(adopt_within, (int, float)):
            raise TypeError(f"adopt_within={adopt_within!r}: give the seconds as a number")
        if not (adopt_within >= 0 and math.isfinite(adopt_within)):
            raise ValueError(
                f"adopt_within={adopt_within!r}: give a finite number of seconds >= 0 (how long"
                " a dead driver's reaper waits for another driver to open the journal; 0: none)"
            )
        self._backoff = backoff_of(retry_backoff)
        self._budgets = {
            "retry": (retries, self._backoff),
            "preemption": (
                preemption_retries,
                backoff_of(preemption_backoff, "preemption_backoff"),
            ),
        }
        self._journal_path = None if journal is None else os.fspath(journal)
        self._journal: Journal | None = None
        self._keys: set[str] = set()
        self._slots = None if max_concurrent is None else anyio.Semaphore(max_concurrent)
        self._runner = runner
        self._open_groups = open_groups
        self._fail_fast = fail_fast
        self._stop_timeout = float(stop_timeout)
        self._handles: list[AppHandle] = []
        self._trials: dict[AppHandle, _Trial] = {}
        self._final: dict[AppHandle, AppStatus] = {}  # each trial's last attempt, as they end
        self._following: set[_Trial] = set()
        self._cancelling = 0
        self._changed = Notifier()
        from asynctorchx.runner._reaper import Reaper  # here: a run with no group loads none

        self._reaper = Reaper(self._journal_path, float(adopt_within))
        self._tasks: TaskGroup | None = None
        self._scope: anyio.CancelScope | None = None
        self._trace: GroupTrace | None = None
        self._failed: AppHandle | None = None
        self._error: Exception | None = None
        self._stopping = False
        self._entered = False

    @property
    def handles(self) -> list[AppHandle]:
        """The handles of the apps started in the group, retries included, in start order."""
        return list(self._handles)

    def budgets(self, handle: AppHandle) -> list[str]:
        """The budget each attempt of the trial ``handle`` is an attempt of spent, as
        :meth:`attempts` lists them: ``first``, ``retry``, ``preemption`` or ``lost`` (the
        driver's loss, resumed from a journal: no budget).

        Raises:
            KeyError: ``handle`` is no app of this group.
        """
        return list(self._trials[handle].budgets)

    def attempts(self, handle: AppHandle) -> list[AppHandle]:
        """Every attempt, first to last, of the trial ``handle`` is an attempt of.

        Args:
            handle (AppHandle): any attempt's handle.

        Raises:
            KeyError: ``handle`` is no app of this group.
        """
        return list(self._trials[handle].attempts)

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[AppGroup]:
        if self._entered:
            raise RuntimeError("an app group is entered once: make another with runner.group()")
        self._entered = True
        if self._journal_path is not None:
            from asynctorchx.runner._journal import Journal

            self._journal = await anyio.to_thread.run_sync(Journal.open, self._journal_path)
        from asynctorchx.runner._tracing import open_group_trace

        self._trace = open_group_trace(self._fail_fast, self._stop_timeout)
        error: BaseException | None = None
        stragglers: list[AppHandle] = []
        self._open_groups.add(self)
        try:
            async with anyio.create_task_group() as self._tasks:
                # Caught here and raised after: a task group would wrap it in an ExceptionGroup.
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
                for trial in list(self._following):
                    trial.scope.cancel()
        finally:
            self._tasks = None
            await self._reaper.close()
            if self._journal is not None:
                self._journal.close()
            self._open_groups.discard(self)
            if self._trace is not None:
                self._trace.end(error or self._error, self._failed)
            # Also when the task group re-raised the enclosing cancellation: keep the stragglers.
            self._raise(error, stragglers)

    def _raise(self, error: BaseException | None, stragglers: list[AppHandle]) -> None:
        """Raise as a task group would: an error wins over a cancellation, stragglers logged."""
        first = error if isinstance(error, Exception) else self._error
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

    async def run(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: Workspace | str | None = None,
        *,
        key: str | None = None,
    ) -> AppHandle:
        """Start ``app`` on ``scheduler`` in the group, as :meth:`Runner.run`; return its handle.

        With a journal, a ``key`` the journal records as ended (``SUCCEEDED``, or terminal
        with its retries spent) submits nothing and returns the recorded first handle; one
        with an app still known to its scheduler follows that app; one whose app was lost
        submits it again without spending a retry.

        Args:
            app (AppDef): the app.
            scheduler (str): the scheduler's registered name.
            cfg (Mapping[str, CfgVal] | None): the scheduler's run options.
            workspace (Workspace | str | None): as :meth:`Runner.run`.
            key (str | None): the trial's name across restarts, unique in the group; needed
                with a journal, ignored without one.

        Raises:
            SchedulerClosedError: the group is not entered, or it is stopping its apps.
            TrialKeyError: with a journal, ``key`` is missing, already run in this group, or
                the journal records it with another app, scheduler or cfg.
            ValueError, UnknownSchedulerException, InvalidRunConfigException: as Runner.dryrun.
        """
        dryrun = functools.partial(self._runner.dryrun, app, scheduler, cfg, workspace)
        return await self._first_handle(
            await self._prepare(dryrun, key, cfg, (app, scheduler)), True
        )

    async def run_component(
        self,
        component: str,
        component_args: list[str] | Mapping[str, Any],
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: Workspace | str | None = None,
        *,
        key: str | None = None,
    ) -> AppHandle:
        """Start component ``component`` in the group, as :meth:`Runner.run_component`.

        Args:
            component (str): a builtin (``utils.sh``), an entry point or ``path.py:fn``.
            component_args (list[str] | Mapping[str, Any]): the component's arguments.
            scheduler (str): the scheduler's registered name.
            cfg (Mapping[str, CfgVal] | None): the scheduler's run options.
            workspace (Workspace | str | None): as :meth:`Runner.run_component`.
            key (str | None): as :meth:`run` (the materialized app is what the journal keeps).

        Raises:
            SchedulerClosedError, TrialKeyError: as :meth:`run`.
            ComponentNotFoundException, ComponentValidationException: as Runner.run_component.
        """
        dryrun = functools.partial(
            self._runner.dryrun_component, component, component_args, scheduler, cfg, workspace
        )
        return await self._first_handle(await self._prepare(dryrun, key, cfg), True)

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

    async def run_many(
        self,
        apps: Sequence[AppDef],
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: Workspace | str | None = None,
        *,
        keys: Sequence[str] | None = None,
    ) -> list[AppHandle]:
        """Start ``apps`` on ``scheduler`` as many :meth:`run` calls would, but submitted
        together (:meth:`Runner.schedule_many`; ``slurm``: as one job array where they differ
        only in their entrypoint, args and env, and no journal marks them, ``docs/slurm.md``);
        return their handles in order. Each app is a trial of its own: its own status, logs,
        cancel and retries (a retry is submitted alone, as :meth:`run` submits it). With
        ``max_concurrent``, the apps that find a free slot at once are submitted together.
        With a journal, each ``key`` resumes as in :meth:`run`; a trial the journal had
        before is submitted alone.

        Args:
            apps (Sequence[AppDef]): the apps.
            scheduler (str): the scheduler's registered name.
            cfg (Mapping[str, CfgVal] | None): the run options of every app.
            workspace (Workspace | str | None): as :meth:`run`, for every app.
            keys (Sequence[str] | None): each app's ``key``, as :meth:`run`.

        Raises:
            ValueError: ``keys`` is not one per app.
            SchedulerClosedError, TrialKeyError: as :meth:`run`; no app was submitted.
            Exception: a submit's error; the apps that submit made were cancelled (those
                submitted before it, with ``max_concurrent``, run on in the group).
        """
        if keys is not None and len(keys) != len(apps):
            raise ValueError(f"{len(keys)} keys for {len(apps)} apps: give one key per app")
        prepared: list[_Trial | AppHandle] = []
        try:
            named: Sequence[str | None] = [None] * len(apps) if keys is None else keys
            for app, key in zip(apps, named, strict=True):
                dryrun = functools.partial(self._runner.dryrun, app, scheduler, cfg, workspace)
                prepared.append(await self._prepare(dryrun, key, cfg, (app, scheduler)))
        except BaseException:
            for trial in prepared:
                if isinstance(trial, _Trial) and trial.key is not None:
                    self._keys.discard(trial.key)
            raise
        trials = [trial for trial in prepared if isinstance(trial, _Trial)]
        resumed = [trial for trial in trials if trial.history is not None]
        await self._launch(resumed, together=False)
        await self._launch([trial for trial in trials if trial not in resumed], together=True)
        return [await self._first_handle(trial) for trial in prepared]

    async def _prepare(
        self,
        again: Callable[[], Awaitable[AppDryRunInfo[Any]]],
        key: str | None,
        cfg: Mapping[str, CfgVal] | None,
        target: tuple[AppDef, str] | None = None,
    ) -> _Trial | AppHandle:
        """The trial dry-run by ``again``, or the first handle of one the journal ends.
        ``target``: the app and scheduler, when known before the dry run (``run``)."""
        self._check_open()
        history = None
        if self._journal is not None:
            from asynctorchx.runner._journal import TrialRecord

            key = self._claim(key, self._journal)
            try:
                if target is not None:  # a trial the journal ends is replayed without a dry run
                    record = TrialRecord.of(key, *target, cfg)
                    history = self._journal.history(record)
                    if history is not None and self._ended(history):
                        return self._replay(_Trial(None, again, key, history), history)
                info = await again()
                if target is None:
                    assert info.scheduler is not None
                    record = TrialRecord.of(key, info.app, info.scheduler, cfg)
                    history = self._journal.history(record)
                if history is None:
                    await self._journal.append(record)
            except BaseException:
                self._keys.discard(key)
                raise
            if history is not None and self._ended(history):
                return self._replay(_Trial(info, again, key, history), history)
            mark = (record if history is None else history.trial).mark
            return _Trial(info, again, key, history, mark, find_marked=history is not None)
        info = await again()
        return _Trial(info, again, key)

    async def _launch(self, trials: list[_Trial], together: bool) -> None:
        """Take a slot for each trial and follow it; ``together``: the trials that take
        slots at once are submitted first, in one :meth:`Runner.schedule_many`."""
        while trials:
            self._check_open()
            taken = len(trials) if together else 1
            if self._slots is not None:
                await self._slots.acquire()
                held = 1
                while held < taken and self._slots.value > 0:
                    self._slots.acquire_nowait()
                    held += 1
                taken = held
            batch, trials = trials[:taken], trials[taken:]
            try:
                self._check_open()  # the group may have begun to stop while it waited
                if together:
                    for trial in batch:
                        if trial.mark is not None:
                            await self._runner._mark(trial.request, trial.mark)
                    with anyio.CancelScope(shield=True):  # every app submitted is followed
                        handles = await self._runner.schedule_many([t.request for t in batch])
                    for trial, handle in zip(batch, handles, strict=True):
                        trial.submitted = handle
            except BaseException:
                for _ in batch:
                    self._release()
                raise
            assert self._tasks is not None
            for trial in batch:
                self._following.add(trial)  # a submit in flight is waited for as an app is
                self._tasks.start_soon(self._follow, trial)

    async def _first_handle(self, prepared: _Trial | AppHandle, launch: bool = False) -> AppHandle:
        """The trial's first handle once submitted (waited for through cancellations), after
        launching it alone with ``launch``; a handle (replayed from the journal) as itself."""
        if isinstance(prepared, str):
            return prepared
        if launch:
            await self._launch([prepared], together=False)
        interrupted = await _wait_through(prepared.done.wait, prepared.done.is_set)
        if prepared.error is not None:
            raise prepared.error
        if interrupted is not None:
            raise interrupted
        return prepared.attempts[0]

    def _claim(self, key: str | None, journal: Journal) -> str:
        """Take ``key`` for this run of the group, or raise ``TrialKeyError``."""
        if not isinstance(key, str) or not key:
            raise TrialKeyError(None, journal.path)
        if key in self._keys:
            raise TrialKeyError(key, journal.path)
        self._keys.add(key)
        return key

    def _ended(self, history: TrialHistory) -> bool:
        """The journal records the trial's end: the group submits it no more."""
        last = history.last_status
        if last is None or (last.stopped and last.state == AppState.CANCELLED.name):
            return False
        spent = [attempt.budget for attempt in history.attempts]
        return self._next_budget(last.status(), spent) is None

    def _next_budget(self, status: AppStatus, spent: list[str]) -> str | None:
        """The budget a retry of ``status`` spends, given the budgets ``spent`` so far, or
        None: it did not fail, or none is left."""
        if status.state not in FAILING_STATES:
            return None
        budget = "preemption" if status.cause in PREEMPTION_CAUSES else "retry"
        if budget == "preemption" and spent.count(budget) >= self._budgets[budget][0]:
            budget = "retry"  # preempted once too often: a failure like any other
        return budget if spent.count(budget) < self._budgets[budget][0] else None

    def _replay(self, trial: _Trial, history: TrialHistory) -> AppHandle:
        """Report a trial the journal records as ended, as it ended."""
        for attempt in history.attempts:
            self._register(trial, attempt.handle, attempt.budget)
        last = history.last_status
        assert last is not None
        self._finish(trial, last.status())
        self._changed.notify()
        return trial.attempts[0]

    def _register(self, trial: _Trial, handle: AppHandle, budget: str) -> None:
        trial.attempts.append(handle)
        trial.budgets.append(budget)
        self._trials[handle] = trial
        self._handles.append(handle)

    def _finish(self, trial: _Trial, status: AppStatus) -> None:
        """Report the trial's final status; with ``fail_fast``, a failure stops the group."""
        last = trial.attempts[-1]
        self._final[last] = status
        if self._fail_fast and status.state in FAILING_STATES and not self._failed:
            self._failed = last
            self._interrupt()

    def _release(self) -> None:
        if self._slots is not None:
            self._slots.release()

    async def _follow(self, trial: _Trial) -> None:
        """Submit, follow and retry one trial."""
        try:
            with trial.scope:
                info = trial.request
                status, budget = await self._resume(trial)
                while True:
                    if status is None:
                        status = await self._attempt(trial, info, budget)
                        if status is None:  # refused: run() raises it
                            return
                    next_budget = self._next_budget(status, trial.budgets)
                    if next_budget is None:
                        break
                    backoff = self._budgets[next_budget][1]
                    with anyio.CancelScope() as trial.backoff:
                        if not self._stopping:
                            delay = retry_delay(trial.budgets.count(next_budget), backoff)
                            await anyio.sleep(max(0.0, delay - trial.waited))
                    trial.backoff, trial.waited = None, 0.0
                    if self._stopping:
                        break
                    info = await trial.again()
                    if self._stopping:
                        break
                    budget, status = next_budget, None
                self._finish(trial, status)
        except Exception as exc:
            if self._error is None:
                self._error = exc
            self._interrupt()
        finally:
            if not trial.attempts and trial.error is None:  # cut short by the group's end
                trial.error = SchedulerClosedError("the group ended before the app was submitted")
            trial.done.set()
            self._following.discard(trial)
            self._release()
            self._changed.notify()

    async def _resume(self, trial: _Trial) -> tuple[AppStatus | None, str]:
        """Take up the journal's attempts: the last one's final status (followed to its end if
        its scheduler still runs it), or None and the budget of the next submit."""
        history = trial.history
        if history is None or not history.attempts:
            return None, "first"
        for attempt in history.attempts:
            self._register(trial, attempt.handle, attempt.budget)
        trial.done.set()
        last = history.last_status
        if last is not None:  # failed with retries left, or cancelled by a stopping group
            if last.stopped and last.state == AppState.CANCELLED.name:
                return None, "lost"
            trial.waited = max(0.0, time.time() - last.ended)  # the backoff goes on from there
            return last.status(), "retry"
        handle = trial.attempts[-1]
        try:
            found = await self._runner.status(handle)
        except UnknownAppException:
            found = None
        assert trial.request.scheduler is not None
        capabilities = self._runner.scheduler_capabilities(trial.request.scheduler)
        # Forgotten by its scheduler, or (local_cwd) ended with the driver that hosted it.
        if found is None or (capabilities.apps_live_in_process and found.state in FAILING_STATES):
            return None, "lost"
        if found.is_terminal():
            await self._record(trial, handle, found)
            return found, "retry"
        trial.running = handle
        outlives = self._tie(trial, handle)  # known to the reaper before run() returns
        status = await self._follow_app(trial, handle, self._app_trace(trial.request), outlives)
        return status, "retry"

    def _app_trace(self, info: AppDryRunInfo[Any]) -> AppTrace | None:
        assert info.app is not None
        assert info.scheduler is not None
        return self._trace.app(info.app, info.scheduler) if self._trace else None

    async def _record(self, trial: _Trial, handle: AppHandle, status: AppStatus) -> None:
        """Journal the attempt's terminal status (before anyone sees it)."""
        if self._journal is not None and trial.key is not None:
            from asynctorchx.runner._journal import StatusRecord

            await self._journal.append(StatusRecord.of(trial.key, handle, status, self._stopping))

    async def _attempt(
        self, trial: _Trial, info: AppDryRunInfo[Any], budget: str
    ) -> AppStatus | None:
        """The attempt's final status, or None when the first submit was refused."""
        trace = self._app_trace(info)
        try:
            handle = trial.submitted or await self._submit(trial, info)
            trial.submitted = None
        except BaseException as exc:
            if trace is not None:
                trace.not_submitted(
                    exc
                    if isinstance(exc, Exception)
                    else SchedulerClosedError("the group ended before the app was submitted")
                )
            if trial.attempts or not isinstance(exc, Exception):
                raise
            trial.error = exc
            return None
        trial.running = handle
        self._register(trial, handle, budget)
        outlives = self._tie(
            trial, handle
        )  # before the record: a driver dying between orphans none
        if self._journal is not None and trial.key is not None:
            from asynctorchx.runner._journal import AttemptRecord

            attempt = AttemptRecord(trial.key, len(trial.attempts), handle, budget)
            await self._journal.append(attempt)
        return await self._follow_app(trial, handle, trace, outlives)

    async def _submit(self, trial: _Trial, info: AppDryRunInfo[Any]) -> AppHandle:
        """Submit ``info`` marked as the trial's app. A resumed trial first looks for an app
        of its mark the journal lacks (its last driver died between the submit and the
        record) and adopts it: no trial runs twice."""
        if trial.mark is None:
            return await self._runner.schedule(info)
        if trial.find_marked:
            trial.find_marked = False
            journaled = {parse_app_handle(handle).app_id for handle in trial.attempts}
            for handle in await self._runner._find_marked(info, trial.mark):
                if parse_app_handle(handle).app_id not in journaled:
                    return handle
        await self._runner._mark(info, trial.mark)
        return await self._runner.schedule(info)

    async def _follow_app(
        self, trial: _Trial, handle: AppHandle, trace: AppTrace | None, outlives: bool
    ) -> AppStatus:
        """Follow the trial's running app ``handle`` (tied to the reaper if it ``outlives``
        the driver) to its end; journal its status."""
        status = None
        try:
            trial.done.set()
            if trace is not None:
                trace.submitted(handle)
            if self._stopping:
                await self._cancel(handle, math.inf)
            status = await self._final_status(handle, trace)
            await self._record(trial, handle, status)
            trial.running = None
            if outlives:
                self._reaper.untie(handle)
            return status
        finally:
            if trace is not None:
                trace.ended(status)  # None: not followed to its end (a straggler, an error)

    def _tie(self, trial: _Trial, handle: AppHandle) -> bool:
        """Tie ``handle`` to the reaper if its app outlives the driver; return whether."""
        assert trial.request.scheduler is not None
        capabilities = self._runner.scheduler_capabilities(trial.request.scheduler)
        if not capabilities.apps_live_in_process:
            self._reaper.tie(handle)
        return not capabilities.apps_live_in_process

    async def _final_status(self, handle: AppHandle, trace: AppTrace | None) -> AppStatus:
        status = None
        if trace is None:
            status = await self._runner.wait(handle)
        else:
            async with aclosing(self._runner.watch(handle)) as statuses:
                async for status in statuses:
                    trace.changed(status)
        if status is None or not status.is_terminal():
            return AppStatus(AppState.UNKNOWN, msg="the scheduler no longer knows this app")
        return status

    def _interrupt(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    def _settled(self) -> bool:
        """No app followed and no cancel in flight (an app may end before its cancel returns)."""
        return not self._following and not self._cancelling

    async def _all_followed(self) -> None:
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
        """Cancel every app not terminal, wait at most ``stop_timeout`` s; return the stragglers."""
        self._stopping = True
        self._reaper.at_once()
        deadline = anyio.current_time() + self._stop_timeout
        if self._tasks is not None:
            for handle in self._stragglers():
                self._tasks.start_soon(self._cancel, handle, deadline)
        for trial in self._following:
            if trial.backoff is not None:
                trial.backoff.cancel()
        interrupted = await _wait_through(self._all_followed, self._settled, deadline)
        if interrupted is not None:
            raise interrupted
        return self._stragglers()

    def _stragglers(self) -> list[AppHandle]:
        return [handle for handle in self._handles if self._trials[handle].running == handle]

    def _statuses(self) -> dict[AppHandle, AppStatus]:
        return {handle: self._final[handle] for handle in self._handles if handle in self._final}

    async def wait(self) -> dict[AppHandle, AppStatus]:
        """Wait until every trial started so far ended; return ``{handle: AppStatus}`` of each
        trial's last attempt, in start order (``UNKNOWN`` for an app its scheduler forgot)."""
        await self._all_followed()
        return self._statuses()

    async def as_completed(self) -> AsyncIterator[tuple[AppHandle, AppStatus]]:
        """Yield ``(handle, final AppStatus)`` as each trial ends, by its last attempt, until
        every app started so far (while iterating too) was yielded; iterations may overlap.

        It returns once it finds no trial in flight: another task's ``run`` counts only from
        its submit on (not in its dry run or while it waits for a slot), and the runs that
        task has yet to make not at all. To report a sweep as it goes, submit in this task.
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
class _Trial:
    """One app of a group and its retries."""

    info: AppDryRunInfo[Any] | None  # None: replayed from the journal, never submitted
    again: Callable[[], Awaitable[AppDryRunInfo[Any]]]
    key: str | None = None
    history: TrialHistory | None = None
    mark: str | None = None  # with a journal: the label on the trial's apps
    find_marked: bool = False  # resumed: look for an app of its mark before submitting
    scope: anyio.CancelScope = attrs.field(factory=lambda: anyio.CancelScope(shield=True))
    done: anyio.Event = attrs.field(factory=anyio.Event)
    attempts: list[AppHandle] = attrs.field(factory=list)
    budgets: list[str] = attrs.field(factory=list)  # what each attempt spent
    running: AppHandle | None = None
    submitted: AppHandle | None = None  # by run_many, with others: not followed yet
    backoff: anyio.CancelScope | None = None
    waited: float = 0.0  # seconds of the next backoff spent before a resume
    error: Exception | None = None

    @property
    def request(self) -> AppDryRunInfo[Any]:
        """The dry run submitted (a trial replayed from the journal has none)."""
        assert self.info is not None
        return self.info


async def _wait_through(
    wait: Callable[[], Awaitable[None]], finished: Callable[[], bool], deadline: float = math.inf
) -> BaseException | None:
    """Await ``wait()`` until ``finished()`` through asyncio's ``Task.cancel()`` too (which
    anyio's shield does not stop); return the last cancellation, for the caller to raise."""
    interrupted: BaseException | None = None
    while not finished() and anyio.current_time() < deadline:
        try:
            with anyio.CancelScope(shield=True, deadline=deadline):
                await wait()
        except BaseException as exc:
            interrupted = exc
    return interrupted


async def stop_groups(groups: Iterable[AppGroup]) -> None:
    """Cancel and await the apps of open groups; a group with stragglers keeps its reaper."""

    async def stop(group: AppGroup) -> None:
        stragglers = await group._stop()
        if stragglers:
            logger.error("%s", AppGroupStopTimeout(stragglers, group._stop_timeout))
        else:
            await group._reaper.close()

    with anyio.CancelScope(shield=True):
        await gather(functools.partial(stop, group) for group in list(groups))
