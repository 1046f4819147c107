"""The async Runner, at the import path ``torchx.runner.api`` has in TorchX.

This module re-exports the names TorchX 0.7.0's ``torchx.runner.api`` has; the names
asynctorchx adds (``LogLine``, ``LogLines``, the events of :meth:`Runner.events`) are
imported from :mod:`asynctorchx.runner`. Each concern lives in its own private module:

- :mod:`asynctorchx.runner._runner`: :class:`Runner` (TorchX's
  ``torchx.runner.api.Runner``, as coroutines, plus ``watch`` and ``log_stream``);
- :mod:`asynctorchx.runner._hosting`: how the runner creates its schedulers on first
  use and hosts each in a task of its task group;
- :mod:`asynctorchx.runner._logs`: :class:`LogLine` and the merged log stream behind
  :meth:`Runner.log_stream`;
- :mod:`asynctorchx.runner._events`: :class:`StateEvent`, :class:`LogEvent`
  (:data:`AppEvent`) and the resumable event stream behind :meth:`Runner.events`;
- :mod:`asynctorchx.runner._get_runner`: :func:`get_runner` (the backends stay
  unimported until a scheduler is made);
- :mod:`asynctorchx.runner.events`: ``log_event``, the usage event the Runner records
  around each API call.

The tracker environment variable names and helpers (:mod:`asynctorchx.tracker.api`)
and the spec and scheduler names ``torchx.runner.api`` imports stay importable from here.
"""

from __future__ import annotations

from asynctorchx.errors import UnknownAppException
from asynctorchx.runner._get_runner import get_runner
from asynctorchx.runner._runner import Runner, logger
from asynctorchx.runner.config import get_scheduler_factories
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
from asynctorchx.tracker.api import (
    ENV_TORCHX_JOB_ID,
    ENV_TORCHX_PARENT_RUN_ID,
    ENV_TORCHX_TRACKERS,
    get_configured_trackers,
    tracker_config_env_var_name,
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
