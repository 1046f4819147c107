"""Raising this process's open-file limit before it starts local replicas.

Each live replica holds file descriptors in the supervising process: the read ends of
its stdout and stderr pipes, a pid file descriptor on Linux (asyncio's
``PidfdChildWatcher``, trio), and up to six log files while it writes. The common soft
limit of 1024 runs out near a hundred replicas. As servers do (nginx's
``worker_rlimit_nofile``, systemd raising its own), :func:`raise_open_file_limit` raises
the soft ``RLIMIT_NOFILE`` to the hard limit, once per process, the first time a local
app is started. The hard limit is never changed (that needs privileges). A start that
still runs out of descriptors fails with :class:`~asynctorchx.errors.OpenFileLimitError`
(:func:`start_error`).

One consequence for the rest of the program: descriptors may now be numbered above
1023, which ``select.select`` cannot watch (``selectors`` with epoll/poll can).
TorchX's ``torchx.schedulers.local_scheduler`` leaves the limit alone.
"""

from __future__ import annotations

import errno
import logging
import sys

from asynctorchx.errors import OpenFileLimitError

logger = logging.getLogger(__name__)

#: The most the soft limit is raised to when the hard limit is unlimited (Linux's
#: default ``fs.nr_open``: a larger value is refused by ``setrlimit``).
_UNLIMITED_CAP = 1 << 20

_raised = False


def raise_open_file_limit() -> None:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit, once per process; never raises.

    A failure (a platform without ``resource``, a limit the kernel refuses) is logged
    at debug level and leaves the limit as it was.
    """
    global _raised
    if _raised or sys.platform == "win32":
        return
    _raised = True
    import resource

    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = _UNLIMITED_CAP if hard == resource.RLIM_INFINITY else hard
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            logger.debug("raised the open-file limit from %d to %d", soft, target)
    except (OSError, ValueError) as error:
        logger.debug("could not raise the open-file limit: %s", error)


def start_error(app_id: str, error: OSError) -> OSError:
    """The error a failed first start of ``app_id`` raises: ``error`` itself, or, when
    this process ran out of file descriptors (``EMFILE``, ``ENFILE``), an
    :class:`~asynctorchx.errors.OpenFileLimitError` caused by it.

    Args:
        app_id: the app whose replica could not start.
        error: what starting the replica raised.
    """
    if error.errno in (errno.EMFILE, errno.ENFILE):
        typed = OpenFileLimitError(error.errno, app_id, str(error))
        typed.__cause__ = error
        return typed
    return error
