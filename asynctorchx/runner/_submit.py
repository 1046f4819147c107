"""The submit path of :class:`~asynctorchx.runner.Runner`: dry-run, then schedule.

TorchX's ``torchx.runner.api.Runner.run_component``, ``dryrun_component``, ``run``,
``dryrun`` and ``schedule``, as coroutines. :class:`Runner` inherits them from
:class:`SubmitMethods`; import them from :mod:`asynctorchx.runner` as before.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import Any, Literal, overload

from asynctorchx.errors import MalformedAppHandleException
from asynctorchx.runner._hosting import SchedulerHost
from asynctorchx.runner.events import log_event
from asynctorchx.runner.tracker import (
    ENV_TORCHX_JOB_ID,
    ENV_TORCHX_PARENT_RUN_ID,
    ENV_TORCHX_TRACKERS,
    get_configured_trackers,
    tracker_config_env_var_name,
)
from asynctorchx.specs.api import (
    AppDef,
    AppDryRunInfo,
    AppHandle,
    CfgVal,
    Workspace,
    macros,
    make_app_handle,
    parse_app_handle,
)

# The logger of runner/api.py before the split: logging configurations naming it work.
logger = logging.getLogger("asynctorchx.runner.api")


def api_event(
    api: str,
    scheduler: str | None = None,
    app_id: str | None = None,
    *,
    app_image: str | None = None,
    cfg: Mapping[str, CfgVal] | None = None,
    workspace: Workspace | str | None = None,
) -> log_event:
    """The usage event of one Runner API call (see :mod:`asynctorchx.runner.events`).

    Args:
        api: the Runner method's name.
        scheduler: the scheduler's registered name, when known.
        app_id: the app's id on its scheduler, when known.
        app_image: role 0's image, when known.
        cfg: the run options, recorded as JSON (as TorchX) when given.
        workspace: the workspace given to the call, recorded as text.
    """
    return log_event(
        api,
        scheduler,
        app_id,
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
        return api_event(api)
    return api_event(api, scheduler, app_id)


class SubmitMethods:
    """The submit methods of :class:`~asynctorchx.runner.Runner` (a base class of it).

    Uses the runner's session name, scheduler host, submitted apps, trackers and
    component defaults, which :class:`~asynctorchx.runner.Runner` sets.
    """

    _name: str
    _host: SchedulerHost
    _apps: dict[AppHandle, AppDef]
    _trackers: dict[str, str | None] | None
    _component_defaults: dict[str, dict[str, str]]

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
                schedulers that support it (``local_docker``), unless role 0 has its own
                ``Role.workspace``; ignored by the other schedulers.
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

        Raises:
            ComponentNotFoundException: the name resolves to no component.
            ComponentValidationException: the component or an argument is invalid.
            ValueError: see :meth:`dryrun`.
        """
        from asynctorchx.specs.builders import materialize_appdef
        from asynctorchx.specs.finder import get_component

        with api_event("dryrun_component", scheduler, cfg=cfg, workspace=workspace):
            component_def = get_component(component)
            argv = component_args if isinstance(component_args, list) else []
            data = None if isinstance(component_args, list) else component_args
            app = materialize_appdef(
                component_def.fn, argv, self._component_defaults.get(component), data
            )
            return await self.dryrun(app, scheduler, cfg, workspace, parent_run_id)

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
                schedulers that support it (``local_docker``), unless role 0 has its own
                ``Role.workspace``; ignored by the other schedulers.
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

        Validates the app and injects into every role's env ``TORCHX_JOB_ID`` and, from
        the tracker config (:mod:`asynctorchx.runner.tracker`), ``TORCHX_PARENT_RUN_ID``
        (``$TORCHX_PARENT_RUN_ID`` wins over ``parent_run_id``), ``TORCHX_TRACKERS`` and
        ``TORCHX_TRACKER_<NAME>_CONFIG``. With ``workspace``, the scheduler may build it
        into an image for role 0 (``local_docker``). Arguments: as :meth:`run`.

        Raises:
            ValueError: no roles, a role without entrypoint, or ``num_replicas <= 0``.
            UnknownSchedulerException: ``scheduler`` is not registered.
            InvalidRunConfigException: ``cfg`` does not match the scheduler's run options.
        """
        with api_event("dryrun", scheduler, cfg=cfg, workspace=workspace):
            return await self._dryrun(app, scheduler, cfg, workspace, parent_run_id)

    async def _dryrun(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None,
        workspace: Workspace | str | None,
        parent_run_id: str | None,
    ) -> AppDryRunInfo[Any]:
        """:meth:`dryrun` without its usage event (the scheduler validates the app)."""
        if ENV_TORCHX_PARENT_RUN_ID in os.environ:
            parent_run_id = os.environ[ENV_TORCHX_PARENT_RUN_ID]
            logger.info("using %s=%s as the parent run id", ENV_TORCHX_PARENT_RUN_ID, parent_run_id)
        trackers = self._trackers if self._trackers is not None else get_configured_trackers()
        for role in app.roles:
            role.env[ENV_TORCHX_JOB_ID] = make_app_handle(scheduler, self._name, macros.app_id)
            if parent_run_id:
                role.env[ENV_TORCHX_PARENT_RUN_ID] = parent_run_id
            if trackers:
                role.env[ENV_TORCHX_TRACKERS] = ",".join(trackers)
                for tracker, config in trackers.items():
                    if config:
                        role.env[tracker_config_env_var_name(tracker)] = config
        dryrun_info = await self._host.dryrun(scheduler, app, cfg or {}, workspace)
        dryrun_info.app = app
        dryrun_info.scheduler = scheduler
        return dryrun_info
