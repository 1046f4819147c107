"""What every backend shares, so a backend is only its own part (``docs/architecture.md``)."""

from asynctorchx.schedulers.toolkit._concurrency import (
    background_tasks,
    gather,
    gather_results,
    race,
)
from asynctorchx.schedulers.toolkit._devices import DEVICES, get_device_mounts
from asynctorchx.schedulers.toolkit._ids import (
    TRIAL_LABEL,
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
from asynctorchx.schedulers.toolkit._polling import (
    RECONNECT_MAX_S,
    BatchedPoller,
    SharedFeed,
    answered,
)
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
from asynctorchx.schedulers.toolkit._rfc3339 import (
    format_rfc3339_ns,
    parse_rfc3339,
    parse_rfc3339_ns,
    utc_of_ns,
)
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
    "RECONNECT_MAX_S",
    "STAMPED_START",
    "TRIAL_LABEL",
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
    "answered",
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
    "parse_rfc3339",
    "parse_rfc3339_ns",
    "position_of",
    "race",
    "role_statuses",
    "sanitize_app_name",
    "symlink_error",
    "tail_blocks",
    "utc_of_ns",
    "validate_app",
    "validate_app_id",
    "validate_name",
    "validate_stop_timeout",
]
