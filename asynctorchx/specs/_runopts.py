"""Scheduler run options: :class:`runopt`, :class:`runopts`, :class:`cases` (``torchx.specs``)."""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Mapping
from typing import Any, Union

import attrs

from asynctorchx.errors import InvalidRunConfigException

#: A value a scheduler run option may take (TorchX 0.7.0's set, ``dict[str, str]`` included).
CfgVal = Union[str, int, float, bool, list[str], dict[str, str], None]


@attrs.define
class runopt:
    """One scheduler run option: its default, type, whether it is required, and its help."""

    default: CfgVal
    opt_type: Any
    is_required: bool
    help: str


def _container_kind(tp: Any) -> str | None:
    origin = typing.get_origin(tp) or tp
    if origin is list:
        return "list"
    if origin is dict:
        return "dict"
    return None


def get_type_name(tp: Any) -> str:
    """Return the name of a type as help prints it (``torchx.specs.api.get_type_name``)."""
    if getattr(tp, "__module__", None) != "typing" and isinstance(tp, type):
        return tp.__name__
    return str(tp)


def _display_name(tp: Any) -> str:
    kind = _container_kind(tp)
    if kind is not None:
        return "List[str]" if kind == "list" else "Dict[str, str]"
    return getattr(tp, "__name__", str(tp))


class cases:
    """Converts an option's name between snake_case and camelCase (``torchx.specs.cases``)."""

    @staticmethod
    def snake_to_camel(name: str) -> str:
        """``hpc_identity`` -> ``hpcIdentity``."""
        first, *rest = name.split("_")
        return first + "".join(part.title() for part in rest)

    @staticmethod
    def camel_to_snake(name: str) -> str:
        """``hpcIdentity`` -> ``hpc_identity``; a snake_case name is returned unchanged."""
        return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


