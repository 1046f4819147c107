"""The application model at ``torchx.specs.api``'s import path; re-exports only.

Every name is the same object whichever path imports it, so the hooks of
:mod:`asynctorchx.specs.converter` apply everywhere.
"""

from __future__ import annotations

from asynctorchx.errors import (
    InvalidRunConfigException,
    MalformedAppHandleException,
    UnknownAppException,
    UnknownSchedulerException,
)
from asynctorchx.specs._app import AppDef, RetryPolicy, Role
from asynctorchx.specs._app_handle import (
    AppHandle,
    ParsedAppHandle,
    make_app_handle,
    parse_app_handle,
)
from asynctorchx.specs._dryrun import AppDryRunInfo
from asynctorchx.specs._mounts import (
    BindMount,
    DeviceMount,
    Mount,
    MountType,
    VolumeMount,
    parse_mounts,
)
from asynctorchx.specs._resource import (
    ALL,
    MISSING,
    NONE,
    NULL_RESOURCE,
    TORCHX_HOME,
    UNKNOWN,
    Resource,
    macros,
    resource_tags,
)
from asynctorchx.specs._runopts import CfgVal, cases, cfg_pairs, get_type_name, runopt, runopts
from asynctorchx.specs._status import (
    AppState,
    AppStatus,
    AppStatusError,
    EndCause,
    ReplicaState,
    ReplicaStatus,
    RoleStatus,
    is_started,
    is_terminal,
)
from asynctorchx.specs._workspace import Workspace

__all__ = [
    "ALL",
    "MISSING",
    "NONE",
    "NULL_RESOURCE",
    "TORCHX_HOME",
    "UNKNOWN",
    "AppDef",
    "AppDryRunInfo",
    "AppHandle",
    "AppState",
    "AppStatus",
    "AppStatusError",
    "BindMount",
    "CfgVal",
    "DeviceMount",
    "EndCause",
    "InvalidRunConfigException",
    "MalformedAppHandleException",
    "Mount",
    "MountType",
    "ParsedAppHandle",
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
    "cases",
    "cfg_pairs",
    "get_type_name",
    "is_started",
    "is_terminal",
    "macros",
    "make_app_handle",
    "parse_app_handle",
    "parse_mounts",
    "resource_tags",
    "runopt",
    "runopts",
]
