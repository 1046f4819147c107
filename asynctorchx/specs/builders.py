"""Build an :class:`AppDef` from a component function and command-line arguments.

:func:`materialize_appdef` does what ``torchx.specs.builders.materialize_appdef`` does
in TorchX 0.7.0: it builds an :mod:`argparse` parser from the function's signature and
its Google-style docstring (parsed with ``docstring_parser``), parses ``argv``, decodes
each value to the annotated type and calls the function.

The command-line form of each parameter (TorchX's):

* ``name: T = default`` becomes ``--name VALUE`` (``-n``/``--n`` for one-letter
  names; ``-h`` is free for the ``h`` named-resource argument, help is ``--help``).
  A parameter without a default is required unless ``defaults`` gives it one.
* ``str``, ``int``, ``float``: the value as written. ``bool``: ``true``/``false``
  (also ``1``/``0``, ``yes``/``no``, ``on``/``off``; any case), e.g. ``--debug true``.
* ``list[P]``: comma-separated, ``--mounts a,b`` -> ``["a", "b"]``.
* ``dict[P, list[P]]``: as ``dict[P, P]``, each value split at ``,``:
  ``--m FOO=a,b;BAR=c`` -> ``{"FOO": ["a", "b"], "BAR": ["c"]}``.
* ``dict[P, P]``: ``KEY=VALUE`` pairs separated by ``,`` or ``;``; a value may itself
  hold separators (``FOO=v1,v2,BAR=v3`` -> ``{"FOO": "v1,v2", "BAR": "v3"}``); ``''``
  or ``""`` is the empty string.
* ``Optional[T]`` (``T | None``): as ``T``, default usually ``None``.
* ``*args``: everything from the first positional word on (argparse's ``REMAINDER``),
  one leading ``--`` dropped: ``utils.sh echo hi``, ``dist.ddp --script t.py -- --lr 1``.

``defaults`` (from ``.torchxconfig``'s ``[component:<name>]``) are strings parsed as if
given on the command line; they replace the function's own defaults.

As ``torchx.specs.builders``, this module also offers :func:`make_app_handle`,
:func:`parse_mounts`, :class:`BindMount`, :class:`VolumeMount` and
:class:`DeviceMount` (defined in :mod:`asynctorchx.specs.api`) and
:func:`get_fn_docstring` (defined in :mod:`asynctorchx.specs.file_linter`).
"""

from __future__ import annotations

import argparse
import inspect
import logging
import re
import shlex
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

import attrs

from asynctorchx.errors import ComponentValidationException
from asynctorchx.specs._runopts import parse_bool, runopts
from asynctorchx.specs.api import (
    AppDef,
    BindMount,
    DeviceMount,
    VolumeMount,
    make_app_handle,
    parse_mounts,
)
from asynctorchx.specs.file_linter import TorchXArgumentHelpFormatter, get_fn_docstring

logger = logging.getLogger(__name__)

_PRIMITIVES: dict[type[Any], str] = {str: "str", int: "int", float: "float", bool: "bool"}


@attrs.define
class ParamType:
    """How one component parameter is read from the command line.

    Args:
        kind: ``"primitive"`` (str/int/float/bool), ``"list"`` or ``"dict"``.
        item: the primitive type of the value, of a list's items or of a dict's values.
        key: the primitive type of a dict's keys (``str`` otherwise).
        optional: the annotation allows ``None``.
        list_values: a dict's values are lists of ``item`` (``Dict[str, List[str]]``).
    """

    kind: str
    item: type[Any]
    key: type[Any] = str
    optional: bool = False
    list_values: bool = False


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(members) == 1 and len(typing.get_args(annotation)) == 2:
            return members[0], True
    return annotation, False


