"""Refuse at dry run a ``--script`` the replicas will not find (TorchX issue 405).

Not checked where the file is not on this host: a remote scheduler without workspace,
an absolute path inside an image, a path with a ``$``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from asynctorchx.errors import ScriptNotFoundError
from asynctorchx.schedulers._workspace import role_workspaces
from asynctorchx.specs.api import AppDef, AppDryRunInfo, Workspace

# by name, so that checking imports no component module the run does not use
_RUN_A_SCRIPT = frozenset(
    {
        ("asynctorchx.components.dist", "ddp"),
        ("asynctorchx.components.dist", "torchrun"),
        ("asynctorchx.components.dist", "spmd"),
        ("asynctorchx.components.utils", "python"),
    }
)


def script_to_check(
    fn: Callable[..., Any],
    argv: list[str],
    defaults: Mapping[str, str] | None,
    data: Mapping[str, Any] | None,
) -> str | None:
    """The ``--script`` of a builtin component that runs one, else ``None``."""
    from asynctorchx.specs.builders import parse_args

    if (getattr(fn, "__module__", ""), getattr(fn, "__qualname__", "")) not in _RUN_A_SCRIPT:
        return None
    script = parse_args(fn, argv, defaults, data).get("script")
    return script if isinstance(script, str) and script and "$" not in script else None


def check_before_build(
    component: str, script: str, app: AppDef, workspace: Workspace | str | None
) -> None:
    """Check ``script`` in the workspace of role 0, if any."""
    for role, role_workspace in role_workspaces(app, workspace):
        if role is app.roles[0]:
            check_in_workspace(component, script, role_workspace)


def check_after_dryrun(component: str, script: str, info: AppDryRunInfo[Any]) -> None:
    """Check ``script`` in the working directory of each replica of a local request."""
    from asynctorchx.schedulers.local._request import PopenRequest

    if not isinstance(info.request, PopenRequest):
        return
    for params in info.request.role_params.values():
        for param in params:
            cwd = param.cwd or os.getcwd()
            if not (Path(cwd) / script).is_file():
                raise ScriptNotFoundError(
                    component,
                    script,
                    cwd,
                    "give a path relative to that directory (or an absolute one), or run"
                    " from the directory that holds the script",
                )


def _in_project(script: str, source: str, subdir: str) -> Path | None:
    """Where ``script`` (relative to the workspace root) would come from in one project."""
    source_path = Path(source).expanduser()
    prefix = f"{subdir.strip('/')}/" if subdir.strip("/") else ""
    if not script.startswith(prefix):
        return None
    inner = script.removeprefix(prefix)
    if source_path.is_file():
        return source_path if inner == source_path.name else None
    return source_path / inner


def check_in_workspace(component: str, script: str, workspace: Workspace) -> None:
    """Check that the relative ``script`` is a file of ``workspace`` as it will be laid out."""
    if os.path.isabs(script):
        return
    for source, subdir in workspace.projects.items():
        found = _in_project(os.path.normpath(script), source, subdir)
        if found is not None and found.is_file():
            return
    raise ScriptNotFoundError(
        component,
        script,
        f"the workspace {workspace}",
        "give the script's path relative to the workspace root, or a workspace that holds it",
    )
