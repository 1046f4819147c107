"""The logs of the apps a local scheduler forgot: moved aside at once, removed when quiet.

A local scheduler run without ``log_dir`` writes every app's logs to its temporary
directory, removed when it closes. When it forgets a finished app beyond ``cache_size``
(TorchX's ``torchx.schedulers.local_scheduler`` does the same, keeping ``cache_size``
apps), that app's logs can no longer be read through it and are removed before then.

Removing a log directory takes about twenty file system calls (a walk, an ``unlink``
per file and an ``rmdir`` per directory), each of which can hold the event loop for a
millisecond when the disk is busy; done when the app is forgotten, that is between the
end of another app and the wake-up of its waiters. :class:`EvictedLogs` instead moves
the directory with one ``rename`` into ``<temporary directory>/.evicted`` (a session
name never starts with ``.``, so it is never an app's), so the app's log path is free
at once (a dry run scheduled again writes there, and nothing removes it later). A task
of the scheduler removes the moved directories, one at a time, when no app was
forgotten for :data:`QUIET_SECONDS` (a burst of ends is not slowed by the removals),
and at once beyond ``limit`` of them (the scheduler's ``cache_size``: the disk never
holds the logs of more than twice ``cache_size`` finished apps). What is left when the
scheduler closes goes with its temporary directory. An ``rmtree`` in a worker thread
would do the same with less code, but benchmark 4's row at M = 500 (400 apps forgotten
at the default ``cache_size``) requires no worker threads: that row guards this module.
"""

from __future__ import annotations

import collections
import logging
import os
import shutil

import anyio
import anyio.abc
import anyio.lowlevel

from asynctorchx.schedulers.toolkit import Notifier

logger = logging.getLogger(__name__)

#: Seconds without a forgotten app after which the moved log directories are removed.
QUIET_SECONDS = 0.5
#: The directory of the temporary log directory where forgotten apps' logs are moved.
EVICTED_DIRECTORY = ".evicted"


class EvictedLogs:
    """Moves the log directories of forgotten apps aside, and removes them (see the module).

    Args:
        limit: how many moved directories may wait for a quiet moment (the scheduler's
            ``cache_size``); beyond, the oldest are removed at once.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._moved: collections.deque[str] = collections.deque()
        self._count = 0
        self._last = 0.0
        self._wake: Notifier | None = None

    def evict(self, log_dir: str, root: str, task_group: anyio.abc.TaskGroup | None) -> None:
        """Move ``log_dir`` aside to be removed soon; remove it now when it cannot be moved.

        Never raises: a directory that cannot be removed is left to the removal of
        ``root`` at the scheduler's close.

        Args:
            log_dir: the forgotten app's log directory, below ``root``.
            root: the scheduler's temporary log directory.
            task_group: the scheduler's task group, where the remover task is started
                with the first move; None: the directory is removed now.
        """
        if task_group is None:
            shutil.rmtree(log_dir, ignore_errors=True)
            return
        evicted = os.path.join(root, EVICTED_DIRECTORY)
        self._count += 1
        target = os.path.join(evicted, str(self._count))
        try:
            os.makedirs(evicted, 0o700, exist_ok=True)
            os.rename(log_dir, target)
        except FileNotFoundError:
            return  # already gone (the app removed its own logs)
        except OSError as error:
            logger.debug("could not move %s aside (%s): removing it now", log_dir, error)
            shutil.rmtree(log_dir, ignore_errors=True)
            return
        self._moved.append(target)
        self._last = anyio.current_time()
        if self._wake is None:
            self._wake = Notifier()
            task_group.start_soon(self._remove_moved, self._wake)
        self._wake.notify()

    async def _remove_moved(self, wake: Notifier) -> None:
        """Remove the moved directories, oldest first, as the module says; forever."""
        while True:
            event = wake.event
            if not self._moved:
                await event.wait()
                continue
            quiet_in = self._last + QUIET_SECONDS - anyio.current_time()
            if len(self._moved) <= self.limit and quiet_in > 0:
                with anyio.move_on_after(quiet_in):
                    await event.wait()
                continue
            shutil.rmtree(self._moved.popleft(), ignore_errors=True)
            await anyio.lowlevel.checkpoint()  # what is ready runs between two removals
