"""Load entry points by group and name, as ``torchx.util.entrypoints`` (TorchX 0.7.0).

:func:`load_group` returns deferred loaders, so a broken plugin fails only when its entry
is used. :func:`entry_points` keeps the last read of the installed distributions while
``sys.path`` and its directories (identity, modification time) are unchanged: one CLI run
asks for several groups. A program that edits an ``entry_points.txt`` in place calls
:func:`invalidate_caches`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any, Protocol

from asynctorchx.errors import EntryPointNotFoundError

__all__ = ["entry_points", "invalidate_caches", "load", "load_group"]


class _Installed(Protocol):
    """What :func:`importlib.metadata.entry_points` returns without arguments: every
    entry point (``EntryPoints``; ``SelectableGroups`` before Python 3.12)."""

    def select(self, *, group: str) -> metadata.EntryPoints:
        """The entry points of ``group``."""


#: The last read: (what it was read from, every entry point then installed).
_last_read: tuple[tuple[object, ...], _Installed] | None = None


def _sources() -> tuple[object, ...]:
    """What :func:`importlib.metadata.entry_points` would read now, as a comparable key:
    the function, and each ``sys.path`` entry with its directory's identity and
    modification time (``None`` for an entry that is no directory or file)."""
    stamps: list[tuple[str, int, int, int] | tuple[str, None]] = []
    for entry in sys.path:
        try:
            info = os.stat(entry or ".")
        except (OSError, TypeError, ValueError):  # missing, or not a path at all
            stamps.append((str(entry), None))
            continue
        stamps.append((entry, info.st_dev, info.st_ino, info.st_mtime_ns))
    return (metadata.entry_points, tuple(stamps))


def _all_entry_points() -> _Installed:
    """Every installed entry point, read again only when :func:`_sources` changed."""
    global _last_read
    sources = _sources()
    if _last_read is None or _last_read[0] != sources:
        _last_read = (sources, metadata.entry_points())
    return _last_read[1]


def invalidate_caches() -> None:
    """Forget the last read: the next :func:`entry_points` reads the distributions again.

    Only needed after an ``entry_points.txt`` was changed in place; installing or removing
    a distribution, or changing ``sys.path``, is seen without it.
    """
    global _last_read
    _last_read = None


def entry_points(group: str) -> metadata.EntryPoints:
    """Every installed entry point of ``group`` (empty when there are none).

    Read through the last read of every group while nothing it came from changed (see
    the module).

    Args:
        group: the entry point group, e.g. ``"asynctorchx.components"``.
    """
    return _all_entry_points().select(group=group)


def load(group: str, name: str, default: Any = None) -> Any:
    """Load the entry point ``name`` of ``group``: the function or module it names.

    Args:
        group: the entry point group, e.g. ``"asynctorchx.components"``.
        name: the entry's name in that group.
        default: returned when there is no such entry; ``None``: raise instead.

    Raises:
        EntryPointNotFoundError: (a ``KeyError``) no entry ``name`` in ``group`` and no
            ``default``.
        Exception: whatever importing the named module raises.
    """
    entries = entry_points(group)
    if name not in entries.names:
        if default is not None:
            return default
        raise EntryPointNotFoundError(group, name, entries.names)
    return entries[name].load()


def _deferred(entry: metadata.EntryPoint) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        loaded = entry.load()
        if entry.attr is None:  # a module: the arguments are ignored
            return loaded
        return loaded(*args, **kwargs)

    return run


def load_group(
    group: str, default: Mapping[str, Any] | None = None
) -> dict[str, Callable[..., Any]] | Mapping[str, Any] | None:
    """Return ``{name: loader}`` for every entry of ``group``, each loaded when called.

    Calling a loader loads its entry: a function entry is called with the loader's
    arguments (``load_group("g")["bar"]("x")`` is ``pkg.mod.bar_fn("x")``); a module
    entry returns the module and ignores them.

    Args:
        group: the entry point group.
        default: returned when the group has no entries (``None`` by default).
    """
    entries = entry_points(group)
    if len(entries) == 0:
        return default
    return {entry.name: _deferred(entry) for entry in entries}
