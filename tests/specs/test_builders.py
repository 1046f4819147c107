"""materialize_appdef: the argparse parser built from a component's signature and docstring."""

from __future__ import annotations

from typing import Dict, List, Optional  # noqa: UP035 (typing forms are supported too)

import pytest

from asynctorchx.errors import ComponentValidationException
from asynctorchx.specs import AppDef, Role
from asynctorchx.specs.builders import (
    create_args_parser,
    get_fn_docstring,
    materialize_appdef,
    parse_args,
    split_dict,
)


def typed(
    *rest: str,
    name: str,
    count: int = 1,
    ratio: float = 0.5,
    flag: bool = False,
    tags: list[str] | None = None,
    env: dict[str, str] | None = None,
    ports: List[int] = [],  # noqa: B006, UP006 (typing.List on purpose)
    limits: Optional[Dict[str, int]] = None,  # noqa: UP006, UP045 (on purpose)
    maybe: Optional[int] = None,  # noqa: UP045 (on purpose)
    h: str | None = None,
) -> AppDef:
    """A component with one argument of every supported type.

    Longer description.

    Args:
        rest: passed through
        name: the app name
        count: how many
        ratio: a fraction
        flag: a switch
        tags: some tags
        env: env vars
        ports: port numbers
        limits: limits by name
        maybe: an optional int
        h: a named resource
    """
    return AppDef(
        name=name,
        roles=[Role(name="r", image="img", entrypoint="e", args=list(rest))],
        metadata={
            "values": repr((count, ratio, flag, tags, env, ports, limits, maybe, h)),
        },
    )


def values(app: AppDef) -> tuple[object, ...]:
    decoded: tuple[object, ...] = eval(app.metadata["values"])  # our own repr of plain values
    return decoded


def test_defaults_apply() -> None:
    app = materialize_appdef(typed, ["--name", "x"])
    assert app.name == "x"
    assert app.roles[0].args == []
    assert values(app) == (1, 0.5, False, None, None, [], None, None, None)


def test_every_type_parses() -> None:
    app = materialize_appdef(
        typed,
        [
            "--name", "x",
            "--count", "3",
            "--ratio", "0.25",
            "--flag", "TRUE",
            "--tags", "a, b,c",
            "--env", "FOO=v1,v2;BAR=v3,EMPTY=''",
            "--ports", "80,443",
            "--limits", "cpu=2,mem=4",
            "--maybe", "7",
            "-h", "gpu.small",
        ],
    )  # fmt: skip
    assert values(app) == (
        3,
        0.25,
        True,
        ["a", "b", "c"],
        {"FOO": "v1,v2", "BAR": "v3", "EMPTY": ""},
        [80, 443],
        {"cpu": 2, "mem": 4},
        7,
        "gpu.small",
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [("true", True), ("False", False), ("1", True), ("0", False), ("yes", True), ("off", False)],
)
def test_bool_spellings(text: str, expected: bool) -> None:
    assert values(materialize_appdef(typed, ["--name", "x", "--flag", text]))[2] is expected


def test_varargs_take_the_remainder_and_drop_one_leading_dashdash() -> None:
    app = materialize_appdef(typed, ["--name", "x", "echo", "--count", "-c", "hi"])
    assert app.roles[0].args == ["echo", "--count", "-c", "hi"]
    assert values(app)[0] == 1  # --count after the first positional belongs to *rest
    app = materialize_appdef(typed, ["--name", "x", "--", "--lr", "0.1"])
    assert app.roles[0].args == ["--lr", "0.1"]


def test_one_letter_names_get_a_short_flag_and_help_stays_long() -> None:
    parser = create_args_parser(typed)
    options = {opt for action in parser._actions for opt in action.option_strings}
    assert {"-h", "--h", "--help", "--name"} <= options
    assert "-n" not in options


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--count", "1"], "--name"),  # missing required
        (["--name", "x", "--count", "many"], "--count"),
        (["--name", "x", "--ratio", "half"], "--ratio"),
        (["--name", "x", "--flag", "maybe"], "--flag"),
        (["--name", "x", "--ports", "80,http"], "--ports"),
        (["--name", "x", "--env", "novalue"], "--env"),
        (["--name", "x", "--limits", "cpu=lots"], "--limits"),
        (["--name", "x", "--bogus", "1"], "--bogus"),
    ],
)
def test_parse_errors_name_the_argument(argv: list[str], named: str) -> None:
    with pytest.raises(ComponentValidationException) as caught:
        materialize_appdef(typed, argv)
    assert named in str(caught.value)


def test_abbreviations_are_not_accepted() -> None:
    with pytest.raises(ComponentValidationException, match="--nam"):
        materialize_appdef(typed, ["--nam", "x"])


