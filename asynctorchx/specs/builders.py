"""Build an :class:`AppDef` from a component and its command line (``torchx.specs.builders``).

Each parameter ``name: T`` becomes ``--name VALUE``; help is ``--help`` so ``-h`` stays free.
"""

from __future__ import annotations

import argparse
import inspect
import logging
import shlex
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from asynctorchx.errors import ComponentUsageError, ComponentValidationException
from asynctorchx.specs._runopts import parse_bool, runopts, split_pairs
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

_PRIMITIVES = (str, int, float, bool)


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(members) == 1 and len(typing.get_args(annotation)) == 2:
            return members[0], True
    return annotation, False


def _supported(tp: Any) -> bool:
    """``P``, ``list[P]`` or ``dict[P, P | list[P]]``."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) is list:
        return len(args) == 1 and args[0] in _PRIMITIVES
    if typing.get_origin(tp) is dict and len(args) == 2 and args[0] in _PRIMITIVES:
        value = args[1]
        return value in _PRIMITIVES or (typing.get_origin(value) is list and _supported(value))
    return tp in _PRIMITIVES


def _annotations(fn: Callable[..., Any]) -> dict[str, Any]:
    target = inspect.unwrap(fn)  # a class component's arguments are its __init__'s
    try:
        hints = typing.get_type_hints(target.__init__ if inspect.isclass(target) else fn)
    except Exception as exc:
        raise ComponentValidationException(
            f"cannot resolve the type annotations of component {fn.__name__!r}: {exc}"
        ) from exc
    annotations: dict[str, Any] = {}
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind == inspect.Parameter.VAR_KEYWORD:
            raise ComponentValidationException(
                f"component {fn.__name__!r} takes **{name}: components cannot take"
                " **kwargs; declare each argument"
            )
        annotation = hints.get(name, param.annotation)
        if annotation is inspect.Parameter.empty:
            raise ComponentValidationException(
                f"argument {name!r} of component {fn.__name__!r} has no type annotation:"
                f" annotate it, e.g. `{name}: str`"
            )
        if not _supported(_unwrap_optional(annotation)[0]):
            raise ComponentValidationException(
                f"argument {name!r} of component {fn.__name__!r} has the unsupported type"
                f" {annotation!r}: use str, int, float, bool, list[str], dict[str, str],"
                " dict[str, list[str]] or Optional of one of them"
            )
        annotations[name] = annotation
    return annotations


def _parse_bool(text: str) -> bool:
    return parse_bool(text)


_parse_bool.__name__ = "bool"  # argparse names the type in its message: "invalid bool value"


def split_dict(text: str) -> dict[str, str]:
    """Split ``"FOO=v1,v2;BAR=v3"`` into ``{"FOO": "v1,v2", "BAR": "v3"}``; ``''`` is ``""``.

    Raises:
        ValueError: a piece has no ``=`` or an empty key.
    """
    pairs = split_pairs(text, r"[^,;=\s]+")
    return {key: "" if value in ("''", '""') else value for key, value in pairs.items()}


def decode(fn_name: str, name: str, tp: Any, value: Any) -> Any:
    """Turn the text ``value`` of parameter ``name`` into ``tp``; a non-string is kept as is.

    Raises:
        ComponentValidationException: the text does not parse as ``tp``; names the argument.
    """
    if not isinstance(value, str):
        return value
    args = typing.get_args(tp)
    if typing.get_origin(tp) is list:
        items = value.split(",") if value.strip() else []
        return [decode(fn_name, name, args[0], item.strip()) for item in items]
    if typing.get_origin(tp) is dict:
        try:
            pairs = split_dict(value)
        except ValueError as exc:
            raise ComponentValidationException(
                f"component {fn_name!r}: argument --{name}: {exc}; write KEY=VALUE pairs"
                " separated by ',' or ';', e.g. `--env FOO=1,BAR=2`"
            ) from None
        return {
            decode(fn_name, name, args[0], key): decode(fn_name, name, args[1], item)
            for key, item in pairs.items()
        }
    try:
        return _parse_bool(value) if tp is bool else tp(value)
    except ValueError:
        raise ComponentValidationException(
            f"component {fn_name!r}: argument --{name}: {value!r} is not a valid {tp.__name__}"
        ) from None


class _ComponentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ComponentUsageError(
            f"{self.prog.strip()}: {message}",
            self.format_usage().strip(),
        )


class _RemainderAction(argparse.Action):
    """Collects ``*args``; falls back to the default (shell-split from ``.torchxconfig``)."""

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
        setattr(namespace, self.dest, given)


def create_args_parser(
    fn: Callable[..., AppDef], defaults: Mapping[str, str] | None = None
) -> argparse.ArgumentParser:
    """Build the argument parser of the component ``fn`` (``torchx.specs.builders``).

    Args:
        fn: the component function.
        defaults: string defaults replacing the declared ones; unknown keys are ignored.

    Raises:
        ComponentValidationException: a parameter unannotated or unsupported, or ``**kwargs``.
    """
    signature = inspect.signature(fn)
    annotations = _annotations(fn)
    defaults = dict(defaults or {})
    unknown = sorted(set(defaults) - set(signature.parameters))
    if unknown:  # a stale [component:x] key must not break a run
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
        kwargs: dict[str, Any] = {"help": helps.get(name, " ")}
        if param.default is not inspect.Parameter.empty:
            kwargs["default"] = param.default
        if name in defaults:
            kwargs["default"] = defaults[name]
        if param.kind == inspect.Parameter.VAR_POSITIONAL:
            parser.add_argument(
                name, metavar=name, nargs=argparse.REMAINDER, action=_RemainderAction, **kwargs
            )
            continue
        tp = _unwrap_optional(annotations[name])[0]
        if tp in _PRIMITIVES:  # containers are decoded after parsing
            kwargs.update(type=_parse_bool if tp is bool else tp, metavar=tp.__name__.upper())
        else:
            kwargs["metavar"] = "K=V,..." if typing.get_origin(tp) is dict else "V,..."
        flags = [f"-{name}", f"--{name}"] if len(name) == 1 else [f"--{name}"]
        parser.add_argument(*flags, dest=name, required="default" not in kwargs, **kwargs)
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
        defaults: string defaults replacing the declared ones (``.torchxconfig``).
        config: values given as data (``run --stdin``), winning over ``argv`` and ``defaults``.

    Raises:
        ComponentUsageError: an argument is missing or unknown.
        ComponentValidationException: a value does not parse as, or have, its type.
        SystemExit: ``--help`` was given (exit 0 after the help).
    """
    parser = create_args_parser(fn, defaults)
    parameters = inspect.signature(fn).parameters
    config = config or {}
    unknown = sorted(set(config) - set(parameters))
    if unknown:
        raise ComponentUsageError(
            f"component {fn.__name__!r} has no argument {', '.join(map(repr, unknown))}:"
            f" it takes {', '.join(parameters) or 'no arguments'}",
            parser.format_usage().strip(),
        )
    for action in parser._actions:  # what config gives is not required on the command line
        if action.dest in config:
            action.required = False
    namespace = parser.parse_args(list(argv))
    annotations = _annotations(fn)
    for name, value in config.items():
        annotation = annotations[name]
        if parameters[name].kind == inspect.Parameter.VAR_POSITIONAL:
            annotation = list[annotation]  # type: ignore[valid-type]  # given as a list
        _check_data_value(fn.__name__, name, annotation, value)
        setattr(namespace, name, value)
    values: dict[str, Any] = {}
    for name, param in parameters.items():
        value = getattr(namespace, name)
        if param.kind == inspect.Parameter.VAR_POSITIONAL:
            rest = list(value or [])
            values[name] = rest[1:] if rest[:1] == ["--"] else rest
        else:
            tp = _unwrap_optional(annotations[name])[0]
            values[name] = decode(fn.__name__, name, tp, value)
    return values


