"""``GET /jobs/{id}/events``: a job's events as Server-Sent Events, resumable.

Every request for a job's events subscribes to the job's one feed
(:meth:`asynctorchx.runner.Runner.subscribe`): the job's logs are read once however many
browsers follow it, and each batch of events arrives with its Server-Sent Events frames
made once for all of them (``event:`` ``state`` or ``log``, ``data:`` the event's JSON,
``id:`` its cursor), written to each connection in one write. A browser's
``EventSource`` sends the last ``id`` it received back as ``Last-Event-ID`` when it
reconnects, and the stream resumes right after that event, with nothing repeated or
lost: after a dropped connection, and after a browser too slow to keep up was cut off
(its stream ends, and it reconnects by itself).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from asynctorchx.errors import InvalidCursorError, UnknownAppException
from asynctorchx.runner import SubscriberCutOff, Subscription

from .jobs import error, known_job, runner_of

#: seconds between the comments that keep an idle stream's connection open
PING_INTERVAL = 15
#: seconds a stream has to end itself at server shutdown before sse-starlette cuts it
SHUTDOWN_GRACE = 5
#: milliseconds a browser waits before it reconnects a dropped stream (SSE ``retry:``)
RECONNECT_DELAY = 1000


async def _server_sent(subscription: Subscription) -> AsyncIterator[bytes]:
    """The ``retry:`` delay, then the events as their frames: each batch with those
    ready behind it (a browser that fell behind), in one write.

    It ends after the job's last event, when the subscription is closed (the server's
    shutdown), or when the browser did not keep up and was cut off: its ``EventSource``
    then reconnects from the last event it received.
    """
    yield f"retry: {RECONNECT_DELAY}\n\n".encode()
    with contextlib.suppress(SubscriberCutOff):
        async for batch in subscription:
            if ready := subscription.take_ready():
                yield b"".join([batch.sse(), *(later.sse() for later in ready)])
            else:
                yield batch.sse()


async def _close_at(shutdown: anyio.Event, subscription: Subscription) -> None:
    """Close ``subscription`` once the server shuts down, so that its stream ends itself."""
    await shutdown.wait()
    subscription.close()


class JobEvents:
    """``GET /jobs/{id}/events``: the job's events as ``text/event-stream``.

    An ASGI application (a class, so that Starlette hands it the raw request). The
    subscription to the job's feed is made before the response starts, so that a cursor
    the runner refuses is answered with 400 rather than a broken stream, and left after
    the response ends, in the same task. ``Last-Event-ID`` (or ``?cursor=``) resumes
    after that event; an unknown job gets 404. The stream ends after the job's terminal
    state, when the client goes away or is cut off, or when the server shuts down
    (sse-starlette sets ``shutdown_event`` then, one task per request closes the
    subscription and the stream ends itself, so that the server can close the
    connections and the lifespan can leave the runner).
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
                subscription = await stack.enter_async_context(
                    runner_of(request).subscribe(job.app_handle, cursor=cursor)
                )
            except UnknownAppException:  # its scheduler forgot it since
                response = error(404, f"no job {job.id!r}")
            except InvalidCursorError as err:  # malformed, or another app's
                response = error(400, str(err))
            else:
                shutdown = anyio.Event()
                response = EventSourceResponse(
                    _server_sent(subscription),
                    ping=PING_INTERVAL,
                    shutdown_event=shutdown,
                    shutdown_grace_period=SHUTDOWN_GRACE,
                )
                watcher = await stack.enter_async_context(anyio.create_task_group())
                watcher.start_soon(_close_at, shutdown, subscription)
                stack.callback(watcher.cancel_scope.cancel)
            await response(scope, receive, send)
