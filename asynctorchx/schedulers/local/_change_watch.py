"""Waking a reader in another process when an app's files change or its supervisor dies.

A process that follows an app it does not supervise (``log -t``, ``wait`` from a second
terminal) has no in-memory event to await. It watches instead:

* the directories that hold the replica's log files and the app's record, with Linux
  ``inotify`` (``inotify_init1``/``inotify_add_watch`` through ``ctypes``; a write to a
  file of a watched directory is an ``IN_MODIFY`` event, the atomic replacement of a
  record an ``IN_MOVED_TO``), and
* the supervising process, through a pid file descriptor (``pidfd_open``, Linux 5.3),
  readable once it exited: a supervisor killed by ``SIGKILL`` writes nothing more, yet
  its followers wake and end.

Both descriptors are awaited with :func:`anyio.wait_readable` (anyio 4.7; asyncio and
trio alike), no thread and no timer: an idle follower costs two file descriptors and
nothing else. Events arriving between a reader's check and its await stay queued in the
descriptor, so none is missed. Why not a library: ``watchfiles`` blocks a worker thread
per watcher, ``asyncinotify``/``aionotify`` are asyncio-only; the few calls are here.

Where inotify is not available (not Linux, no ``libc`` symbol, the per-user watch
limit reached, anyio older than 4.7), :meth:`ChangeWatch.wait` falls back to sleeping
:data:`POLL_INTERVAL` seconds, after which the reader looks again (the file's size,
the record): the documented polling fallback.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import logging
import os
import sys
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import anyio

logger = logging.getLogger(__name__)

#: Seconds between two looks of a follower when inotify is not available.
POLL_INTERVAL = 0.1

_IN_MODIFY = 0x002
_IN_ATTRIB = 0x004
_IN_CLOSE_WRITE = 0x008
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_WATCHED_EVENTS = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
)
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


@functools.lru_cache(maxsize=1)
def _libc() -> Any | None:
    """The C library with ``inotify_init1``, None where there is none."""
    if sys.platform != "linux" or not hasattr(anyio, "wait_readable"):
        return None
    try:
        # the symbols this process already has (libc is loaded): ``find_library`` would
        # run ``ldconfig -p`` in a child process, ~6 ms at the first app's start
        libc = ctypes.CDLL(None, use_errno=True)
        if not hasattr(libc, "inotify_init1"):
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    except (OSError, AttributeError):
        return None
    return libc


class ChangeWatch:
    """Wakes when a file in one of ``directories`` changes, or the process ``pid`` exits.

    Use it as ``with ChangeWatch(dirs, pid) as watch:`` and ``await watch.wait()``
    between two looks at the files. See the module for the mechanism and its fallback.

    Args:
        directories: the directories to watch (a missing one is skipped).
        pid: the supervising process to watch, or None.
    """

    def __init__(self, directories: Sequence[str], pid: int | None = None) -> None:
        self._directories = list(directories)
        self._pid = pid
        self._inotify = -1
        self._pidfd = -1

    @property
    def polling(self) -> bool:
        """Whether this watch falls back to polling (no inotify here)."""
        return self._inotify < 0

    def __enter__(self) -> ChangeWatch:
        self._inotify = _open_inotify(self._directories)
        if self._pid is not None and hasattr(os, "pidfd_open"):
            with contextlib.suppress(OSError):
                self._pidfd = os.pidfd_open(self._pid)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for fd in (self._inotify, self._pidfd):
            if fd >= 0:
                os.close(fd)
        self._inotify = self._pidfd = -1

    async def wait(self) -> None:
        """Return once something changed since the last return (or since entering).

        With inotify: when a watched directory had an event or the process exited.
        Without: after :data:`POLL_INTERVAL` seconds.
        """
        if self._inotify < 0:
            await anyio.sleep(POLL_INTERVAL)
            return
        if self._pidfd < 0:
            await anyio.wait_readable(self._inotify)
        else:
            async with anyio.create_task_group() as task_group:
                for fd in (self._inotify, self._pidfd):
                    task_group.start_soon(_readable_then_cancel, fd, task_group.cancel_scope)
        _drain(self._inotify)


async def _readable_then_cancel(fd: int, scope: anyio.CancelScope) -> None:
    await anyio.wait_readable(fd)
    scope.cancel()


def _open_inotify(directories: Sequence[str]) -> int:
    """An inotify descriptor watching ``directories``; -1 when inotify is not available."""
    libc = _libc()
    if libc is None:
        return -1
    fd = int(libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
    if fd < 0:
        logger.debug("inotify_init1: %s; followers poll", os.strerror(ctypes.get_errno()))
        return -1
    for directory in directories:
        if libc.inotify_add_watch(fd, os.fsencode(directory), _WATCHED_EVENTS) < 0:
            error = ctypes.get_errno()
            if error in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                continue  # nothing there (yet): the other watches and the pidfd remain
            logger.debug("inotify_add_watch(%s): %s; polling", directory, os.strerror(error))
            os.close(fd)
            return -1
    return fd


def _drain(fd: int) -> None:
    """Read every queued event (their content does not matter: the reader looks again)."""
    with contextlib.suppress(BlockingIOError, InterruptedError):
        while os.read(fd, 65536):
            pass
