"""The ``local_docker`` scheduler's errors (re-exported by :mod:`asynctorchx.errors`)."""

from __future__ import annotations

from asynctorchx._error_bases import SchedulerRequestError


class DockerEngineError(SchedulerRequestError):
    """The Docker engine answered a request with an HTTP error (4xx/5xx).

    Raised instead of ``aiodocker.DockerError``; it keeps ``status``, ``message`` and
    ``request``, as ``httpx.HTTPStatusError`` does, so a caller can tell a missing
    container (404) from a conflict (409).

    Args:
        status: the HTTP status the engine answered (Docker Engine API).
        message: the engine's message (or ours, saying how to fix it).
        request: the request, as ``METHOD path`` (e.g. ``POST containers/create``).
    """

    def __init__(self, status: int, message: str, request: str = "") -> None:
        where = f" to {request}" if request else ""
        super().__init__(f"the Docker engine answered {status}{where}: {message}")
        self.status = status
        self.message = message
        self.request = request
