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
* ``dict[P, P]``: ``KEY=VALUE`` pairs separated by ``,`` or ``;``; a value may itself
  hold separators (``FOO=v1,v2,BAR=v3`` -> ``{"FOO": "v1,v2", "BAR": "v3"}``); ``''``
  or ``""`` is the empty string.
* ``Optional[T]`` (``T | None``): as ``T``, default usually ``None``.
* ``*args``: everything from the first positional word on (argparse's ``REMAINDER``),
  one leading ``--`` dropped: ``utils.sh echo hi``, ``dist.ddp --script t.py -- --lr 1``.

``defaults`` (from ``.torchxconfig``'s ``[component:<name>]``) are strings parsed as if
given on the command line; they replace the function's own defaults.
"""

from __future__ import annotations

import argparse
import inspect
import re
import shlex
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

import attrs
import docstring_parser

from asynctorchx.errors import ComponentValidationException
from asynctorchx.specs._runopts import parse_bool
from asynctorchx.specs.api import AppDef

_PRIMITIVES: dict[type[Any], str] = {str: "str", int: "int", float: "float", bool: "bool"}


@attrs.define
class ParamType:
    """How one component parameter is read from the command line.

    Args:
        kind: ``"primitive"`` (str/int/float/bool), ``"list"`` or ``"dict"``.
        item: the primitive type of the value, of a list's items or of a dict's values.
        key: the primitive type of a dict's keys (``str`` otherwise).
        optional: the annotation allows ``None``.
    """

    kind: str
    item: type[Any]
    key: type[Any] = str
    optional: bool = False


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
    if origin is dict and len(args) == 2 and all(arg in _PRIMITIVES for arg in args):
        return ParamType("dict", args[1], key=args[0], optional=optional)
    raise ComponentValidationException(
        f"argument {name!r} of component {fn_name!r} has the unsupported type"
        f" {annotation!r}: use str, int, float, bool, list[str], dict[str, str] or"
        " Optional of one of them"
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
    return {
        _convert(fn_name, name, ptype.key, key): _convert(fn_name, name, ptype.item, item)
        for key, item in pairs.items()
    }


def get_fn_docstring(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """Return the function's description and each parameter's help from its docstring.

    The docstring is read as Google style (``Args:`` section). Without a docstring the
    description is the function's name with a tip; a parameter the docstring does not
    describe gets a blank help (TorchX's behaviour).
    """
    params = inspect.signature(fn).parameters
    helps = {name: " " for name in params}
    doc = inspect.getdoc(fn)
    fallback = (
        f"{fn.__name__} TIP: improve this help string by adding a Google-style docstring"
        " to your component"
    )
    if not doc:
        return fallback, helps
    try:
        parsed = docstring_parser.parse(doc, docstring_parser.DocstringStyle.GOOGLE)
    except docstring_parser.ParseError:
        return doc, helps
    for param in parsed.params:
        name = param.arg_name.lstrip("*")
        if param.description and name in helps:
            helps[name] = param.description
    description = parsed.short_description or fallback
    if parsed.long_description:
        description += "\n" + parsed.long_description
    return description, helps


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Appends ``(required)`` or ``(default: X)`` to each argument's help."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default is argparse.SUPPRESS or action.nargs == argparse.REMAINDER:
            return text
        if action.required:
            return text + " (required)"
        return text + f" (default: {action.default})"


class _ComponentParser(argparse.ArgumentParser):
    """An argument parser whose usage errors raise instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise ComponentValidationException(
            f"{self.prog.strip()}: {message} (`--help` lists the arguments)"
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
        if not given and isinstance(self.default, str):
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

    Raises:
        ComponentValidationException: a parameter is unannotated or of an unsupported
            type, ``fn`` takes ``**kwargs``, or ``defaults`` names no parameter of ``fn``.
    """
    signature = inspect.signature(fn)
    types_by_name = _param_types(fn)
    defaults = dict(defaults or {})
    unknown = sorted(set(defaults) - set(signature.parameters))
    if unknown:
        raise ComponentValidationException(
            f"component defaults name {', '.join(map(repr, unknown))}, which"
            f" {fn.__name__!r} does not take: use one of"
            f" {', '.join(signature.parameters) or 'no arguments'}"
        )
    description, helps = get_fn_docstring(fn)
    parser = _ComponentParser(
        prog=f"asynctorchx run <run args...> {fn.__name__}",
        description=description,
        formatter_class=_HelpFormatter,
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
            kwargs["action"] = _RemainderAction
            kwargs.setdefault("default", [])
            parser.add_argument(name, **kwargs)
            continue
        flags = [f"-{name}", f"--{name}"] if len(name) == 1 else [f"--{name}"]
        if "default" not in kwargs:
            kwargs["required"] = True
        parser.add_argument(*flags, dest=name, **kwargs)
    return parser


def parse_args(
    fn: Callable[..., AppDef], argv: Sequence[str], defaults: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Parse ``argv`` for the component ``fn`` into decoded values keyed by parameter.

    Raises:
        ComponentValidationException: an argument is missing, unknown or does not parse
            as its type; the message names it.
        SystemExit: ``--help`` was given (argparse prints the help and exits 0).
    """
    parser = create_args_parser(fn, defaults)
    namespace = parser.parse_args(list(argv))
    types_by_name = _param_types(fn)
    values: dict[str, Any] = {}
    for name, param in inspect.signature(fn).parameters.items():
        value = getattr(namespace, name)
        if param.kind == inspect.Parameter.VAR_POSITIONAL:
            rest = list(value)
            values[name] = rest[1:] if rest[:1] == ["--"] else rest
        else:
            values[name] = decode(fn.__name__, name, types_by_name[name], value)
    return values


def materialize_appdef(
    fn: Callable[..., AppDef],
    argv: Sequence[str],
    defaults: Mapping[str, str] | None = None,
) -> AppDef:
    """Parse ``argv`` as the component ``fn``'s command line and return ``fn(...)``.

    Args:
        fn: the component function (annotated, Google-style docstring, returns AppDef).
        argv: the component's arguments, e.g. ``["--msg", "hi"]``.
        defaults: string defaults that replace the declared ones (``.torchxconfig``).

    Returns:
        The :class:`AppDef` the component returns.

    Raises:
        ComponentValidationException: the function is not a valid component (e.g. an
            ``async def``), an argument is missing, unknown or malformed (the message
            names it), or the function did not return an ``AppDef``.
        SystemExit: ``--help`` was given (argparse prints the help and exits 0).
        Exception: whatever the component raises for values it rejects.
    """
    if inspect.iscoroutinefunction(fn):
        raise ComponentValidationException(
            f"component {fn.__name__!r} is an `async def`: it would return a coroutine,"
            " not an AppDef; make it a plain `def`"
        )
    values = parse_args(fn, argv, defaults)
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
