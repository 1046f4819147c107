"""TorchX 0.7.0's ``dir_workspace``: the workspace copied into ``job_dir`` (``slurm``'s)."""

from __future__ import annotations

import fnmatch
import os
import posixpath
import shutil
from collections.abc import Mapping
from pathlib import Path

import anyio.to_thread

from asynctorchx.errors import InvalidJobDirError
from asynctorchx.specs.api import CfgVal, Role
from asynctorchx.workspace.api import WorkspaceMixin

#: The ignore file of a directory workspace (TorchX's ``torchx.workspace.api.TORCHX_IGNORE``).
TORCHX_IGNORE = ".torchxignore"


class DirWorkspaceMixin(WorkspaceMixin[None]):
    """TorchX's ``DirWorkspaceMixin``: roles run in a copy of the workspace, in ``job_dir``."""

    workspace_build = "directory"

    async def build_workspace_and_update_role(
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Copy ``workspace`` into ``cfg["job_dir"]`` (:func:`copy_workspace`) for ``role.image``.

        Raises:
            InvalidJobDirError: no ``job_dir`` for a workspace other than the current
                directory, or ``job_dir`` is a file, not empty, or cannot be created.
            NotADirectoryError: ``workspace`` is not a directory.
            OSError: the copy failed (what was copied is removed).
        """
        job_dir = cfg.get("job_dir")
        if job_dir is not None and not isinstance(job_dir, str):
            raise InvalidJobDirError(str(job_dir), "not a path", "give a directory path")
        copy = await anyio.to_thread.run_sync(copy_workspace, workspace, job_dir)
        if copy is not None:
            role.image = copy


def copy_workspace(workspace: str, job_dir: str | None) -> str | None:
    """Copy ``workspace`` into ``job_dir`` but what ``.torchxignore`` names; return the copy.

    ``job_dir`` ``None``: copy nothing, return ``None`` (the workspace must be the cwd)."""
    root = os.path.realpath(os.path.expanduser(workspace))
    if not os.path.isdir(root):
        raise NotADirectoryError(f"workspace {workspace!r} is not a directory: pass a directory")
    if job_dir is None:
        if root != os.path.realpath(os.getcwd()):
            raise InvalidJobDirError(
                None,
                f"the job would run in the current directory, not in workspace {workspace!r}",
                "set the slurm run option job_dir (e.g. -cfg job_dir=/shared/jobs/run-1), a"
                " new directory the workspace is copied into, or run from the workspace",
            )
        return None
    target = os.path.abspath(os.path.expanduser(job_dir))
    created = _prepare(job_dir, target)
    try:
        _copy_tree(root, target)
    except BaseException:
        if created:
            shutil.rmtree(target, ignore_errors=True)
        else:
            for name in os.listdir(target):
                path = os.path.join(target, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
        raise
    return target


def _prepare(job_dir: str, target: str) -> bool:
    """Make sure ``target`` is a new or empty directory; return whether it was created."""
    fix = (
        "give a new directory (it is created) or an empty one, or copy nothing"
        " (run --workspace '', Runner.run(..., workspace=None))"
    )
    if os.path.isdir(target):
        if os.listdir(target):
            raise InvalidJobDirError(job_dir, "the directory is not empty", fix)
        if not os.access(target, os.W_OK | os.X_OK):
            raise InvalidJobDirError(job_dir, "this user cannot write in it", fix)
        return False
    if os.path.lexists(target):
        raise InvalidJobDirError(job_dir, "it is a file", fix)
    try:
        os.makedirs(target)
    except OSError as err:
        raise InvalidJobDirError(job_dir, f"it cannot be created ({err.strerror})", fix) from err
    return True


def read_torchxignore(text: str) -> list[str]:
    """Return a ``.torchxignore``'s patterns as TorchX's ``walk_workspace`` reads them: ``fnmatch``
    over the relative path (``*`` matches ``/``), ``!`` re-includes, the last match decides."""
    patterns = (line.partition("#")[0].strip() for line in text.splitlines())
    return [pattern for pattern in patterns if pattern not in ("", ".")]


def _last_match(path: str, patterns: list[str]) -> tuple[int, bool]:
    """The index of the last pattern matching ``path`` (-1: none), and whether it ignores."""
    found, ignored = -1, False
    for index, pattern in enumerate(patterns):
        negated = pattern.startswith("!")
        if fnmatch.fnmatchcase(path, pattern[1:] if negated else pattern):
            found, ignored = index, not negated
    return found, ignored


def _copy_tree(root: str, target: str) -> None:
    """Copy what ``.torchxignore`` keeps; under a ``!dir`` only later patterns apply (TorchX's)."""
    ignore_file = Path(root, TORCHX_IGNORE)
    patterns = read_torchxignore(ignore_file.read_text("utf-8")) if ignore_file.is_file() else []
    real_target = os.path.realpath(target)
    todo = [("", 0)]  # (directory relative to root, index of its first pattern)
    while todo:
        rel_dir, first = todo.pop()
        rules = patterns[first:]
        with os.scandir(os.path.join(root, rel_dir)) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                rel = posixpath.join(rel_dir, entry.name) if rel_dir else entry.name
                index, ignored = _last_match(rel, rules)
                if ignored:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if os.path.realpath(entry.path) != real_target:
                        todo.append((rel, first + index + 1))
                    continue
                destination = os.path.join(target, rel)
                os.makedirs(os.path.dirname(destination), exist_ok=True)
                shutil.copy2(entry.path, destination, follow_symlinks=False)
