"""Class components, as torchx-nightly finds them: ``file.py:Cls``, ``pkg.module:Cls`` and
``pkg.module.Cls``, whose constructor takes the arguments and whose ``build()`` makes the app;
each beside nightly's own lookup, through our linter and through the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from asynctorchx.errors import ComponentNotFoundException, ComponentValidationException
from asynctorchx.specs import file_linter
from asynctorchx.specs.builders import create_args_parser, materialize_appdef
from asynctorchx.specs.finder import get_component
from tests.nightly import run_nightly

# No `from __future__ import annotations`: nightly reads the raw annotations, so strings fail it.
COMPONENTS = '''
import asynctorchx.specs as specs


class Hello:
    """Echo a message.

    Args:
        msg: what to echo
    """

    def __init__(self, msg: str = "hello") -> None:
        self.msg = msg

    def build(self) -> specs.AppDef:
        role = specs.Role("echo", "/", entrypoint="echo", args=[self.msg])
        return specs.AppDef("hello", roles=[role])


class Louder(Hello):
    """Echo a message, its ``build`` inherited."""


class NoBuild:
    """Has no build."""

    def __init__(self, msg: str) -> None:
        self.msg = msg
'''

NIGHTLY_LOOKUP = """
import json, sys
from torchx.specs.finder import get_component
out = {}
for name in json.load(sys.stdin):
    try:
        out[name] = get_component(name).fn_name
    except Exception as error:
        out[name] = type(error).__name__
print(json.dumps(out))
"""

NAMES = [
    *(f"{path}{sep}{cls}" for path, sep in [("clspkg.comps", "."), ("clspkg.comps", ":")]
      for cls in ("Hello", "Louder", "NoBuild", "Nope")),
    "clspkg/comps.py:Hello",
    "clspkg/comps.py:NoBuild",
]  # fmt: skip


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / "clspkg").mkdir()
    (tmp_path / "clspkg" / "__init__.py").write_text("")
    (tmp_path / "clspkg" / "comps.py").write_text(COMPONENTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for name in [name for name in sys.modules if name.partition(".")[0] == "clspkg"]:
        del sys.modules[name]


def _ours(name: str) -> str:
    try:
        return get_component(name).fn_name
    except (ComponentNotFoundException, ComponentValidationException) as error:
        return type(error).__name__


def test_class_names_resolve_as_nightly_resolves_them(package: Path) -> None:
    nightly_source = COMPONENTS.replace("asynctorchx", "torchx")
    (package / "clspkg" / "comps.py").write_text(nightly_source)
    theirs = run_nightly(NIGHTLY_LOOKUP, NAMES, env={"PYTHONPATH": str(package)})
    (package / "clspkg" / "comps.py").write_text(COMPONENTS)
    assert {name: _ours(name) for name in NAMES} == theirs
    assert theirs["clspkg.comps.Hello"] == "Hello"
    assert theirs["clspkg.comps.NoBuild"] == "ComponentValidationException"


@pytest.mark.parametrize(
    "name", ["clspkg.comps.Hello", "clspkg.comps:Hello", "clspkg/comps.py:Hello"]
)
def test_a_class_builds_its_app_from_the_constructor_arguments(package: Path, name: str) -> None:
    component = get_component(name)
    assert component.description == "Echo a message."
    assert materialize_appdef(component.fn, ["--msg", "hi"]).roles[0].args == ["hi"]
    assert "what to echo" in create_args_parser(component.fn).format_help()


def test_a_class_without_build_names_the_class_and_the_method_to_add(package: Path) -> None:
    with pytest.raises(ComponentValidationException, match=r"'NoBuild'.*def build\(self\)"):
        get_component("clspkg/comps.py:NoBuild")


def test_the_linter_checks_a_class_as_the_function_its_constructor_and_build_make() -> None:
    source = '''
class Bad:
    """Bad."""

    def __init__(self, msg, n: object) -> None:
        pass

    def build(self):
        pass
'''
    found = [m.description for m in file_linter.errors(file_linter.validate_source(source, "Bad"))]
    assert found == [
        "argument 'msg' of 'Bad' has no type annotation: annotate it, e.g. `msg: str`",
        "argument 'n' of 'Bad': object is not a supported type; use str, int, float, bool,"
        " list[str], dict[str, str] or Optional of one of them",
        "'Bad.build' has no return annotation to return AppDef: declare `-> AppDef`",
    ]


def test_string_annotations_of_a_class_resolve(package: Path) -> None:
    source = "from __future__ import annotations\nfrom typing import Optional\n" + COMPONENTS
    source = source.replace("msg: str = ", "msg: Optional[str] = ")
    (package / "later.py").write_text(source)
    component = get_component("later.py:Hello")
    assert materialize_appdef(component.fn, ["--msg", "hi"]).roles[0].args == ["hi"]


def _cli(package: Path, *args: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(filter(None, [str(package), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "HOME": str(package), "PYTHONPATH": path}
    return subprocess.run(
        [sys.executable, "-m", "asynctorchx", "run", "-s", "local_cwd", *args],
        cwd=package,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_run_a_class_component_from_the_command_line(package: Path) -> None:
    done = _cli(package, "clspkg/comps.py:Hello", "--msg", "hi from a class")
    assert done.returncode == 0, done.stderr
    assert "hi from a class" in done.stdout + done.stderr
    helped = _cli(package, "clspkg.comps.Hello", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "Echo a message." in helped.stdout
    assert "what to echo" in helped.stdout
