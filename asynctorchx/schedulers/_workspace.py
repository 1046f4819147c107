"""Building ``Role.workspace`` and the runner's ``workspace=`` into role images."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from asynctorchx.specs.api import AppDef, CfgVal, Role, Workspace

if TYPE_CHECKING:
    from asynctorchx.schedulers.api import Scheduler


def role_workspaces(app: AppDef, workspace: Workspace | str | None) -> list[tuple[Role, Workspace]]:
    """The roles to build with their workspaces; ``workspace`` overrides role 0's (torchx-nightly).

    Raises:
        ValueError: ``workspace`` is text :meth:`Workspace.from_str` refuses.
    """
    given = Workspace.from_str(workspace) if isinstance(workspace, str) and workspace else workspace
    builds: list[tuple[Role, Workspace]] = []
    for index, role in enumerate(app.roles):
        chosen = given if index == 0 and given else role.workspace
        if chosen is not None and chosen.projects:
            builds.append((role, chosen))
    return builds


def _expand_user(path: str) -> str:
    return os.path.expanduser(path)


def _copy_projects(projects: Mapping[str, str], root: str) -> None:
    """Copy each project (a file or a directory) to its sub-directory of ``root``."""
    for src, dst in projects.items():
        source = Path(src).expanduser()
        if not source.exists():
            raise FileNotFoundError(f"workspace project {src!r} not found")
        target = Path(root) / dst
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True, symlinks=True)
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / source.name)


async def build_workspaces(
    sched: Scheduler[Any],
    app: AppDef,
    workspace: Workspace | str | None,
    cfg: Mapping[str, CfgVal],
) -> None:
    """Build :func:`role_workspaces` into the roles' images, one build per (image, workspace).

    The cache across roles is torchx-nightly's ``Runner.build_workspace``'s.
    """
    built: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
    for role, role_workspace in role_workspaces(app, workspace):
        key = (role.image, tuple(role_workspace.projects.items()))
        if key not in built:
            await build_workspace(sched, role, role_workspace, cfg)
            built[key] = role.image
        role.image = built[key]


async def build_workspace(
    sched: Scheduler[Any], role: Role, workspace: Workspace, cfg: Mapping[str, CfgVal]
) -> None:
    """Build ``workspace`` into ``role``'s image; a mapped one is copied to a temporary directory.

    Raises:
        FileNotFoundError: a project of a mapped workspace does not exist.
    """
    if workspace.is_unmapped_single_project():
        path = _expand_user(next(iter(workspace.projects)))
        await sched.build_workspace_and_update_role(role, path, cfg)
        return
    async with anyio.TemporaryDirectory(prefix="asynctorchx_workspace_") as root:
        await anyio.to_thread.run_sync(_copy_projects, workspace.projects, root)
        await sched.build_workspace_and_update_role(role, root, cfg)
