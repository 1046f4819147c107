"""What every CLI command shares: the usage error, JSON output and printed lines."""

from __future__ import annotations

import sys
from contextlib import suppress

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
