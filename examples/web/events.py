"""``GET /jobs/{id}/events``: a job's events as Server-Sent Events, resumable.

Each :class:`~asynctorchx.runner.StateEvent` and :class:`~asynctorchx.runner.LogEvent`
of :meth:`asynctorchx.runner.Runner.events` becomes one Server-Sent Event: ``event:``
``state`` or ``log``, ``data:`` the event's JSON, ``id:`` its cursor. A browser's
``EventSource`` sends the last ``id`` it received back as ``Last-Event-ID`` when it
reconnects, and the runner resumes right after that event, with nothing repeated or lost.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from asynctorchx.errors import InvalidCursorError, UnknownAppException
from asynctorchx.runner import AppEvent, EventStream

from .jobs import error, known_job, runner_of

#: seconds between the comments that keep an idle stream's connection open
PING_INTERVAL = 15
#: seconds a stream has to end itself at server shutdown before sse-starlette cuts it
SHUTDOWN_GRACE = 5
#: milliseconds a browser waits before it reconnects a dropped stream (SSE ``retry:``)
RECONNECT_DELAY = 1000


async def _next_event(events: EventStream, shutdown: anyio.Event) -> AppEvent | None:
    """The next event; ``None`` once the stream ended or the server is shutting down.

    An event dropped here at shutdown is not lost: the client resumes from the last
    event it received, which precedes it.
    """
    received: list[AppEvent] = []
    async with anyio.create_task_group() as race:

        async def receive() -> None:
            with contextlib.suppress(anyio.EndOfStream):
                received.append(await events.receive())
            race.cancel_scope.cancel()

        async def stop() -> None:
            await shutdown.wait()
            race.cancel_scope.cancel()

        race.start_soon(receive)
        race.start_soon(stop)
    return received[0] if received else None


async def _server_sent(
    events: EventStream, shutdown: anyio.Event
) -> AsyncIterator[ServerSentEvent]:
    """Each event as a Server-Sent Event, until the last one or the server's shutdown.

    Ending by itself at shutdown (rather than being cut by sse-starlette) lets the
    response end properly, so that the server closes the connection cleanly.
    """
    retry: int | None = RECONNECT_DELAY  # sent once, with the first event
    while (event := await _next_event(events, shutdown)) is not None:
        yield ServerSentEvent(event.to_json(), event=event.kind, id=event.cursor, retry=retry)
        retry = None


class JobEvents:
    """``GET /jobs/{id}/events``: the job's events as ``text/event-stream``.

    An ASGI application (a class, so that Starlette hands it the raw request). The
    runner's event stream is opened before the response starts, so that a cursor the
    runner refuses is answered with 400 rather than a broken stream, and closed after
    the response ends, in the same task. ``Last-Event-ID`` (or ``?cursor=``) resumes
    after that event; an unknown job gets 404. The stream ends after the job's terminal
    state, when the client goes away, or when the server shuts down (sse-starlette sets
    ``shutdown_event`` then and the stream ends itself, so that the server can close
    the connections and the lifespan can leave the runner).
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request.

        Args:
            scope: the request's ASGI scope.
            receive: the ASGI receive channel.
            send: the ASGI send channel.
        """
        request = Request(scope, receive)
        job = await known_job(request)
        if job is None:
            await error(404, f"no job {request.path_params['id']!r}")(scope, receive, send)
            return
        cursor = request.headers.get("last-event-id") or request.query_params.get("cursor")
        response: Response
        async with contextlib.AsyncExitStack() as stack:
            try:
                events = await stack.enter_async_context(
                    runner_of(request).events(job.app_handle, cursor=cursor)
                )
            except UnknownAppException:  # its scheduler forgot it since
                response = error(404, f"no job {job.id!r}")
            except InvalidCursorError as err:  # malformed, or another app's
                response = error(400, str(err))
            else:
                shutdown = anyio.Event()
                response = EventSourceResponse(
                    _server_sent(events, shutdown),
                    ping=PING_INTERVAL,
                    shutdown_event=shutdown,
                    shutdown_grace_period=SHUTDOWN_GRACE,
                )
            await response(scope, receive, send)
