"""TorchX's module path ``torchx.workspace.api``: :class:`WorkspaceMixin` and ``Workspace``.

The mixin lives in :mod:`asynctorchx.workspace._mixin`; ``Workspace`` (several projects
mapped to sub-directories, a later TorchX's ``torchx.workspace.api.Workspace``) is
:class:`asynctorchx.specs.Workspace`.
"""

from __future__ import annotations

from asynctorchx.specs.api import Workspace
from asynctorchx.workspace._mixin import WorkspaceMixin

__all__ = ["Workspace", "WorkspaceMixin"]
