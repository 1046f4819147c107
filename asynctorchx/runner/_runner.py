"""The async :class:`Runner`: TorchX's ``torchx.runner.api.Runner`` as coroutines."""

from __future__ import annotations

import builtins
import copy
import json
import logging
import os
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager, nullcontext
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal, overload

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from asynctorchx.errors import MalformedAppHandleException, UnknownAppException
from asynctorchx.runner import _script_check
from asynctorchx.runner._events import Cursor, EventStream, app_event_stream, parse_cursor
from asynctorchx.runner._fanout import SUBSCRIBER_BUFFER, Fanout, Subscription
from asynctorchx.runner._group import AppGroup, stop_groups
from asynctorchx.runner._hosting import SchedulerHost, scheduler_params_from_env
from asynctorchx.runner._log_lines import LogLines
from asynctorchx.runner._logs import LogLine, deliver, fan_in
from asynctorchx.runner._signals import can_own_signals, terminate_on_signals
from asynctorchx.runner.events import log_event
from asynctorchx.schedulers.api import (
    Capabilities,
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    SchedulerFactory,
    Stream,
)
from asynctorchx.schedulers.toolkit import LogBlock, LogQuery
from asynctorchx.specs.api import (
    AppDef,
    AppDryRunInfo,
    AppHandle,
    AppState,
    AppStatus,
    CfgVal,
    Workspace,
    macros,
    make_app_handle,
    parse_app_handle,
    runopts,
)
from asynctorchx.util._tracker_env import (
    ENV_TORCHX_JOB_ID,
    ENV_TORCHX_PARENT_RUN_ID,
    ENV_TORCHX_TRACKERS,
    get_configured_trackers,
    tracker_config_env_var_name,
)
from asynctorchx.util.session import TORCHX_INTERNAL_SESSION_ID, get_session_id_or_create_new

# TorchX's logger name, so that logging configurations naming it apply
logger = logging.getLogger("asynctorchx.runner.api")
#: Sorts an app without a submit time after every other.
_NEVER = datetime.min.replace(tzinfo=UTC)


def api_event(
    api: str,
    scheduler: str | None = None,
    *,
    app_image: str | None = None,
    cfg: Mapping[str, CfgVal] | None = None,
    workspace: Workspace | str | None = None,
) -> log_event:
    """The usage event of one Runner API call, ``cfg`` as JSON (as TorchX)."""
    return log_event(
        api,
        scheduler,
        app_image=app_image,
        runcfg=json.dumps(dict(cfg), default=str) if cfg else None,
        workspace=None if workspace is None else str(workspace),
    )


def _submittable(dryrun_info: AppDryRunInfo[Any]) -> tuple[str, AppDef]:
    """The scheduler and app of a :meth:`Runner.dryrun` result, or a ``ValueError``."""
    scheduler, app = dryrun_info.scheduler, dryrun_info.app
    if scheduler is None or app is None:
        raise ValueError(
            "this AppDryRunInfo did not come from Runner.dryrun(): call"
            " `await runner.dryrun(app, scheduler)` and pass its result"
        )
    return scheduler, app


def handle_event(api: str, app_handle: AppHandle) -> log_event:
    """The usage event of a Runner call on ``app_handle``."""
    try:
        scheduler, _, app_id = parse_app_handle(app_handle)
    except MalformedAppHandleException:  # the call itself raises it again
        return log_event(api)
    return log_event(api, scheduler, app_id)


