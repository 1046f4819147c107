"""TorchX 0.7.0's builders, mounts, linter and finder names and behaviours (issue 13).

Each expectation was read off TorchX 0.7.0 by running it.
"""

from __future__ import annotations

import argparse
import re
import textwrap
import typing
from pathlib import Path

import pytest

from asynctorchx.errors import (
    ComponentNotFoundException,
    ComponentUsageError,
    ComponentValidationException,
)
from asynctorchx.specs import AppDef, Role, builders, file_linter, finder
from asynctorchx.specs.api import BindMount, DeviceMount, VolumeMount, parse_mounts


def comp(a: str, b: typing.Optional[typing.Dict[str, typing.List[str]]] = None) -> AppDef:  # noqa: UP006, UP045
    """Comp.

    Args:
        a: A
        b: B
    """
    return AppDef(
        "x",
        roles=[Role("r", image="i", args=[a], env={k: ",".join(v) for k, v in (b or {}).items()})],
    )


def variadic(*args: str, x: str = "1") -> AppDef:
    """Variadic.

    Args:
        args: the words
        x: X
    """
    return AppDef("x", roles=[Role("r", image="i", args=list(args))])


def test_builders_reexports_torchx_names() -> None:
    assert builders.make_app_handle("local_cwd", "s", "app") == "local_cwd://s/app"
    assert builders.parse_mounts is parse_mounts
    assert (builders.BindMount, builders.VolumeMount, builders.DeviceMount) == (
        BindMount,
        VolumeMount,
        DeviceMount,
    )


@pytest.mark.parametrize(
    "opts",
    [
        ["type=bind", "src=a"],
        ["type=bind", "dst=b"],
        ["type=volume", "src=a"],
        ["type=device"],
        ["src=a", "dst=b"],
        ["type=bind", "src=a", "dst=b", "bogus=1"],
    ],
)
def test_parse_mounts_raises_key_error_where_torchx_does(opts: list[str]) -> None:
    with pytest.raises(KeyError) as caught:
        parse_mounts(opts)
    assert isinstance(caught.value, ValueError)  # our own callers catch ValueError
    assert not str(caught.value).startswith("'")  # the message, not KeyError's quoting


def test_parse_mounts_unknown_type_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="foo") as caught:
        parse_mounts(["type=foo", "src=a"])
    assert not isinstance(caught.value, KeyError)


@pytest.mark.parametrize(
    ("opts", "torchx_sentence"),
    [
        (["src=foo"], "type must be specified first"),
        (["blah=foo"], "unknown mount option blah, must be one of ["),
        (
            ["type=foo", "src=a"],
            "invalid mount type 'foo', must be one of ['bind', 'volume', 'device']",
        ),
        (
            ["type=foo"],  # the type is checked before the missing src
            "invalid mount type 'foo', must be one of ['bind', 'volume', 'device']",
        ),
        (
            ["type=device", "src=/dev/x", "perm=rx"],
            "x is not a valid permission flags must one of r,w,m",
        ),
    ],
)
def test_parse_mounts_messages_start_with_torchx_sentence(
    opts: list[str], torchx_sentence: str
) -> None:
    """Code matching TorchX's message (``assertRaisesRegex``) still matches; the hint follows."""
    with pytest.raises(ValueError, match=re.escape(torchx_sentence)) as caught:
        parse_mounts(opts)
    message = str(caught.value)
    assert message.startswith(torchx_sentence)
    assert len(message) > len(torchx_sentence)  # and says how to fix it


def test_dict_of_lists_parameter_is_accepted() -> None:
    assert builders.materialize_appdef(comp, ["--a", "x"]).roles[0].args == ["x"]
    app = builders.materialize_appdef(comp, ["--a", "x", "--b", "FOO=1,2;BAR=3"])
    assert app.roles[0].env == {"FOO": "1,2", "BAR": "3"}


