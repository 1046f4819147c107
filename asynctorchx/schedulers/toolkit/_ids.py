"""The one app-id policy of every backend: generate, sanitise, validate (``AppDef("my app/x")``
gets ``my-app-x-<suffix>`` on every backend; TorchX leaves the cleaning to each)."""

from __future__ import annotations

import re
import secrets
import string
from typing import TypeGuard

from asynctorchx.errors import InvalidAppIdException

#: What a valid app id looks like: it is used as a path part and a container name.
APP_ID_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
#: The longest app name kept in an id (characters); the rest is cut so that an id stays a
#: usable file name (255 bytes) and container name with room for role and replica parts.
MAX_NAME_LENGTH = 100
#: Length of the random suffix of :func:`make_app_id`.
SUFFIX_LENGTH = 10

_OUTSIDE_ID = re.compile(r"[^A-Za-z0-9_.\-]+")
_DOTS = re.compile(r"\.{2,}")


def sanitize_app_name(name: str) -> str:
    """Return ``name`` made usable as the first part of an app id.

    Every run of characters outside ``[A-Za-z0-9_.-]`` and every ``..`` becomes ``-``;
    leading ``-`` and ``.`` are dropped; the result is cut to :data:`MAX_NAME_LENGTH`
    characters. An empty result is ``app``.

    Args:
        name: the app's name (``AppDef.name``), any string.
    """
    cleaned = _DOTS.sub("-", _OUTSIDE_ID.sub("-", name)).lstrip("-.")
    return cleaned[:MAX_NAME_LENGTH].rstrip("-.") or "app"


def make_app_id(app_name: str) -> str:
    """Return a new unique app id: ``{sanitised name}-{10 random characters}``.

    The suffix is a lowercase letter then 9 lowercase letters or digits from :mod:`secrets`,
    so ids and the paths named after them cannot be guessed (TorchX's ``make_unique``).

    Args:
        app_name: the app's name; see :func:`sanitize_app_name`.
    """
    alphabet = string.ascii_lowercase + string.digits
    suffix = secrets.choice(string.ascii_lowercase) + "".join(
        secrets.choice(alphabet) for _ in range(SUFFIX_LENGTH - 1)
    )
    return f"{sanitize_app_name(app_name)}-{suffix}"


def validate_app_id(app_id: str) -> str:
    """Return ``app_id`` if it is safe to use as a path part or a container name.

    Args:
        app_id: the id to check (from an app handle, a user, or :func:`make_app_id`).

    Raises:
        InvalidAppIdException: it is not a string, is empty, holds a character outside
            ``[A-Za-z0-9_.-]`` (a path separator, a space), starts with ``.`` or ``-``, or
            holds ``..``.
    """
    if not is_safe_name(app_id):
        raise InvalidAppIdException(str(app_id))
    return app_id


def is_safe_name(name: object) -> TypeGuard[str]:
    """Whether ``name`` is a string of ``[A-Za-z0-9_.-]``, not starting with ``.`` or ``-``
    and without ``..``: it cannot leave the directory it is joined to.

    The rule of app ids (:func:`validate_app_id`) and of role and session names
    (:func:`~asynctorchx.schedulers.toolkit.validate_name`, which also bounds the length).

    Args:
        name: the value to check.
    """
    return isinstance(name, str) and APP_ID_PATTERN.fullmatch(name) is not None and ".." not in name
