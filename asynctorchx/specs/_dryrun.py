"""What a scheduler would submit: :class:`AppDryRunInfo`.

As ``torchx.specs.api.AppDryRunInfo`` (TorchX 0.7.0). Re-exported by
:mod:`asynctorchx.specs.api` and :mod:`asynctorchx.specs`.
"""

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

    The runner also records the app, the cfg and the scheduler name on it
    (``_app``, ``_cfg``, ``_scheduler``) so ``Runner.schedule`` can submit it.
    """

    request: T
    fmt: Callable[[T], str] = attrs.field(default=repr)
    _app: AppDef | None = attrs.field(default=None, init=False)
    _cfg: Mapping[str, CfgVal] | None = attrs.field(default=None, init=False)
    _scheduler: str | None = attrs.field(default=None, init=False)

    def __str__(self) -> str:
        return self.fmt(self.request)
