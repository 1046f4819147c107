"""RFC 3339 times in nanoseconds, in one place: the stamps of Docker's and the kubelet's logs.

The Docker engine stamps log frames, and writes ``Created``/``FinishedAt``, as RFC 3339
in UTC with up to 9 fraction digits (Go's ``time.RFC3339Nano``); the kubelet prefixes
each log line of ``timestamps=true`` the same way. Python's ``datetime`` keeps only
microseconds, so the fraction is parsed apart.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

_RFC3339 = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def parse_rfc3339_ns(text: str | None) -> int | None:
    """Parse an RFC 3339 time (``Z`` or an offset, up to 9 fraction digits used) into ns.

    Args:
        text: the time, e.g. ``2024-05-01T10:00:00.123456789Z``.

    Returns:
        ns since the epoch, or ``None`` for no text, the Docker engine's zero time
        (``0001-01-01...``: never happened) or a text that is not RFC 3339.
    """
    if not text or text.startswith("0001-01-01"):
        return None
    match = _RFC3339.match(text)
    if match is None:
        return None
    base, fraction, zone = match.groups()
    zone = "+00:00" if zone == "Z" else zone
    seconds = int(datetime.fromisoformat(base + zone).timestamp())
    return seconds * 1_000_000_000 + int((fraction or "0")[:9].ljust(9, "0"))


def format_rfc3339_ns(ns: int) -> str:
    """Format ``ns`` since the epoch as RFC 3339 in UTC with 9 fraction digits (30 chars),
    as the Docker engine stamps its log frames (Go's ``RFC3339NanoFixed``).

    Args:
        ns: nanoseconds since the epoch.
    """
    base = datetime.fromtimestamp(ns // 1_000_000_000, UTC)
    return f"{base:%Y-%m-%dT%H:%M:%S}.{ns % 1_000_000_000:09d}Z"
