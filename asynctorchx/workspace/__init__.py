"""Workspaces: a local directory built into what a role runs (``torchx.workspace``).

A scheduler builds a workspace in ``build_workspace_and_update_role`` (see
:class:`WorkspaceMixin`); the runner calls it at dry run. ``local_docker`` and
``kubernetes`` build the directory into an image, honouring its ``.dockerignore``
(:mod:`asynctorchx.workspace.docker_workspace`); ``slurm`` copies it into ``job_dir``,
honouring its ``.torchxignore`` (:mod:`asynctorchx.workspace.dir_workspace`, with TorchX's
``TORCHX_IGNORE``); the local schedulers run in the directory itself.

TorchX's ``walk_workspace(fs, path, ignore_name)`` is not mirrored: it walks an
``fsspec`` file system, and asynctorchx copies local directories only, without
depending on fsspec.
"""

from __future__ import annotations

from asynctorchx.workspace.api import Workspace, WorkspaceMixin

__all__ = ["Workspace", "WorkspaceMixin"]
