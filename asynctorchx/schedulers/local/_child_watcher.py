"""Reap child processes without a thread per child on Python 3.10 and 3.11.

Before 3.12, asyncio's default child watcher (``ThreadedChildWatcher``) blocks one
thread in ``waitpid`` for every live child: 1000 replicas, 1000 threads. Linux's pid
file descriptors let the event loop itself learn of an exit (``PidfdChildWatcher``,
the default from 3.12 on). :func:`use_pidfd_child_watcher` installs it for the running
loop when that is safe: asyncio, the main thread, a kernel with ``pidfd_open``.
Elsewhere (trio, other threads, 3.12+) nothing changes.

The watcher installed here also tells :mod:`._subreaper` which children it reaps (from
the ``fork`` on, before ``open_process`` returns the process): those are never
descendants to sweep, so a sweep that runs while a replica is being started does not
read the new child's ``/proc`` entries to find that out.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from asynctorchx.schedulers.local import _subreaper

if TYPE_CHECKING:  # annotations only (typing has them from 3.11 on)
    from typing_extensions import TypeVarTuple, Unpack

    Ts = TypeVarTuple("Ts")

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
    watcher = _registering_watcher()
    watcher.attach_loop(loop)
    asyncio.set_child_watcher(watcher)
    _attached_loops.add(loop)


_watcher_class: type[Any] | None = None


def _registering_watcher() -> Any:
    """A new ``asyncio.PidfdChildWatcher`` that keeps :mod:`._subreaper` told of the
    children it watches (registered at ``add_child_handler``, unregistered once reaped).

    The class is made on first use: ``PidfdChildWatcher`` is gone from asyncio in 3.14.
    """
    global _watcher_class
    if _watcher_class is None:
        import asyncio

        class RegisteringWatcher(asyncio.PidfdChildWatcher):
            def add_child_handler(
                self,
                pid: int,
                callback: Callable[[int, int, Unpack[Ts]], object],
                *args: Unpack[Ts],
            ) -> None:
                _subreaper.register(pid)

                def reaped(pid: int, returncode: int, *args: Unpack[Ts]) -> object:
                    _subreaper.unregister(pid)
                    return callback(pid, returncode, *args)

                super().add_child_handler(pid, reaped, *args)

        _watcher_class = RegisteringWatcher
    return _watcher_class()
