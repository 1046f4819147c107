"""Overlays: request fields no ``AppDef`` or ``Role`` attribute sets (``torchx.specs.overlays``).

Dicts merge, lists append, a tuple replaces a list, anything else replaces.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Protocol

import attrs

#: Marks ``metadata[namespace]`` as written by :func:`set_overlay` (kind -> overlay).
FORMAT_KEY = "__torchx_overlays__"
_PUT = "__put__:"
_JOIN = "__join__:"
_DEL = "__del__:"


class _HasMetadata(Protocol):
    metadata: Any


def PUT(key: str) -> str:
    """An overlay key that replaces the field ``key`` instead of merging into it."""
    return _PUT + key


def JOIN(key: str, *, on: str) -> str:
    """An overlay key merging the list ``key`` item by item, matching items on the field ``on``."""
    return f"{_JOIN}{key}:{on}"


def DEL(key: str) -> str:
    """An overlay key removing the field ``key`` (its value is ignored)."""
    return _DEL + key


def _field(key: str) -> str:
    if key.startswith((_PUT, _DEL)):
        return key.partition(":")[2]
    if key.startswith(_JOIN):
        return key[len(_JOIN) :].partition(":")[0]
    return key


def _drop(base: dict[str, Any], field: str, keep: str | None = None) -> None:
    for key in [key for key in base if _field(key) == field and key != keep]:
        del base[key]


def _join(base_items: list[Any], items: Any, field: str, on: str) -> None:
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise TypeError(f"JOIN({field!r}) needs a list of dicts, got {items!r}")
    if not all(isinstance(item, dict) for item in base_items):
        raise TypeError(f"JOIN({field!r}) needs the base's {field!r} to be a list of dicts")
    by_key = {item[on]: item for item in base_items if on in item}
    for item in items:
        match = by_key.get(item[on]) if on in item else None
        if match is None:
            base_items.append(copy.deepcopy(item))
        else:
            match.update({k: copy.deepcopy(v) for k, v in item.items() if k != on})


def _merge(base: dict[str, Any], key: str, value: Any, resolve: bool) -> None:
    if key not in base:
        base[key] = list(value) if resolve and isinstance(value, tuple) else copy.deepcopy(value)
        return
    current = base[key]
    if isinstance(current, dict) and isinstance(value, dict):
        _apply(current, value, resolve)
    elif isinstance(current, list) and isinstance(value, tuple):
        base[key] = list(value)
    elif isinstance(current, list) and isinstance(value, list):
        current.extend(copy.deepcopy(value))
    elif isinstance(current, (dict, list)) or isinstance(value, (dict, list)):
        raise TypeError(
            f"overlay field {key!r}: cannot merge {type(value).__name__} into"
            f" {type(current).__name__}"
        )
    else:
        base[key] = copy.deepcopy(value)


def _apply(base: dict[str, Any], overlay: Mapping[str, Any], resolve: bool) -> None:
    for key, value in overlay.items():
        field = _field(key)
        if key.startswith(_JOIN):
            on = key[len(_JOIN) :].partition(":")[2]
            if not on:
                raise ValueError(f"overlay key {key!r} names no field to join on")
            stored = base.get(key, base.get(field))
            joined: list[Any] = copy.deepcopy(stored) if isinstance(stored, list) else []
            if stored is not None and not isinstance(stored, list):
                raise TypeError(f"JOIN({field!r}) needs the base's {field!r} to be a list")
            _join(joined, value, field, on)
            _drop(base, field)
            base[field if resolve else key] = joined
        elif resolve and key.startswith(_DEL):
            _drop(base, field)
        elif resolve and key.startswith(_PUT):
            _drop(base, field)
            base[field] = copy.deepcopy(value)
        else:  # unresolved PUT and DEL are kept for apply_overlay
            _drop(base, field, keep=key)
            if key.startswith((_PUT, _DEL)):
                base[key] = copy.deepcopy(value)
            else:
                _merge(base, key, value, resolve)


def apply_overlay(base: dict[str, Any], overlay: Mapping[str, Any]) -> None:
    """Merge ``overlay`` into ``base`` in place, operators resolved.

    Raises:
        TypeError: a dict meets a non-dict, a list a non-list, or ``JOIN`` a non-dict list.
        ValueError: a ``JOIN`` key names no field to join on.
    """
    _apply(base, overlay, resolve=True)


def set_overlay(
    target: _HasMetadata, namespace: str, kind: str, overlay: Mapping[str, Any]
) -> None:
    """Store ``overlay`` in ``target.metadata[namespace][kind]``, merged with what is there.

    Args:
        target: a ``Role`` or ``AppDef``.
        namespace: the scheduler's name (``kubernetes``).
        kind: the request type (``V1Pod``).
        overlay: the overlay dict.

    Raises:
        TypeError: ``overlay`` is not a dict, or does not merge with the stored one.
        ValueError: ``kind`` is the reserved :data:`FORMAT_KEY`.
    """
    if kind == FORMAT_KEY:
        raise ValueError(f"overlay kind {kind!r} is reserved")
    if not isinstance(overlay, Mapping):
        raise TypeError(f"an overlay is a dict, got {type(overlay).__name__}: {overlay!r}")
    kinds = target.metadata.get(namespace)
    if not isinstance(kinds, dict):
        kinds = target.metadata[namespace] = {}
    kinds[FORMAT_KEY] = True
    stored = kinds.setdefault(kind, {})
    _apply(stored, overlay, resolve=False)


def get_overlay(
    target: _HasMetadata, namespace: str, kind: str, *, flat_fallback: bool = True
) -> dict[str, Any]:
    """The overlay stored for ``(namespace, kind)``, or ``{}``.

    Args:
        target: a ``Role`` or ``AppDef``.
        namespace: the scheduler's name.
        kind: the request type.
        flat_fallback: take a ``metadata[namespace]`` not from :func:`set_overlay` as the overlay.

    Raises:
        TypeError: ``metadata[namespace]`` is a string (overlay files are not supported).
    """
    kinds = target.metadata.get(namespace)
    if isinstance(kinds, str):
        raise TypeError(
            f"metadata[{namespace!r}] is {kinds!r}: overlay files are not supported;"
            " use set_overlay with a dict"
        )
    if not isinstance(kinds, dict):
        return {}
    found = kinds.get(kind)
    if isinstance(found, dict):
        return found
    if kinds.get(FORMAT_KEY) or not flat_fallback:
        return {}
    nested = len(kinds) > 1 and all(isinstance(value, dict) for value in kinds.values())
    return {} if nested or not kinds else kinds


def validate_overlay(
    overlay: Mapping[str, Any],
    *,
    blocklist: list[str] | None = None,
    forbidden_keys: set[str] | None = None,
    overlay_name: str = "overlay",
    suggestion: str = "",
) -> None:
    """Refuse top-level overlay fields that a ``Role`` attribute sets, or that belong elsewhere.

    Args:
        overlay: the overlay.
        blocklist: fields set through ``Role``/``AppDef`` attributes instead.
        forbidden_keys: fields of another overlay kind.
        overlay_name: the kind, for the message.
        suggestion: appended to the message about ``forbidden_keys``.

    Raises:
        ValueError: a field is in ``blocklist`` or ``forbidden_keys``.
    """
    fields = [_field(key) for key in overlay]
    blocked = [field for field in fields if field in (blocklist or [])]
    if blocked:
        names = ", ".join(f"`{overlay_name}.{field}`" for field in blocked)
        raise ValueError(f"overlay fields {names} are set through the role's attributes")
    misplaced = sorted(set(fields) & (forbidden_keys or set()))
    if misplaced:
        raise ValueError(f"{overlay_name} overlay has misplaced fields {misplaced}. {suggestion}")


@attrs.frozen
class OverlaySpec:
    """One overlay kind of a scheduler: its namespace, request type and blocked fields."""

    namespace: str
    kind: str
    blocklist: tuple[str, ...] = ()

    def set(self, target: _HasMetadata, overlay: Mapping[str, Any]) -> None:
        """:func:`set_overlay` after :func:`validate_overlay` against the blocklist.

        Raises:
            ValueError: a blocked field.
        """
        validate_overlay(overlay, blocklist=list(self.blocklist), overlay_name=self.kind)
        set_overlay(target, self.namespace, self.kind, overlay)

    def get(self, target: _HasMetadata) -> dict[str, Any]:
        """The stored overlay (nested form only), validated against the blocklist.

        Raises:
            ValueError: a blocked field.
        """
        overlay = get_overlay(target, self.namespace, self.kind, flat_fallback=False)
        validate_overlay(overlay, blocklist=list(self.blocklist), overlay_name=self.kind)
        return overlay


__all__ = [
    "DEL",
    "JOIN",
    "PUT",
    "OverlaySpec",
    "apply_overlay",
    "get_overlay",
    "set_overlay",
    "validate_overlay",
]
