"""The application spec, as ``torchx.specs``: ``AppDef``, ``Role``, ``Resource``, ``runopts``.

Names TorchX has only in ``torchx.specs.api`` (``AppStatusError``, ``Mount``,
``ParsedAppHandle``) are left out of ``__all__``; ``_named_resource_factories`` is
TorchX's registry of named resources, patchable here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from asynctorchx.specs import api
from asynctorchx.specs._named_resources import (
    _named_resource_factories as _named_resource_factories,  # TorchX's registry, patchable here
)
from asynctorchx.specs._named_resources import (
    _NamedResourcesLibrary as _NamedResourcesLibrary,  # TorchX's class name
)
from asynctorchx.specs._named_resources import get_named_resources, named_resources, resource
from asynctorchx.specs.api import *  # noqa: F403
from asynctorchx.specs.capabilities import CapabilityKey
from asynctorchx.specs.metadata_keys import NA, TORCHX_CONTEXT_NAME, app_metadata

if TYPE_CHECKING:
    from asynctorchx.specs.builders import materialize_appdef

#: TorchX has these in ``torchx.specs.api`` only.
_API_ONLY = frozenset({"AppStatusError", "Mount", "ParsedAppHandle", "cfg_pairs"})
__all__ = [
    "NA",
    "TORCHX_CONTEXT_NAME",
    "CapabilityKey",
    "app_metadata",
    "get_named_resources",
    "materialize_appdef",
    "named_resources",
    "resource",
]
__all__ += [name for name in api.__all__ if name not in _API_ONLY]


def __getattr__(name: str) -> Any:
    """Import ``materialize_appdef`` on first use, keeping ``import asynctorchx.specs`` light."""
    if name == "materialize_appdef":
        from asynctorchx.specs.builders import materialize_appdef

        return materialize_appdef
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
