"""Replica logs of ``local_docker``: a thin re-export of the two modules that now hold them.

- :mod:`asynctorchx.schedulers.docker._log_frames`: :class:`LogLines`, the engine's log
  frames as whole lines per stream (demultiplexing, stamps, a follower's deduplication),
  and its constants (``REREAD_NS``, ``MAX_REMEMBERED_FRAMES``, ``MAX_REMEMBERED_BYTES``,
  ``STDOUT``, ``STDERR``);
- :mod:`asynctorchx.schedulers.docker._log_follow`: :func:`log_blocks`, the log requests of
  a read or of a follow across restarts (``CAUGHT_UP_FRAMES``, ``DRAIN_QUIET_SECONDS``,
  ``GONE``).
"""

from __future__ import annotations

from asynctorchx.schedulers.docker._log_follow import (
    CAUGHT_UP_FRAMES,
    DRAIN_QUIET_SECONDS,
    GONE,
    log_blocks,
)
from asynctorchx.schedulers.docker._log_frames import (
    MAX_REMEMBERED_BYTES,
    MAX_REMEMBERED_FRAMES,
    REREAD_NS,
    STDERR,
    STDOUT,
    LogLines,
)

__all__ = [
    "CAUGHT_UP_FRAMES",
    "DRAIN_QUIET_SECONDS",
    "GONE",
    "MAX_REMEMBERED_BYTES",
    "MAX_REMEMBERED_FRAMES",
    "REREAD_NS",
    "STDERR",
    "STDOUT",
    "LogLines",
    "log_blocks",
]
