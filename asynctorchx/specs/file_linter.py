"""The component linter (``torchx.specs.file_linter``): check a component without running it.

A class component is checked as the function ``Cls(<__init__'s arguments>) -> <build's return>``
with the class's docstring.
"""

from __future__ import annotations

import argparse
import ast
import copy
import inspect
from collections.abc import Callable
from pathlib import Path

import attrs
import docstring_parser

#: The annotation names a component parameter may use for a single value.
PRIMITIVES: frozenset[str] = frozenset({"str", "int", "float", "bool"})
_LISTS = frozenset({"list", "List"})
_DICTS = frozenset({"dict", "Dict"})
_SUPPORTED = "str, int, float, bool, list[str], dict[str, str] or Optional of one of them"


@attrs.define
class LinterMessage:
    """One finding of :func:`validate`.

    Args:
        name: the rule (``docstring``, ``annotation``, ``return``, ``syntax``, ``not-found``).
        description: what is wrong and how to fix it.
        line: 1-based line in the file (0: none).
        char: 0-based column (0: unknown).
        severity: ``"error"`` (the component is refused) or ``"warning"``.
    """

    name: str
    description: str
    line: int
    char: int
    severity: str = "error"


def _name_of(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _check_type(node: ast.expr, *, allow_optional: bool = True) -> str | None:
    """Why the annotation is not supported, or ``None``; ``Optional`` only outermost."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        parsed = _parse_annotation(node.value)
        if parsed is None:
            return f"the string annotation {node.value!r} is not a type expression"
        return _check_type(parsed, allow_optional=allow_optional)
    name = _name_of(node)
    if name is not None:
        return None if name in PRIMITIVES else f"{name} is not a supported type"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _check_union(
            [node.left, node.right], allow_optional, "a union other than `T | None`"
        )
    if isinstance(node, ast.Subscript):
        return _check_subscript(node, allow_optional)
    return f"{ast.unparse(node)} is not a supported type"


def _check_union(members: list[ast.expr], allow_optional: bool, refused: str) -> str | None:
    rest = [m for m in members if not (isinstance(m, ast.Constant) and m.value is None)]
    if allow_optional and len(rest) == 1 and len(members) == 2:
        return _check_type(rest[0], allow_optional=False)
    return f"{refused} is not supported"


def _check_subscript(node: ast.Subscript, allow_optional: bool) -> str | None:
    base = _name_of(node.value)
    args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if base == "Optional" and allow_optional and len(args) == 1:
        return _check_type(args[0], allow_optional=False)
    if base == "Union" and allow_optional:
        return _check_union(args, allow_optional, "a Union other than Union[T, None]")
    if base in _LISTS or base in _DICTS:
        expected = 1 if base in _LISTS else 2
        if base in _DICTS and len(args) == 2 and _is_primitive_list(args[1]):
            args = args[:1]
            expected = 1
        if len(args) != expected or any(_name_of(arg) not in PRIMITIVES for arg in args):
            kind = "List" if base in _LISTS else "Dict"
            return f"{kind} can only hold the primitive types str, int, float and bool"
        return None
    return f"{ast.unparse(node)} is not a supported type"


def _is_primitive_list(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Subscript)
        and _name_of(node.value) in _LISTS
        and _name_of(node.slice) in PRIMITIVES
    )


def _params(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.arg]:
    vararg = [func.args.vararg] if func.args.vararg is not None else []
    return [*func.args.posonlyargs, *func.args.args, *vararg, *func.args.kwonlyargs]


def _at(
    node: ast.arg | ast.stmt, name: str, description: str, severity: str = "error"
) -> LinterMessage:
    return LinterMessage(name, description, node.lineno, node.col_offset, severity)


def _check_args(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[LinterMessage]:
    messages: list[LinterMessage] = []
    for arg in _params(func):
        if arg.annotation is None:
            why = f" has no type annotation: annotate it, e.g. `{arg.arg}: str`"
        else:
            problem = _check_type(arg.annotation)
            if problem is None:
                continue
            why = f": {problem}; use {_SUPPORTED}"
        messages.append(_at(arg, "annotation", f"argument {arg.arg!r} of {func.name!r}{why}"))
    kwarg = func.args.kwarg
    if kwarg is not None:
        why = "components cannot take **kwargs; declare each argument"
        messages.append(_at(kwarg, "annotation", f"{func.name!r} takes **{kwarg.arg}: {why}"))
    return messages


def _parse_annotation(text: str) -> ast.expr | None:
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError:
        return None


def _return_name(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        node = _parse_annotation(node.value)
    return None if node is None else _name_of(node)


def _check_return(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[LinterMessage]:
    if isinstance(func, ast.AsyncFunctionDef):
        why = (
            "calling it returns a coroutine, not an AppDef; make it a plain `def`"
            " (components only describe the app)"
        )
        return [_at(func, "return", f"{func.name!r} is an `async def`: {why}")]
    if _return_name(func.returns) == "AppDef":
        return []
    what = "has no return annotation" if func.returns is None else "is not annotated"
    found = "" if func.returns is None else f" (found `{ast.unparse(func.returns)}`)"
    why = f"{what} to return AppDef: declare `-> AppDef`{found}"
    return [_at(func, "return", f"{func.name!r} {why}")]


def _check_docstring(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[LinterMessage]:
    text = ast.get_docstring(func)
    if not text:
        why = (
            "its --help will only name the arguments; describe the component and each"
            " argument in a Google-style docstring (a summary line, then `Args:`)"
        )
        return [_at(func, "docstring", f"{func.name!r} has no docstring: {why}", "warning")]
    try:
        documented = {
            param.arg_name.lstrip("*")
            for param in docstring_parser.parse(text, docstring_parser.DocstringStyle.GOOGLE).params
        }
    except docstring_parser.ParseError as exc:
        why = f"is not Google style ({exc}): its --help will show the docstring as it is"
        return [_at(func, "docstring", f"the docstring of {func.name!r} {why}", "warning")]
    why = "is not described in the docstring's `Args:` section: its --help will be empty"
    return [
        _at(func, "docstring", f"argument {arg.arg!r} of {func.name!r} {why}", "warning")
        for arg in _params(func)
        if arg.arg not in documented
    ]


def _check_class(cls: ast.ClassDef) -> list[LinterMessage]:
    """A class component's findings: ``__init__``'s arguments, its docstring, ``build``'s return."""
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    init = methods.get("__init__")
    args = copy.copy(init.args) if init else ast.arguments([], [], None, [], [], None, [])
    if init and args.posonlyargs:  # `self` is not an argument of the component
        args.posonlyargs = args.posonlyargs[1:]
    elif init:
        args.args = args.args[1:]
    as_fn = ast.FunctionDef(
        cls.name, args, cls.body, [], lineno=cls.lineno, col_offset=cls.col_offset
    )
    messages = [*_check_docstring(as_fn), *_check_args(as_fn)]
    if "build" not in methods:  # maybe inherited: the finder checks the loaded class
        return messages
    build = copy.copy(methods["build"])
    build.name = f"{cls.name}.build"
    return [*messages, *_check_return(build)]


def validate_source(
    source: str, function_name: str, filename: str = "<string>"
) -> list[LinterMessage]:
    """Return the findings, errors and warnings, for the component ``function_name`` of ``source``.

    Args:
        source: the module's source text.
        function_name: the component function's or class's name.
        filename: named in a syntax error's message.
    """
    try:
        module = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        why = f"{filename} does not parse: {exc.msg}"
        return [LinterMessage("syntax", why, exc.lineno or 0, exc.offset or 0)]
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function_name:
            return [*_check_docstring(node), *_check_args(node), *_check_return(node)]
        if isinstance(node, ast.ClassDef) and node.name == function_name:
            return _check_class(node)
    why = f"function or class {function_name!r} not found at the top level of {filename}:"
    return [LinterMessage("not-found", why + " check the name after the ':'", 0, 0)]


def read_conf_file(conf_file: str) -> str:
    """Return the text of ``conf_file`` (UTF-8); :func:`check` calls it, so tests may patch it.

    Raises:
        OSError: the file cannot be read.
        UnicodeDecodeError: the file is not UTF-8.
    """
    return Path(conf_file).read_text(encoding="utf-8")


def check(path: str, component_function: str) -> list[LinterMessage]:
    """Return every finding for ``component_function`` in ``path`` (parsed, never imported).

    Raises:
        OSError: the file cannot be read.
        UnicodeDecodeError: the file is not UTF-8.
    """
    return validate_source(read_conf_file(path), component_function, filename=path)


def validate(path: str, component_function: str) -> list[LinterMessage]:
    """Return the errors of ``component_function`` in ``path``; ``[]``: valid (TorchX's).

    Raises:
        OSError: the file cannot be read.
        UnicodeDecodeError: the file is not UTF-8.
    """
    return errors(check(path, component_function))


def errors(messages: list[LinterMessage]) -> list[LinterMessage]:
    """Return the messages of severity ``error`` only."""
    return [message for message in messages if message.severity == "error"]


def warnings(messages: list[LinterMessage]) -> list[LinterMessage]:
    """Return the messages of severity ``warning`` only."""
    return [message for message in messages if message.severity == "warning"]


class TorchXArgumentHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Component ``--help``: an argument's help ends ``(required)`` or ``(default: X)``."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default is argparse.SUPPRESS or action.nargs == argparse.REMAINDER:
            return text
        if action.required:
            return text + " (required)"
        return text + f" (default: {action.default})"


def get_fn_docstring(fn: Callable[..., object]) -> tuple[str, dict[str, str]]:
    """Return ``(description, {parameter: help})`` from ``fn``'s Google-style docstring (TorchX's).

    An undescribed parameter's help is ``" "``. Never raises.
    """
    params = inspect.signature(fn).parameters
    helps = {name: " " for name in params}
    doc = inspect.getdoc(fn)
    fallback = (
        f"{getattr(fn, '__name__', 'component')} TIP: improve this help string by adding a"
        " Google-style docstring to your component"
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
