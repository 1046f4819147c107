"""The ``local_cwd``/``local_dir`` schedulers' errors (re-exported by :mod:`asynctorchx.errors`)."""

from __future__ import annotations

import errno

from asynctorchx._error_bases import AsyncTorchXError, InvalidRunConfigException


class OpenFileLimitError(AsyncTorchXError, OSError):
    """An app could not start for lack of file descriptors (``EMFILE``, ``ENFILE``); none runs."""

    def __init__(self, errno_value: int, app_id: str, detail: str) -> None:
        super().__init__(
            errno_value,
            f"could not start the replicas of {app_id!r}: {detail} (the open-file limit,"
            " `ulimit -n`, is too low for this many replicas: raise the soft and hard"
            " RLIMIT_NOFILE of this process, or run fewer replicas at once); nothing of"
            " the app was left running",
        )
        self.app_id = app_id


class ReplicaLaunchError(AsyncTorchXError, OSError):
    """A replica could not start its entrypoint (not on ``PATH``, not executable); none runs.
    Keeps the ``errno`` and ``filename`` of the ``OSError`` TorchX lets through."""

    def __init__(
        self, errno_value: int, role: str, replica_id: int, entrypoint: str, reason: str, fix: str
    ) -> None:
        super().__init__(
            errno_value,
            f"replica {role}/{replica_id} could not start {entrypoint!r}: {reason}; {fix}",
            entrypoint,
        )
        self.role = role
        self.replica_id = replica_id
        self.entrypoint = entrypoint

    def __str__(self) -> str:
        return str(self.strerror)


class InvalidLogDirError(InvalidRunConfigException):
    """Run option ``log_dir`` cannot hold the logs (a file, not writable, a name too long);
    raised at dry run or at submit, with nothing started."""

    def __init__(self, log_dir: str, reason: str, fix: str) -> None:
        super().__init__(f"log_dir {log_dir!r} cannot hold the logs: {reason}; {fix}", "log_dir")
        self.log_dir = log_dir


class LogsRemovedError(AsyncTorchXError, FileNotFoundError):
    """A replica's log directory is gone: something removed it after the app started (logs
    under the default ``log_dir`` are kept as long as the app's record; a ``log_dir`` you
    set is yours to keep). Raised by ``log_iter``, with ``filename`` the directory."""

    def __init__(self, app_id: str, directory: str) -> None:
        super().__init__(
            errno.ENOENT,
            f"the logs of {app_id!r} were removed from {directory!r}; to keep an app's logs"
            " for as long as its record, leave the run option log_dir unset (they then live"
            " beside the record and go with it), or keep the log_dir you chose",
            directory,
        )
        self.app_id = app_id

    def __str__(self) -> str:
        return str(self.strerror)
