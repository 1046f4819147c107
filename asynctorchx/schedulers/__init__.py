"""Schedulers: the async :class:`Scheduler` interface and the registry of backends.

Built-ins, in order (the first is the default): ``local_cwd``, ``local_dir``,
``local_docker``, ``slurm``, ``kubernetes``; a plugin (:mod:`asynctorchx.plugins`) of a
built-in's name replaces it, as in torchx-nightly. A backend is imported only when its
factory is called or asked its capabilities, so ``local_cwd`` never imports aiodocker.
"""

from __future__ import annotations

import importlib
from typing import Any

from asynctorchx.plugins import PluginType, registry
from asynctorchx.schedulers._sync_adapter import SyncSchedulerAdapter, is_sync_scheduler
from asynctorchx.schedulers.api import Capabilities, Scheduler, SchedulerFactory

#: name -> (module of ``asynctorchx.schedulers``, factory, the class whose
#: ``capabilities`` the factory exposes), imported on first use.
_BUILTINS: dict[str, tuple[str, str, str]] = {
    "local_cwd": ("local_scheduler", "create_cwd_scheduler", "LocalScheduler"),
    "local_dir": ("local_scheduler", "create_dir_scheduler", "LocalScheduler"),
    "local_docker": ("docker_scheduler", "create_scheduler", "DockerScheduler"),
    "slurm": ("slurm_scheduler", "create_scheduler", "SlurmScheduler"),
    "kubernetes": ("kubernetes_scheduler", "create_scheduler", "KubernetesScheduler"),
}


class _LazyFactory:
    """A built-in factory: imports its backend module only when called (or asked its
    :attr:`capabilities`).

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
    def capabilities(self) -> Capabilities:
        """The :class:`Capabilities` of the class this factory creates (its module is
        imported, no scheduler is made)."""
        found: Capabilities = getattr(
            importlib.import_module(self._module), self._class_name
        ).capabilities
        return found


def get_scheduler_capabilities(factory: SchedulerFactory) -> Capabilities | None:
    """Return what the schedulers ``factory`` creates support, without creating one.

    The built-in factories expose their class's record. Any other factory (an entry
    point's) may expose one as its ``capabilities`` attribute (``create_scheduler.
    capabilities = MyScheduler.capabilities``; a scheduler class used as its own factory
    has it already); without one the answer is ``None`` and the caller creates a
    scheduler (and closes it) to ask it.

    Args:
        factory: a value of :func:`get_scheduler_factories`.

    Raises:
        ImportError: the backend module of a built-in cannot be imported.
    """
    found = getattr(factory, "capabilities", None)
    return found if isinstance(found, Capabilities) else None


def get_scheduler_factories(*, skip_defaults: bool = False) -> dict[str, SchedulerFactory]:
    """Return scheduler name -> factory ``factory(session_name, **kwargs) -> Scheduler``.

    The registered plugins first (:func:`asynctorchx.plugins.registry`: the
    ``@register.scheduler()`` functions of the namespace package
    ``asynctorchx_plugins.schedulers`` and the entry point group
    ``asynctorchx.schedulers``), then the built-ins they do not replace, as
    torchx-nightly's ``torchx.schedulers.get_scheduler_factories``. The first entry is
    the default scheduler. Plugins are found once per process
    (``registry().clear()`` finds them again).

    Args:
        skip_defaults: the plugins only, no built-in.
    """
    factories: dict[str, SchedulerFactory] = dict(registry().get(PluginType.SCHEDULER))
    if not skip_defaults:
        for name, targets in _BUILTINS.items():
            factories.setdefault(name, _LazyFactory(*targets))
    return factories


def get_default_scheduler_name() -> str:
    """Return the first name of :func:`get_scheduler_factories` (``local_cwd`` built in)."""
    return next(iter(get_scheduler_factories()))


__all__ = [
    "Capabilities",
    "Scheduler",
    "SchedulerFactory",
    "SyncSchedulerAdapter",
    "get_default_scheduler_name",
    "get_scheduler_capabilities",
    "get_scheduler_factories",
    "is_sync_scheduler",
]