def test_help_prints_descriptions_and_exits(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        materialize_appdef(typed, ["--help"])
    assert caught.value.code == 0
    out = capsys.readouterr().out
    assert "A component with one argument of every supported type." in out
    assert "Longer description." in out
    assert "the app name (required)" in out
    assert "how many (default: 1)" in out


def test_defaults_mapping_replaces_declared_defaults_and_fills_required() -> None:
    app = materialize_appdef(
        typed, ["--count", "5"], {"name": "from-config", "count": "2", "flag": "true"}
    )
    assert app.name == "from-config"
    assert values(app)[:3] == (5, 0.5, True)
    app = materialize_appdef(typed, [], {"name": "n", "rest": "a 'b c'", "tags": "x,y"})
    assert app.roles[0].args == ["a", "b c"]
    assert values(app)[3] == ["x", "y"]


def test_bad_default_from_config_names_the_argument() -> None:
    with pytest.raises(ComponentValidationException, match="--count"):
        materialize_appdef(typed, [], {"name": "n", "count": "lots"})


def test_values_given_as_data_keep_their_types() -> None:
    config = {"name": "n", "count": 3, "ratio": 1, "flag": True, "tags": ["a"], "maybe": None}
    app = materialize_appdef(typed, [], config=config)
    assert values(app)[:4] == (3, 1, True, ["a"])


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"name": 3}, "'name'"),  # a str parameter given an int
        ({"name": "n", "count": "x"}, "--count"),  # text that does not parse
        ({"name": "n", "count": 2.5}, "'count'"),
        ({"name": "n", "flag": 1}, "'flag'"),
        ({"name": "n", "tags": ["a", 2]}, "'tags'"),
        ({"name": "n", "env": {"K": 1}}, "'env'"),
        ({"name": None}, "'name'"),  # not optional
    ],
)
def test_a_value_given_as_data_of_the_wrong_type_names_the_argument(
    config: dict[str, object], named: str
) -> None:
    # run_component(..., {"msg": 3}) failed later with a bare TypeError in the macros
    with pytest.raises(ComponentValidationException, match=named):
        materialize_appdef(typed, [], config=config)


def test_unknown_default_key_is_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    # a stale [component:x] key must not break a run (TorchX ignores it too)
    app = materialize_appdef(typed, ["--name", "x"], {"nmae": "typo"})
    assert isinstance(app, AppDef)
    assert "'nmae'" in caplog.text


def test_keyword_only_and_positional_parameters() -> None:
    def comp(first: str, second: int = 2, *, third: str = "t") -> AppDef:
        """Comp.

        Args:
            first: a
            second: b
            third: c
        """
        return AppDef(name=f"{first}-{second}-{third}")

    assert materialize_appdef(comp, ["--first", "a", "--third", "z"]).name == "a-2-z"


def test_unsupported_signatures_are_refused() -> None:
    def unannotated(x) -> AppDef:  # type: ignore[no-untyped-def]
        """X.

        Args:
            x: x
        """
        return AppDef(name="x")

    def kwargs(**extra: str) -> AppDef:
        """X."""
        return AppDef(name="x")

    def nested(x: list[list[str]]) -> AppDef:
        """X.

        Args:
            x: x
        """
        return AppDef(name="x")

    with pytest.raises(ComponentValidationException, match=r"'x'.*no type annotation"):
        materialize_appdef(unannotated, ["--x", "1"])
    with pytest.raises(ComponentValidationException, match="kwargs"):
        materialize_appdef(kwargs, [])
    with pytest.raises(ComponentValidationException, match="unsupported type"):
        materialize_appdef(nested, ["--x", "a"])


def test_a_component_must_return_an_appdef() -> None:
    def not_app(x: str = "a") -> AppDef:
        """X.

        Args:
            x: x
        """
        return "oops"  # type: ignore[return-value]

    with pytest.raises(ComponentValidationException, match="returned str"):
        materialize_appdef(not_app, [])


def test_an_async_component_is_refused_before_it_is_called() -> None:
    async def later(x: str = "a") -> AppDef:
        """X.

        Args:
            x: x
        """
        return AppDef(x)

    # refused up front: no coroutine is created, so no "never awaited" warning either
    with pytest.raises(ComponentValidationException, match="async def"):
        materialize_appdef(later, [])  # type: ignore[arg-type]


def test_component_errors_propagate() -> None:
    def picky(x: int = 0) -> AppDef:
        """X.

        Args:
            x: x
        """
        raise ValueError(f"x must be positive, got {x}")

    with pytest.raises(ValueError, match="got -1"):
        materialize_appdef(picky, ["--x", "-1"])


def test_docstring_fallbacks() -> None:
    def bare(x: str = "a") -> AppDef:
        return AppDef(name=x)

    description, helps = get_fn_docstring(bare)
    assert description.startswith("bare TIP")
    assert helps == {"x": " "}
    description, helps = get_fn_docstring(typed)
    assert description.splitlines()[0] == "A component with one argument of every supported type."
    assert helps["rest"] == "passed through"


def test_parse_args_returns_decoded_values() -> None:
    parsed = parse_args(typed, ["--name", "x", "--tags", "", "a"])
    assert parsed["tags"] == []
    assert parsed["rest"] == ["a"]


def test_split_dict() -> None:
    assert split_dict("") == {}
    assert split_dict("A=1") == {"A": "1"}
    assert split_dict("A=1;2,B=x=y") == {"A": "1;2", "B": "x=y"}
    assert split_dict('A=""') == {"A": ""}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        split_dict("=1")
