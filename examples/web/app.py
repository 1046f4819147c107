"""An example web service over asynctorchx: submit jobs, follow them live, cancel them.

Serve it from the repository's root (``pip install -e '.[web]'``)::

    uvicorn examples.web.app:app

and open http://127.0.0.1:8000/. The endpoints:

- ``POST /jobs``: submit a job, from a component
  (``{"component": "utils.echo", "args": ["--msg", "hi"], "scheduler": "local_cwd",
  "cfg": {}}``) or a command (``{"command": ["python", "-c", "print(1)"],
  "replicas": 2}``, one role); answers 201 with the job's id and app handle, or 400
  with the message of asynctorchx's typed error when the request is wrong.
- ``GET /jobs``: the jobs this service started, with their states.
- ``GET /jobs/{id}/events``: Server-Sent Events of the job's state changes and log
  lines (:meth:`asynctorchx.runner.Runner.events`); each event's ``id:`` is its cursor,
  so a client that reconnects with ``Last-Event-ID`` resumes where it stopped.
- ``DELETE /jobs/{id}``: cancel the job (404 for an id the service does not know).
- ``GET /``: a page (``index.html``) listing the jobs with each replica's live output.

Only this machine's pages may use it (``guard.py``): ``POST`` and ``DELETE`` must be
``Content-Type: application/json`` and same-origin, the ``Host`` must be one of
``ASYNCTORCHX_WEB_HOSTS`` (127.0.0.1 and localhost by default), and a client beyond
loopback must send ``Authorization: Bearer`` with the token of ``ASYNCTORCHX_WEB_TOKEN``.

The runner belongs to the application's lifespan: entered when the server starts,
left when it stops, which terminates the ``local_cwd``/``local_dir`` jobs still
running. It is made with ``handle_signals=False`` because the server owns the signals.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TypedDict

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from asynctorchx.errors import AsyncTorchXError, SchedulerUnavailableError
from asynctorchx.runner import Runner, get_runner
from asynctorchx.specs import parse_app_handle

from .events import JobEvents
from .guard import guarded
from .jobs import BadRequest, Job, error, jobs_of, known_job, runner_of, submit

PAGE = Path(__file__).with_name("index.html")


class State(TypedDict):
    """What the lifespan hands to every request (``request.state.runner``, ``.jobs``)."""

    runner: Runner
    jobs: dict[str, Job]


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[State]:
    """Own the runner for the server's lifetime: enter it at startup, leave it at shutdown.

    Leaving the runner terminates the local jobs still running (each with its
    ``stop_timeout``); jobs on other schedulers stay detached.

    Args:
        app: the application (unused: the state goes to the requests instead).
    """
    del app
    async with get_runner(handle_signals=False) as runner:
        yield {"runner": runner, "jobs": {}}


async def submit_job(request: Request) -> Response:
    """``POST /jobs``: submit a job; 201 with its id and handle, 400 when it is wrong.

    Args:
        request: the request; its body is the job (see :func:`jobs.submit`).
    """
    try:
        body = await request.json()
    except ValueError as err:
        return error(400, f"the body is not JSON: {err}")
    if not isinstance(body, dict):
        return error(400, f"the body must be a JSON object, got {body!r}")
    try:
        app_handle, name = await submit(runner_of(request), body)
    except SchedulerUnavailableError as err:
        return error(503, str(err))
    except (BadRequest, AsyncTorchXError) as err:
        return error(400, str(err))
    job = Job(parse_app_handle(app_handle).app_id, app_handle, name)
    jobs_of(request)[job.id] = job
    return JSONResponse({"id": job.id, "app_handle": job.app_handle, "name": job.name}, 201)


async def list_jobs(request: Request) -> Response:
    """``GET /jobs``: the jobs this service started, oldest first, with their states.

    Args:
        request: the request.
    """
    runner = runner_of(request)
    jobs = []
    for job in list(jobs_of(request).values()):
        status = await runner.status(job.app_handle)
        state = "UNKNOWN" if status is None else status.state.name
        jobs.append({"id": job.id, "app_handle": job.app_handle, "name": job.name, "state": state})
    return JSONResponse(jobs)


async def cancel_job(request: Request) -> Response:
    """``DELETE /jobs/{id}``: ask the scheduler to cancel the job; 404 for an unknown id.

    Answers 202 once the cancellation is requested; the job's events end with its
    terminal state (``CANCELLED``).

    Args:
        request: the request.
    """
    job = await known_job(request)
    if job is None:
        return error(404, f"no job {request.path_params['id']!r}")
    await runner_of(request).cancel(job.app_handle)
    return JSONResponse({"id": job.id, "app_handle": job.app_handle}, 202)


async def page(request: Request) -> Response:
    """``GET /``: the page that lists the jobs and follows each one's events.

    Args:
        request: the request.
    """
    del request
    return HTMLResponse(PAGE.read_text())


def create_app(hosts: list[str] | None = None, token: str | None = None) -> Starlette:
    """Return the service: its routes, its guard, and the lifespan that owns the runner.

    Args:
        hosts: the host names it answers to (see :func:`guard.guarded`); ``None``: those
            of ``ASYNCTORCHX_WEB_HOSTS``, else 127.0.0.1 and localhost.
        token: the bearer token clients beyond loopback must send; ``None``: that of
            ``ASYNCTORCHX_WEB_TOKEN``, else such clients are refused.
    """
    return Starlette(
        routes=[
            Route("/", page),
            Route("/jobs", submit_job, methods=["POST"]),
            Route("/jobs", list_jobs, methods=["GET"]),
            Route("/jobs/{id}", cancel_job, methods=["DELETE"]),
            Route("/jobs/{id}/events", JobEvents(), methods=["GET"]),
        ],
        middleware=guarded(hosts, token),
        lifespan=lifespan,
    )


app = create_app()
