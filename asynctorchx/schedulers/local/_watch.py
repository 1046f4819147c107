"""Watching a local app change: in memory for this process's apps, on disk for another's.

``ctypes`` inotify and a pidfd under :func:`anyio.wait_readable`: ``watchfiles`` blocks a thread
per watcher and ``asyncinotify`` is asyncio-only.
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
from asynctorchx.schedulers.toolkit import Notifier, race

logger = logging.getLogger(__name__)

#: Seconds between two looks of a follower when inotify is not available.
POLL_INTERVAL = 0.1

#: IN_MODIFY, ATTRIB, CLOSE_WRITE, MOVED_TO, CREATE, DELETE, DELETE_SELF (``<sys/inotify.h>``)
_WATCHED_EVENTS = 0x002 | 0x004 | 0x008 | 0x080 | 0x100 | 0x200 | 0x400


class ChangeWatch:
    """Wakes when a file in one of ``directories`` changes, or the process ``pid`` exits."""

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
        """Return once something changed since the last return (or since entering)."""
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


class Changes:
    """A :class:`Notifier` awaited as a :class:`ChangeWatch`: no change after a look is lost."""

    def __init__(self, notifier: Notifier) -> None:
        self._notifier = notifier
        self._event: anyio.Event | None = None

    def __enter__(self) -> Changes:
        self._event = self._notifier.event
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass

    async def wait(self) -> None:
        """Return once the notifier was notified since the last return (or since entered)."""
        assert self._event is not None, "enter the watch first"
        await self._event.wait()
        self._event = self._notifier.event
