"""App handles ``{scheduler}://{session_name}/{app_id}`` (``torchx.specs.api``)."""

from __future__ import annotations

import re
from typing import NamedTuple

from asynctorchx.errors import MalformedAppHandleException

#: An app handle: ``{scheduler}://{session_name}/{app_id}``.
AppHandle = str


class ParsedAppHandle(NamedTuple):
    """The parts of an app handle: scheduler, session name (never empty), app id (TorchX's)."""

    scheduler_backend: str
    session_name: str
    app_id: str


# fullmatch, not `$`: `$` also matches before a trailing newline.
_APP_HANDLE = re.compile(
    r"(?P<scheduler_backend>[^:/\s]+)://(?P<session_name>[^/]+)/(?P<app_id>.+)"
)


def make_app_handle(scheduler_backend: str, session_name: str, app_id: str) -> AppHandle:
    """Return the handle ``{scheduler_backend}://{session_name}/{app_id}``."""
    return f"{scheduler_backend}://{session_name}/{app_id}"


def parse_app_handle(app_handle: AppHandle) -> ParsedAppHandle:
    """Split an app handle into its parts (the id may hold ``/``).

    Raises:
        MalformedAppHandleException: not of that form, every part non-empty.
    """
    match = _APP_HANDLE.fullmatch(app_handle)
    if match is None:
        raise MalformedAppHandleException(app_handle)
    return ParsedAppHandle(**match.groupdict())