def param_type(fn_name: str, name: str, annotation: Any) -> ParamType:
    """Return how the parameter ``name`` annotated ``annotation`` is parsed.

    Raises:
        ComponentValidationException: the annotation is missing or not one of the
            supported types (see the module docstring).
    """
    if annotation is inspect.Parameter.empty:
        raise ComponentValidationException(
            f"argument {name!r} of component {fn_name!r} has no type annotation:"
            f" annotate it, e.g. `{name}: str`"
        )
    inner, optional = _unwrap_optional(annotation)
    if inner in _PRIMITIVES:
        return ParamType("primitive", inner, optional=optional)
    origin = typing.get_origin(inner)
    args = typing.get_args(inner)
    if origin is list and len(args) == 1 and args[0] in _PRIMITIVES:
        return ParamType("list", args[0], optional=optional)
    if origin is dict and len(args) == 2 and args[0] in _PRIMITIVES:
        if args[1] in _PRIMITIVES:
            return ParamType("dict", args[1], key=args[0], optional=optional)
        value_args = typing.get_args(args[1])
        if typing.get_origin(args[1]) is list and value_args and value_args[0] in _PRIMITIVES:
            return ParamType(
                "dict", value_args[0], key=args[0], optional=optional, list_values=True
            )
    raise ComponentValidationException(
        f"argument {name!r} of component {fn_name!r} has the unsupported type"
        f" {annotation!r}: use str, int, float, bool, list[str], dict[str, str],"
        " dict[str, list[str]] or Optional of one of them"
    )


def _parse_bool(text: str) -> bool:
    """The one bool grammar of run options and component arguments (``parse_bool``)."""
    return parse_bool(text)


_parse_bool.__name__ = "bool"  # argparse names the type in its message: "invalid bool value"


def _convert(fn_name: str, name: str, tp: type[Any], text: str) -> Any:
    try:
        return _parse_bool(text) if tp is bool else tp(text)
    except ValueError:
        raise ComponentValidationException(
            f"component {fn_name!r}: argument --{name}: {text!r} is not a valid {_PRIMITIVES[tp]}"
        ) from None


def _unquote(value: str) -> str:
    return "" if value in ("''", '""') else value


_DICT_SPLIT = re.compile(r"[,;](?=\s*[^,;=\s]+\s*=)")


def split_dict(text: str) -> dict[str, str]:
    """Split ``"FOO=v1,v2;BAR=v3"`` into ``{"FOO": "v1,v2", "BAR": "v3"}``.

    A ``,`` or ``;`` followed by ``KEY=`` starts a new pair; any other separator is
    part of the value. ``''`` and ``""`` stand for the empty string.

    Raises:
        ValueError: a piece has no ``=`` or an empty key.
    """
    pairs: dict[str, str] = {}
    if not text.strip():
        return pairs
    for piece in _DICT_SPLIT.split(text.strip()):
        key, sep, value = piece.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{piece!r} is not KEY=VALUE")
        pairs[key.strip()] = _unquote(value.strip())
    return pairs


def decode(fn_name: str, name: str, ptype: ParamType, value: Any) -> Any:
    """Turn the parsed ``value`` of parameter ``name`` into the annotated type.

    Values that are not strings (a declared default such as ``None`` or ``[]``) are
    returned as they are.

    Raises:
        ComponentValidationException: the text does not parse as the type; the message
            names the argument.
    """
    if not isinstance(value, str):
        return value
    if ptype.kind == "primitive":
        return _convert(fn_name, name, ptype.item, value)
    if ptype.kind == "list":
        items = [item.strip() for item in value.split(",")] if value.strip() else []
        return [_convert(fn_name, name, ptype.item, item) for item in items]
    try:
        pairs = split_dict(value)
    except ValueError as exc:
        raise ComponentValidationException(
            f"component {fn_name!r}: argument --{name}: {exc}; write KEY=VALUE pairs"
            " separated by ',' or ';', e.g. `--env FOO=1,BAR=2`"
        ) from None
    if ptype.list_values:  # FOO=a,b;BAR=c -> {"FOO": ["a", "b"], "BAR": ["c"]}
        return {
            _convert(fn_name, name, ptype.key, key): [
                _convert(fn_name, name, ptype.item, piece.strip())
                for piece in item.split(",")
                if piece.strip()
            ]
            for key, item in pairs.items()
        }
    return {
        _convert(fn_name, name, ptype.key, key): _convert(fn_name, name, ptype.item, item)
        for key, item in pairs.items()
    }


