"""Typed run options: torchx-nightly's ``StructuredOpts``, public through ``schedulers.api``."""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import textwrap
import types
from collections.abc import Iterator, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, NamedTuple, Self, Union, get_args, get_type_hints

from asynctorchx.errors import InvalidRunConfigException
from asynctorchx.specs.api import CfgVal, cases, runopt, runopts


class _Option(NamedTuple):
    """One field of a :class:`StructuredOpts` class, as a run option."""

    name: str
    key: str  # the field's ``cfg_key`` metadata, else its name
    type: Any  # ``None`` taken out of an optional
    nested: bool  # a StructuredOpts group, flattened as ``<name>.<key>``
    required: bool
    default: Any  # ``None`` for a default factory


def _unwrap_optional(tp: Any) -> Any:
    """``str | None`` -> ``str``; any other type unchanged."""
    args = [arg for arg in get_args(tp) if arg is not types.NoneType]
    if args and len(args) < len(get_args(tp)):
        return args[0] if len(args) == 1 else Union[tuple(args)]
    return tp


def _is_group(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, StructuredOpts) and tp is not StructuredOpts


@functools.cache
def _options(cls: type[StructuredOpts]) -> tuple[_Option, ...]:
    """The run options of ``cls``'s public fields (an ``_`` field is none), in order."""
    hints = get_type_hints(cls)
    found = []
    for f in fields(cls):
        if f.name.startswith("_"):
            continue
        tp = _unwrap_optional(hints.get(f.name, str))
        no_default = f.default is MISSING and f.default_factory is MISSING
        default = None if f.default is MISSING else f.default
        key = f.metadata.get("cfg_key", f.name)
        found.append(_Option(f.name, key, tp, _is_group(tp), no_default, default))
    return tuple(found)


@functools.cache
def _by_key(cls: type[StructuredOpts]) -> dict[str, _Option]:
    table = {option.name: option for option in _options(cls)}
    table.update({option.key: option for option in _options(cls)})
    return table


def _field_docstrings(cls: type) -> dict[str, str]:
    """``cls``'s own attribute docstrings on one line each; ``{}`` without source."""
    try:
        node = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    except (OSError, TypeError, SyntaxError):
        return {}
    docs: dict[str, str] = {}
    for stmt, after in itertools.pairwise(node.body if isinstance(node, ast.ClassDef) else []):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[stmt.target.id] = " ".join(after.value.value.split())
    return docs


@functools.cache
def _declared(cls: type[StructuredOpts]) -> tuple[tuple[str, runopt], ...]:
    """``cls``'s run options, cached because ``run_opts()`` runs at every dry run."""
    docs = cls.get_docstrings()
    declared: list[tuple[str, runopt]] = []
    for option in _options(cls):
        if option.nested:
            declared += [(f"{option.name}.{k}", o) for k, o in option.type.as_runopts()]
        else:
            help_ = docs.get(option.name, option.name)
            declared.append(
                (option.key, runopt(option.default, option.type, option.required, help_))
            )
    return tuple(declared)


@dataclass
class StructuredOpts(Mapping[str, CfgVal]):
    """Run options as a ``@dataclass`` that is also a read-only ``cfg`` mapping (torchx-nightly).

    Each field is an option: its annotation the type, its default the default (none:
    required), the string under it the help; ``metadata={"cfg_key": ...}`` renames it, a
    ``StructuredOpts`` field is a group ``<field>.<option>``, an ``_`` field is none. Keys
    may be camelCase; ``a | b`` merges into a ``dict``, ``b`` winning.
    """

    _extra_cfg: dict[str, CfgVal] = field(
        default_factory=dict, repr=False, compare=False, kw_only=True
    )
    """The options given to :meth:`from_cfg` that are no field."""

    @classmethod
    def from_cfg(cls, cfg: Mapping[str, CfgVal]) -> Self:
        """Make an instance from ``cfg`` (option, field or camelCase names); values unchecked.

        Raises:
            InvalidRunConfigException: an option is given under two spellings, two values.
            TypeError: a field without a default is missing from ``cfg``.
        """
        kwargs: dict[str, Any] = {}
        for option in _options(cls):
            if option.nested:
                prefix = f"{option.name}."
                group = {k[len(prefix) :]: v for k, v in cfg.items() if k.startswith(prefix)}
                if group or option.required:
                    kwargs[option.name] = option.type.from_cfg(group)
                continue
            spellings = dict.fromkeys((option.key, option.name, cases.snake_to_camel(option.name)))
            given = [key for key in spellings if key in cfg]
            if not given:
                continue
            for other in given[1:]:
                if cfg[other] != cfg[given[0]]:
                    raise InvalidRunConfigException(
                        f"run option {option.key!r} is given as {given[0]!r} and as {other!r}"
                        f" with different values: give it once, as {option.key!r}",
                        option.key,
                        cfg,
                    )
            kwargs[option.name] = cfg[given[0]]
        opts = cls(**kwargs)
        opts._extra_cfg = {key: value for key, value in cfg.items() if key not in opts}
        return opts

    def __getitem__(self, key: str) -> CfgVal:
        if not isinstance(key, str):  # Mapping's ``in`` and ``get`` catch only KeyError
            raise KeyError(key)
        prefix, dot, rest = key.partition(".")
        if dot:
            group = getattr(self, cases.camel_to_snake(prefix), None)
            if isinstance(group, StructuredOpts):
                return group[rest]
            raise KeyError(key)
        table = _by_key(type(self))
        option = table.get(key) or table.get(cases.camel_to_snake(key))
        if option is not None and not option.nested:
            value: CfgVal = getattr(self, option.name)
            return value
        if key in self._extra_cfg:
            return self._extra_cfg[key]
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        for option in _options(type(self)):
            if not option.nested:
                yield option.key
            elif (group := getattr(self, option.name)) is not None:
                yield from (f"{option.name}.{key}" for key in group)
        yield from self._extra_cfg

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __or__(self, other: StructuredOpts) -> dict[str, CfgVal]:
        """Merge into a new ``cfg`` dict, ``other``'s values winning."""
        return {**self, **other}

    @classmethod
    def get_docstrings(cls) -> dict[str, str]:
        """Return field name (``<group>.<name>`` in a group) -> its attribute docstring."""
        docs: dict[str, str] = {}
        for klass in reversed(cls.__mro__):
            own = vars(klass).get("__annotations__", {})
            if issubclass(klass, StructuredOpts) and any(not n.startswith("_") for n in own):
                docs.update(_field_docstrings(klass))
        for option in _options(cls):
            if option.nested:
                docs.update(
                    {f"{option.name}.{k}": v for k, v in option.type.get_docstrings().items()}
                )
        return {name: doc for name, doc in docs.items() if not name.startswith("_")}

    @classmethod
    def as_runopts(cls) -> runopts:
        """Return the :class:`~asynctorchx.specs.runopts` the fields declare, in field order."""
        opts = runopts()
        for key, runopt_ in _declared(cls):
            opts.add(
                key,
                type_=runopt_.opt_type,
                help=runopt_.help,
                default=runopt_.default,
                required=runopt_.is_required,
            )
        return opts
