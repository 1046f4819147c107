"""Load entry points by group and name, as ``torchx.util.entrypoints``.

The installed distributions are read again only when ``sys.path`` or its directories change.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any, Protocol

from asynctorchx.errors import EntryPointNotFoundError

__all__ = ["entry_points", "invalidate_caches", "load", "load_group"]


class _Installed(Protocol):
    """What :func:`importlib.metadata.entry_points` returns without arguments."""

    def select(self, *, group: str) -> metadata.EntryPoints: ...


def _sources() -> tuple[object, ...]:
    """What :func:`importlib.metadata.entry_points` would read now, as a comparable key."""
    stamps: list[tuple[str, int, int, int] | tuple[str, None]] = []
    for entry in sys.path:
        try:
            info = os.stat(entry or ".")
        except (OSError, TypeError, ValueError):
            stamps.append((str(entry), None))
            continue
        stamps.append((entry, info.st_dev, info.st_ino, info.st_mtime_ns))
    return (metadata.entry_points, tuple(stamps))


@functools.lru_cache(maxsize=1)
def _read(sources: tuple[object, ...]) -> _Installed:
    """The installed entry points, read again only when ``sources`` (:func:`_sources`) change."""
    return metadata.entry_points()


def invalidate_caches() -> None:
    """Forget the last read; needed only after an ``entry_points.txt`` changed in place."""
    _read.cache_clear()


def entry_points(group: str) -> metadata.EntryPoints:
    """Every installed entry point of ``group`` (empty when there are none).

    Args:
        group: the entry point group, e.g. ``"asynctorchx.components"``.
    """
    return _read(_sources()).select(group=group)


def load(group: str, name: str, default: Any = None) -> Any:
    """Load the entry point ``name`` of ``group``: the function or module it names.

    Args:
        group: the entry point group, e.g. ``"asynctorchx.components"``.
        name: the entry's name in that group.
        default: returned when there is no such entry; ``None``: raise instead.

    Raises:
        EntryPointNotFoundError: no entry ``name`` in ``group`` and no ``default``.
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

    A function entry is called with the loader's arguments; a module entry ignores them.

    Args:
        group: the entry point group.
        default: returned when the group has no entries (``None`` by default).
    """
    entries = entry_points(group)
    if len(entries) == 0:
        return default
    return {entry.name: _deferred(entry) for entry in entries}