def test_a_missing_required_argument_is_a_usage_error_with_the_usage() -> None:
    # not TorchX's SystemExit(2): a service that catches Exception catches it
    with pytest.raises(ComponentUsageError) as caught:
        builders.materialize_appdef(comp, [])
    assert not isinstance(caught.value, SystemExit)
    assert isinstance(caught.value, ComponentValidationException)
    assert "-a/--a" in str(caught.value)
    assert "--help" not in str(caught.value)  # the CLI's wording, added by the CLI
    assert caught.value.usage.startswith("usage: ")
    assert builders.ComponentUsageError is ComponentUsageError


def test_an_unknown_argument_is_a_usage_error() -> None:
    with pytest.raises(ComponentUsageError, match="--nope"):
        builders.materialize_appdef(comp, ["--a", "x", "--nope", "1"])


def test_varargs_default_is_none_and_parses_to_empty() -> None:
    parser = builders.create_args_parser(variadic)
    (action,) = [a for a in parser._actions if a.dest == "args"]
    assert action.default is None
    assert builders.materialize_appdef(variadic, []).roles[0].args == []
    assert builders.materialize_appdef(variadic, ["a", "b"]).roles[0].args == ["a", "b"]


def test_help_formatter_and_docstring_helpers_live_in_file_linter() -> None:
    assert issubclass(file_linter.TorchXArgumentHelpFormatter, argparse.HelpFormatter)
    assert builders.get_fn_docstring is file_linter.get_fn_docstring
    description, helps = file_linter.get_fn_docstring(variadic)
    assert description == "Variadic."
    assert helps == {"args": "the words", "x": "X"}
    parser = builders.create_args_parser(comp)
    assert parser.formatter_class is file_linter.TorchXArgumentHelpFormatter
    text = parser.format_help()
    assert "A (required)" in text
    assert "B (default: None)" in text


def test_get_fn_docstring_without_docstring() -> None:
    def bare(a: str) -> AppDef:
        return AppDef("x")

    description, helps = file_linter.get_fn_docstring(bare)
    assert description.startswith("bare TIP:")
    assert helps == {"a": " "}


def _write(tmp_path: Path, source: str) -> str:
    path = tmp_path / "comp.py"
    path.write_text(textwrap.dedent(source))
    return str(path)


def test_component_without_docstring_is_valid(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "from asynctorchx.specs import AppDef\ndef f(a: str) -> AppDef:\n    return AppDef('x')\n",
    )
    assert file_linter.validate(path, "f") == []
    warnings = file_linter.warnings(file_linter.check(path, "f"))
    assert [m.name for m in warnings] == ["docstring"]
    (component,) = finder.CustomComponentsFinder(path, "f").find()
    assert component.validation_errors == []
    assert component.fn_name == "f"
    assert isinstance(component.fn("v"), AppDef)


def test_custom_finder_reports_errors_without_running_the_file(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "raise SystemExit('must not run')\ndef f(a) -> AppDef:\n    return None\n"
    )
    (component,) = finder.CustomComponentsFinder(path, "f").find()
    assert component.validation_errors
    with pytest.raises(ComponentNotFoundException):
        finder.CustomComponentsFinder(path, "nope").find()


def test_module_components_finder_and_module_relname() -> None:
    import asynctorchx.components as components
    import asynctorchx.components.dist as dist

    found = {c.name: c for c in finder.ModuleComponentsFinder("asynctorchx.components", "").find()}
    assert found["dist.ddp"].fn_name == "ddp"
    grouped = {c.name for c in finder.ModuleComponentsFinder(dist, "mine").find()}
    assert "mine.ddp" in grouped
    assert finder.module_relname(dist, relative_to=components) == "dist"
    assert finder.module_relname(dist, relative_to=dist) == ""
    with pytest.raises(ValueError, match="not a submodule"):
        finder.module_relname(components, relative_to=dist)


def test_get_builtin_source_has_imports_and_the_function() -> None:
    source = finder.get_builtin_source("utils.echo")
    assert "def echo(" in source
    assert "import " in source.split("def echo(")[0]
    compile(source, "echo.py", "exec")
