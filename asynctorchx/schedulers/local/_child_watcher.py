"""Reap child processes without a thread per child on Python 3.11 (gone with 3.11)."""

from __future__ import annotations

import functools
import os
import sys
import threading
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from asynctorchx.schedulers.local import _subreaper
from asynctorchx.schedulers.local._process_identity import pidfd_supported

if TYPE_CHECKING:  # annotations only
    from typing import TypeVarTuple

    Ts = TypeVarTuple("Ts")


def use_pidfd_child_watcher() -> None:
    """Make asyncio reap children through pidfds (3.11 on Linux, from the main thread)."""
    if sys.version_info >= (3, 12) or sys.platform != "linux":
        return
    if threading.current_thread() is not threading.main_thread() or not pidfd_supported():
        return
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # not asyncio (trio): it reaps children its own way
        return
    watcher_class = _registering_watcher_class()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if isinstance(asyncio.get_child_watcher(), watcher_class):
            return
        asyncio.set_child_watcher(watcher_class())


@functools.cache
def _registering_watcher_class() -> type[Any]:
    """The class of the watcher :func:`use_pidfd_child_watcher` installs, made on first use."""
    import asyncio

    class RegisteringWatcher(asyncio.PidfdChildWatcher):
        def is_active(self) -> bool:
            return True

        def attach_loop(self, loop: Any) -> None:
            pass

        def add_child_handler(
            self,
            pid: int,
            callback: Callable[[int, int, *Ts], object],
            *args: *Ts,
        ) -> None:
            loop = asyncio.get_running_loop()
            _subreaper.OWN_CHILDREN.add(pid)
            pidfd = os.pidfd_open(pid)
            loop._add_reader(  # type: ignore[attr-defined]
                pidfd, self._reap, loop, pid, pidfd, callback, args
            )

        def _reap(
            self,
            loop: Any,
            pid: int,
            pidfd: int,
            callback: Callable[[int, int, *Ts], object],
            args: tuple[*Ts],
        ) -> None:
            loop._remove_reader(pidfd)
            try:
                _, status = os.waitpid(pid, 0)
                returncode = os.waitstatus_to_exitcode(status)
            except ChildProcessError:  # reaped elsewhere: asyncio's own convention
                returncode = 255
            finally:
                os.close(pidfd)
                _subreaper.OWN_CHILDREN.discard(pid)
            callback(pid, returncode, *args)

    return RegisteringWatcher