class ComponentUsageError(ComponentValidationException, SystemExit):
    """A component's command line is wrong: a missing, unknown or malformed argument.

    TorchX's component parser is a plain :mod:`argparse` parser, so a bad command line
    exits with ``SystemExit(2)`` (``torchx.specs.builders.materialize_appdef``). This
    error is both that ``SystemExit`` (``code`` is 2) and a
    :class:`~asynctorchx.errors.ComponentValidationException`, so code catching either
    works. Unlike argparse it prints nothing: the message is the one-line error and
    :attr:`usage` holds the usage text argparse would print above it.

    Args:
        message: the error, naming the argument.
        usage: the parser's usage text (``usage: ...``).
    """

    def __init__(self, message: str, usage: str = "") -> None:
        super().__init__(message)
        self.code = 2
        self.usage = usage


class _ComponentParser(argparse.ArgumentParser):
    """An argument parser whose usage errors raise :class:`ComponentUsageError`."""

    def error(self, message: str) -> NoReturn:
        raise ComponentUsageError(
            f"{self.prog.strip()}: {message} (`--help` lists the arguments)",
            self.format_usage().strip(),
        )


class _RemainderAction(argparse.Action):
    """Collects ``*args``; falls back to the (shell-split) default when none are given."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        given = list(values or [])
        if not given and isinstance(self.default, str):  # from .torchxconfig: shell words
            given = shlex.split(self.default)
        elif not given and isinstance(self.default, list):
            given = list(self.default)
        setattr(namespace, self.dest, given)


def _type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception as exc:  # a NameError/TypeError from a bad annotation
        raise ComponentValidationException(
            f"cannot resolve the type annotations of component {fn.__name__!r}: {exc}"
        ) from exc


def _param_types(fn: Callable[..., Any]) -> dict[str, ParamType]:
    hints = _type_hints(fn)
    result: dict[str, ParamType] = {}
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind == inspect.Parameter.VAR_KEYWORD:
            raise ComponentValidationException(
                f"component {fn.__name__!r} takes **{name}: components cannot take"
                " **kwargs; declare each argument"
            )
        annotation = hints.get(name, param.annotation)
        result[name] = param_type(fn.__name__, name, annotation)
    return result


def create_args_parser(
    fn: Callable[..., AppDef], defaults: Mapping[str, str] | None = None
) -> argparse.ArgumentParser:
    """Build the argument parser of the component ``fn`` (see the module docstring).

    Args:
        fn: the component function.
        defaults: string defaults that replace the declared ones, keyed by parameter.

    A key of ``defaults`` that names no parameter of ``fn`` is ignored with a logged
    warning, as TorchX ignores it.

    Raises:
        ComponentValidationException: a parameter is unannotated or of an unsupported
            type, or ``fn`` takes ``**kwargs``.
    """
    signature = inspect.signature(fn)
    types_by_name = _param_types(fn)
    defaults = dict(defaults or {})
    unknown = sorted(set(defaults) - set(signature.parameters))
    if unknown:  # a stale [component:x] key must not break a run (TorchX ignores them)
        logger.warning(
            "ignoring the component defaults %s: %r takes no such argument (it takes %s)",
            ", ".join(map(repr, unknown)),
            fn.__name__,
            ", ".join(signature.parameters) or "no arguments",
        )
    description, helps = get_fn_docstring(fn)
    parser = _ComponentParser(
        prog=f"asynctorchx run <run args...> {fn.__name__}",
        description=description,
        formatter_class=TorchXArgumentHelpFormatter,
        add_help=False,  # frees -h for the `h` (named resource) argument
        allow_abbrev=False,
    )
    parser.add_argument(
        "--help", action="help", default=argparse.SUPPRESS, help="show this help and exit"
    )
    for name, param in signature.parameters.items():
        ptype = types_by_name[name]
        kwargs: dict[str, Any] = {"help": helps.get(name, " ")}
        if ptype.kind == "primitive":
            kwargs["type"] = _parse_bool if ptype.item is bool else ptype.item
            kwargs["metavar"] = _PRIMITIVES[ptype.item].upper()
        else:
            kwargs["type"] = str
            kwargs["metavar"] = "K=V,..." if ptype.kind == "dict" else "V,..."
        if param.default is not inspect.Parameter.empty:
            kwargs["default"] = param.default
        if name in defaults:
            kwargs["default"] = defaults[name]
        if param.kind == inspect.Parameter.VAR_POSITIONAL:
            kwargs.pop("type")
            kwargs["metavar"] = name
            kwargs["nargs"] = argparse.REMAINDER
            kwargs["action"] = _RemainderAction  # default None, as TorchX's
            parser.add_argument(name, **kwargs)
            continue
        flags = [f"-{name}", f"--{name}"] if len(name) == 1 else [f"--{name}"]
        if "default" not in kwargs:
            kwargs["required"] = True
        parser.add_argument(*flags, dest=name, **kwargs)
    return parser


def parse_args(
    fn: Callable[..., AppDef],
    argv: Sequence[str],
    defaults: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Parse ``argv`` for the component ``fn`` into decoded values keyed by parameter.

    Args:
        fn: the component function.
        argv: its command line, e.g. ``["--msg", "hi"]``.
        defaults: string defaults that replace the declared ones (``.torchxconfig``).
        config: argument values given as data (``run --stdin``'s JSON
            ``component_args``): they win over ``argv`` and ``defaults``; a string is
            decoded as a command-line value, any other value must already have the
            parameter's type.

    Raises:
        ComponentUsageError: (a ``ComponentValidationException`` and ``SystemExit(2)``)
            an argument is missing or unknown; ``usage`` holds the usage text.
        ComponentValidationException: an argument does not parse as its type, or a
            value given as data does not have it; the message names it.
        SystemExit: ``--help`` was given (argparse prints the help and exits 0).
    """
    parser = create_args_parser(fn, defaults)
    if config:
        _accept_config(fn, parser, config)
    namespace = parser.parse_args(list(argv))
    types_by_name = _param_types(fn)
    parameters = inspect.signature(fn).parameters
    for name, value in (config or {}).items():
        ptype = types_by_name[name]
        if parameters[name].kind == inspect.Parameter.VAR_POSITIONAL:
            ptype = ParamType("list", ptype.item)  # *args: given as a list of its items
        _check_data_value(fn.__name__, name, ptype, value)
        setattr(namespace, name, value)
    values: dict[str, Any] = {}
    for name, param in inspect.signature(fn).parameters.items():
        value = getattr(namespace, name)
        if param.kind == inspect.Parameter.VAR_POSITIONAL:
            rest = list(value or [])
            values[name] = rest[1:] if rest[:1] == ["--"] else rest
        else:
            values[name] = decode(fn.__name__, name, types_by_name[name], value)
    return values


