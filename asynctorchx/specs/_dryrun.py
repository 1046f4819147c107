"""What a scheduler would submit: :class:`AppDryRunInfo`.

As ``torchx.specs.api.AppDryRunInfo`` (TorchX 0.7.0). Re-exported by
:mod:`asynctorchx.specs.api` and :mod:`asynctorchx.specs`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import attrs

from asynctorchx.specs._app import AppDef

T = TypeVar("T")


@attrs.define
class AppDryRunInfo(Generic[T]):
    """What a scheduler would submit for an app: the request, and how to print it.

    Args:
        request: the scheduler's own request object (e.g. ``PopenRequest``, ``DockerJob``).
        fmt: turns the request into readable text; ``str(info)`` calls it.
        app: the app the request is for; ``Runner.dryrun`` sets it, and
            ``Runner.schedule`` records it as the submitted app.
        scheduler: the registered name of the scheduler that made the request;
            ``Runner.dryrun`` sets it, and ``Runner.schedule`` submits to it.

    TorchX keeps ``app`` and ``scheduler`` in the private attributes ``_app`` and
    ``_scheduler``; both names remain as aliases for code written against TorchX.
    TorchX's ``_cfg`` is gone: a backend puts what :meth:`Scheduler.schedule` needs of
    the run options into its request.
    """

    request: T
    fmt: Callable[[T], str] = attrs.field(default=repr)
    app: AppDef | None = attrs.field(default=None, kw_only=True)
    scheduler: str | None = attrs.field(default=None, kw_only=True)

    @property
    def _app(self) -> AppDef | None:
        """TorchX's name of :attr:`app` (read-only)."""
        return self.app

    @property
    def _scheduler(self) -> str | None:
        """TorchX's name of :attr:`scheduler` (read-only)."""
        return self.scheduler

    def __repr__(self) -> str:
        """The formatted request; ``str(info)`` is the same (``torchx.specs.api.AppDryRunInfo``)."""
        return self.fmt(self.request)
