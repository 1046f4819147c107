"""RFC 3339 times in ns (Go's ``RFC3339Nano``: Docker's and the kubelet's log stamps).

``datetime`` keeps only microseconds, so the fraction is parsed apart.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

_RFC3339 = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def parse_rfc3339_ns(text: str | None) -> int | None:
    """Return ns since the epoch; ``None`` for no text, Docker's zero time or not RFC 3339."""
    if not text or text.startswith("0001-01-01"):
        return None
    match = _RFC3339.match(text)
    if match is None:
        return None
    base, fraction, zone = match.groups()
    zone = "+00:00" if zone == "Z" else zone
    seconds = int(datetime.fromisoformat(base + zone).timestamp())
    return seconds * 1_000_000_000 + int((fraction or "0")[:9].ljust(9, "0"))


def utc_of_ns(ns: int | None) -> datetime | None:
    """Ns since the epoch as an aware UTC ``datetime``; ``None`` for ``None``."""
    return None if ns is None else datetime.fromtimestamp(ns / 1e9, UTC)


def parse_rfc3339(text: str | None) -> datetime | None:
    """An RFC 3339 time (Docker's, the API server's) as an aware UTC ``datetime``; ``None``
    as :func:`parse_rfc3339_ns`."""
    return utc_of_ns(parse_rfc3339_ns(text))


def format_rfc3339_ns(ns: int) -> str:
    """Format ns since the epoch as Docker stamps log frames (Go's ``RFC3339NanoFixed``)."""
    base = datetime.fromtimestamp(ns // 1_000_000_000, UTC)
    return f"{base:%Y-%m-%dT%H:%M:%S}.{ns % 1_000_000_000:09d}Z"
