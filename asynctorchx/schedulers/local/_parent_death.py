"""Tying each replica to the life of this process on Linux: a parent-death signal.

A replica is started in a session of its own, so nothing ends it when this process
dies without closing its scheduler: ``SIGKILL``, the OOM killer, a crash. Linux's
``prctl(PR_SET_PDEATHSIG)`` makes the kernel send a signal to a process when its parent
dies; it must be set in the child between ``fork`` and ``exec``. Python can only do that
with ``preexec_fn``, which disables ``subprocess``'s fast ``vfork``/``posix_spawn`` path
and is unsafe with threads. Instead, :func:`replica_command` starts the replica through
util-linux's ``setpriv --pdeathsig KILL -- <argv>``: ``setpriv`` sets the signal, then
``exec``\\ s the replica in the same process (same pid, same process group, nothing left
in between). The cost is one extra ``exec`` per replica (``benchmarks/bench_spawn.py``).
TorchX's ``torchx.schedulers.local_scheduler`` does not tie its replicas to the host.

Limits:

* Linux only, and only when ``setpriv`` (util-linux 2.33 or later) is installed;
  elsewhere replicas are started directly and outlive a killed host as before.
* The signal goes to the replica's main process only. Its own children (those still in
  its process group) are not signalled by the kernel: a replica that starts workers
  should tie them to itself the same way (``torchrun`` does for its workers).
* "The parent" is the *thread* that forked the replica: it fires when that thread ends.
  asyncio forks in the event loop's thread, so the replicas are started wrapped only
  under asyncio; trio forks in a worker thread that ends when idle, so under trio
  replicas are started directly.
* A host that dies between the ``fork`` and ``setpriv``'s ``prctl`` (microseconds)
  leaves that replica untied; a replica that executes a set-user-ID program loses the
  signal (the kernel clears it).
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence

#: The ``setpriv`` used, found once per process; "" when there is none that works.
_setpriv_path: str | None = None

#: Set to False to start replicas directly (what ``benchmarks/bench_spawn.py`` compares).
enabled = True


def _setpriv() -> str:
    """The path of a ``setpriv`` that supports ``--pdeathsig``, or "" (checked once)."""
    global _setpriv_path
    if _setpriv_path is None:
        _setpriv_path = ""
        path = shutil.which("setpriv", path=os.pathsep.join(("/usr/bin", "/bin", "/usr/sbin")))
        if path is not None:
            try:
                probe = subprocess.run(
                    [path, "--pdeathsig", "KILL", "--", "true"],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    timeout=10,
                    check=False,
                )
            except (OSError, subprocess.SubprocessError):
                probe = None
            if probe is not None and probe.returncode == 0:
                _setpriv_path = path
    return _setpriv_path


def _forks_in_this_thread() -> bool:
    """True when the running event loop forks children in its own thread (asyncio)."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # trio: it forks in a worker thread
        return False
    return True


def _check_executable(program: str, env: Mapping[str, str], cwd: str | None) -> None:
    """Raise what ``subprocess.Popen`` would when ``program`` cannot be executed.

    ``setpriv`` would otherwise start and then fail to ``exec`` it (exit status 127),
    where a direct start raises ``FileNotFoundError`` or ``PermissionError``.
    """
    base = cwd or os.getcwd()
    if cwd is not None and not os.path.isdir(cwd):
        return  # Popen reports the working directory itself
    if os.sep in program:
        candidates = [os.path.join(base, program)]
    else:
        candidates = [os.path.join(base, d, program) for d in os.get_exec_path(dict(env))]
    denied = False
    for candidate in candidates:
        if os.path.isfile(candidate):
            if os.access(candidate, os.X_OK):
                return
            denied = True
    code = errno.EACCES if denied else errno.ENOENT
    error_class = PermissionError if denied else FileNotFoundError
    raise error_class(code, os.strerror(code), program)


def replica_command(args: Sequence[str], env: Mapping[str, str], cwd: str | None) -> list[str]:
    """The argv that starts the replica ``args``, tied to this process's life if possible.

    ``setpriv --pdeathsig KILL -- *args`` on Linux under asyncio with a working
    ``setpriv``; ``args`` unchanged otherwise (see the module's limits).

    Args:
        args: the replica's argv, ``[entrypoint, *args]``.
        env: the replica's whole environment (its ``PATH`` finds the entrypoint).
        cwd: the replica's working directory, or None for this process's.

    Raises:
        FileNotFoundError: the entrypoint does not exist (as a direct start raises).
        PermissionError: the entrypoint is not executable.
    """
    argv = list(args)
    if not enabled or sys.platform != "linux" or not argv or not _forks_in_this_thread():
        return argv
    setpriv = _setpriv()
    if not setpriv:
        return argv
    _check_executable(argv[0], env, cwd)
    return [setpriv, "--pdeathsig", "KILL", "--", *argv]
