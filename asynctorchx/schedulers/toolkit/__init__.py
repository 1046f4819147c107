"""The scheduler toolkit: what every backend shares, so a backend is only its own part.

A backend (``local``, ``docker``, ``slurm``...) subclasses
:class:`asynctorchx.schedulers.api.Scheduler` and takes the rest from here:

- app ids: :func:`make_app_id`, :func:`sanitize_app_name`, :func:`validate_app_id`;
- apps: :func:`validate_app` (roles, replicas, entrypoints, resources, :func:`check_env`)
  and :func:`validate_name`
  (role and session names, which become path parts), :func:`validate_stop_timeout`
  (the grace period before SIGKILL);
- devices: :func:`get_device_mounts` (EFA and Neuron, TorchX's table);
- states: :func:`app_state` (replicas -> app), :func:`describe_app`,
  :func:`role_statuses`;
- logs: :class:`LogQuery` (what ``log_iter`` was asked), :class:`LineAssembler`, the one
  splitter (bytes -> lines, lines longer than :data:`MAX_LINE_BYTES` cut at a character
  boundary, nothing added), :func:`has_long_line` and :func:`line_spans` (where a read's
  lines are),
  :func:`tail_blocks` (a file's lines a read at a time, each :class:`LogBlock` with the
  byte offset to read again from), :func:`lines_of` (their lines one by one) and
  :class:`Notifier` (follow a file, woken by its writer), :func:`open_for_reading` (never
  through a planted symlink), :func:`parse_rfc3339_ns` and :func:`format_rfc3339_ns`
  (log stamps);
- log positions: :data:`LogPosition` (a byte offset, a :class:`Stamped`, a
  :class:`StampedPair` or an :class:`InContainer`), :func:`position_of` (a backend's kind, checked),
  :class:`StampSkip` (resume a stamped log and skip what was delivered),
  :func:`format_position` and :func:`parse_position` (as text, in cursors);
- concurrency: :func:`gather`, :func:`gather_results`, :func:`race` (the first error
  raised as itself), :func:`background_tasks` (a block's exception raised as itself);
- waiting on one feed: :class:`SharedFeed` (one reader, many waiters; a Kubernetes watch
  is one), :class:`BatchedPoller` (for backends without events: one poll per tick for
  every waiter).

``docs/architecture.md`` walks through adding a backend with these pieces.
"""

from asynctorchx.schedulers.toolkit._concurrency import (
    background_tasks,
    gather,
    gather_results,
    race,
)
from asynctorchx.schedulers.toolkit._devices import DEVICES, get_device_mounts
from asynctorchx.schedulers.toolkit._ids import (
    make_app_id,
    sanitize_app_name,
    validate_app_id,
)
from asynctorchx.schedulers.toolkit._lines import (
    MAX_LINE_BYTES,
    LineAssembler,
    has_long_line,
    line_spans,
)
from asynctorchx.schedulers.toolkit._log_query import LogQuery
from asynctorchx.schedulers.toolkit._polling import BatchedPoller, SharedFeed
from asynctorchx.schedulers.toolkit._position import (
    STAMPED_START,
    InContainer,
    LogPosition,
    Stamped,
    StampedPair,
    StampSkip,
    format_position,
    parse_position,
    position_of,
)
from asynctorchx.schedulers.toolkit._rfc3339 import format_rfc3339_ns, parse_rfc3339_ns
from asynctorchx.schedulers.toolkit._state import (
    app_state,
    describe_app,
    role_statuses,
)
from asynctorchx.schedulers.toolkit._tail import (
    LogBlock,
    Notifier,
    lines_of,
    open_for_reading,
    symlink_error,
    tail_blocks,
)
from asynctorchx.schedulers.toolkit._validation import (
    check_env,
    validate_app,
    validate_name,
    validate_stop_timeout,
)

__all__ = [
    "DEVICES",
    "MAX_LINE_BYTES",
    "STAMPED_START",
    "BatchedPoller",
    "InContainer",
    "LineAssembler",
    "LogBlock",
    "LogPosition",
    "LogQuery",
    "Notifier",
    "SharedFeed",
    "StampSkip",
    "Stamped",
    "StampedPair",
    "app_state",
    "background_tasks",
    "check_env",
    "describe_app",
    "format_position",
    "format_rfc3339_ns",
    "gather",
    "gather_results",
    "get_device_mounts",
    "has_long_line",
    "line_spans",
    "lines_of",
    "make_app_id",
    "open_for_reading",
    "parse_position",
    "parse_rfc3339_ns",
    "position_of",
    "race",
    "role_statuses",
    "sanitize_app_name",
    "symlink_error",
    "tail_blocks",
    "validate_app",
    "validate_app_id",
    "validate_name",
    "validate_stop_timeout",
]