class Runner(anyio.AsyncContextManagerMixin):
    """Runs apps on the registered schedulers and acts on them by app handle.

    Use it as ``async with runner:`` (entering it twice raises ``RuntimeError``); leaving
    the block closes every scheduler (``local_docker`` apps run on unless ``cancel_on_close``).
    Outside it every coroutine raises :class:`~asynctorchx.errors.SchedulerClosedError`. An
    ``app_handle`` is ``{scheduler}://{session}/{app_id}``; a malformed one raises
    ``MalformedAppHandleException``, an unregistered scheduler ``UnknownSchedulerException``.

    Args:
        name: the session name, the middle part of every app handle.
        scheduler_factories: scheduler name -> ``factory(session_name, **params)``.
        component_defaults: ``{component: {argument: default}}`` for :meth:`dryrun_component`.
        scheduler_params: keyword arguments for every factory, over the ``TORCHX_*`` variables.
        trackers: ``{tracker: config or None}`` for :meth:`dryrun`; ``None``: read at each dry run.
        handle_signals: ``True``: SIGTERM and SIGHUP close the runner, then end the process
            (:func:`~asynctorchx.runner.terminate_on_signals`); ``None``: when both are default.
    """

    def __init__(
        self,
        name: str,
        scheduler_factories: Mapping[str, SchedulerFactory],
        component_defaults: Mapping[str, Mapping[str, str]] | None = None,
        scheduler_params: Mapping[str, Any] | None = None,
        trackers: Mapping[str, str | None] | None = None,
        handle_signals: bool | None = None,
    ) -> None:
        self._name = name
        self._handle_signals = handle_signals
        self._trackers = None if trackers is None else dict(trackers)
        self._component_defaults = {k: dict(v) for k, v in (component_defaults or {}).items()}
        self._host = SchedulerHost(
            name,
            scheduler_factories,
            {**scheduler_params_from_env(), **(scheduler_params or {})},
        )
        self._apps: dict[AppHandle, AppDef] = {}
        self._groups: set[AppGroup] = set()
        self._fanout = Fanout()

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[Runner]:
        own = can_own_signals() if self._handle_signals is None else self._handle_signals
        # entered first, left last: a signal during close still closes
        signals = terminate_on_signals(self) if own else nullcontext()
        async with signals, self._host, self._fanout:
            try:
                yield self
            finally:
                with anyio.CancelScope(shield=True):  # another task's groups, still open
                    await stop_groups(self._groups)

    async def close(self) -> None:
        """Stop every open :meth:`group`, then close every scheduler; idempotent."""
        await stop_groups(self._groups)
        await self._host.close()

    def group(
        self,
        fail_fast: bool = False,
        stop_timeout: float = 60.0,
        *,
        max_concurrent: int | None = None,
        retries: int = 0,
        retry_backoff: tuple[float, float] = (10.0, 600.0),
        journal: str | os.PathLike[str] | None = None,
        preemption_retries: int = 3,
        preemption_backoff: tuple[float, float] = (1.0, 60.0),
        adopt_within: float = 300.0,
    ) -> AppGroup:
        """Return a group of apps that end with its block: ``async with runner.group() as g:``.

        Leaving the block waits for every app started in it; leaving it by an exception
        cancels the apps not terminal and waits at most ``stop_timeout`` (:class:`AppGroup`).

        Args:
            fail_fast (bool): an app failed with no retry left raises ``AppGroupFailed``.
            stop_timeout (float): seconds to wait for cancelled apps to end (> 0).
            max_concurrent (int | None): most apps running at once (>= 1); ``None``: no limit.
            retries (int): resubmissions of a ``FAILED`` or ``UNKNOWN`` app (>= 0).
            retry_backoff (tuple[float, float]): shortest and longest wait before a retry, seconds.
            journal (str | os.PathLike[str] | None): a file (JSON Lines, created 0600) that
                records every trial, attempt and terminal status before the script sees it,
                so that the same script run again resumes the sweep; each ``run`` then
                needs a ``key``. Held by one driver while the block runs. ``None``: none.
            preemption_retries (int): resubmissions of an app that failed because the cluster
                took it back (its ``AppStatus.cause`` ``PREEMPTED``, ``EVICTED`` or
                ``NODE_LOST``), spending none of ``retries`` (>= 0); once spent, such a
                failure spends ``retries``.
            preemption_backoff (tuple[float, float]): shortest and longest wait before a
                preemption retry, seconds.
            adopt_within (float): with ``journal``, seconds (>= 0, default 300) the reaper of
                a driver that died in the block (SIGKILL, the OOM killer) waits for another
                driver to open the journal: it then cancels none of the apps, else it cancels
                them all; 0: at once. Ignored without a journal; leaving the block by an
                exception or a cancellation cancels the apps at once still.

        Raises:
            TypeError, ValueError: an argument is out of its range.
            JournalUnsafeError: on entering, the journal is not private to its user.
            JournalLockedError: on entering, another process holds the journal.
            JournalCorruptError: on entering, a full line of the journal is no record.
        """
        return AppGroup(
            self,
            self._groups,
            fail_fast=fail_fast,
            stop_timeout=stop_timeout,
            max_concurrent=max_concurrent,
            retries=retries,
            retry_backoff=retry_backoff,
            journal=journal,
            preemption_retries=preemption_retries,
            preemption_backoff=preemption_backoff,
            adopt_within=adopt_within,
        )

    async def run_component(
        self,
        component: str,
        component_args: list[str] | Mapping[str, Any],
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: Workspace | str | None = None,
        parent_run_id: str | None = None,
    ) -> AppHandle:
        """Materialize component ``component`` with ``component_args`` and run it.

        Args:
            component (str): a builtin (``utils.echo``), an entry point or ``path.py:fn``.
            component_args (list[str] | Mapping[str, Any]): its command line, or its arguments.
            scheduler (str): as :meth:`run`.
            cfg (Mapping[str, CfgVal] | None): as :meth:`run`.
            workspace (Workspace | str | None): as :meth:`run`.
            parent_run_id (str | None): as :meth:`run`.

        Raises:
            ComponentNotFoundException: the name resolves to no component.
            ComponentValidationException: the component function is invalid.
            ValueError: see :meth:`dryrun`.
        """
        with api_event("run_component", scheduler, cfg=cfg, workspace=workspace) as ctx:
            dryrun_info = await self.dryrun_component(
                component, component_args, scheduler, cfg, workspace, parent_run_id
            )
            app_handle = await self.schedule(dryrun_info)
            ctx.event.app_id = parse_app_handle(app_handle).app_id
            return app_handle

    async def dryrun_component(
        self,
        component: str,
        component_args: list[str] | Mapping[str, Any],
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: Workspace | str | None = None,
        parent_run_id: str | None = None,
    ) -> AppDryRunInfo[Any]:
        """Dry-run version of :meth:`run_component`: return what would be submitted.

        The runner's ``component_defaults`` fill in missing arguments; a ``--script`` is
        checked where the replicas will look for it. Arguments: as :meth:`run_component`.

        Raises:
            ComponentNotFoundException: the name resolves to no component.
            ComponentValidationException: the component or an argument is invalid.
            ScriptNotFoundError: the ``--script`` is not where the replicas will look for it.
            ValueError: see :meth:`dryrun`.
        """
        from asynctorchx.specs.builders import materialize_appdef
        from asynctorchx.specs.finder import get_component

        with api_event("dryrun_component", scheduler, cfg=cfg, workspace=workspace):
            fn = get_component(component).fn
            argv = component_args if isinstance(component_args, list) else []
            data = None if isinstance(component_args, list) else component_args
            defaults = self._component_defaults.get(component)
            app = materialize_appdef(fn, argv, defaults, data)
            script = _script_check.script_to_check(fn, argv, defaults, data)
            return await self._dryrun_checked(
                component, script, app, scheduler, cfg, workspace, parent_run_id
            )

    async def _dryrun_checked(
        self,
        component: str,
        script: str | None,
        app: AppDef,
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None,
        workspace: Workspace | str | None,
        parent_run_id: str | None,
        building: AbstractAsyncContextManager[None] | None = None,
    ) -> AppDryRunInfo[Any]:
        """:meth:`dryrun` inside ``building``, with ``script`` checked (the CLI calls it too)."""
        builds = self.scheduler_capabilities(scheduler).workspace is not None
        if script is not None and builds:
            _script_check.check_before_build(component, script, app, workspace)
        async with building or nullcontext():
            info = await self.dryrun(app, scheduler, cfg, workspace, parent_run_id)
        if script is not None and not builds:
            _script_check.check_after_dryrun(component, script, info)
        return info

    @overload
    async def run(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: Workspace | str | None = None,
        parent_run_id: str | None = None,
        dryrun: Literal[False] = False,
    ) -> AppHandle: ...

    @overload
    async def run(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: Workspace | str | None = None,
        parent_run_id: str | None = None,
        *,
        dryrun: Literal[True],
    ) -> AppDryRunInfo[Any]: ...

    async def run(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: Workspace | str | None = None,
        parent_run_id: str | None = None,
        dryrun: bool = False,
    ) -> AppHandle | AppDryRunInfo[Any]:
        """Run ``app`` on ``scheduler`` with run config ``cfg``; return its app handle.

        TorchX's ``Runner.run``; with ``dryrun=True`` it returns the :meth:`dryrun` result.

        Args:
            app (AppDef): the app.
            scheduler (str): the scheduler's registered name (``local_cwd``).
            cfg (Mapping[str, CfgVal] | None): the scheduler's run options; ``None``: defaults.
            workspace (Workspace | str | None): built into role 0's image where supported.
            parent_run_id (str | None): the tracker parent run id (``$TORCHX_PARENT_RUN_ID`` wins).
            dryrun (bool): return what would be submitted, submit nothing.

        Raises:
            ValueError, UnknownSchedulerException, InvalidRunConfigException: as :meth:`dryrun`.
        """
        with api_event("run", scheduler, cfg=cfg, workspace=workspace) as ctx:
            dryrun_info = await self.dryrun(app, scheduler, cfg, workspace, parent_run_id)
            if dryrun:
                return dryrun_info
            app_handle = await self.schedule(dryrun_info)
            ctx.event.app_id = parse_app_handle(app_handle).app_id
            return app_handle

    async def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> AppHandle:
        """Submit a (possibly edited) dry-run result; return the app handle.

        Args:
            dryrun_info (AppDryRunInfo): the result of :meth:`dryrun`.

        Raises:
            ValueError: ``dryrun_info`` did not come from :meth:`dryrun`.
        """
        scheduler, app = _submittable(dryrun_info)
        image = app.roles[0].image if app.roles else None
        with api_event("schedule", scheduler, app_image=image) as ctx:
            sched = await self._host.get(scheduler)
            app_id = await sched.schedule(dryrun_info)
            ctx.event.app_id = app_id
            app_handle = make_app_handle(scheduler, self._name, app_id)
            self._apps[app_handle] = app
            return app_handle

    async def _mark(self, dryrun_info: AppDryRunInfo[Any], mark: str) -> None:
        """Mark the app ``dryrun_info`` submits as the journaled trial ``mark``."""
        scheduler, _ = _submittable(dryrun_info)
        (await self._host.get(scheduler))._mark(dryrun_info, mark)

    async def _find_marked(self, dryrun_info: AppDryRunInfo[Any], mark: str) -> list[AppHandle]:
        """The handles of the apps marked ``mark`` where ``dryrun_info`` would submit."""
        scheduler, _ = _submittable(dryrun_info)
        found = await (await self._host.get(scheduler))._find_marked(dryrun_info, mark)
        return [make_app_handle(scheduler, self._name, app_id) for app_id in found]

    async def schedule_many(self, dryrun_infos: Sequence[AppDryRunInfo[Any]]) -> list[AppHandle]:
        """Submit dry-run results of one scheduler together; return their handles in order.

        Each is an app of its own, as :meth:`schedule` makes it, but the scheduler may submit
        several in one call (``slurm``: apps of one replica that differ only in its
        entrypoint, args and env go as one job array, ``docs/slurm.md``); others submit
        each at once (``Scheduler.schedule_many``).

        Args:
            dryrun_infos (Sequence[AppDryRunInfo]): results of :meth:`dryrun`.

        Raises:
            ValueError: a result did not come from :meth:`dryrun`, or they name several
                schedulers.
            Exception: a submit's error, as :meth:`schedule` raises it; the apps already
                submitted were cancelled.
        """
        schedulers = {_submittable(info)[0] for info in dryrun_infos}
        if len(schedulers) != 1:
            if not schedulers:
                return []
            raise ValueError(
                f"dry runs of schedulers {sorted(schedulers)}: schedule_many() submits one"
                " scheduler's apps, call it once per scheduler"
            )
        (scheduler,) = schedulers
        with api_event("schedule_many", scheduler):
            sched = await self._host.get(scheduler)
            app_ids = await sched.schedule_many(dryrun_infos)
            handles = [make_app_handle(scheduler, self._name, app_id) for app_id in app_ids]
            for handle, info in zip(handles, dryrun_infos, strict=True):
                self._apps[handle] = _submittable(info)[1]
            return handles

    async def dryrun(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: Workspace | str | None = None,
        parent_run_id: str | None = None,
    ) -> AppDryRunInfo[Any]:
        """Return what :meth:`run` would submit, without submitting it (``print()`` it).

        The result's ``app`` is a copy of ``app`` with ``TORCHX_JOB_ID``, the session id and
        the tracker variables in every role's env (and role 0's image built from
        ``workspace``); ``app`` itself is left as it was, as in torchx-nightly. Arguments: as
        :meth:`run`.

        Raises:
            ValueError: no roles, a role without entrypoint, or ``num_replicas <= 0``.
            UnknownSchedulerException: ``scheduler`` is not registered.
            InvalidRunConfigException: ``cfg`` does not match the scheduler's run options.
        """
        with api_event("dryrun", scheduler, cfg=cfg, workspace=workspace):
            app = copy.deepcopy(app)
            if ENV_TORCHX_PARENT_RUN_ID in os.environ:
                parent_run_id = os.environ[ENV_TORCHX_PARENT_RUN_ID]
                logger.info(
                    "using %s=%s as the parent run id", ENV_TORCHX_PARENT_RUN_ID, parent_run_id
                )
            trackers = self._trackers if self._trackers is not None else get_configured_trackers()
            env = {
                ENV_TORCHX_JOB_ID: make_app_handle(scheduler, self._name, macros.app_id),
                TORCHX_INTERNAL_SESSION_ID: get_session_id_or_create_new(),
            }
            if parent_run_id:
                env[ENV_TORCHX_PARENT_RUN_ID] = parent_run_id
            if trackers:
                env[ENV_TORCHX_TRACKERS] = ",".join(trackers)
            env.update({tracker_config_env_var_name(t): c for t, c in trackers.items() if c})
            for role in app.roles:
                role.env.update(env)
            dryrun_info = await self._host.dryrun(scheduler, app, cfg or {}, workspace)
            dryrun_info.app = app
            dryrun_info.scheduler = scheduler
            return dryrun_info

    def name(self) -> str:
        """Return the session name."""
        return self._name

    def scheduler_backends(self) -> list[str]:
        """Return the registered scheduler names, the default first."""
        return list(self._host.factories)

    def scheduler_run_opts(self, scheduler: str) -> runopts:
        """Return the run options of ``scheduler`` (str).

        Raises:
            UnknownSchedulerException: ``scheduler`` is not registered.
        """
        return self._host.run_opts(scheduler)

    def cfg_from_str(self, scheduler: str, *cfg_literal: str) -> dict[str, CfgVal]:
        """Parse ``key=value,key2=value2`` literals into ``scheduler``'s typed run options.

        TorchX's ``Runner.cfg_from_str``: later literals win; an unknown key stays text.

        Raises:
            UnknownSchedulerException: ``scheduler`` is not registered.
            InvalidRunConfigException: a value does not parse as its option's type.
        """
        opts = self.scheduler_run_opts(scheduler)
        cfg: dict[str, CfgVal] = {}
        for literal in cfg_literal:
            cfg.update(opts.cfg_from_str(literal))
        return cfg

    def scheduler_capabilities(self, scheduler: str) -> Capabilities:
        """Return what ``scheduler`` (str) supports.

        Raises:
            UnknownSchedulerException: ``scheduler`` is not registered.
        """
        return self._host.capabilities(scheduler)

    async def status(self, app_handle: AppHandle) -> AppStatus | None:
        """Return the app's status, or ``None`` if the scheduler does not know the app."""
        with handle_event("status", app_handle):
            sched, app_id = await self._host.for_handle(app_handle, check_session=False)
            return self._app_status(app_handle, await sched.describe(app_id))

    def _app_status(
        self, app_handle: AppHandle, desc: DescribeAppResponse | None
    ) -> AppStatus | None:
        """The status of ``desc``; ``None`` (and the app forgotten) for none."""
        if desc is None:
            self._apps.pop(app_handle, None)
            return None
        return AppStatus(
            desc.state,
            desc.num_restarts,
            msg=desc.msg,
            structured_error_msg=desc.structured_error_msg,
            ui_url=desc.ui_url,
            roles=desc.roles_statuses,
            cause=desc.cause,
            pending_reason=desc.pending_reason,
            submitted=desc.submitted,
            started=desc.started,
            ended=desc.ended,
        )

    async def wait(self, app_handle: AppHandle, wait_interval: float = 10) -> AppStatus | None:
        """Wait until the app is terminal; return its status (``None``: unknown app).

        ``wait_interval`` is TorchX's argument, ignored: the scheduler's ``wait`` is awaited.
        """
        del wait_interval
        with handle_event("wait", app_handle):
            sched, app_id = await self._host.for_handle(app_handle, check_session=False)
            return self._app_status(app_handle, await sched.wait(app_id))

    async def watch(self, app_handle: AppHandle) -> AsyncGenerator[AppStatus, None]:
        """Yield the app's :class:`AppStatus` now and at each change of its state or pending
        reason, to a terminal one."""
        sched, app_id = await self._host.for_handle(app_handle, check_session=False)
        app_status = self._app_status(app_handle, await sched.describe(app_id))
        async with aclosing(self._changes(sched, app_id, app_handle, app_status)) as changes:
            async for each in changes:
                yield each

    async def _changes(
        self,
        sched: Scheduler[Any],
        app_id: str,
        app_handle: AppHandle,
        app_status: AppStatus | None,
    ) -> AsyncGenerator[AppStatus, None]:
        """:meth:`watch` from a status already read."""
        last: tuple[AppState, str | None] | None = None
        while app_status is not None:
            now = app_status.state, app_status.pending_reason
            if now != last:
                last = now
                yield app_status
            if app_status.is_terminal():
                return
            desc = await sched.wait_for_change(app_id, *now)
            app_status = self._app_status(app_handle, desc)

    async def cancel(self, app_handle: AppHandle) -> None:
        """Ask the scheduler to cancel the app; a no-op for an unknown or finished app (as TorchX).

        Raises:
            SessionMismatchException: the handle belongs to another session.
        """
        with handle_event("cancel", app_handle):
            sched, app_id = await self._host.for_handle(app_handle)
            await sched.cancel(app_id)

    async def delete(self, app_handle: AppHandle) -> None:
        """Cancel the app, then remove what its scheduler keeps of it (TorchX's); idempotent.

        Raises:
            SessionMismatchException: the handle belongs to another session.
        """
        with handle_event("delete", app_handle):
            sched, app_id = await self._host.for_handle(app_handle)
            await sched.delete(app_id)
            self._apps.pop(app_handle, None)

    async def stop(self, app_handle: AppHandle) -> None:
        """Deprecated alias of :meth:`cancel` (``PendingDeprecationWarning``, as TorchX)."""
        message = "Runner.stop() will be removed: use Runner.cancel() instead"
        warnings.warn(message, PendingDeprecationWarning, stacklevel=2)
        await self.cancel(app_handle)

    async def describe(self, app_handle: AppHandle) -> AppDef | None:
        """Return the submitted ``AppDef``, else the scheduler's view of it; ``None``: unknown."""
        with handle_event("describe", app_handle):
            sched, app_id = await self._host.for_handle(app_handle, check_session=False)
            app = self._apps.get(app_handle)
            if app is None:
                desc = await sched.describe(app_id)
                if desc is not None:
                    app = AppDef(name=app_id, roles=desc.roles, metadata=dict(desc.metadata))
            return app

    async def list(
        self, scheduler: str, cfg: Mapping[str, CfgVal] | None = None
    ) -> builtins.list[ListAppResponse]:
        """List the apps ``scheduler`` (str) knows, ``cfg`` narrowing it (TorchX's ``list``),
        newest first: by ``submitted``, apps without one last (TorchX keeps the scheduler's order).

        Raises:
            UnknownSchedulerException: ``scheduler`` is not registered.
        """
        with api_event("list", scheduler, cfg=cfg):
            sched = await self._host.get(scheduler)
            apps = await (sched.list() if cfg is None else sched.list(cfg=cfg))
        for app in apps:
            app.app_handle = make_app_handle(scheduler, self._name, app.app_id)
            submitted = self._apps.get(app.app_handle)
            if not app.name and submitted is not None:
                app.name = submitted.name
        apps.sort(key=lambda app: app.submitted or _NEVER, reverse=True)  # stable: ties kept
        return apps

    async def describe_native(self, app_handle: AppHandle) -> Any | None:
        """Return the scheduler's own description of the app; ``None`` when it has none."""
        with handle_event("describe_native", app_handle):
            sched, app_id = await self._host.for_handle(app_handle, check_session=False)
            return await sched.describe_native(app_id)

    def log_lines(
        self,
        app_handle: AppHandle,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> LogLines:
        """Iterate over the log lines of replica ``k`` of ``role_name`` (lines keep ``\\n``).

        TorchX's ``Runner.log_lines``.

        Args:
            app_handle (str): the app's handle.
            role_name (str): the role's name.
            k (int): the replica id (0-based), not the rank.
            regex (str | None): keep only the lines it matches.
            since (datetime | None): first line time, where the scheduler knows times.
            until (datetime | None): last line time, likewise.
            should_tail (bool): follow the log until the app is terminal.
            streams (Stream | None): stdout, stderr or combined (default).

        Raises:
            UnknownAppException: the scheduler does not know the app (at the first line).
        """

        async def open_log() -> AsyncIterator[LogBlock]:
            with handle_event("log_lines", app_handle):
                sched, app_id, _ = await self._app(app_handle)
                query = LogQuery(role_name, k, regex, since, until, should_tail, streams)
                return sched.log_blocks(app_id, query)

        return LogLines(open_log)

    @asynccontextmanager
    async def log_stream(
        self,
        app_handle: AppHandle,
        replicas: Mapping[str, builtins.list[int]] | None = None,
        regex: str | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> AsyncIterator[MemoryObjectReceiveStream[LogLine]]:
        """Merge the logs of several replicas into one stream of :class:`LogLine`.

        ``async with runner.log_stream(handle) as lines:``; leaving the block stops the readers.

        Args:
            app_handle (str): the app's handle.
            replicas (Mapping[str, list[int]] | None): ``{role: [k, ...]}``; ``None``: all.
            regex (str | None): as :meth:`log_lines`.
            should_tail (bool): as :meth:`log_lines`.
            streams (Stream | None): as :meth:`log_lines`.

        Raises:
            UnknownAppException: the scheduler does not know the app.
            ValueError: (when read) no such role or replica, or an unsupported ``streams``.
        """
        sched, app_id, desc = await self._app(app_handle, replicas is None)
        if replicas is None:
            replicas = self._replicas(app_handle, desc)

        async def read(role_name: str, k: int, send: MemoryObjectSendStream[LogLine]) -> None:
            query = LogQuery(role_name, k, regex, should_tail=should_tail, streams=streams)
            blocks = sched.log_blocks(app_id, query)
            async with aclosing(blocks):  # type: ignore[type-var]
                async for _, lines in blocks:
                    for line in lines:
                        if not await deliver(send, LogLine(role_name, k, line)):
                            return

        readers = [partial(read, role_name, k) for role_name, ids in replicas.items() for k in ids]
        async with fan_in(readers, max_buffer_size=1024) as lines:
            yield lines

    async def _app(
        self, app_handle: AppHandle, describe: bool = False
    ) -> tuple[Scheduler[Any], str, DescribeAppResponse | None]:
        """The app's scheduler, id and description (read if ``describe`` or not submitted here)."""
        sched, app_id = await self._host.for_handle(app_handle, check_session=False)
        if not describe and app_handle in self._apps:
            return sched, app_id, None
        desc = await sched.describe(app_id)
        if self._app_status(app_handle, desc) is None:
            raise UnknownAppException(app_handle)
        return sched, app_id, desc

    def _replicas(
        self, app_handle: AppHandle, desc: DescribeAppResponse | None
    ) -> dict[str, builtins.list[int]]:
        """``{role: [k, ...]}`` of the submitted app, else of its description."""
        app = self._apps.get(app_handle)
        if app is not None and app.roles:
            return {role.name: list(range(role.num_replicas)) for role in app.roles}
        assert desc is not None  # described: the runner did not submit it
        if desc.roles:
            return {role.name: list(range(role.num_replicas)) for role in desc.roles}
        return {r.role: [rep.id for rep in r.replicas] for r in desc.roles_statuses}

    @asynccontextmanager
    async def events(
        self, app_handle: AppHandle, cursor: str | None = None
    ) -> AsyncIterator[EventStream]:
        """One ordered stream of the app's state changes and log lines, resumable by cursor.

        ``async with runner.events(handle, cursor=last) as events:``: a :class:`StateEvent`
        per state (as :meth:`watch`), a :class:`LogEvent` per line of each replica's log, the
        terminal state last. A cursor resumes right after its event, none repeated or missed.

        Args:
            app_handle (str): the app's handle.
            cursor (str | None): resume after the event that carried it; ``None``: the start.

        Raises:
            InvalidCursorError: ``cursor`` is malformed, another app's, or of other log streams.
            UnknownAppException: the scheduler does not know the app (when read: it was deleted).
            Exception: (when read) the first error of a log reader, as itself.
        """
        async with self._events(app_handle, parse_cursor(cursor, app_handle)) as events:
            yield events

    @asynccontextmanager
    async def _events(
        self,
        app_handle: AppHandle,
        cursor: Cursor | None,
        *,
        anchor_lines: int | None = 0,
        limits: Sequence[int] | None = None,
    ) -> AsyncIterator[EventStream]:
        """:meth:`events` from a parsed cursor."""
        sched, app_id, desc = await self._app(app_handle, describe=True)
        app_status = self._app_status(app_handle, desc)
        assert app_status is not None
        statuses = self._changes(sched, app_id, app_handle, app_status)
        # a finished app's logs are complete: read once, not followed (benchmark 10's resume rows)
        async with app_event_stream(
            sched,
            app_id,
            app_handle,
            self._replicas(app_handle, desc),
            statuses,
            cursor,
            follow=not app_status.is_terminal(),
            anchor_lines=anchor_lines,
            limits=limits,
        ) as events:
            yield events

    @asynccontextmanager
    async def subscribe(
        self,
        app_handle: AppHandle,
        cursor: str | None = None,
        *,
        max_buffer: int = SUBSCRIBER_BUFFER,
    ) -> AsyncIterator[Subscription]:
        """:meth:`events` from one reader shared by every subscriber of the app.

        ``async with runner.subscribe(handle, cursor=last) as sub: async for batch in sub:``
        yields :class:`~asynctorchx.runner.FeedBatch` es of :meth:`events`' events. A subscriber
        whose buffer is full is cut off with a resumable ``SubscriberCutOff``.

        Args:
            app_handle (str): the app's handle.
            cursor (str | None): as :meth:`events`.
            max_buffer (int): batches the subscriber's buffer holds (>= 1).

        Raises:
            ValueError: ``max_buffer`` is under 1.
            InvalidCursorError, UnknownAppException: as :meth:`events`.
            SubscriberCutOff: (when read) it did not keep up.
        """
        async with self._fanout.subscribe(
            app_handle,
            partial(self._events, app_handle),
            parse_cursor(cursor, app_handle),
            max_buffer,
        ) as subscription:
            yield subscription

    def __repr__(self) -> str:
        return f"Runner(name={self._name!r}, schedulers={list(self._host.factories)})"
