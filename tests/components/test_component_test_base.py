"""``ComponentTestCase``: TorchX's helper for testing one's own components, synchronous."""

from __future__ import annotations

import unittest
from pathlib import Path
from types import ModuleType

import pytest

from asynctorchx.components import utils
from asynctorchx.components.component_test_base import ComponentTestCase
from asynctorchx.errors import ComponentValidationException
from asynctorchx.specs import AppState

BROKEN = '''
from asynctorchx.specs import AppDef

def unannotated(msg) -> AppDef:
    """Has an argument without a type.

    Args:
        msg: the message
    """
    return AppDef(name="x")
'''


def case() -> ComponentTestCase:
    return ComponentTestCase("run")  # the method name unittest requires; never run


def load(path: Path) -> ModuleType:
    module = ModuleType("broken_component")
    module.__file__ = str(path)
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    return module


def test_it_is_a_unittest_test_case() -> None:
    assert issubclass(ComponentTestCase, unittest.TestCase)


def test_validate_accepts_a_builtin() -> None:
    case().validate(utils, "echo")


def test_validate_refuses_a_component_the_cli_would_refuse(tmp_path: Path) -> None:
    path = tmp_path / "broken_component.py"
    path.write_text(BROKEN)
    with pytest.raises(ComponentValidationException, match="msg"):
        case().validate(load(path), "unannotated")


def test_run_component_runs_it_to_the_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    status = case().run_component(
        utils.python, {"c": "print('hi')"}, scheduler_params={"cache_size": 1}
    )
    assert status is not None
    assert status.state == AppState.SUCCEEDED


def test_run_component_raises_what_the_scheduler_factory_raises() -> None:
    with pytest.raises(ValueError, match="cache_size"):
        case().run_component(utils.echo, {"msg": "x"}, scheduler_params={"cache_size": -1})


def test_run_component_gives_the_status_when_the_timeout_expires(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # the replica waits for a signal: only the runner's close ends it
    status = case().run_component(utils.python, {"c": "import signal; signal.pause()"}, timeout=0)
    assert status is not None
    assert not status.is_terminal()
