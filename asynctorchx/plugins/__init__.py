"""Plugins: TorchX's ``torchx.plugins`` (torchx-nightly), registered by decorator.

Put a factory in a module of the namespace package ``asynctorchx_plugins.schedulers``
(TorchX's ``torchx_plugins.schedulers``) and decorate it::

    # asynctorchx_plugins/schedulers/my_scheduler.py  (no __init__.py needed)
    from asynctorchx.plugins import register

    @register.scheduler()
    def my_scheduler(session_name: str, **kwargs) -> Scheduler: ...

:func:`asynctorchx.schedulers.get_scheduler_factories` then offers ``my_scheduler``
beside the built-ins, as it offers a scheduler of the entry point group
``asynctorchx.schedulers``. Named resources (``@register.named_resource``, with
:func:`powers_of_two_gpus`, :func:`halve_mem_down_to` and the shares :data:`WHOLE`...),
trackers and event handlers are registered the same way, each kind under its own
namespace package (``asynctorchx_plugins.named_resources``...). ``registry()`` holds
what was found and what could not be loaded (:attr:`PluginRegistry.errors`).
:class:`resource_tags` is :class:`asynctorchx.specs.resource_tags`.
"""

from asynctorchx.plugins._registration import (
    EIGHTH,
    HALF,
    QUARTER,
    SIXTEENTH,
    WHOLE,
    halve_mem_down_to,
    powers_of_two_gpus,
    register,
)
from asynctorchx.plugins._registry import (
    SOURCE_ENV,
    PluginRegistry,
    PluginSource,
    PluginType,
    RegistrationError,
    registry,
)
from asynctorchx.specs.api import resource_tags

__all__ = [
    "EIGHTH",
    "HALF",
    "QUARTER",
    "SIXTEENTH",
    "SOURCE_ENV",
    "WHOLE",
    "PluginRegistry",
    "PluginSource",
    "PluginType",
    "RegistrationError",
    "halve_mem_down_to",
    "powers_of_two_gpus",
    "register",
    "registry",
    "resource_tags",
]
