"""What a scheduler would submit: :class:`AppDryRunInfo` (``torchx.specs.api``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

import attrs

from asynctorchx.specs._app import AppDef
from asynctorchx.specs._runopts import CfgVal

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
        cfg: the run options the request was made with, defaults filled in;
            ``Scheduler.submit_dryrun`` sets it. Read it, never change it: a backend
            puts what :meth:`Scheduler.schedule` needs into its request.

    TorchX 0.7.0's private names ``_app`` and ``_scheduler`` remain as read-only
    aliases for code written against it.
    """

    request: T
    fmt: Callable[[T], str] = attrs.field(default=repr)
    app: AppDef | None = attrs.field(default=None, kw_only=True)
    scheduler: str | None = attrs.field(default=None, kw_only=True)
    cfg: Mapping[str, CfgVal] = attrs.field(factory=dict, kw_only=True)

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
