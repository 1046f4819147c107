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
    """Return ``obj`` as JSON-able data, unset values (TorchX's placeholders) as ``None``.

    Args:
        obj: an attrs spec object, or a list of them.
    """
    from asynctorchx.specs.converter import converter

    return _nulls(converter.unstructure(obj))


def to_json_with_nulls(obj: object) -> str:
    """Encode ``obj`` as indented JSON, unset values (TorchX's placeholders) as ``null``.

    What ``describe --json`` and ``list --json`` print: an unset value is ``null``, never
    TorchX's string ``"<NONE>"``.

    Args:
        obj: an attrs spec object, or a list of them.
    """
    return json.dumps(unstructure_with_nulls(obj), indent=2)


def print_json_line(data: Mapping[str, Any]) -> None:
    """Print ``data`` as one line of JSON on stdout (``run --json``: JSON Lines).

    Args:
        data: a JSON-able mapping.
    """
    print(json.dumps(data), flush=True)


#: ANSI colours of the ``role/replica`` prefixes: green, blue, magenta, cyan, yellow and
#: their bright forms (no red: it reads as an error).
_PREFIX_COLOURS = ("32", "34", "35", "36", "33", "92", "94", "95", "96", "93")


def use_colour(file: TextIO) -> bool:
    """Whether to colour what is printed on ``file``.

    Only on a terminal (as ``torchx.cli.colors``), and never when ``NO_COLOR`` is set to a
    non-empty value (https://no-color.org) or ``TERM`` is ``dumb``.

    Args:
        file: where the text goes.
    """
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return not file.closed and file.isatty()
    except (AttributeError, ValueError):  # a stream without a terminal behind it
        return False


def prefix_colour(role: str, replica_id: int) -> str:
    """Return the ANSI colour code of ``role/replica_id``'s prefix.

    Stable across runs and processes (a checksum of the role's name, not ``hash``), and
    different for consecutive replicas of a role.

    Args:
        role: the role's name.
        replica_id: the replica's id.
    """
    return _PREFIX_COLOURS[(zlib.crc32(role.encode()) + replica_id) % len(_PREFIX_COLOURS)]


def print_line(line: LogLine, file: TextIO | None = None) -> None:
    """Print a log line prefixed ``role/replica_id``; it keeps one ``\\n``.

    On a terminal the prefix has one colour per replica (TorchX colours every prefix
    green, ``torchx.cli.cmd_log``); see :func:`use_colour`.

    Args:
        line: the line and where it comes from.
        file: where to print (default: stdout).
    """
    out = file if file is not None else sys.stdout
    text = line.line if line.line.endswith("\n") else line.line + "\n"
    prefix = f"{line.role}/{line.replica_id}"
    if use_colour(out):
        prefix = f"\033[{prefix_colour(line.role, line.replica_id)}m{prefix}\033[0m"
    out.write(f"{prefix} {text}")
    out.flush()


def note(text: str) -> None:
    """Print a status line on stderr; a closed terminal (after SIGHUP) must not stop us.

    Args:
        text: the line, without its newline.
    """
    with suppress(OSError):
        print(text, file=sys.stderr, flush=True)
