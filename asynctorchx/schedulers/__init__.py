"""Schedulers: the async :class:`Scheduler` interface and the registry of backends.

Built-ins, in order (the first is the default): ``local_cwd``, ``local_dir``,
``local_docker``. Installing a package that registers the entry point group
``asynctorchx.schedulers`` replaces the built-ins with its schedulers, as TorchX's
``torchx.schedulers`` group does (seed 000). Backends are imported only when their
factory is called, so ``local_cwd`` never imports aiodocker.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from asynctorchx.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    SchedulerFactory,
    Stream,
)

_BUILTINS: dict[str, str] = {
    "local_cwd": "asynctorchx.schedulers.local_scheduler:create_cwd_scheduler",
    "local_dir": "asynctorchx.schedulers.local_scheduler:create_dir_scheduler",
    "local_docker": "asynctorchx.schedulers.docker_scheduler:create_scheduler",
}


def _lazy(target: str) -> Callable[..., Scheduler[Any]]:
    module_name, _, attribute = target.partition(":")

    def factory(session_name: str, **kwargs: Any) -> Scheduler[Any]:
        module = importlib.import_module(module_name)
        created: Scheduler[Any] = getattr(module, attribute)(session_name, **kwargs)
        return created

    factory.__name__ = attribute
    factory.__doc__ = f"Create a scheduler with ``{target}`` (imported on first use)."
    return factory


def get_scheduler_factories() -> dict[str, SchedulerFactory]:
    """Return scheduler name -> factory ``factory(session_name, **kwargs) -> Scheduler``.

    The entry point group ``asynctorchx.schedulers``, when any package registers it,
    replaces the built-ins. The first entry is the default scheduler.
    """
    registered = entry_points(group="asynctorchx.schedulers")
    if registered:
        return {entry.name: entry.load() for entry in registered}
    return {name: _lazy(target) for name, target in _BUILTINS.items()}


def get_default_scheduler_name() -> str:
    """Return the first name of :func:`get_scheduler_factories` (``local_cwd`` built in)."""
    return next(iter(get_scheduler_factories()))


__all__ = [
    "DescribeAppResponse",
    "ListAppResponse",
    "Scheduler",
    "SchedulerFactory",
    "Stream",
    "get_default_scheduler_name",
    "get_scheduler_factories",
]