class runopts:
    """The run options a scheduler accepts; ``str(opts)`` reads like ``--help`` (TorchX's)."""

    def __init__(self) -> None:
        self._opts: dict[str, runopt] = {}

    def __iter__(self) -> Any:
        return iter(self._opts.items())

    def __len__(self) -> int:
        return len(self._opts)

    def __contains__(self, key: object) -> bool:
        return key in self._opts

    @staticmethod
    def is_type(obj: object, tp: Any) -> bool:
        """Whether ``obj`` fits ``tp`` (``list[str]``, ``dict[str, str]`` too); a bool is no int."""
        kind = _container_kind(tp)
        if kind == "list":
            return isinstance(obj, list) and all(isinstance(item, str) for item in obj)
        if kind == "dict":
            return isinstance(obj, dict) and all(
                isinstance(key, str) and isinstance(value, str) for key, value in obj.items()
            )
        if tp is int or tp is float:
            return isinstance(obj, (int, tp)) and not isinstance(obj, bool)
        return isinstance(obj, tp) if isinstance(tp, type) else False

    def add(
        self,
        cfg_key: str,
        type_: Any,
        help: str,
        default: CfgVal = None,
        required: bool = False,
    ) -> None:
        """Add an option.

        Args:
            cfg_key: its name (``log_dir``).
            type_: ``str``, ``int``, ``float``, ``bool``, ``list[str]`` or ``dict[str, str]``.
            help: one line of help.
            default: its value when none is given; ``None`` when required.
            required: the user must give it.

        Raises:
            ValueError: a required option with a default.
            TypeError: a default of the wrong type.
        """
        kind = _container_kind(type_)
        if kind is not None and isinstance(default, (list, dict)) and not default:
            default = [] if kind == "list" else {}
        if required and default is not None:
            raise ValueError(
                f"required option {cfg_key!r} must not have a default (got {default!r})"
            )
        if default is not None and not runopts.is_type(default, type_):
            raise TypeError(
                f"option {cfg_key!r}: default {default!r} is not of type {_display_name(type_)}"
            )
        self._opts[cfg_key] = runopt(default, type_, required, help)

    def canonical_key(self, name: str) -> str | None:
        """Return the option ``name`` spells (itself or in camelCase), else ``None``."""
        if name in self._opts:
            return name
        snake = cases.camel_to_snake(name)
        return snake if snake in self._opts else None

    def get(self, name: str) -> runopt | None:
        """Return the option ``name`` spells, or ``None``."""
        key = self.canonical_key(name)
        return None if key is None else self._opts[key]

    def update(self, other: runopts) -> None:
        """Add ``other``'s options, replacing those of the same name."""
        self._opts.update(other._opts)

    def __or__(self, other: runopts) -> runopts:
        merged = runopts()
        merged.update(self)
        merged.update(other)
        return merged

    def resolve(
        self, cfg: Mapping[str, CfgVal], *, ignore_unknown: bool = False
    ) -> dict[str, CfgVal]:
        """Check ``cfg`` (keys may be camelCase) and return a copy with the defaults filled in.

        Args:
            cfg: the run options given.
            ignore_unknown: keep unknown keys unchecked.

        Raises:
            InvalidRunConfigException: a key missing, unknown, given twice, or of the wrong type.
        """
        given: dict[str, CfgVal] = {}
        spelled: dict[str, str] = {}
        for key, value in cfg.items():
            name = self.canonical_key(key)
            if name is None and not ignore_unknown:
                import difflib  # only on this error

                close = difflib.get_close_matches(key, self._opts, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise InvalidRunConfigException(
                    f"unknown run option {key!r}: {hint}{self._accepted()}", key
                )
            if name is not None and name in spelled and given[name] != value:
                raise InvalidRunConfigException(
                    f"run option {name!r} is given as {spelled[name]!r} and as {key!r} with"
                    f" different values: give it once, as {name!r}",
                    name,
                )
            name = name or key
            spelled.setdefault(name, key)
            given[name] = value
        resolved: dict[str, CfgVal] = {}
        for key, opt in self._opts.items():
            value = given.get(key)
            if value is None and opt.is_required:
                raise InvalidRunConfigException(
                    f"required run option {key!r} ({_display_name(opt.opt_type)}) is missing:"
                    f" pass it with `-cfg {key}=<value>` ({opt.help}); {self._accepted()}",
                    key,
                )
            if value is not None and not runopts.is_type(value, opt.opt_type):
                raise InvalidRunConfigException(
                    f"run option {key!r} must be of type {_display_name(opt.opt_type)},"
                    f" got {value!r} ({type(value).__name__}); {self._accepted()}",
                    key,
                )
            resolved[key] = opt.default if value is None else value
        resolved.update({key: value for key, value in given.items() if key not in self._opts})
        return resolved

    def _accepted(self) -> str:
        if not self._opts:
            return "the scheduler accepts no options"
        listed = ", ".join(
            f"{key} ({_display_name(opt.opt_type)})" for key, opt in sorted(self._opts.items())
        )
        return f"the scheduler accepts {listed}"

    def cfg_from_str(self, cfg_str: str) -> dict[str, CfgVal]:
        """Parse ``"key1=v1,key2=v2;key3=a,b"`` into a typed cfg (dict items ``name:value``).

        Raises:
            InvalidRunConfigException: a value does not parse as its option's type.
        """
        cfg: dict[str, CfgVal] = {}
        for key, raw in cfg_pairs(cfg_str).items():
            opt = self.get(key)
            cfg[key] = raw if opt is None else _cast(key, raw, opt.opt_type)
        return cfg

    def cfg_from_json_repr(self, json_repr: str) -> dict[str, CfgVal]:
        """Parse a JSON object into a cfg, values as JSON gives them.

        Raises:
            InvalidRunConfigException: ``json_repr`` is not a JSON object.
        """
        try:
            loaded = json.loads(json_repr)
        except json.JSONDecodeError as exc:
            raise InvalidRunConfigException(
                f"run config {json_repr!r} is not valid JSON ({exc})"
            ) from None
        if not isinstance(loaded, dict):
            raise InvalidRunConfigException(
                f'run config {json_repr!r} is not a JSON object: write {{"key": value, ...}}'
            )
        return dict(loaded)

    def __str__(self) -> str:
        required = [(key, opt) for key, opt in self._opts.items() if opt.is_required]
        optional = [(key, opt) for key, opt in self._opts.items() if not opt.is_required]
        usage = ",".join(
            f"{key}={key.upper()}" if opt.is_required else f"[{key}={key.upper()}]"
            for key, opt in required + optional
        )
        out = f"    usage:\n        {usage}"
        for title, group in (("required", required), ("optional", optional)):
            if not group:
                continue
            out += f"\n\n    {title} arguments:"
            for key, opt in group:
                default = "" if opt.is_required else f", {opt.default}"
                out += f"\n        {key}={key.upper()} ({get_type_name(opt.opt_type)}{default})"
                out += f"\n            {opt.help}"
        return out

    __repr__ = __str__


def split_pairs(text: str, key: str) -> dict[str, str]:
    """Split ``"a=1,b=x;y"`` into pairs; ``,`` or ``;`` then ``key`` (a regex) and ``=`` starts one.

    Raises:
        ValueError: a piece has no ``=`` or an empty key.
    """
    pairs: dict[str, str] = {}
    if not text.strip():
        return pairs
    for piece in re.split(rf"[,;](?=\s*{key}\s*=)", text.strip()):
        name, sep, value = piece.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{piece!r} is not KEY=VALUE")
        pairs[name.strip()] = value.strip()
    return pairs


def cfg_pairs(cfg_str: str) -> dict[str, str]:
    """Split a run config into ``name=value`` pairs.

    Raises:
        InvalidRunConfigException: the string does not start with ``name=``.
    """
    try:
        return split_pairs(cfg_str, r"[A-Za-z_][\w.\-]*")
    except ValueError as exc:
        raise InvalidRunConfigException(
            f"cannot parse run config {cfg_str.strip()!r}: {exc}; write key=value pairs"
            " separated by ',' or ';', e.g. `log_dir=/tmp/logs,prepend_cwd=true`"
        ) from None


#: The words a bool option or component argument takes for True (any case).
TRUE_WORDS: frozenset[str] = frozenset({"true", "1", "yes", "y", "on"})
#: The words it takes for False.
FALSE_WORDS: frozenset[str] = frozenset({"false", "0", "no", "n", "off"})


def parse_bool(text: str) -> bool:
    """Read a bool as written on a command line: :data:`TRUE_WORDS` or :data:`FALSE_WORDS`.

    Raises:
        ValueError: ``text`` is none of the words.
    """
    lowered = text.strip().lower()
    if lowered in TRUE_WORDS:
        return True
    if lowered in FALSE_WORDS:
        return False
    raise ValueError(
        f"{text!r} is not a bool: write one of {', '.join(sorted(TRUE_WORDS))}"
        f" or {', '.join(sorted(FALSE_WORDS))}"
    )


def _cast(key: str, raw: str, tp: Any) -> CfgVal:
    if tp is bool:
        try:
            return parse_bool(raw)
        except ValueError as exc:
            raise InvalidRunConfigException(f"run option {key!r}: {exc}", key) from None
    kind = _container_kind(tp)
    if kind == "list":
        return [item.strip() for item in re.split(r"[,;]", raw) if item.strip()]
    if kind == "dict":
        pairs: dict[str, str] = {}
        for item in re.split(r"[,;]", raw):
            if not item.strip():
                continue
            name, sep, item_value = item.partition(":")
            if not sep or not name.strip():
                raise InvalidRunConfigException(
                    f"run option {key!r} is a Dict[str, str]: write name:value pairs"
                    f" separated by ',' or ';' (e.g. `{key}=a:1,b:2`), not {raw!r}",
                    key,
                )
            pairs[name.strip()] = item_value.strip()
        return pairs
    try:
        value: CfgVal = tp(raw)
    except ValueError:
        raise InvalidRunConfigException(
            f"run option {key!r} must be of type {_display_name(tp)}, got {raw!r}", key
        ) from None
    return value