def _check_data_value(fn_name: str, name: str, ptype: ParamType, value: Any) -> None:
    """Refuse a value given as data (not text) that does not have the parameter's type.

    A string is decoded as on the command line; ``None`` is accepted for an optional
    parameter. Anything else must already be of the annotated type: a component that
    puts an ``int`` where its role expects ``str`` arguments would fail later, far from
    the value (in the macros' substitution).

    Raises:
        ComponentValidationException: the value does not have the type; the message
            names the argument, the value and the fix.
    """
    if isinstance(value, str) or (value is None and ptype.optional):
        return
    if ptype.kind == "primitive":
        fits = runopts.is_type(value, ptype.item)
        wanted = ptype.item.__name__
    elif ptype.kind == "list":
        fits = isinstance(value, (list, tuple)) and all(
            runopts.is_type(item, ptype.item) for item in value
        )
        wanted = f"a list of {ptype.item.__name__}"
    else:

        def item_fits(item: Any) -> bool:
            if ptype.list_values:
                return isinstance(item, list) and all(runopts.is_type(x, ptype.item) for x in item)
            return runopts.is_type(item, ptype.item)

        fits = isinstance(value, Mapping) and all(
            runopts.is_type(k, ptype.key) and item_fits(v) for k, v in value.items()
        )
        wanted = f"a dict of {ptype.key.__name__} to {ptype.item.__name__}"
    if not fits:
        raise ComponentValidationException(
            f"argument {name!r} of component {fn_name!r} is {value!r}"
            f" ({type(value).__name__}): give {wanted}, or its command-line text"
            f" as a string (e.g. {str(value)!r})"
        )


