"""The one cattrs converter for every encoding of the specs (enums by name, mounts tagged)."""

from __future__ import annotations

import enum
import json
from datetime import datetime
from typing import Any, TypeVar

import cattrs
from cattrs.strategies import configure_tagged_union

from asynctorchx.specs.api import AppState, Mount, RetryPolicy

T = TypeVar("T")

#: Spec objects to JSON-able data (``unstructure``) and back (``structure``).
converter = cattrs.Converter(omit_if_default=False)


def _enum_by_name(cls: type[enum.Enum]) -> None:
    converter.register_unstructure_hook(cls, lambda member: member.name)
    converter.register_structure_hook(cls, lambda value, _: cls[value])


_enum_by_name(AppState)
_enum_by_name(RetryPolicy)
configure_tagged_union(Mount, converter, tag_name="type")
converter.register_structure_hook_func(lambda cls: cls is object, lambda value, _: value)
converter.register_unstructure_hook(datetime, datetime.isoformat)
converter.register_structure_hook(datetime, lambda value, _: datetime.fromisoformat(value))


def to_json(obj: Any, **dumps_kwargs: Any) -> str:
    """Encode an attrs spec object (or a list of them) as JSON text."""
    return json.dumps(converter.unstructure(obj), **dumps_kwargs)


def from_json(text: str | bytes, cls: type[T]) -> T:
    """Decode :func:`to_json`'s text into ``cls``.

    Raises:
        json.JSONDecodeError: the text is not JSON.
        cattrs.errors.ClassValidationError: the JSON does not describe a ``cls``.
    """
    return converter.structure(json.loads(text), cls)
