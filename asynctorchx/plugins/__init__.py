"""Plugins: torchx-nightly's ``torchx.plugins``, registered by decorator.

A factory decorated ``@register.scheduler()`` in a module of the namespace package
``asynctorchx_plugins.schedulers`` is offered beside the built-ins; each kind has its own.
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
