"""What every CLI command shares: the usage error, JSON output and printed lines."""

from __future__ import annotations

import json
import sys
from contextlib import suppress
from typing import Any

from asynctorchx.runner.api import LogLine


class UsageError(Exception):
    """A command line that parses but makes no sense; exits 2 like argparse errors."""


def to_json(obj: object, **dumps_kwargs: object) -> str:
    """Encode ``obj`` with the project's cattrs converter (imported only when needed).

    Args:
        obj: an attrs spec object, or a list of them.
        **dumps_kwargs: given to :func:`json.dumps` (``indent=2``).
    """
    from asynctorchx.specs.converter import to_json as encode

    return encode(obj, **dumps_kwargs)


def _nulls(data: Any) -> Any:
    """``data`` with the placeholders ``<NONE>`` and ``<MISSING>`` (unset values) as ``None``."""
    from asynctorchx.specs.api import MISSING, NONE

    if isinstance(data, dict):
        return {key: _nulls(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_nulls(value) for value in data]
    return None if isinstance(data, str) and data in (NONE, MISSING) else data


def to_json_with_nulls(obj: object) -> str:
    """Encode ``obj`` as indented JSON, unset values (TorchX's placeholders) as ``null``.

    What ``describe --json`` and ``list --json`` print (issue: never the string
    ``"<NONE>"``).

    Args:
        obj: an attrs spec object, or a list of them.
    """
    from asynctorchx.specs.converter import converter

    return json.dumps(_nulls(converter.unstructure(obj)), indent=2)


def print_line(line: LogLine) -> None:
    """Print a log line on stdout prefixed ``role/replica_id``; it keeps one ``\\n``.

    Args:
        line: the line and where it comes from.
    """
    text = line.line if line.line.endswith("\n") else line.line + "\n"
    sys.stdout.write(f"{line.role}/{line.replica_id} {text}")
    sys.stdout.flush()


def note(text: str) -> None:
    """Print a status line on stderr; a closed terminal (after SIGHUP) must not stop us.

    Args:
        text: the line, without its newline.
    """
    with suppress(OSError):
        print(text, file=sys.stderr, flush=True)
