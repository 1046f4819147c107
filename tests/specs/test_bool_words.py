"""One grammar for bools: run options (``-cfg``) and component arguments read the same words."""

from __future__ import annotations

import pytest

from asynctorchx.errors import ComponentValidationException, InvalidRunConfigException
from asynctorchx.specs._runopts import FALSE_WORDS, TRUE_WORDS, parse_bool
from asynctorchx.specs.api import AppDef, Role, runopts
from asynctorchx.specs.builders import materialize_appdef

#: every spelling, in several cases, with the value it means
WORDS: list[tuple[str, bool]] = [
    *((word, True) for word in ("true", "True", "TRUE", "1", "yes", "Yes", "y", "on", "ON")),
    *((word, False) for word in ("false", "False", "0", "no", "NO", "n", "off", "Off")),
]
NOT_BOOLS = ["2", "maybe", "t", "", "truee"]


def flagged(debug: bool = False) -> AppDef:
    """An app whose only arg is the flag.

    Args:
        debug: the flag
    """
    return AppDef(name="f", roles=[Role(name="f", image=".", entrypoint="x", args=[str(debug)])])


def _opts() -> runopts:
    opts = runopts()
    opts.add("debug", type_=bool, help="the flag", default=False)
    return opts


def test_the_table_covers_every_word() -> None:
    assert {word.lower() for word, _ in WORDS} == TRUE_WORDS | FALSE_WORDS


@pytest.mark.parametrize(("word", "expected"), WORDS)
def test_run_options_and_component_arguments_read_the_same_words(word: str, expected: bool) -> None:
    assert parse_bool(word) is expected
    assert _opts().cfg_from_str(f"debug={word}") == {"debug": expected}
    app = materialize_appdef(flagged, ["--debug", word])
    assert app.roles[0].args == [str(expected)]


@pytest.mark.parametrize("word", NOT_BOOLS)
def test_both_refuse_the_same_other_words(word: str) -> None:
    with pytest.raises(ValueError, match="not a bool"):
        parse_bool(word)
    with pytest.raises(InvalidRunConfigException, match="'debug'"):
        _opts().cfg_from_str(f"debug={word}")
    with pytest.raises(ComponentValidationException, match="debug"):
        materialize_appdef(flagged, ["--debug", word])
