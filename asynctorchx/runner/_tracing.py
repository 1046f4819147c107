"""OpenTelemetry spans of an app group (``asynctorchx.group``), its apps (``asynctorchx.app``)
and each app's wait in its scheduler's queue (``asynctorchx.app.queue_wait``, child of its app's).

Without the ``otel`` extra or a recording provider, :func:`open_group_trace` returns ``None``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING

from asynctorchx.specs.api import AppDef, AppHandle, AppState, AppStatus, parse_app_handle

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer


def open_group_trace(fail_fast: bool, stop_timeout: float) -> GroupTrace | None:
    """Start the span of a group; ``None`` when OpenTelemetry is absent or not recording."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    tracer = trace.get_tracer("asynctorchx")
    span = tracer.start_span(
        "asynctorchx.group",
        attributes={
            "asynctorchx.group.fail_fast": fail_fast,
            "asynctorchx.group.stop_timeout": stop_timeout,
        },
    )
    if not span.is_recording():
        return None
    return GroupTrace(tracer, span)


class GroupTrace:
    """The span of one group, parent of its apps' spans."""

    def __init__(self, tracer: Tracer, span: Span) -> None:
        self._tracer = tracer
        self._span = span

    def current(self) -> AbstractContextManager[object]:
        """Make the group's span current, parent of the block's own spans."""
        from opentelemetry import trace

        # end() records what left the block, once
        return trace.use_span(
            self._span, end_on_exit=False, record_exception=False, set_status_on_exception=False
        )

    def app(self, app: AppDef, scheduler: str) -> AppTrace:
        """Start the span of ``app``, about to be submitted to ``scheduler``."""
        from opentelemetry import trace

        span = self._tracer.start_span(
            "asynctorchx.app",
            context=trace.set_span_in_context(self._span),
            attributes={
                "asynctorchx.scheduler": scheduler,
                "asynctorchx.app.name": app.name,
                "asynctorchx.app.roles": [role.name for role in app.roles],
                "asynctorchx.app.replicas": sum(role.num_replicas for role in app.roles),
            },
        )
        return AppTrace(span, self._tracer)

    def end(self, error: BaseException | None, failed: AppHandle | None) -> None:
        """End the group's span, with what left the block and the app that failed it."""
        _end(self._span, None if failed is None else f"{failed} failed", error)


class AppTrace:
    """The span of one app of a group."""

    def __init__(self, span: Span, tracer: Tracer) -> None:
        self._span = span
        self._tracer = tracer
        self._state: AppState | None = None
        self._reason: str | None = None
        self._queued = False

    def submitted(self, handle: AppHandle) -> None:
        """The scheduler accepted the app as ``handle``."""
        self._span.set_attribute("asynctorchx.app.handle", handle)
        self._span.set_attribute("asynctorchx.app.id", parse_app_handle(handle).app_id)
        self._span.add_event("submitted")
        self._state = AppState.SUBMITTED

    def not_submitted(self, error: BaseException) -> None:
        """The submit failed with ``error``; the span ends."""
        _end(self._span, error=error)

    def changed(self, status: AppStatus) -> None:
        """The app was seen in ``status``: an event if its state is new; once it has both
        ``submitted`` and ``started``, its queue-wait span between them (with the last
        ``pending_reason`` seen)."""
        if status.state != self._state:
            self._state = status.state
            self._span.add_event(status.state.name.lower())
        self._reason = status.pending_reason or self._reason
        if self._queued or status.submitted is None or status.started is None:
            return
        from opentelemetry import trace

        self._queued = True
        reason = {} if self._reason is None else {"asynctorchx.app.pending_reason": self._reason}
        wait = self._tracer.start_span(
            "asynctorchx.app.queue_wait",
            context=trace.set_span_in_context(self._span),
            start_time=_ns(status.submitted),
            attributes=reason,
        )
        wait.end(end_time=_ns(status.started))

    def ended(self, status: AppStatus | None) -> None:
        """The app ended in ``status`` (``None``: not followed to its end); the span ends."""
        if status is None:
            _end(self._span, "still running when the group ended")
            return
        self.changed(status)
        self._span.set_attribute("asynctorchx.app.state", status.state.name)
        from asynctorchx.runner._journal import exit_code  # loaded only while recording

        code = exit_code(status)
        if code is not None:
            self._span.set_attribute("asynctorchx.app.exit_code", code)
        failed = status.state != AppState.SUCCEEDED
        _end(self._span, status.msg or status.state.name if failed else None)


def _ns(at: datetime) -> int:
    return round(at.timestamp() * 1e9)


def _end(span: Span, error_status: str | None = None, error: BaseException | None = None) -> None:
    """End ``span``, status ``ERROR`` with ``error_status`` or the type of ``error``."""
    from opentelemetry.trace import Status, StatusCode

    if error is not None:
        span.record_exception(error)
        error_status = type(error).__name__
    if error_status is not None:
        span.set_status(Status(StatusCode.ERROR, error_status))
    span.end()
