"""The async :class:`Runner`: submit, watch, tail and cancel apps on any scheduler.

Same methods, arguments and semantics as TorchX's ``torchx.runner.api.Runner``, as
coroutines, plus :meth:`Runner.watch`, :meth:`Runner.log_stream` and :meth:`Runner.events`
for async callers.

Lifecycle: ``async with get_runner() as runner:`` opens a task group. A scheduler is
created on first use (from any task; a lock makes two tasks share one) and hosted by a
task of that group, inside ``async with scheduler:`` (see
:mod:`asynctorchx.runner._hosting`). Leaving the block (normally, by an exception or by
cancellation) or ``await runner.close()`` closes every scheduler: the local schedulers
terminate the replicas they still run; ``local_docker`` apps are detached (as in TorchX)
unless run with its ``cancel_on_close`` option. Re-exported by
:mod:`asynctorchx.runner.api` and :mod:`asynctorchx.runner`.
"""

from __future__ import annotations

import builtins
import json
import logging
import os
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager, nullcontext
from datetime import datetime
from functools import partial
from typing import Any, Literal, overload

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from asynctorchx.errors import MalformedAppHandleException, UnknownAppException
from asynctorchx.runner._events import EventStream, app_event_stream
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

# Named after the public module ``asynctorchx.runner.api`` (TorchX's ``torchx.runner.api``
# logs there), so that logging configurations naming it apply.
logger = logging.getLogger("asynctorchx.runner.api")


def api_event(
    api: str,
    scheduler: str | None = None,
    *,
    app_image: str | None = None,
    cfg: Mapping[str, CfgVal] | None = None,
    workspace: Workspace | str | None = None,
) -> log_event:
    """The usage event of one Runner API call (see :mod:`asynctorchx.runner.events`).

    Args:
        api: the Runner method's name.
        scheduler: the scheduler's registered name, when known.
        app_image: role 0's image, when known.
        cfg: the run options, recorded as JSON (as TorchX) when given.
        workspace: the workspace given to the call, recorded as text.
    """
    return log_event(
        api,
        scheduler,
        app_image=app_image,
        runcfg=json.dumps(dict(cfg), default=str) if cfg else None,
        workspace=None if workspace is None else str(workspace),
    )


def handle_event(api: str, app_handle: AppHandle) -> log_event:
    """The usage event of a Runner call on ``app_handle`` (scheduler and app id from it).

    A malformed handle gives an event without them; the call then raises as it would.

    Args:
        api: the Runner method's name.
        app_handle: ``{scheduler}://{session}/{app_id}``.
    """
    try:
        scheduler, _, app_id = parse_app_handle(app_handle)
    except MalformedAppHandleException:  # the call itself raises it again
        return log_event(api)
    return log_event(api, scheduler, app_id)


