"""The async Runner: ``async with get_runner() as runner:`` then run, watch, tail, cancel.

See :class:`Runner` (TorchX's ``torchx.runner`` API as coroutines; its ``events`` stream
(:class:`EventStream`) yields :data:`AppEvent`, a :class:`StateEvent` or a :class:`LogEvent`) and
:mod:`asynctorchx.runner.config` for the ``.torchxconfig`` file.
"""

from __future__ import annotations

from asynctorchx.runner._events import AppEvent, EventStream, LogEvent, StateEvent
from asynctorchx.runner._fanout import FeedBatch, SubscriberCutOff, Subscription
from asynctorchx.runner._group import AppGroup
from asynctorchx.runner._log_lines import LogLines
from asynctorchx.runner._logs import LogLine
from asynctorchx.runner._signals import TERMINATION_SIGNALS, can_own_signals, terminate_on_signals
from asynctorchx.runner.api import Runner, get_runner

__all__ = [
    "TERMINATION_SIGNALS",
    "AppEvent",
    "AppGroup",
    "EventStream",
    "FeedBatch",
    "LogEvent",
    "LogLine",
    "LogLines",
    "Runner",
    "StateEvent",
    "SubscriberCutOff",
    "Subscription",
    "can_own_signals",
    "get_runner",
    "terminate_on_signals",
]
