"""A griffe extension: the constructor of attrs classes and named tuples, as Python builds it.

griffe reads the package's source, where an ``@attrs.define`` class or a ``NamedTuple``
has no ``__init__``: attrs and ``typing`` write it when the class is created. Without one,
the ``Args:`` of such a class (``Role``, ``Resource``, ``ParsedAppHandle``...) name
parameters griffe cannot find, and ``mkdocs build --strict`` fails on every one. This
extension imports the class and gives griffe an ``__init__`` with the signature
``inspect.signature`` reports (attrs' aliases, defaults and ``init=False`` fields
included), so the documented arguments are checked against the real ones.
"""

from __future__ import annotations

import enum
import importlib
import inspect
from typing import Any

import attrs
import griffe


def _runtime_class(cls: griffe.Class) -> type[Any] | None:
    """Import the class griffe read from source; ``None`` when it cannot be found."""
    module = importlib.import_module(cls.module.path)
    found: Any = module
    for part in cls.path[len(cls.module.path) + 1 :].split("."):
        found = getattr(found, part, None)
    return found if isinstance(found, type) else None


def _is_generated(runtime: type[Any]) -> bool:
    """Whether Python writes the constructor: an attrs class or a ``NamedTuple``."""
    return attrs.has(runtime) or (issubclass(runtime, tuple) and hasattr(runtime, "_fields"))


def _annotation(value: Any) -> str:
    """An annotation as the signature shows it (a string under postponed evaluation)."""
    return value if isinstance(value, str) else getattr(value, "__name__", repr(value))


def _default(runtime: type[Any], name: str, value: Any) -> str:
    """A default as the signature shows it: ``dict()`` for an attrs factory of ``dict``."""
    if value is attrs.NOTHING:  # a factory: attrs' __init__ calls it
        for field in attrs.fields(runtime):
            if field.alias == name and isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
                return f"{getattr(field.default.factory, '__name__', 'factory')}()"
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    return repr(value)


class RuntimeSignatures(griffe.Extension):
    """Give attrs classes and named tuples the ``__init__`` Python generates for them."""

    def on_class_members(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        """Add ``__init__`` to ``cls`` when its constructor is generated at run time.

        Args:
            cls: the class griffe has just read, with its members.
            kwargs: the rest of griffe's hook arguments (unused).
        """
        del kwargs
        if "__init__" in cls.members:
            return
        runtime = _runtime_class(cls)
        if runtime is None or not _is_generated(runtime):
            return
        self_kind = griffe.ParameterKind(inspect.Parameter.POSITIONAL_OR_KEYWORD.description)
        parameters = [griffe.Parameter("self", kind=self_kind)]
        for parameter in inspect.signature(runtime).parameters.values():
            empty = inspect.Parameter.empty
            parameters.append(
                griffe.Parameter(
                    parameter.name,
                    annotation=None
                    if parameter.annotation is empty
                    else _annotation(parameter.annotation),
                    kind=griffe.ParameterKind(parameter.kind.description),
                    default=None
                    if parameter.default is empty
                    else _default(runtime, parameter.name, parameter.default),
                )
            )
        init = griffe.Function(
            "__init__", parent=cls, parameters=griffe.Parameters(*parameters), returns="None"
        )
        cls.set_member("__init__", init)
