"""Schedulers: the async :class:`Scheduler` interface and the registry of backends.

Built-ins, in order (the first is the default): ``local_cwd``, ``local_dir``,
``local_docker``, ``slurm``, ``kubernetes``. Installing a package that registers the
entry point group ``asynctorchx.schedulers`` replaces the built-ins with its schedulers, as TorchX's
``torchx.schedulers`` group does (``torchx.schedulers.get_scheduler_factories``).
Backends are imported only when their factory is called (or its class asked for with
:func:`get_scheduler_class`), so ``local_cwd`` never imports aiodocker.

A synchronous, TorchX-style scheduler (:func:`is_sync_scheduler`) is given the async
interface by :class:`SyncSchedulerAdapter`; the Runner wraps one for you. The response
types (``DescribeAppResponse``, ``ListAppResponse``) and ``Stream`` are imported from
:mod:`asynctorchx.schedulers.api`, as in TorchX.
"""

from __future__ import annotations

import importlib
from typing import Any

from asynctorchx.schedulers._sync_adapter import SyncSchedulerAdapter, is_sync_scheduler
from asynctorchx.schedulers.api import Scheduler, SchedulerFactory
from asynctorchx.util.entrypoints import entry_points

#: name -> (module of ``asynctorchx.schedulers``, factory, scheduler class), imported on
#: first use.
_BUILTINS: dict[str, tuple[str, str, str]] = {
    "local_cwd": ("local_scheduler", "create_cwd_scheduler", "LocalScheduler"),
    "local_dir": ("local_scheduler", "create_dir_scheduler", "LocalScheduler"),
    "local_docker": ("docker_scheduler", "create_scheduler", "DockerScheduler"),
    "slurm": ("slurm_scheduler", "create_scheduler", "SlurmScheduler"),
    "kubernetes": ("kubernetes_scheduler", "create_scheduler", "KubernetesScheduler"),
}


class _LazyFactory:
    """A built-in factory: imports its backend module only when called (or asked its class).

    Args:
        module: the backend's module under ``asynctorchx.schedulers``.
        factory: the factory function's name in it.
        class_name: the name of the class the factory creates.
    """

    def __init__(self, module: str, factory: str, class_name: str) -> None:
        self._module = f"asynctorchx.schedulers.{module}"
        self._class_name = class_name
        self.__name__ = factory
        self.__doc__ = (
            f"Create a scheduler with ``{self._module}.{factory}`` (imported on first use)."
        )

    def __call__(self, session_name: str, **kwargs: Any) -> Scheduler[Any]:
        module = importlib.import_module(self._module)
        created: Scheduler[Any] = getattr(module, self.__name__)(session_name, **kwargs)
        return created

    @property
    def scheduler_class(self) -> type[Scheduler[Any]]:
        """The class this factory creates (its module is imported, no scheduler is made)."""
        found: type[Scheduler[Any]] = getattr(
            importlib.import_module(self._module), self._class_name
        )
        return found


def get_scheduler_class(factory: SchedulerFactory) -> type[Scheduler[Any]] | None:
    """Return the scheduler class ``factory`` creates, without creating a scheduler.

    The built-in factories know their class. Any other factory (an entry point's) may
    say it with a ``scheduler_class`` attribute (``create_scheduler.scheduler_class =
    MyScheduler``); without one the answer is ``None`` and the caller has to create a
    scheduler (and close it) to learn its class or run options.

    Args:
        factory: a value of :func:`get_scheduler_factories`.

    Raises:
        ImportError: the backend module of a built-in cannot be imported.
    """
    found = getattr(factory, "scheduler_class", None)
    if isinstance(found, type) and issubclass(found, Scheduler):
        return found
    return None


def get_scheduler_factories() -> dict[str, SchedulerFactory]:
    """Return scheduler name -> factory ``factory(session_name, **kwargs) -> Scheduler``.

    The entry point group ``asynctorchx.schedulers``, when any package registers it,
    replaces the built-ins. The first entry is the default scheduler. The installed entry
    points are read once for as long as none is installed or removed
    (:func:`asynctorchx.util.entrypoints.entry_points`), so calling this again is cheap.
    """
    registered = entry_points(group="asynctorchx.schedulers")
    if registered:
        return {entry.name: entry.load() for entry in registered}
    return {name: _LazyFactory(*targets) for name, targets in _BUILTINS.items()}


def get_default_scheduler_name() -> str:
    """Return the first name of :func:`get_scheduler_factories` (``local_cwd`` built in)."""
    return next(iter(get_scheduler_factories()))


__all__ = [
    "Scheduler",
    "SchedulerFactory",
    "SyncSchedulerAdapter",
    "get_default_scheduler_name",
    "get_scheduler_class",
    "get_scheduler_factories",
    "is_sync_scheduler",
]
