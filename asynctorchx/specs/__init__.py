"""The application spec, as ``torchx.specs``: ``AppDef``, ``Role``, ``Resource``, ``runopts``.

Names TorchX has only in ``torchx.specs.api`` (``AppStatusError``, ``Mount``,
``ParsedAppHandle``) are left out of ``__all__``; ``_named_resource_factories`` is
TorchX's registry of named resources, patchable here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from asynctorchx.specs._named_resources import (
    _named_resource_factories as _named_resource_factories,  # TorchX's registry, patchable here
)
from asynctorchx.specs._named_resources import (
    _NamedResourcesLibrary as _NamedResourcesLibrary,  # TorchX's class name
)
from asynctorchx.specs._named_resources import get_named_resources, named_resources, resource

# every name of asynctorchx.specs.api; the ones below (not those TorchX has in
# torchx.specs.api only) make the public face
from asynctorchx.specs.api import *  # noqa: F403
from asynctorchx.specs.capabilities import CapabilityKey
from asynctorchx.specs.metadata_keys import NA, TORCHX_CONTEXT_NAME, app_metadata

if TYPE_CHECKING:
    from asynctorchx.specs.builders import materialize_appdef

__all__ = [
    "ALL",
    "MISSING",
    "NA",
    "NONE",
    "NULL_RESOURCE",
    "TORCHX_CONTEXT_NAME",
    "TORCHX_HOME",
    "UNKNOWN",
    "AppDef",
    "AppDryRunInfo",
    "AppHandle",
    "AppState",
    "AppStatus",
    "BindMount",
    "CapabilityKey",
    "CfgVal",
    "DeviceMount",
    "InvalidRunConfigException",
    "MalformedAppHandleException",
    "MountType",
    "ReplicaState",
    "ReplicaStatus",
    "Resource",
    "RetryPolicy",
    "Role",
    "RoleStatus",
    "UnknownAppException",
    "UnknownSchedulerException",
    "VolumeMount",
    "Workspace",
    "app_metadata",
    "cases",
    "get_named_resources",
    "get_type_name",
    "is_started",
    "is_terminal",
    "macros",
    "make_app_handle",
    "materialize_appdef",
    "named_resources",
    "parse_app_handle",
    "parse_mounts",
    "resource",
    "resource_tags",
    "runopt",
    "runopts",
]


def __getattr__(name: str) -> Any:
    """Import ``materialize_appdef`` on first use, keeping ``import asynctorchx.specs`` light."""
    if name == "materialize_appdef":
        from asynctorchx.specs.builders import materialize_appdef

        return materialize_appdef
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
