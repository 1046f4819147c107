"""Reap child processes without a thread per child on Python 3.10 and 3.11.

Before 3.12, asyncio's default child watcher (``ThreadedChildWatcher``) blocks one
thread in ``waitpid`` for every live child: 1000 replicas, 1000 threads. Linux's pid
file descriptors let the event loop itself learn of an exit (``PidfdChildWatcher``,
the default from 3.12 on). :func:`use_pidfd_child_watcher` installs it for the running
loop when that is safe: asyncio, the main thread, a kernel with ``pidfd_open``.
Elsewhere (trio, other threads, 3.12+) nothing changes.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from typing import Any

_attached_loops: weakref.WeakSet[Any] = weakref.WeakSet()
_pidfd_works: bool | None = None


def _pidfd_supported() -> bool:
    global _pidfd_works
    if _pidfd_works is None:
        try:
            os.close(os.pidfd_open(os.getpid()))
            _pidfd_works = True
        except (AttributeError, OSError):
            _pidfd_works = False
    return _pidfd_works


def use_pidfd_child_watcher() -> None:
    """Make asyncio reap children through pidfds on this loop (3.10/3.11, main thread)."""
    if sys.version_info >= (3, 12) or sys.platform != "linux":
        return
    if threading.current_thread() is not threading.main_thread() or not _pidfd_supported():
        return
    import asyncio

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio (trio): it reaps children its own way
        return
    if loop in _attached_loops:
        return
    watcher = asyncio.PidfdChildWatcher()
    watcher.attach_loop(loop)
    asyncio.set_child_watcher(watcher)
    _attached_loops.add(loop)
