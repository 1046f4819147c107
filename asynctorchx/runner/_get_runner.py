"""The :func:`get_runner` factory: a :class:`Runner` over every registered scheduler.

As ``torchx.runner.api.get_runner``. Re-exported by :mod:`asynctorchx.runner.api` and
:mod:`asynctorchx.runner`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from asynctorchx.runner._runner import Runner
from asynctorchx.runner.config import (
    Sections,
    get_component_defaults,
    get_scheduler_factories,
    load_sections,
)
from asynctorchx.tracker.api import get_configured_trackers


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
        name: the session name (default ``torchx``, as TorchX; a custom name warns with
            ``FutureWarning``, as TorchX does).
        component_defaults: ``{component: {argument: default}}``; default: the
            ``[component:<name>]`` sections of the ``.torchxconfig`` files.
        config_sections: the ``.torchxconfig`` sections already read
            (:func:`asynctorchx.runner.config.load_sections`); ``None``: the files are
            read here, once. The component defaults and the trackers
            (:mod:`asynctorchx.tracker.api`, with their environment variables) are
            taken from them when the runner is made.
        handle_signals: whether the runner owns SIGTERM and SIGHUP while entered
            (``None``: when the program left them at their defaults); see :class:`Runner`.
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
