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
    """What a scheduler would submit for an app (``torchx.specs.api.AppDryRunInfo``).

    Args:
        request: the scheduler's own request object.
        fmt: turns the request into text; ``str(info)`` calls it.
        app: the app; ``Runner.dryrun`` sets it.
        scheduler: the scheduler's registered name; ``Runner.dryrun`` sets it.
        cfg: the run options with defaults filled in (read-only).
    """

    request: T
    fmt: Callable[[T], str] = attrs.field(default=repr)
    app: AppDef | None = attrs.field(default=None, kw_only=True)
    scheduler: str | None = attrs.field(default=None, kw_only=True)
    cfg: Mapping[str, CfgVal] = attrs.field(factory=dict, kw_only=True)

    @property
    def _app(self) -> AppDef | None:
        return self.app

    @property
    def _scheduler(self) -> str | None:
        return self.scheduler

    def __repr__(self) -> str:
        return self.fmt(self.request)
