"""The value types a scheduler returns: ``DescribeAppResponse``, ``ListAppResponse``, ``Stream``.

TorchX defines them in ``torchx.schedulers.api``; that import path re-exports them. They
live apart from the ``Scheduler`` class so that the scheduler toolkit can build them
without importing the interface it serves.
"""

from __future__ import annotations

import enum
from datetime import datetime

import attrs

from asynctorchx.specs.api import NONE, AppState, EndCause, Role, RoleStatus


class Stream(str, enum.Enum):
    """Which output stream ``log_iter`` reads (TorchX's ``torchx.schedulers.api``)."""

    STDOUT = "stdout"
    STDERR = "stderr"
    COMBINED = "combined"


@attrs.define
class DescribeAppResponse:
    """What ``Scheduler.describe`` knows of an app (TorchX's ``torchx.schedulers.api``).

    Args:
        app_id: the app's id on its scheduler.
        state: its state.
        num_restarts: restarts so far (``-1``: unknown).
        msg: a free-form message.
        structured_error_msg: a JSON error (the earliest replica error file), or ``<NONE>``.
        ui_url: where to look at it (``file://`` log dir for local schedulers).
        roles_statuses: per role, the replicas' statuses.
        roles: the app's roles as submitted (TorchX leaves them empty; we do not).
        metadata: the app's metadata where the scheduler keeps it (``AppDef.metadata``),
            else empty (added to TorchX after 0.7.0).
        cause: why the app ended, once terminal (``None``: not ended, or not said).
        pending_reason: why it waits while ``PENDING``, in the backend's words, else ``None``.
        submitted: when it was submitted, an aware UTC ``datetime``; ``None``: not said.
        started: when its first replica started, likewise.
        ended: when its last replica ended, once terminal, likewise (asynctorchx's four).
    """

    app_id: str = "<NOT_SET>"
    state: AppState = AppState.UNSUBMITTED
    num_restarts: int = -1
    msg: str = NONE
    structured_error_msg: str = NONE
    ui_url: str | None = None
    roles_statuses: list[RoleStatus] = attrs.field(factory=list)
    roles: list[Role] = attrs.field(factory=list)
    metadata: dict[str, str] = attrs.field(factory=dict)
    cause: EndCause | None = None
    pending_reason: str | None = None
    submitted: datetime | None = None
    started: datetime | None = None
    ended: datetime | None = None


@attrs.define
class ListAppResponse:
    """One app in ``Scheduler.list`` / ``Runner.list`` (TorchX's ``torchx.schedulers.api``).

    Args:
        app_id: the app's id on its scheduler.
        state: its state.
        app_handle: ``{scheduler}://{session}/{app_id}``, filled in by ``Runner.list``.
        name: the app's name (``AppDef.name``) where the scheduler knows it, else ``""``
            (added to TorchX after 0.7.0).
        submitted: when the app was submitted, an aware UTC ``datetime``; ``None``: the
            scheduler does not say (asynctorchx's, not TorchX's).
        ended: when it ended (its last replica), likewise; ``None`` also while it runs.
    """

    app_id: str
    state: AppState
    app_handle: str = "<NOT_SET>"
    name: str = ""
    submitted: datetime | None = None
    ended: datetime | None = None
