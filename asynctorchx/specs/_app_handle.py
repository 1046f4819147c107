"""App handles ``{scheduler}://{session_name}/{app_id}`` (``torchx.specs.api``)."""

from __future__ import annotations

import re
from typing import NamedTuple

from asynctorchx.errors import MalformedAppHandleException

#: An app handle: ``{scheduler}://{session_name}/{app_id}``.
AppHandle = str


class ParsedAppHandle(NamedTuple):
    """The parts of an app handle; a named tuple, as TorchX's.

    Args:
        scheduler_backend: the scheduler's name, e.g. ``local_cwd``.
        session_name: the runner session that started the app (never empty).
        app_id: the id the scheduler gave the app.
    """

    scheduler_backend: str
    session_name: str
    app_id: str


# fullmatch, not match with `$`: `$` also matches before a trailing newline. The session
# name may not be empty (``local_cwd:///app`` is refused, as ``torchx.specs.api`` does).
_APP_HANDLE = re.compile(
    r"(?P<scheduler_backend>[^:/\s]+)://(?P<session_name>[^/]+)/(?P<app_id>.+)"
)


def make_app_handle(scheduler_backend: str, session_name: str, app_id: str) -> AppHandle:
    """Return the handle ``{scheduler_backend}://{session_name}/{app_id}``."""
    return f"{scheduler_backend}://{session_name}/{app_id}"


def parse_app_handle(app_handle: AppHandle) -> ParsedAppHandle:
    """Split ``{scheduler_backend}://{session_name}/{app_id}`` (the id may hold ``/``).

    Raises:
        MalformedAppHandleException: not of that form, every part non-empty.
    """
    match = _APP_HANDLE.fullmatch(app_handle)
    if match is None:
        raise MalformedAppHandleException(app_handle)
    return ParsedAppHandle(**match.groupdict())
