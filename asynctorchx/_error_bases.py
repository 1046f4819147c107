"""The bases a backend's errors build on; import them from :mod:`asynctorchx.errors`.

They import nothing of the package, so that :mod:`asynctorchx.errors` can re-export the
errors declared in a backend's package without an import cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class AsyncTorchXError(Exception):
    """Base class of every error raised on purpose by asynctorchx."""


class InvalidRunConfigException(AsyncTorchXError, ValueError):
    """A run config (``cfg``) does not match the scheduler's ``runopts`` (TorchX's name).

    Args:
        message: what is wrong and how to fix it.
        cfg_key: the offending key, when there is one.
        cfg: the run config being resolved (TorchX's third argument).
    """

    def __init__(
        self, message: str, cfg_key: str | None = None, cfg: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.cfg_key = cfg_key
        self.cfg = cfg


class SchedulerUnavailableError(AsyncTorchXError, RuntimeError):
    """A scheduler cannot be used here (no Docker engine, unsupported event loop)."""


class SchedulerRequestError(AsyncTorchXError, RuntimeError):
    """The backend refused a request (the Docker engine, the Kubernetes API server, a Slurm
    command); the message carries the backend's own words."""