def _fits(value: Any, tp: Any) -> bool:
    args = typing.get_args(tp)
    if typing.get_origin(tp) is list:
        return isinstance(value, list | tuple) and all(_fits(item, args[0]) for item in value)
    if typing.get_origin(tp) is dict:
        return isinstance(value, Mapping) and all(
            _fits(key, args[0]) and _fits(item, args[1]) for key, item in value.items()
        )
    return runopts.is_type(value, tp)


def _check_data_value(fn_name: str, name: str, annotation: Any, value: Any) -> None:
    """Refuse a non-string value given as data that lacks the parameter's type."""
    tp, optional = _unwrap_optional(annotation)
    if isinstance(value, str) or (value is None and optional) or _fits(value, tp):
        return
    wanted = tp.__name__ if tp in _PRIMITIVES else str(tp).replace("typing.", "")
    raise ComponentValidationException(
        f"argument {name!r} of component {fn_name!r} is {value!r}"
        f" ({type(value).__name__}): give a value of type {wanted}, or its command-line text"
        f" as a string (e.g. {str(value)!r})"
    )


def materialize_appdef(
    fn: Callable[..., AppDef],
    argv: Sequence[str],
    defaults: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
) -> AppDef:
    """Parse ``argv`` as ``fn``'s command line and return ``fn(...)`` (``torchx.specs.builders``).

    Args:
        fn: the component function.
        argv: its arguments, e.g. ``["--msg", "hi"]``.
        defaults: string defaults replacing the declared ones (``.torchxconfig``).
        config: values given as data; see :func:`parse_args`.

    Raises:
        ComponentUsageError: an argument is missing or unknown.
        ComponentValidationException: ``fn`` is async, an argument bad, or no AppDef returned.
        SystemExit: ``--help`` was given.
        Exception: whatever the component raises.
    """
    if inspect.iscoroutinefunction(fn):
        raise ComponentValidationException(
            f"component {fn.__name__!r} is an `async def`: it would return a coroutine,"
            " not an AppDef; make it a plain `def`"
        )
    values = parse_args(fn, argv, defaults, config)
    call = inspect.signature(fn).bind_partial()
    call.arguments.update(values)  # *args spread, keyword-only passed by name
    app = fn(*call.args, **call.kwargs)
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
    "VolumeMount",
    "create_args_parser",
    "decode",
    "get_fn_docstring",
    "make_app_handle",
    "materialize_appdef",
    "parse_args",
    "parse_mounts",
    "split_dict",
]
