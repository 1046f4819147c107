"""Typed run options: :class:`StructuredOpts` (torchx-nightly's, ``torchx.schedulers.api``).

A scheduler declares its run options once, as the fields of a ``@dataclass`` subclass
(type, default, and the attribute docstring under each field as its help);
:meth:`StructuredOpts.as_runopts` makes the :class:`~asynctorchx.specs.runopts` from
them, so the options a scheduler checks and the typed view of them cannot drift.
Public through :mod:`asynctorchx.schedulers.api`, TorchX's import path.
"""

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

    name: str  # the field's name
    key: str  # the run option's name: the field's ``cfg_key`` metadata, else its name
    type: Any  # the annotation, ``None`` taken out of an optional
    nested: bool  # a StructuredOpts group, flattened as ``<name>.<key>``
    required: bool  # no default
    default: Any  # the default (``None`` for a default factory or none)


def _unwrap_optional(tp: Any) -> Any:
    """``str | None`` -> ``str``; any other type unchanged."""
    args = [arg for arg in get_args(tp) if arg is not types.NoneType]
    if args and len(args) < len(get_args(tp)):
        return args[0] if len(args) == 1 else Union[tuple(args)]
    return tp


def _is_group(tp: Any) -> bool:
    """Whether ``tp`` is a subclass of :class:`StructuredOpts` (a nested group)."""
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
    """``cls``'s options by their run option name and by their field name."""
    table = {option.name: option for option in _options(cls)}
    table.update({option.key: option for option in _options(cls)})
    return table


def _field_docstrings(cls: type) -> dict[str, str]:
    """The attribute docstrings of ``cls``'s own fields, each on one line; ``{}`` when its
    source cannot be read (a class made in an interactive session)."""
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
    """The run options ``cls`` declares (see :meth:`StructuredOpts.as_runopts`), worked
    out once per class: a scheduler's ``run_opts()`` runs at every dry run."""
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
    """A scheduler's run options as a typed dataclass that is also a read-only ``cfg`` mapping.

    torchx-nightly's ``torchx.schedulers.api.StructuredOpts``. Subclass it with
    ``@dataclass``, one field per run option: its annotation is the option's type
    (``str``, ``int``, ``float``, ``bool``, ``list[str]``, ``dict[str, str]``, any of them
    ``| None``), its default the option's default (none: the option is required), and the
    string under it its help. ``field(metadata={"cfg_key": "mail-user"})`` names an option
    no field can be named; a field typed as another ``StructuredOpts`` is a group whose
    options are named ``<field>.<option>`` (``k8s.context``). Fields starting with ``_``
    are no options.

    As a mapping its keys are the run option names (groups flattened), then the options
    :meth:`from_cfg` was given that are no field; a key may be given in camelCase
    (``opts["logDir"]``). ``a | b`` merges two into a ``dict``, ``b``'s values winning.
    The built-in schedulers hand one to their ``_submit_dryrun`` and put it in
    ``AppDryRunInfo.cfg``, as torchx-nightly does.

    Example::

        @dataclass
        class MyOpts(StructuredOpts):
            cluster: str
            '''Cluster to submit to.'''
            retries: int = 3
            '''Times to retry a failed submission.'''
    """

    _extra_cfg: dict[str, CfgVal] = field(
        default_factory=dict, repr=False, compare=False, kw_only=True
    )
    """The options given to :meth:`from_cfg` that are no field, kept so that reading
    the options back loses none."""

    @classmethod
    def from_cfg(cls, cfg: Mapping[str, CfgVal]) -> Self:
        """Make an instance from a ``cfg`` mapping, e.g. a resolved one.

        A field is read from its run option name, its field name or its camelCase
        spelling (``hpcIdentity`` for ``hpc_identity``); a group's fields from the keys
        with its prefix. Keys that are no field are kept (see the class). Values are not
        checked: :meth:`runopts.resolve` of :meth:`as_runopts` does that.

        Args:
            cfg: run option name -> value.

        Raises:
            InvalidRunConfigException: an option is given under two spellings with
                different values; the message names both.
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

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        try:
            self[key]
        except KeyError:
            return False
        return True

    def __or__(self, other: StructuredOpts) -> dict[str, CfgVal]:
        """Merge into a new ``cfg`` dict: ``self``'s options, then ``other``'s over them."""
        return {**self, **other}

    @classmethod
    def get_docstrings(cls) -> dict[str, str]:
        """Return field name -> help: each field's attribute docstring, on one line.

        A group's fields are named ``<field>.<name>``; inherited fields are read from the
        class that declares them. A field without a docstring has no entry.
        """
        docs: dict[str, str] = {}
        for klass in reversed(cls.__mro__):
            # a class declaring no public field (``StructuredOpts`` itself) has none to read
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
        """Return the :class:`~asynctorchx.specs.runopts` the fields declare, in field order.

        Each option's type is its field's annotation without ``None``, its default the
        field's (``None`` for a default factory), required when the field has no default,
        and its help the field's docstring (its name without one). A group's options
        come as ``<field>.<option>``.
        """
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
