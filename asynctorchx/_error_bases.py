"""The error bases, importing nothing of the package so that :mod:`asynctorchx.errors` can
re-export a backend's errors without an import cycle; import them from there."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class AsyncTorchXError(Exception):
    """Base class of every error raised on purpose by asynctorchx."""


class InvalidRunConfigException(AsyncTorchXError, ValueError):
    """A run config (``cfg``) does not match the scheduler's ``runopts`` (TorchX's name)."""

    def __init__(
        self, message: str, cfg_key: str | None = None, cfg: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.cfg_key = cfg_key
        self.cfg = cfg


class SchedulerUnavailableError(AsyncTorchXError, RuntimeError):
    """A scheduler cannot be used here (no Docker engine, unsupported event loop)."""


class SchedulerUnreachableError(SchedulerUnavailableError):
    """The scheduler's engine does not answer now (down, or restarting): a ``wait`` goes on
    waiting through it; a one-off call (``status``, ``describe``) raises it."""


class SchedulerRequestError(AsyncTorchXError, RuntimeError):
    """The backend (Docker engine, Kubernetes API server, Slurm command) refused a request."""