class Runner(anyio.AsyncContextManagerMixin):
    """Runs apps on the registered schedulers and acts on them by app handle.

    Args:
        name: the session name; it appears in every app handle
            (``{scheduler}://{name}/{app_id}``).
        scheduler_factories: scheduler name -> ``factory(session_name, **params)``.
        component_defaults: ``{component name: {argument: default}}`` used by
            :meth:`dryrun_component` (from ``[component:<name>]`` config sections).
        scheduler_params: keyword arguments given to every scheduler factory; they win over
            the ``TORCHX_*`` environment variables, which become parameters by removing the
            prefix (``TORCHX_FOO=1`` -> ``foo="1"``).
        trackers: ``{tracker name: config or None}`` that :meth:`dryrun` passes to the
            replicas (see :mod:`asynctorchx.tracker.api`); ``None``: read from the
            config files and the environment at each dry run, as TorchX does.
        handle_signals: who owns SIGTERM and SIGHUP while the runner is entered
            (see :func:`~asynctorchx.runner.terminate_on_signals`). ``True``: the runner
            does: either signal closes it (as :meth:`close`, each app with its stop
            timeout) and then ends the process with that signal. ``False``: the program
            does (a web server's graceful shutdown closes the runner itself). ``None``
            (default): the runner does when the program left both signals at their
            default action in the main thread, as a plain script does; TorchX's local
            scheduler protects its replicas the same way.

    Use it as ``async with runner:`` (``anyio.AsyncContextManagerMixin``: entering it
    again while it is entered raises ``RuntimeError``); every coroutine raises
    :class:`~asynctorchx.errors.SchedulerClosedError` when the runner is not entered or
    already closed.
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

    # ------------------------------------------------------------------ lifecycle

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[Runner]:
        own = can_own_signals() if self._handle_signals is None else self._handle_signals
        # the signal block is entered first, left last: a signal during close still closes
        signals = terminate_on_signals(self) if own else nullcontext()
        async with signals, self._host, self._fanout:
            try:
                yield self
            finally:
                with anyio.CancelScope(shield=True):  # another task's groups, still open
                    await stop_groups(self._groups)

    async def close(self) -> None:
        """Close every scheduler it opened (ending local replicas, ``cancel_on_close`` apps).

        First the apps of every :meth:`group` still open are cancelled and awaited, each
        group for at most its ``stop_timeout`` (what a SIGTERM or SIGHUP does to a
        runner that owns the signals). Idempotent; the runner cannot be used afterwards.
        Inside ``async with`` it returns once every scheduler is closed; the block's end
        then only exits the task group.
        """
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
    ) -> AppGroup:
        """Return a group of apps that end with its block: ``async with runner.group() as g:``.

        The rule of an anyio task group (``anyio.create_task_group``), for apps on any
        scheduler: leaving the block normally waits until every app started in it
        (``g.run``, ``g.run_component``) is terminal; leaving it by an exception or a
        cancellation (an enclosing ``anyio.fail_after``, Ctrl-C) cancels every app not
        terminal and waits, shielded, until each ends, at most ``stop_timeout`` seconds,
        then lets the exception through. A SIGTERM or SIGHUP to a runner that owns the
        signals does the same before the process ends. See :class:`AppGroup`.

        Args:
            fail_fast (bool): the first app that ends ``FAILED`` or ``UNKNOWN`` with no
                retry left cancels the block and the other apps; the block then raises
                :class:`~asynctorchx.errors.AppGroupFailed` with every app's final
                status. ``False``: failures raise nothing, read the statuses.
            stop_timeout (float): seconds to wait for cancelled apps to end (> 0).
            max_concurrent (int | None): at most this many apps of the group submitted
                and not yet terminal (>= 1); ``g.run`` waits for a slot. ``None``: no limit.
            retries (int): how many times an app that ends ``FAILED`` or ``UNKNOWN`` is
                submitted again, as a new app (>= 0).
            retry_backoff (tuple[float, float]): the shortest and longest wait before a
                retry, seconds; each retry of an app waits a random time between them,
                growing exponentially (:func:`~asynctorchx.runner._group.retry_delay`).

        Raises:
            TypeError, ValueError: ``stop_timeout`` is not a positive finite number.
            ValueError: ``max_concurrent`` is not None or an int >= 1, ``retries`` not an
                int >= 0, or ``retry_backoff`` not two finite seconds, shortest first.
        """
        return AppGroup(
            self,
            self._groups,
            fail_fast=fail_fast,
            stop_timeout=stop_timeout,
            max_concurrent=max_concurrent,
            retries=retries,
            retry_backoff=retry_backoff,
        )

    # ------------------------------------------------------------------ submit

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
            component_args (list[str] | Mapping[str, Any]): the component's command line
                (``["--msg", "hi"]``), or its arguments as data (``{"msg": "hi"}``, as
                TorchX accepts after 0.7.0; see
                :func:`~asynctorchx.specs.builders.materialize_appdef`'s ``config``).
            scheduler (str): the scheduler's registered name (``local_cwd``).
            cfg (Mapping[str, CfgVal] | None): the scheduler's run options (see
                :meth:`scheduler_run_opts`); ``None``: its defaults.
            workspace (Workspace | str | None): a directory (or a
                :class:`~asynctorchx.specs.Workspace`) built into role 0's image by
                schedulers that support it (``local_docker``), over role 0's own
                ``Role.workspace`` as in torchx-nightly; ignored by the other schedulers.
            parent_run_id (str | None): the tracker parent run id (``TORCHX_PARENT_RUN_ID``
                in the launching environment wins).

        Returns:
            The app handle (str).

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

        The ``[component:<name>]`` defaults given to the runner fill in arguments that
        ``component_args`` leaves out. Arguments: as :meth:`run_component`.

        The ``--script`` of ``dist.ddp``, ``dist.torchrun``, ``dist.spmd`` and
        ``utils.python`` is checked where the replicas will look for it: in role 0's
        workspace before it is built, or in the local replicas' working directory
        (:mod:`asynctorchx.runner._script_check`).

        Raises:
            ComponentNotFoundException: the name resolves to no component.
            ComponentValidationException: the component or an argument is invalid.
            ScriptNotFoundError: (a ``ComponentValidationException`` and a
                ``FileNotFoundError``) the ``--script`` is not where the replicas will
                look for it; the message names the path, the directory and the fix.
            ValueError: see :meth:`dryrun`.
        """
        from asynctorchx.runner import _script_check
        from asynctorchx.specs.builders import materialize_appdef
        from asynctorchx.specs.finder import get_component

        with api_event("dryrun_component", scheduler, cfg=cfg, workspace=workspace):
            component_def = get_component(component)
            argv = component_args if isinstance(component_args, list) else []
            data = None if isinstance(component_args, list) else component_args
            defaults = self._component_defaults.get(component)
            app = materialize_appdef(component_def.fn, argv, defaults, data)
            script = _script_check.script_to_check(component_def.fn, argv, defaults, data)
            caps = self.scheduler_capabilities(scheduler)
            builds = script is not None and caps.workspace is not None
            if script is not None and builds:
                _script_check.check_before_build(component, script, app, workspace)
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

        With ``dryrun=True`` nothing is submitted and the :meth:`dryrun` result is
        returned instead (TorchX's ``torchx.runner.api.Runner.run`` after 0.7.0).

        Args:
            app (AppDef): the app; :meth:`dryrun` adds the tracker variables to its roles' env.
            scheduler (str): the scheduler's registered name (``local_cwd``).
            cfg (Mapping[str, CfgVal] | None): the scheduler's run options (see
                :meth:`scheduler_run_opts`); ``None``: its defaults.
            workspace (Workspace | str | None): a directory (or a
                :class:`~asynctorchx.specs.Workspace`) built into role 0's image by
                schedulers that support it (``local_docker``), over role 0's own
                ``Role.workspace`` as in torchx-nightly; ignored by the other schedulers.
            parent_run_id (str | None): the tracker parent run id (``TORCHX_PARENT_RUN_ID``
                in the launching environment wins).
            dryrun (bool): return what would be submitted, submit nothing.

        Returns:
            The app handle (str), or with ``dryrun=True`` the :class:`AppDryRunInfo`.

        Raises:
            ValueError, UnknownSchedulerException, InvalidRunConfigException: see
                :meth:`dryrun`.
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

        The submitted ``AppDef`` is recorded so :meth:`describe` returns it.

        Args:
            dryrun_info (AppDryRunInfo): the result of :meth:`dryrun` (its ``request`` may
                have been edited).

        Raises:
            ValueError: ``dryrun_info`` did not come from :meth:`dryrun`.
        """
        scheduler, app = dryrun_info.scheduler, dryrun_info.app
        if scheduler is None or app is None:
            raise ValueError(
                "this AppDryRunInfo did not come from Runner.dryrun(): call"
                " `await runner.dryrun(app, scheduler)` and pass its result"
            )
        image = app.roles[0].image if app.roles else None
        with api_event("schedule", scheduler, app_image=image) as ctx:
            sched = await self._host.get(scheduler)
            app_id = await sched.schedule(dryrun_info)
            ctx.event.app_id = app_id
            app_handle = make_app_handle(scheduler, self._name, app_id)
            self._apps[app_handle] = app
            return app_handle

    async def dryrun(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: Workspace | str | None = None,
        parent_run_id: str | None = None,
    ) -> AppDryRunInfo[Any]:
        """Return what :meth:`run` would submit, without submitting it (``print()`` it).

        Validates the app and injects into every role's env ``TORCHX_JOB_ID``,
        ``TORCHX_INTERNAL_SESSION_ID`` (:mod:`asynctorchx.util.session`) and, from
        the tracker config (:mod:`asynctorchx.tracker.api`), ``TORCHX_PARENT_RUN_ID``
        (``$TORCHX_PARENT_RUN_ID`` wins over ``parent_run_id``), ``TORCHX_TRACKERS`` and
        ``TORCHX_TRACKER_<NAME>_CONFIG``. With ``workspace``, the scheduler may build it
        into an image for role 0 (``local_docker``). Arguments: as :meth:`run`.

        Raises:
            ValueError: no roles, a role without entrypoint, or ``num_replicas <= 0``.
            UnknownSchedulerException: ``scheduler`` is not registered.
            InvalidRunConfigException: ``cfg`` does not match the scheduler's run options.
        """
        with api_event("dryrun", scheduler, cfg=cfg, workspace=workspace):
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

    # ------------------------------------------------------------------ inspect and act

    def name(self) -> str:
        """Return the session name (the middle part of app handles)."""
        return self._name

    def scheduler_backends(self) -> list[str]:
        """Return the registered scheduler names, the default first."""
        return list(self._host.factories)

    def scheduler_run_opts(self, scheduler: str) -> runopts:
        """Return the run options of ``scheduler`` (works without entering the runner).

        Made by :meth:`scheduler_capabilities` when its record can make them; no
        scheduler is created then.

        Args:
            scheduler (str): the scheduler's registered name.

        Raises:
            UnknownSchedulerException: ``scheduler`` is not registered.
        """
        return self._host.run_opts(scheduler)

    def cfg_from_str(self, scheduler: str, *cfg_literal: str) -> dict[str, CfgVal]:
        """Parse run options written ``key=value,key2=value2`` for ``scheduler``.

        TorchX's ``torchx.runner.api.Runner.cfg_from_str`` (after 0.7.0): each literal is
        parsed by the scheduler's ``runopts.cfg_from_str`` and later literals win. Works
        without entering the runner, as :meth:`scheduler_run_opts`.

        Args:
            scheduler (str): the scheduler's registered name.
            *cfg_literal (str): ``"log_dir=/tmp/x,prepend_cwd=true"``-style strings.

        Returns:
            The typed options (only the keys given; defaults are not filled in). A key
            that is not an option is kept as text: the dry-run refuses it by name.

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
        """Return what ``scheduler`` supports (works without entering the runner).

        E.g. ``runner.scheduler_capabilities(name).apps_live_in_process``. No scheduler
        is created when its factory exposes its record (the built-ins do).

        Args:
            scheduler (str): the scheduler's registered name.

        Raises:
            UnknownSchedulerException: ``scheduler`` is not registered.
        """
        return self._host.capabilities(scheduler)

    async def status(self, app_handle: AppHandle) -> AppStatus | None:
        """Return the app's status, or ``None`` if the scheduler does not know the app.

        Args:
            app_handle (str): ``{scheduler}://{session}/{app_id}``.

        Raises:
            MalformedAppHandleException: the handle is malformed.
            UnknownSchedulerException: the handle's scheduler is not registered.
        """
        with handle_event("status", app_handle):
            sched, app_id = await self._host.for_handle(app_handle, check_session=False)
            return self._app_status(app_handle, await sched.describe(app_id))

    def _app_status(
        self, app_handle: AppHandle, desc: DescribeAppResponse | None
    ) -> AppStatus | None:
        """The :class:`AppStatus` of a scheduler's description; ``None`` (and the app
        forgotten) when the scheduler does not know the app."""
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
        )

    async def wait(self, app_handle: AppHandle, wait_interval: float = 10) -> AppStatus | None:
        """Wait until the app is terminal; return its final status (``None``: unknown app).

        Awaits the scheduler's ``wait``: an event on backends that have events, else the
        base class's batched poller (every waiter of a scheduler shares one poll each
        ``Scheduler.poll_interval`` seconds).

        Args:
            app_handle (str): ``{scheduler}://{session}/{app_id}``.
            wait_interval (float): accepted for TorchX's signature
                (``torchx.runner.api.Runner.wait``) and ignored: the scheduler sets the
                poll interval of its fallback.

        Raises:
            MalformedAppHandleException, UnknownSchedulerException: as :meth:`status`.
        """
        del wait_interval  # TorchX's argument; see the docstring
        with handle_event("wait", app_handle):
            sched, app_id = await self._host.for_handle(app_handle, check_session=False)
            return self._app_status(app_handle, await sched.wait(app_id))

    async def watch(self, app_handle: AppHandle) -> AsyncIterator[AppStatus]:
        """Yield the app's :class:`AppStatus` at each change of state, ending at a terminal one.

        The first status is yielded at once; each next one when the scheduler's
        ``wait_for_state_change`` returns (an event on the local schedulers, a documented
        polling fallback elsewhere). Yields nothing for an unknown app.

        Args:
            app_handle (str): ``{scheduler}://{session}/{app_id}``.

        Raises:
            MalformedAppHandleException, UnknownSchedulerException: as :meth:`status`.
        """
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
        """:meth:`watch` from a status already read (``None``: the app is unknown)."""
        last = None
        while app_status is not None:
            if app_status.state != last:
                last = app_status.state
                yield app_status
            if app_status.is_terminal():
                return
            desc = await sched.wait_for_state_change(app_id, app_status.state)
            app_status = self._app_status(app_handle, desc)

    async def cancel(self, app_handle: AppHandle) -> None:
        """Ask the scheduler to cancel the app; a no-op for an unknown or finished app.

        Returns once the request is made; ``await wait(handle)`` to see it end
        (``CANCELLED``, or ``FAILED`` when the scheduler could not stop it cleanly).
        An unknown app is not an error, as in TorchX (``torchx.runner.api.Runner.cancel``):
        to tell it apart (a web handler's 404), ``await runner.status(handle) is None``.

        Args:
            app_handle (str): ``{scheduler}://{session}/{app_id}``.

        Raises:
            SessionMismatchException: the handle belongs to another session.
        """
        with handle_event("cancel", app_handle):
            sched, app_id = await self._host.for_handle(app_handle)
            await sched.cancel(app_id)  # a no-op for an unknown or finished app

    async def delete(self, app_handle: AppHandle) -> None:
        """Delete the app: cancel it if it runs, then remove what its scheduler keeps of it.

        TorchX's ``torchx.runner.api.Runner.delete`` (after 0.7.0); ``Scheduler.delete``
        says what goes (``local_docker``: every container and volume of the app).
        Idempotent: an unknown or already deleted app is a no-op.

        Args:
            app_handle (str): ``{scheduler}://{session}/{app_id}``.

        Raises:
            SessionMismatchException: the handle belongs to another session.
            MalformedAppHandleException, UnknownSchedulerException: as :meth:`status`.
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
        """Return the submitted ``AppDef`` (else the scheduler's view of it); ``None``: unknown.

        Args:
            app_handle (str): ``{scheduler}://{session}/{app_id}``.

        Raises:
            MalformedAppHandleException, UnknownSchedulerException: as :meth:`status`.
        """
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
        """List the apps ``scheduler`` knows, each with its ``app_handle`` filled in.

        ``name`` is filled in too for the apps this runner submitted when the scheduler
        left it empty.

        Args:
            scheduler (str): the scheduler's registered name.
            cfg (Mapping[str, CfgVal] | None): run options that narrow the listing
                (TorchX's ``torchx.runner.api.Runner.list`` after 0.7.0, e.g. a
                Kubernetes namespace). Given as they are to a scheduler whose ``list``
                takes ``cfg``; a scheduler whose ``list`` does not lists every app it
                knows.

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
        return apps

    async def describe_native(self, app_handle: AppHandle) -> Any | None:
        """Return the scheduler's own description of the app (``Scheduler.describe_native``).

        TorchX's ``torchx.runner.api.Runner.describe_native`` (after 0.7.0). Its type is
        the backend's (see each scheduler's ``describe_native``); ``None`` when the
        backend has no raw description or does not know the app.

        Args:
            app_handle (str): ``{scheduler}://{session}/{app_id}``.

        Raises:
            MalformedAppHandleException, UnknownSchedulerException: as :meth:`status`.
        """
        with handle_event("describe_native", app_handle):
            sched, app_id = await self._host.for_handle(app_handle, check_session=False)
            return await sched.describe_native(app_id)

    # ------------------------------------------------------------------ logs

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

        ``should_tail=True`` follows the log until the app is terminal. Scheduler-dependent
        (see ``Scheduler.log_iter``): lines may be missing once a scheduler purged them.

        Args:
            app_handle (str): ``{scheduler}://{session}/{app_id}``.
            role_name (str): the role's name.
            k (int): the replica id (0-based), not the rank.
            regex (str | None): keep only the lines this regular expression matches.
            since (datetime | None): first line time (not every scheduler honors it).
            until (datetime | None): last line time (not every scheduler honors it).
            should_tail (bool): follow the log until the app is terminal.
            streams (Stream | None): stdout, stderr or combined (default).

        Raises:
            UnknownAppException: the scheduler does not know the app; raised by the
                first step of the iteration, or at once by ``await runner.log_lines(...)``
                (which returns the same iterator, opened), as TorchX raises it at the call.
        """

        async def open_log() -> AsyncIterator[LogBlock]:
            with handle_event("log_lines", app_handle):
                sched, app_id, _, _ = await self._known(app_handle)
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

        Usage: ``async with runner.log_stream(handle, should_tail=True) as lines:
        async for line in lines: ...``. Each replica is read by its own task (a task
        group, :func:`~asynctorchx.runner._logs.fan_in`, 1024 lines buffered), lines
        arrive in the order they are read. ``replicas``: ``{role: [k, ...]}`` (default:
        every replica of every role of the submitted app). Leaving the block (or
        cancelling its task) stops every reader and closes its log.

        Args:
            app_handle (str): ``{scheduler}://{session}/{app_id}``.
            replicas (Mapping[str, list[int]] | None): ``{role: [k, ...]}`` to read.
            regex (str | None): keep only the lines this regular expression matches.
            should_tail (bool): follow the logs until the app is terminal.
            streams (Stream | None): stdout, stderr or combined (default).

        Raises:
            UnknownAppException: the scheduler does not know the app.
            ValueError: (when read) the app has no such role or replica id, or the
                scheduler does not support ``streams``; the first such error ends the
                stream and is raised as itself.
        """
        sched, app_id, desc, _ = await self._known(app_handle)
        if replicas is None:
            replicas = self._replicas(app_handle, desc)

        async def read(role_name: str, k: int, send: MemoryObjectSendStream[LogLine]) -> None:
            lines = sched.log_iter(
                app_id, role_name, k, regex, should_tail=should_tail, streams=streams
            )
            async with aclosing(lines):  # type: ignore[type-var]
                async for line in lines:
                    if not await deliver(send, LogLine(role_name, k, line)):
                        return

        readers = [partial(read, role_name, k) for role_name, ids in replicas.items() for k in ids]
        async with fan_in(readers, max_buffer_size=1024) as lines:
            yield lines

    async def _known(
        self, app_handle: AppHandle
    ) -> tuple[Scheduler[Any], str, DescribeAppResponse, AppStatus]:
        """The scheduler, app id, description and status of the app of ``app_handle``.

        Raises:
            UnknownAppException: the scheduler does not know the app.
            MalformedAppHandleException, UnknownSchedulerException: as :meth:`status`.
        """
        sched, app_id = await self._host.for_handle(app_handle, check_session=False)
        desc = await sched.describe(app_id)
        app_status = self._app_status(app_handle, desc)
        if desc is None or app_status is None:
            raise UnknownAppException(app_handle)
        return sched, app_id, desc, app_status

    def _replicas(
        self, app_handle: AppHandle, desc: DescribeAppResponse
    ) -> dict[str, builtins.list[int]]:
        """``{role: [k, ...]}`` of every replica of the submitted app (else of the roles in
        its description, else of its replicas' statuses)."""
        app = self._apps.get(app_handle)
        roles = app.roles if app is not None and app.roles else desc.roles
        if roles:
            return {role.name: list(range(role.num_replicas)) for role in roles}
        return {r.role: [rep.id for rep in r.replicas] for r in desc.roles_statuses}

    @asynccontextmanager
    async def events(
        self, app_handle: AppHandle, cursor: str | None = None
    ) -> AsyncIterator[EventStream]:
        """One ordered stream of the app's state changes and log lines, resumable by cursor.

        Usage: ``async with runner.events(handle, cursor=last) as events: async for event
        in events: ...`` (what a web service sends as Server-Sent Events, ``event.cursor``
        as the SSE ``id``). First a :class:`StateEvent` with the current state (unless it
        is terminal), then one at each change (``Scheduler.wait_for_state_change``, as
        :meth:`watch`), and a :class:`LogEvent` per line of each replica of each role:
        stdout and stderr apart when the scheduler keeps them apart
        (``Capabilities.log_streams``), else ``combined``; each stream's lines in
        order. The terminal state comes last, after every line; then the stream ends.
        Readers wait while 16 batches of events (each at most one read's lines, 1024
        events) are buffered. Leaving the block (or cancelling its task) stops every
        reader; the app runs on.

        ``cursor``: an event's ``cursor``; the stream resumes right after that event, with
        no event repeated or missed: each log is read again from the position of the
        block its last delivered line came from (``Scheduler.log_blocks``: a byte offset
        on the local schedulers and Slurm, the engine's time stamp and a count on Docker,
        the kubelet's time and a count on Kubernetes, so a resume does not read the log
        again from its start) and the lines of that block already delivered are skipped,
        and the state is sent again only if it changed. Cursors sort as their
        events (string order); their size is described in
        :class:`asynctorchx.runner._events.Position`.

        Args:
            app_handle (str): ``{scheduler}://{session}/{app_id}``.
            cursor (str | None): resume after the event that carried it; ``None``: from
                the start.

        Raises:
            UnknownAppException: the scheduler does not know the app.
            InvalidCursorError: ``cursor`` is malformed, was made for another app, or
                holds the positions of other log streams than the app has.
            MalformedAppHandleException, UnknownSchedulerException: as :meth:`status`.
            Exception: (when read) the first error of a log reader, as itself;
                ``UnknownAppException`` if the app is deleted while followed.
        """
        async with self._events(app_handle, cursor) as events:
            yield events

    @asynccontextmanager
    async def _events(
        self,
        app_handle: AppHandle,
        cursor: str | None,
        *,
        anchor_lines: int | None = 0,
        limits: Sequence[int] | None = None,
    ) -> AsyncIterator[EventStream]:
        """:meth:`events`, its cursors' log counts anchored and its lines limited as
        :func:`~asynctorchx.runner._events.app_event_stream` says."""
        sched, app_id, desc, app_status = await self._known(app_handle)
        replicas = self._replicas(app_handle, desc)
        statuses = self._changes(sched, app_id, app_handle, app_status)
        # a finished app's logs are complete: read once, not followed (benchmark 10's resume rows)
        finished = app_status.is_terminal()
        async with app_event_stream(
            sched,
            app_id,
            app_handle,
            replicas,
            statuses,
            cursor,
            follow=not finished,
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
        """The app's :meth:`events` from one reader shared by every subscriber of the app.

        Usage: ``async with runner.subscribe(handle, cursor=last) as sub: async for batch
        in sub: ...``; each :class:`~asynctorchx.runner.FeedBatch` holds the events ready
        together (``batch.events``) and their Server-Sent Events frames, made once for
        every subscriber (``batch.sse()``). The events, their order, cursors and end are
        those of :meth:`events`, from ``cursor`` on, each once. The app's feed (one
        :meth:`events` stream, a task of the runner) starts with its first subscriber and
        ends when its last one leaves or the app ends. A subscriber that joins behind the
        feed gets the feed's batches after its cursor when the feed still keeps them;
        from an older cursor (or ``None`` once the feed dropped its first batches) it
        reads the lines up to the first kept batch from the scheduler, then joins the
        feed there. A cursor the feed cannot place (made by a stream the feed does not
        know the log positions of, or ahead of it) gets its own :meth:`events` stream.
        The feed's cursors count each log's lines from one position for up to 1024
        lines, so a resume from one (here or with :meth:`events`) skips at most that
        many and one read's (:mod:`asynctorchx.runner._fanout`).

        A subscriber whose buffer holds ``max_buffer`` batches when the feed has another
        is cut off: it receives what its buffer holds, then
        :class:`~asynctorchx.runner.SubscriberCutOff`, whose ``cursor`` resumes it with
        nothing lost or repeated; the feed never waits for a subscriber.

        Args:
            app_handle (str): ``{scheduler}://{session}/{app_id}``.
            cursor (str | None): resume after the event that carried it; ``None``: from
                the start.
            max_buffer (int): batches the subscriber's buffer holds (at least 1).

        Raises:
            ValueError: ``max_buffer`` is under 1.
            UnknownAppException: as :meth:`events`.
            InvalidCursorError: as :meth:`events`.
            MalformedAppHandleException: as :meth:`events`.
            UnknownSchedulerException: as :meth:`events`.
            SubscriberCutOff: (when read) it did not keep up.
            Exception: (when read) the error that ended the app's stream, as :meth:`events`.
        """
        async with self._fanout.subscribe(
            app_handle, partial(self._events, app_handle), cursor, max_buffer
        ) as subscription:
            yield subscription

    def __repr__(self) -> str:
        return f"Runner(name={self._name!r}, schedulers={list(self._host.factories)})"
