"""Load entry points by group and name, as ``torchx.util.entrypoints`` (TorchX 0.7.0).

An entry point names a function (``pkg.mod:fn``) or a module (``pkg.mod``)::

    [project.entry-points."asynctorchx.components"]
    foo = "my_pkg.components"

:func:`load_group` returns deferred loaders, so a broken plugin fails only when its
entry is used. The standard library's :mod:`importlib.metadata` reads the installed
distributions (TorchX uses the ``importlib_metadata`` backport; the API is the same).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any

from asynctorchx.errors import EntryPointNotFoundError

__all__ = ["entry_points", "load", "load_group"]


def entry_points(group: str) -> metadata.EntryPoints:
    """Every installed entry point of ``group`` (empty when there are none).

    Args:
        group: the entry point group, e.g. ``"asynctorchx.components"``.
    """
    return metadata.entry_points().select(group=group)


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
