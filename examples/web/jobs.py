"""The jobs of the example service: what a request may submit, and the table of jobs.

A request body names either a component (as ``asynctorchx run`` does) or a command,
which becomes a one-role :class:`~asynctorchx.specs.AppDef`. Every mistake in the body
is a :class:`BadRequest`; what the runner refuses raises asynctorchx's typed errors
(``ComponentNotFoundException``, ``InvalidRunConfigException``, ...), whose messages
say what to fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import attrs
from starlette.requests import Request
from starlette.responses import JSONResponse

from asynctorchx.runner import Runner
from asynctorchx.specs import AppDef, AppHandle, CfgVal, Role


@attrs.frozen
class Job:
    """A job this service submitted.

    Args:
        id: the job's id in the service's URLs (the app id the scheduler gave it).
        app_handle: the app handle (``{scheduler}://{session}/{app_id}``).
        name: what was submitted: the component's name, or the command's app name.
    """

    id: str
    app_handle: AppHandle
    name: str


class BadRequest(ValueError):
    """The request body is not a job this service can submit (answered with 400)."""


def error(status_code: int, message: str) -> JSONResponse:
    """The service's error answer: ``{"error": message}`` with ``status_code``.

    Args:
        status_code: the HTTP status (400, 404, 503).
        message: what is wrong, for the client to show.
    """
    return JSONResponse({"error": message}, status_code=status_code)


def runner_of(request: Request) -> Runner:
    """The runner the lifespan entered (``request.state.runner``).

    Args:
        request: the request being served.
    """
    return cast(Runner, request.state.runner)


def jobs_of(request: Request) -> dict[str, Job]:
    """The service's jobs by id, oldest first (``request.state.jobs``).

    Args:
        request: the request being served.
    """
    return cast(dict[str, Job], request.state.jobs)


async def known_job(request: Request) -> Job | None:
    """The job the URL's ``{id}`` names, or ``None`` if the service or its scheduler forgot it.

    Args:
        request: the request being served.
    """
    job = jobs_of(request).get(request.path_params["id"])
    if job is None or await runner_of(request).status(job.app_handle) is None:
        return None
    return job


def _strings(body: Mapping[str, Any], key: str) -> list[str]:
    value = body.get(key, [])
    if not isinstance(value, list) or not all(isinstance(word, str) for word in value):
        raise BadRequest(f"{key!r} must be a list of strings, got {value!r}")
    return cast(list[str], value)


def command_app(body: Mapping[str, Any]) -> AppDef:
    """The one-role :class:`AppDef` of a ``{"command": [...]}`` request body.

    Args:
        body: ``command`` (the program and its arguments), optionally ``replicas``
            (how many copies run, default 1) and ``name`` (the app's and role's name,
            default ``command``).

    Raises:
        BadRequest: a field has the wrong type, or the command is empty.
    """
    command = _strings(body, "command")
    if not command:
        raise BadRequest("'command' must name a program: ['python', '-c', '...']")
    replicas = body.get("replicas", 1)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
        raise BadRequest(f"'replicas' must be a whole number >= 1, got {replicas!r}")
    name = body.get("name", "command")
    if not isinstance(name, str):
        raise BadRequest(f"'name' must be a string, got {name!r}")
    role = Role(name, image="", entrypoint=command[0], args=command[1:], num_replicas=replicas)
    return AppDef(name, roles=[role])


async def submit(runner: Runner, body: Mapping[str, Any]) -> tuple[AppHandle, str]:
    """Submit the job a request body describes; return its app handle and name.

    Args:
        runner: the service's runner.
        body: ``{"component": ..., "args": [...]}`` or ``{"command": [...]}`` (see
            :func:`command_app`), each with an optional ``scheduler`` (default
            ``local_cwd``) and ``cfg`` (the scheduler's run options).

    Raises:
        BadRequest: the body is not a job.
        AsyncTorchXError: the runner refused the job (its message says why).
    """
    scheduler = body.get("scheduler", "local_cwd")
    if not isinstance(scheduler, str):
        raise BadRequest(f"'scheduler' must be a string, got {scheduler!r}")
    cfg = body.get("cfg", {})
    if not isinstance(cfg, dict):
        raise BadRequest(f"'cfg' must be an object of run options, got {cfg!r}")
    run_cfg = cast(dict[str, CfgVal], cfg)
    if ("component" in body) == ("command" in body):
        raise BadRequest("give either 'component' (with 'args') or 'command'")
    component = body.get("component")
    if component is None:
        app = command_app(body)
        return await runner.run(app, scheduler, run_cfg), app.name
    if not isinstance(component, str):
        raise BadRequest(f"'component' must be a name such as 'utils.echo', got {component!r}")
    args = _strings(body, "args")
    return await runner.run_component(component, args, scheduler, run_cfg), component
