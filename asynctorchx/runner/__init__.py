"""The async Runner: ``async with get_runner() as runner:`` then run, watch, tail, cancel.

See :class:`Runner` (TorchX's ``torchx.runner`` API as coroutines; its ``events`` stream
(:class:`EventStream`) yields :data:`AppEvent`, a :class:`StateEvent` or a :class:`LogEvent`) and
:mod:`asynctorchx.runner.config` for the ``.torchxconfig`` file.
"""

from __future__ import annotations

from asynctorchx.runner._group import AppGroup
from asynctorchx.runner._signals import TERMINATION_SIGNALS, can_own_signals, terminate_on_signals
from asynctorchx.runner.api import (
    AppEvent,
    EventStream,
    LogEvent,
    LogLine,
    LogLines,
    Runner,
    StateEvent,
    get_runner,
)
from asynctorchx.runner.config import apply as apply_config
from asynctorchx.runner.config import get_component_defaults, get_config, get_configs

__all__ = [
    "TERMINATION_SIGNALS",
    "AppEvent",
    "AppGroup",
    "EventStream",
    "LogEvent",
    "LogLine",
    "LogLines",
    "Runner",
    "StateEvent",
    "apply_config",
    "can_own_signals",
    "get_component_defaults",
    "get_config",
    "get_configs",
    "get_runner",
    "terminate_on_signals",
]
