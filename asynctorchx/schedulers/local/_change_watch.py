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

Both descriptors are awaited with :func:`anyio.wait_readable` (asyncio and trio alike),
no thread and no timer: an idle follower costs two file descriptors and nothing else.
Events arriving between a reader's check and its await stay queued in the descriptor, so
none is missed. Why not a library: ``watchfiles`` blocks a worker thread per watcher,
``asyncinotify``/``aionotify`` are asyncio-only; the few calls are here.

Where inotify is not available (not Linux, no ``libc`` symbol, the per-user watch
limit reached), :meth:`ChangeWatch.wait` falls back to sleeping
:data:`POLL_INTERVAL` seconds, after which the reader looks again (the file's size,
the record): the documented polling fallback.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import sys
from collections.abc import Sequence
from functools import partial

import anyio

from asynctorchx.schedulers.local._process_identity import libc
from asynctorchx.schedulers.toolkit import race

logger = logging.getLogger(__name__)

#: Seconds between two looks of a follower when inotify is not available.
POLL_INTERVAL = 0.1

#: IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE |
#: IN_DELETE_SELF (``<sys/inotify.h>``)
_WATCHED_EVENTS = 0x002 | 0x004 | 0x008 | 0x080 | 0x100 | 0x200 | 0x400


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

    def __enter__(self) -> ChangeWatch:
        self._inotify = _open_inotify(self._directories)
        if self._pid is not None and hasattr(os, "pidfd_open"):
            with contextlib.suppress(OSError):
                self._pidfd = os.pidfd_open(self._pid)
        return self

    def __exit__(self, *exc_info: object) -> None:
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
        fds = [fd for fd in (self._inotify, self._pidfd) if fd >= 0]
        await race(partial(anyio.wait_readable, fd) for fd in fds)
        _drain(self._inotify)


def _open_inotify(directories: Sequence[str]) -> int:
    """An inotify descriptor watching ``directories``; -1 when inotify is not available."""
    if sys.platform != "linux":
        return -1
    try:
        c = libc()
        c.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        fd = int(c.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
    except (OSError, AttributeError):  # no such C library or symbol
        return -1
    if fd < 0:
        logger.debug("inotify_init1: %s; followers poll", os.strerror(ctypes.get_errno()))
        return -1
    for directory in directories:
        if c.inotify_add_watch(fd, os.fsencode(directory), _WATCHED_EVENTS) < 0:
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
