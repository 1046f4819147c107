"""The session id TorchX puts in every replica's environment (``torchx.util.session``)."""

from __future__ import annotations

import functools
import os
import uuid

#: The environment variable holding the session id.
TORCHX_INTERNAL_SESSION_ID: str = "TORCHX_INTERNAL_SESSION_ID"


@functools.cache
def get_session_id_or_create_new() -> str:
    """Return this process's session id: ``$TORCHX_INTERNAL_SESSION_ID``, else a new UUID4."""
    return os.environ.get(TORCHX_INTERNAL_SESSION_ID) or str(uuid.uuid4())


def get_torchx_session_id() -> str | None:
    """Return the session id if this process has one yet (``None`` before any dry run)."""
    cached = get_session_id_or_create_new.cache_info().currsize
    return get_session_id_or_create_new() if cached else None
