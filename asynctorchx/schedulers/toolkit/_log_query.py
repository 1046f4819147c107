"""``LogQuery``: TorchX's ``log_iter`` arguments as one value, validated once."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs

from asynctorchx.schedulers._responses import Stream


def _check_replica_index(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"replica id k={value!r} is not a replica id: use 0, 1, ...")


def _to_stream(value: Stream | str | None) -> Stream | None:
    if value is None or isinstance(value, Stream):
        return value
    try:
        return Stream(value)
    except ValueError:
        choices = ", ".join(stream.value for stream in Stream)
        raise ValueError(f"streams={value!r} is not a log stream: use one of {choices}") from None


@attrs.frozen
class LogQuery:
    """Which log lines to read, of which replica, and whether to follow.

    Args:
        role_name: the role whose replica is read.
        k: the replica id, 0-based.
        regex: keep only lines in which it matches (``re.search``).
        since: skip lines written before it (a naive datetime is local time).
        until: stop at the first line written after it.
        should_tail: follow until the app is terminal and every line was yielded.
        streams: a :class:`Stream` or its value; ``None``: the backend's default.

    Raises:
        ValueError: ``k`` is not an int >= 0, ``regex`` does not compile, or a bad ``streams``.
    """

    role_name: str
    k: int = attrs.field(default=0, validator=_check_replica_index)
    regex: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    should_tail: bool = False
    streams: Stream | None = attrs.field(default=None, converter=_to_stream)
    pattern: re.Pattern[str] | None = attrs.field(init=False, eq=False, repr=False)

    @pattern.default
    def _pattern(self) -> re.Pattern[str] | None:
        if self.regex is None:
            return None
        try:
            return re.compile(self.regex)
        except re.error as error:
            raise ValueError(f"regex {self.regex!r} is not a regular expression: {error}") from None

    @property
    def since_timestamp(self) -> float | None:
        """``since`` in seconds since the epoch, or ``None``."""
        return self.since.timestamp() if self.since is not None else None

    @property
    def until_timestamp(self) -> float | None:
        """``until`` in seconds since the epoch, or ``None``."""
        return self.until.timestamp() if self.until is not None else None

    @property
    def has_time_bounds(self) -> bool:
        """Whether ``since`` or ``until`` is set."""
        return self.since is not None or self.until is not None

    def stream_or(self, default: Stream) -> Stream:
        """The stream to read: ``streams``, or the backend's ``default`` when it is ``None``."""
        return self.streams if self.streams is not None else default

    def matches(self, line: str) -> bool:
        """Whether ``line`` passes ``regex`` (always, without one)."""
        return self.pattern is None or self.pattern.search(line) is not None

    def check_replica(self, app_id: str, replica_counts: Mapping[str, int]) -> None:
        """Raise ``ValueError`` unless the app has this role and replica (role -> replica count)."""
        count = replica_counts.get(self.role_name)
        if count is None:
            roles = ", ".join(replica_counts) or "none"
            raise ValueError(f"app {app_id!r} has no role {self.role_name!r}; its roles: {roles}")
        if self.k >= count:
            raise ValueError(
                f"role {self.role_name!r} of app {app_id!r} has replicas 0..{count - 1},"
                f" not {self.k}"
            )
