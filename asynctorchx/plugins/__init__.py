"""Plugins: TorchX's ``torchx.plugins`` (torchx-nightly), registered by decorator.

Put a factory in a module of the namespace package ``asynctorchx_plugins.schedulers``
(TorchX's ``torchx_plugins.schedulers``) and decorate it::

    # asynctorchx_plugins/schedulers/my_scheduler.py  (no __init__.py needed)
    from asynctorchx.plugins import register

    @register.scheduler()
    def my_scheduler(session_name: str, **kwargs) -> Scheduler: ...

:func:`asynctorchx.schedulers.get_scheduler_factories` then offers ``my_scheduler``
beside the built-ins, as it offers a scheduler of the entry point group
``asynctorchx.schedulers``. ``registry()`` holds what was found and what could not be
loaded (:attr:`PluginRegistry.errors`). :class:`resource_tags` is
:class:`asynctorchx.specs.resource_tags`.
"""

from asynctorchx.plugins._registry import (
    SOURCE_ENV,
    PluginRegistry,
    PluginSource,
    PluginType,
    RegistrationError,
    register,
    registry,
)
from asynctorchx.specs.api import resource_tags

__all__ = [
    "SOURCE_ENV",
    "PluginRegistry",
    "PluginSource",
    "PluginType",
    "RegistrationError",
    "register",
    "registry",
    "resource_tags",
]
