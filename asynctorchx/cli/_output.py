"""What every CLI command shares: the usage error, JSON output and printed lines."""

from __future__ import annotations

import json
import os
import sys
import zlib
from collections.abc import Mapping
from contextlib import suppress
from typing import Any, TextIO

from asynctorchx.runner import LogLine


class UsageError(Exception):
    """A command line that parses but makes no sense; exits 2 like argparse errors."""


def _nulls(data: Any) -> Any:
    """``data`` with the placeholders ``<NONE>`` and ``<MISSING>`` (unset values) as ``None``."""
    from asynctorchx.specs.api import MISSING, NONE

    if isinstance(data, dict):
        return {key: _nulls(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_nulls(value) for value in data]
    return None if isinstance(data, str) and data in (NONE, MISSING) else data


def unstructure_with_nulls(obj: object) -> Any:
    """``obj`` (spec objects) as JSON-able data, TorchX's unset placeholders as ``None``."""
    from asynctorchx.specs.converter import converter

    return _nulls(converter.unstructure(obj))


def to_json_with_nulls(obj: object) -> str:
    """``obj`` as indented JSON, unset values as ``null`` (not TorchX's ``"<NONE>"``)."""
    return json.dumps(unstructure_with_nulls(obj), indent=2)


def print_json_line(data: Mapping[str, Any]) -> None:
    """Print ``data`` as one line of JSON on stdout (``run --json``: JSON Lines)."""
    print(json.dumps(data), flush=True)


#: ANSI colours of the ``role/replica`` prefixes; no red: it reads as an error.
_PREFIX_COLOURS = ("32", "34", "35", "36", "33", "92", "94", "95", "96", "93")


def use_colour(file: TextIO) -> bool:
    """Colour on a terminal (``torchx.cli.colors``), unless ``NO_COLOR`` or ``TERM=dumb``."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return not file.closed and file.isatty()
    except (AttributeError, ValueError):
        return False


def prefix_colour(role: str, replica_id: int) -> str:
    """The ANSI colour of ``role/replica_id``: a checksum, stable across processes."""
    return _PREFIX_COLOURS[(zlib.crc32(role.encode()) + replica_id) % len(_PREFIX_COLOURS)]


def print_line(line: LogLine, file: TextIO | None = None) -> None:
    """Print a log line prefixed ``role/replica_id``, coloured per replica on a terminal."""
    out = file if file is not None else sys.stdout
    text = line.line if line.line.endswith("\n") else line.line + "\n"
    prefix = f"{line.role}/{line.replica_id}"
    if use_colour(out):
        prefix = f"\033[{prefix_colour(line.role, line.replica_id)}m{prefix}\033[0m"
    out.write(f"{prefix} {text}")
    out.flush()


def note(text: str) -> None:
    """Print a status line on stderr; a closed terminal (after SIGHUP) must not stop us."""
    with suppress(OSError):
        print(text, file=sys.stderr, flush=True)
