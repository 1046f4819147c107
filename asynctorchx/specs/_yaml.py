"""A small block-style YAML writer for ``repr(AppStatus)``.

``torchx.specs.api.AppStatus.__repr__`` prints the status as a YAML document (keys
sorted, block style, as PyYAML's ``yaml.dump`` writes it). asynctorchx does not depend
on PyYAML, so this module writes the same layout for the values a status holds:
mappings, lists, strings, numbers, booleans and ``None``. Long strings are not folded
over several lines (PyYAML folds them at 80 columns); the document still reads back
the same with any YAML parser.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

# Words a YAML 1.1 reader takes for null, booleans or numbers: such strings are quoted.
_RESERVED = re.compile(
    r"~|null|true|false|yes|no|on|off|y|n|[-+]?(\.inf|\.nan)|[-+]?[0-9][0-9_.:eE+-]*|[-+]?\.[0-9]+",
    re.IGNORECASE,
)
# Characters that may not start a plain (unquoted) scalar.
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")


def _is_plain(text: str) -> bool:
    return not (
        not text
        or text != text.strip()
        or text[0] in _INDICATORS
        or text.endswith(":")
        or ": " in text
        or " #" in text
        or not text.isprintable()
        or _RESERVED.fullmatch(text)
    )


def scalar(value: Any) -> str:
    """Return ``value`` written as a YAML scalar (quoted when a reader would misread it).

    Args:
        value: ``None``, a bool, an int, a float or a string; anything else is
            written as its ``str``.

    Returns:
        ``null``, ``true``/``false``, the number, or the string: plain when safe,
        else single-quoted, else (when it holds newlines or control characters)
        double-quoted with JSON escapes. Never raises.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value)
    if _is_plain(text):
        return text
    if text.isprintable():
        return "'" + text.replace("'", "''") + "'"
    return json.dumps(text)


def _is_block(value: Any) -> bool:
    """A non-empty mapping or list: written as an indented block, not on the key's line."""
    return isinstance(value, (Mapping, list, tuple)) and len(value) > 0


def _inline(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{}"
    if isinstance(value, (list, tuple)):
        return "[]"
    return scalar(value)


def _mapping(data: Mapping[str, Any], indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    for key in sorted(data):
        value = data[key]
        if not _is_block(value):
            lines.append(f"{pad}{scalar(key)}: {_inline(value)}")
        elif isinstance(value, Mapping):
            lines.append(f"{pad}{scalar(key)}:")
            lines.extend(_mapping(value, indent + 2))
        else:  # a list inside a mapping is not indented further (PyYAML's layout)
            lines.append(f"{pad}{scalar(key)}:")
            lines.extend(_sequence(value, indent))
    return lines


def _sequence(items: Sequence[Any], indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    for item in items:
        if not _is_block(item):
            lines.append(f"{pad}- {_inline(item)}")
            continue
        nested = (
            _mapping(item, indent + 2) if isinstance(item, Mapping) else _sequence(item, indent + 2)
        )
        lines.append(f"{pad}- {nested[0].lstrip()}")
        lines.extend(nested[1:])
    return lines


def dump(data: Mapping[str, Any]) -> str:
    """Return ``data`` as a block-style YAML document, keys sorted, ending with a newline.

    Args:
        data: a mapping of strings to mappings, lists and scalars (see :func:`scalar`).

    Returns:
        The document. Never raises for such data.
    """
    return "\n".join(_mapping(data, 0)) + "\n"
