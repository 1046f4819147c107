"""Workspaces: a local directory built into what a role runs (TorchX's ``torchx.workspace``)."""

from __future__ import annotations

from asynctorchx.workspace.api import Workspace, WorkspaceMixin

__all__ = ["Workspace", "WorkspaceMixin"]
