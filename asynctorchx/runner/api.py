"""The async Runner at TorchX's import path ``torchx.runner.api``: :func:`get_runner` and
the names TorchX's module has.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from asynctorchx.errors import UnknownAppException
from asynctorchx.runner._runner import Runner, logger
from asynctorchx.runner.config import (
    Sections,
    get_component_defaults,
    get_scheduler_factories,
    load_sections,
)
from asynctorchx.runner.events import log_event
from asynctorchx.schedulers.api import ListAppResponse, Scheduler, SchedulerFactory, Stream
from asynctorchx.specs.api import (
    AppDef,
    AppDryRunInfo,
    AppHandle,
    AppStatus,
    CfgVal,
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


def get_runner(
    name: str | None = None,
    component_defaults: Mapping[str, Mapping[str, str]] | None = None,
    *,
    config_sections: Sections | None = None,
    handle_signals: bool | None = None,
    **scheduler_params: Any,
) -> Runner:
    """Return a :class:`Runner` over every registered scheduler; use it with ``async with``.

    Args:
        name: the session name (default ``torchx``; another warns ``FutureWarning``, as TorchX).
        component_defaults: ``{component: {argument: default}}``; default: the config files'.
        config_sections: the ``.torchxconfig`` sections already read; ``None``: read here.
        handle_signals: whether the runner owns SIGTERM and SIGHUP; see :class:`Runner`.
        scheduler_params: keyword arguments for every scheduler factory.

    Raises:
        ConfigError: a ``.torchxconfig`` file is unreadable.
    """
    if name:
        warnings.warn(
            f"custom session names are deprecated (got {name!r}); call get_runner() without"
            " `name` and prefix the app name instead",
            FutureWarning,
            stacklevel=2,
        )
    if config_sections is None:
        config_sections = load_sections()
    if component_defaults is None:
        component_defaults = get_component_defaults(sections=config_sections)
    return Runner(
        name or "torchx",
        get_scheduler_factories(),
        component_defaults,
        scheduler_params=scheduler_params,
        trackers=get_configured_trackers(sections=config_sections),
        handle_signals=handle_signals,
    )


__all__ = [
    "ENV_TORCHX_JOB_ID",
    "ENV_TORCHX_PARENT_RUN_ID",
    "ENV_TORCHX_TRACKERS",
    "AppDef",
    "AppDryRunInfo",
    "AppHandle",
    "AppStatus",
    "CfgVal",
    "ListAppResponse",
    "Runner",
    "Scheduler",
    "SchedulerFactory",
    "Stream",
    "UnknownAppException",
    "get_configured_trackers",
    "get_runner",
    "get_scheduler_factories",
    "log_event",
    "logger",
    "macros",
    "make_app_handle",
    "parse_app_handle",
    "runopts",
    "tracker_config_env_var_name",
]
