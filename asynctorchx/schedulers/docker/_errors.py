"""The ``local_docker`` scheduler's errors (re-exported by :mod:`asynctorchx.errors`)."""

from __future__ import annotations

from asynctorchx._error_bases import SchedulerRequestError, SchedulerUnreachableError


class DockerEngineError(SchedulerRequestError):
    """The Docker engine answered with an HTTP error; raised instead of ``aiodocker.DockerError``
    with its ``status``, ``message`` and ``request`` (``METHOD path``)."""

    def __init__(self, status: int, message: str, request: str = "") -> None:
        where = f" to {request}" if request else ""
        super().__init__(f"the Docker engine answered {status}{where}: {message}")
        self.status = status
        self.message = message
        self.request = request


class DockerEngineUnreachableError(SchedulerUnreachableError):
    """The Docker engine does not answer: not running, stopped or restarting. ``wait`` and a
    followed log wait for it through a restart; a one-off call raises it."""
