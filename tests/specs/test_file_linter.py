"""The component linter's three rules: docstring, annotations, AppDef return."""

from __future__ import annotations

import textwrap
from pathlib import Path
from unittest.mock import patch

import pytest

import asynctorchx.components.dist as dist_module
import asynctorchx.components.utils as utils_module
from asynctorchx.specs import file_linter
from asynctorchx.specs.file_linter import LinterMessage, errors, validate, validate_source

GOOD = '''
from typing import Dict, List, Optional
from asynctorchx.specs import AppDef
from asynctorchx import specs

def good(*args: str, a: int, b: "float" = 1.0, c: Optional[List[str]] = None,
         d: dict[str, int] | None = None, e: Dict[str, str] = {}, f: bool = False) -> AppDef:
    """Does things.

    Args:
        args: rest
        a: a
        b: b
        c: c
        d: d
        e: e
        f: f
    """
    return AppDef(name="x")

def qualified(x: str) -> specs.AppDef:
    """Q.

    Args:
        x: x
    """

def stringly(x: str) -> "AppDef":
    """S.

    Args:
        x: x
    """
'''


def lint(source: str, fn: str) -> list[LinterMessage]:
    return validate_source(textwrap.dedent(source), fn, filename="comp.py")


@pytest.mark.parametrize("fn", ["good", "qualified", "stringly"])
def test_valid_components_have_no_message(fn: str) -> None:
    assert lint(GOOD, fn) == []


def test_missing_docstring_is_only_a_warning() -> None:
    # TorchX accepts a component without a docstring; we accept it and advise
    messages = lint("def f(x: str) -> AppDef:\n    return None\n", "f")
    assert [(m.name, m.severity, m.line) for m in messages] == [("docstring", "warning", 1)]
    assert "no docstring" in messages[0].description
    assert errors(messages) == []


def test_undocumented_argument_is_a_warning() -> None:
    source = '''
    def f(x: str, y: int) -> AppDef:
        """F.

        Args:
            x: x
        """
    '''
    messages = lint(source, "f")
    assert [(m.name, m.severity) for m in messages] == [("docstring", "warning")]
    assert "'y'" in messages[0].description
    assert errors(messages) == []


def test_unannotated_and_unsupported_arguments() -> None:
    source = '''
    def f(a, *rest, b: object, c: List[List[str]], d: Union[int, str], e: Dict[str, list],
          f: Optional[Optional[int]], **kw: str) -> AppDef:
        """F.

        Args:
            a: a
            rest: r
            b: b
            c: c
            d: d
            e: e
            f: f
            kw: k
        """
    '''
    messages = errors(lint(source, "f"))
    by_arg = {m.description.split("'")[1]: m for m in messages}
    assert set(by_arg) == {"a", "rest", "b", "c", "d", "e", "f"}
    assert "no type annotation" in by_arg["a"].description
    assert "no type annotation" in by_arg["rest"].description
    assert "object is not a supported type" in by_arg["b"].description
    assert "List can only hold" in by_arg["c"].description
    assert "Union" in by_arg["d"].description
    assert "Dict can only hold" in by_arg["e"].description
    assert all(m.name == "annotation" for m in by_arg.values())
    assert any("**kw" in m.description for m in messages)
    assert by_arg["a"].line == 2


@pytest.mark.parametrize(
    ("signature", "found"),
    [("def f(x: str):", "has no return annotation"), ("def f(x: str) -> str:", "`str`")],
)
def test_return_must_be_appdef(signature: str, found: str) -> None:
    source = f'{signature}\n    """F.\n\n    Args:\n        x: x\n    """\n'
    messages = lint(source, "f")
    assert [m.name for m in messages] == ["return"]
    assert found in messages[0].description
    assert "-> AppDef" in messages[0].description


def test_async_def_is_refused() -> None:
    source = 'async def f(x: str) -> AppDef:\n    """F.\n\n    Args:\n        x: x\n    """\n'
    messages = lint(source, "f")
    assert [m.name for m in messages] == ["return"]
    assert "async def" in messages[0].description
    assert messages[0].severity == "error"


def test_syntax_error_is_one_message() -> None:
    messages = lint("def f(:\n", "f")
    assert len(messages) == 1
    assert messages[0].name == "syntax"
    assert messages[0].line == 1


def test_missing_function_is_one_message() -> None:
    messages = lint(GOOD, "nope")
    assert [m.name for m in messages] == ["not-found"]
    assert "'nope'" in messages[0].description


def test_nested_functions_are_not_components() -> None:
    source = '''
    def outer() -> None:
        def inner(x: str) -> AppDef:
            """I."""
    '''
    assert [m.name for m in lint(source, "inner")] == ["not-found"]


def test_validate_reads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "comp.py"
    path.write_text(textwrap.dedent(GOOD))
    assert validate(str(path), "good") == []
    with pytest.raises(FileNotFoundError):
        validate(str(tmp_path / "missing.py"), "good")


def test_the_linter_reads_through_read_conf_file(tmp_path: Path) -> None:
    path = tmp_path / "comp.py"
    path.write_text(textwrap.dedent(GOOD))
    assert file_linter.read_conf_file(str(path)) == textwrap.dedent(GOOD)
    with patch("asynctorchx.specs.file_linter.read_conf_file", return_value="!!foo====bar"):
        messages = validate(str(path), "good")
    assert [m.name for m in messages] == ["syntax"]
    with pytest.raises(FileNotFoundError):
        file_linter.read_conf_file(str(tmp_path / "missing.py"))


@pytest.mark.parametrize(
    ("module", "names"),
    [
        (utils_module, ["echo", "touch", "sh", "python", "copy", "booth", "binary"]),
        (dist_module, ["ddp", "spmd"]),
    ],
)
def test_every_builtin_passes_without_warnings(module: object, names: list[str]) -> None:
    path = str(module.__file__)  # type: ignore[attr-defined]
    for name in names:
        assert validate(path, name) == [], name
