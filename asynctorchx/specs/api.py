"""The application model, at the import path ``torchx.specs.api`` has in TorchX.

Names, fields, defaults and positional order follow ``torchx.specs.api`` (TorchX 0.7.0),
so TorchX code ports by changing the import. This module only re-exports; each concern
lives in its own private module:

- :mod:`asynctorchx.specs._resource`: :class:`Resource`, :data:`NULL_RESOURCE`,
  :class:`macros`, :class:`resource_tags`, :func:`TORCHX_HOME` and the placeholders
  :data:`MISSING`, :data:`NONE`, :data:`UNKNOWN`, :data:`ALL`;
- :mod:`asynctorchx.specs._mounts`: :class:`MountType`, :class:`BindMount`,
  :class:`VolumeMount`, :class:`DeviceMount`, :data:`Mount`, :func:`parse_mounts`;
- :mod:`asynctorchx.specs._app`: :class:`RetryPolicy`, :class:`Role`, :class:`AppDef`;
- :mod:`asynctorchx.specs._status`: :class:`AppState`, :data:`ReplicaState`,
  :func:`is_terminal`, :func:`is_started`, :class:`ReplicaStatus`, :class:`RoleStatus`,
  :class:`AppStatus`, :class:`AppStatusError`;
- :mod:`asynctorchx.specs._dryrun`: :class:`AppDryRunInfo`;
- :mod:`asynctorchx.specs._app_handle`: :data:`AppHandle`, :class:`ParsedAppHandle`,
  :func:`make_app_handle`, :func:`parse_app_handle`;
- :mod:`asynctorchx.specs._runopts`: :data:`CfgVal`, :class:`runopt`, :class:`runopts`,
  :func:`get_type_name`, :func:`cfg_pairs`, :class:`cases`;
- :mod:`asynctorchx.specs._workspace`: :class:`Workspace`.

The exceptions TorchX defines in ``torchx.specs.api`` (``UnknownAppException``,
``UnknownSchedulerException``, ``InvalidRunConfigException``,
``MalformedAppHandleException``) live in :mod:`asynctorchx.errors` and are re-exported
here.

Every name is the same object whichever path imports it, so the hooks that
:mod:`asynctorchx.specs.converter` registers on these classes apply everywhere.
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
