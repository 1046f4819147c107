"""The async :class:`Scheduler` interface and the registry of backends (``torchx.schedulers``).

A backend is imported only when its factory is called or asked its capabilities.
"""

from __future__ import annotations

import importlib
from typing import Any

from asynctorchx.plugins import PluginType, registry
from asynctorchx.schedulers._sync_adapter import SyncSchedulerAdapter, is_sync_scheduler
from asynctorchx.schedulers.api import Capabilities, Scheduler, SchedulerFactory

#: name -> (module, factory, class whose ``capabilities`` it exposes); the first is the default
_BUILTINS: dict[str, tuple[str, str, str]] = {
    "local_cwd": ("local_scheduler", "create_cwd_scheduler", "LocalScheduler"),
    "local_dir": ("local_scheduler", "create_dir_scheduler", "LocalScheduler"),
    "local_docker": ("docker_scheduler", "create_scheduler", "DockerScheduler"),
    "slurm": ("slurm_scheduler", "create_scheduler", "SlurmScheduler"),
    "kubernetes": ("kubernetes_scheduler", "create_scheduler", "KubernetesScheduler"),
}


class _LazyFactory:
    """A built-in factory that imports its backend module on first use."""

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
        """The :class:`Capabilities` of the class this factory creates, made without one."""
        found: Capabilities = getattr(
            importlib.import_module(self._module), self._class_name
        ).capabilities
        return found


def get_scheduler_capabilities(factory: SchedulerFactory) -> Capabilities | None:
    """Return ``factory``'s ``capabilities`` attribute, ``None`` without one (then ask a scheduler).

    Raises:
        ImportError: the backend module of a built-in cannot be imported.
    """
    found = getattr(factory, "capabilities", None)
    return found if isinstance(found, Capabilities) else None


def get_scheduler_factories(*, skip_defaults: bool = False) -> dict[str, SchedulerFactory]:
    """Return scheduler name -> factory: the plugins, then the built-ins they do not replace.

    As torchx-nightly's ``get_scheduler_factories``; the first entry is the default.

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
