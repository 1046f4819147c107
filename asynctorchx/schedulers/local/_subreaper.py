"""Ending the daemons a replica leaves behind: this process as a child subreaper (Linux).

Limits: needs ``pidfd_open``; a descendant that leaves the session and drops the token
(``env -i``) escapes.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import signal
from pathlib import Path

import anyio
import anyio.lowlevel

from asynctorchx.schedulers.local._process_identity import libc, pidfd_supported, proc_stat

logger = logging.getLogger(__name__)

#: The environment variable carrying a replica's token to all its descendants.
TOKEN_VARIABLE = "ASYNCTORCHX_REPLICA_TOKEN"

_PR_SET_CHILD_SUBREAPER = 36

#: The children this process starts and reaps itself (replica main processes): never swept.
OWN_CHILDREN: set[int] = set()
#: Tokens read from adopted children while alive, so their zombies stay identifiable.
_known_tokens: dict[int, str] = {}


@functools.cache
def enable() -> bool:
    """Make this process a child subreaper, once; return whether it is one."""
    if not pidfd_supported():
        return False
    try:
        if libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
    except (OSError, AttributeError) as error:  # the latter: no prctl in this C library
        logger.debug("not a child subreaper, daemons of replicas may escape: %s", error)
        return False
    return True


def _children() -> list[int]:
    """This process's children (``/proc/self/task/*/children``, else a scan of /proc)."""
    me = os.getpid()
    try:
        found: list[int] = []
        for task in os.listdir(f"/proc/{me}/task"):
            children = Path(f"/proc/{me}/task/{task}/children").read_bytes()
            found.extend(int(pid) for pid in children.split())
        return found
    except FileNotFoundError:  # a kernel without CONFIG_PROC_CHILDREN
        pids = (int(entry) for entry in os.listdir("/proc") if entry.isdigit())
        return [pid for pid in pids if (stat := proc_stat(pid)) is not None and stat[1] == me]
    except OSError:
        return []


def _token(pid: int) -> str | None:
    """The replica token in ``pid``'s environment, None if absent or unreadable."""
    prefix = TOKEN_VARIABLE.encode() + b"="
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode(errors="replace")
    return None


def _identified(replicas: dict[str, int]) -> list[int]:
    """Our children that descend from one of ``replicas`` (token -> process group)."""
    me = os.getpid()
    found = []
    children = _children()
    if _known_tokens:
        live = set(children)
        for gone in [pid for pid in _known_tokens if pid not in live]:
            del _known_tokens[gone]  # reaped: the pid may be reused
    for pid in children:
        stat = None if pid in OWN_CHILDREN else proc_stat(pid)
        if stat is None or stat[1] != me:
            continue
        state, _, pgrp, session, _ = stat
        token = _known_tokens.get(pid)
        if state != "Z":
            token = _token(pid) or token
            if token is not None:
                _known_tokens[pid] = token
        if token is not None:
            if state == "Z" or token in replicas:  # a known zombie is reaped whoever's it is
                found.append(pid)
        elif pgrp in replicas.values() or session in replicas.values():
            found.append(pid)
    return found


def signal_descendants(token: str, pgid: int, signum: int) -> None:
    """Send ``signum`` to the adopted descendants of one replica (no wait, no reap)."""
    if not enable():
        return
    for pid in _identified({token: pgid}):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


class _Sweeps:
    """One event loop's sweeps: one runs at a time and serves every replica waiting."""

    def __init__(self) -> None:
        self.pending: dict[str, int] = {}
        # no extra loop turn when no sweep runs (benchmark 3's ms-per-replica row)
        self.lock = anyio.Lock(fast_acquire=True)


_SWEEPS: anyio.lowlevel.RunVar[_Sweeps] = anyio.lowlevel.RunVar("asynctorchx_sweeps")


async def end_descendants(token: str, pgid: int) -> None:
    """SIGKILL and reap every adopted descendant of one replica (shielded, after its reap).

    Replicas ending together share one sweep; never raises."""
    if not enable():
        return
    sweeps = _SWEEPS.get(None)
    if sweeps is None:
        sweeps = _Sweeps()
        _SWEEPS.set(sweeps)
    sweeps.pending[token] = pgid
    async with sweeps.lock:
        if token not in sweeps.pending:  # the sweep before served this replica
            return
        batch = dict(sweeps.pending)
        try:
            await _sweep(batch)
        except Exception:
            logger.exception("ending the descendants of replicas")
        finally:
            for swept in batch:
                sweeps.pending.pop(swept, None)


async def _sweep(replicas: dict[str, int]) -> None:
    while found := _identified(replicas):
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in found:
            await _reap(pid)


async def _reap(pid: int) -> None:
    """Await the exit of our child ``pid`` (its pid file descriptor), then reap it."""
    with contextlib.suppress(ProcessLookupError):  # gone already: reap it at once
        pidfd = os.pidfd_open(pid)
        try:
            await anyio.wait_readable(pidfd)
        finally:
            os.close(pidfd)
    _collect(pid)


def _collect(pid: int) -> None:
    """Reap our exited child ``pid`` (``WNOHANG``: it never blocks); gone is fine."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    _known_tokens.pop(pid, None)
