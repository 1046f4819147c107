"""Why a replica's entrypoint could not start, in words that say the fix.

``subprocess`` reports a missing program as ``[Errno 2] No such file or directory:
'name'`` and a file the kernel cannot run as ``[Errno 8] Exec format error``: neither
says which replica, which ``PATH`` was searched, or what to change. This module turns
those errors into :class:`~asynctorchx.errors.ReplicaLaunchError`, looking where the
process start looked: the replica's own ``PATH`` (its environment, not this process's)
and its working directory (the image directory).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping

from asynctorchx.errors import ReplicaLaunchError

_INTERPRETER_FIX = (
    "or make the entrypoint its interpreter and the file its first argument"
    " (entrypoint 'sh' or 'python3', args [file, ...])"
)


def _found(entrypoint: str, cwd: str, env: Mapping[str, str]) -> str | None:
    """The file an exec of ``entrypoint`` tried: the first of that name on ``PATH``.

    An entrypoint with a ``/`` is a path, relative to ``cwd``.
    """
    if "/" in entrypoint:
        path = os.path.join(cwd, entrypoint)
        return path if os.path.exists(path) else None
    for directory in os.get_exec_path(dict(env)):
        path = os.path.join(directory or ".", entrypoint)
        if os.path.isfile(path):
            return path
    return None


def launch_error(
    role: str,
    replica_id: int,
    args: list[str],
    cwd: str | None,
    env: Mapping[str, str],
    error: OSError,
) -> OSError:
    """The typed error of a replica whose process could not start; else ``error`` itself.

    Args:
        role: the replica's role.
        replica_id: its index in the role.
        args: its argument list, ``[entrypoint, *args]``.
        cwd: its working directory (the image directory), or ``None`` for this process's.
        env: its whole environment (whose ``PATH`` the start searched).
        error: what starting it raised.

    Returns:
        A :class:`~asynctorchx.errors.ReplicaLaunchError` for a program that is missing,
        not executable or not runnable, or a working directory that is missing; ``error``
        for anything else (e.g. no file descriptor left, which the caller maps).
    """
    entrypoint, where = args[0], cwd or os.getcwd()
    path = os.pathsep.join(os.get_exec_path(dict(env)))
    found = _found(entrypoint, where, env)

    def typed(reason: str, fix: str) -> ReplicaLaunchError:
        return ReplicaLaunchError(error.errno or 0, role, replica_id, entrypoint, reason, fix)

    if error.errno in (errno.ENOENT, errno.ENOTDIR):
        if cwd is not None and error.filename == cwd:
            return typed(
                f"its working directory {cwd!r} does not exist", "create it, or fix the image"
            )
        if "/" in entrypoint:
            return typed(
                f"there is no file {os.path.join(where, entrypoint)!r}",
                "fix the role's entrypoint, or create that file",
            )
        return typed(
            f"no program of that name on the replica's PATH {path!r}",
            "install it, give the entrypoint as an absolute path, or put its directory on"
            " the role's PATH (Role.env)",
        )
    if error.errno == errno.EACCES and found is not None:
        mode = "a directory" if os.path.isdir(found) else f"mode {os.stat(found).st_mode:o}"
        return typed(
            f"{found!r} is not executable ({mode})",
            f"make it executable (`chmod +x {found}`), {_INTERPRETER_FIX}",
        )
    if error.errno == errno.ENOEXEC:
        shown = found if found is not None else entrypoint
        return typed(
            f"{shown!r} is executable but not a program this machine can run (no '#!' line,"
            " or built for another machine)",
            "begin it with a '#!' line naming its interpreter (e.g. '#!/bin/sh'), "
            + _INTERPRETER_FIX,
        )
    return error
