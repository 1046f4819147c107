"""The app-id policy of every backend: generate, sanitise, validate."""

from __future__ import annotations

import re
import secrets
import string
from typing import TypeGuard

from asynctorchx.errors import InvalidAppIdException

#: What a valid app id looks like: it is used as a path part and a container name.
APP_ID_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
#: Characters of the app name kept in an id, leaving room in a 255-byte file name.
MAX_NAME_LENGTH = 100
#: Length of the random suffix of :func:`make_app_id`.
SUFFIX_LENGTH = 10
#: The label (Slurm: the comment) that names a journaled group's trial on its apps.
TRIAL_LABEL = "asynctorchx.pytorch.org/trial"

_OUTSIDE_ID = re.compile(r"[^A-Za-z0-9_.\-]+")
_DOTS = re.compile(r"\.{2,}")


def sanitize_app_name(name: str) -> str:
    """Return ``name`` with runs outside ``[A-Za-z0-9_.-]`` and ``..`` as ``-``, cut; or ``app``."""
    cleaned = _DOTS.sub("-", _OUTSIDE_ID.sub("-", name)).lstrip("-.")
    return cleaned[:MAX_NAME_LENGTH].rstrip("-.") or "app"


def make_app_id(app_name: str) -> str:
    """Return ``{sanitised name}-{10 unguessable characters}`` (TorchX's ``make_unique``)."""
    alphabet = string.ascii_lowercase + string.digits
    suffix = secrets.choice(string.ascii_lowercase) + "".join(
        secrets.choice(alphabet) for _ in range(SUFFIX_LENGTH - 1)
    )
    return f"{sanitize_app_name(app_name)}-{suffix}"


def validate_app_id(app_id: str) -> str:
    """Return ``app_id`` if :func:`is_safe_name`, else raise ``InvalidAppIdException``."""
    if not is_safe_name(app_id):
        raise InvalidAppIdException(str(app_id))
    return app_id


def is_safe_name(name: object) -> TypeGuard[str]:
    """Whether ``name`` is a ``[A-Za-z0-9_.-]`` string, not starting ``.``/``-``, without ``..``."""
    return isinstance(name, str) and APP_ID_PATTERN.fullmatch(name) is not None and ".." not in name