def _accept_config(
    fn: Callable[..., AppDef], parser: argparse.ArgumentParser, config: Mapping[str, Any]
) -> None:
    """Make the arguments ``config`` gives optional on the command line.

    Raises:
        ComponentUsageError: ``config`` names an argument ``fn`` does not take.
    """
    params = inspect.signature(fn).parameters
    unknown = sorted(set(config) - set(params))
    if unknown:
        raise ComponentUsageError(
            f"component {fn.__name__!r} has no argument {', '.join(map(repr, unknown))}:"
            f" it takes {', '.join(params) or 'no arguments'}",
            parser.format_usage().strip(),
        )
    for action in parser._actions:
        if action.dest in config:
            action.required = False


def materialize_appdef(
    fn: Callable[..., AppDef],
    argv: Sequence[str],
    defaults: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
) -> AppDef:
    """Parse ``argv`` as the component ``fn``'s command line and return ``fn(...)``.

    Args:
        fn: the component function (annotated, Google-style docstring, returns AppDef).
        argv: the component's arguments, e.g. ``["--msg", "hi"]``.
        defaults: string defaults that replace the declared ones (``.torchxconfig``).
        config: argument values given as data, e.g. JSON (TorchX's fourth argument of
            ``torchx.specs.builders.materialize_appdef`` after 0.7.0); they win over
            ``argv`` and ``defaults``; see :func:`parse_args`.

    Returns:
        The :class:`AppDef` the component returns.

    Raises:
        ComponentUsageError: (a ``ComponentValidationException`` and ``SystemExit(2)``,
            as TorchX exits) an argument is missing or unknown; ``usage`` holds the
            usage text.
        ComponentValidationException: the function is not a valid component (e.g. an
            ``async def``), an argument is malformed (the message names it), or the
            function did not return an ``AppDef``.
        SystemExit: ``--help`` was given (argparse prints the help and exits 0).
        Exception: whatever the component raises for values it rejects.
    """
    if inspect.iscoroutinefunction(fn):
        raise ComponentValidationException(
            f"component {fn.__name__!r} is an `async def`: it would return a coroutine,"
            " not an AppDef; make it a plain `def`"
        )
    values = parse_args(fn, argv, defaults, config)
    positional: list[Any] = []
    var_args: list[Any] = []
    keyword: dict[str, Any] = {}
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind == inspect.Parameter.VAR_POSITIONAL:
            var_args = values[name]
        elif param.kind == inspect.Parameter.KEYWORD_ONLY:
            keyword[name] = values[name]
        else:
            positional.append(values[name])
    app = fn(*positional, *var_args, **keyword)
    if not isinstance(app, AppDef):
        raise ComponentValidationException(
            f"component {fn.__name__!r} returned {type(app).__name__}, not an AppDef:"
            " return an asynctorchx.specs.AppDef"
        )
    return app


__all__ = [
    "BindMount",
    "ComponentUsageError",
    "DeviceMount",
    "ParamType",
    "VolumeMount",
    "create_args_parser",
    "decode",
    "get_fn_docstring",
    "make_app_handle",
    "materialize_appdef",
    "param_type",
    "parse_args",
    "parse_mounts",
    "split_dict",
]
