"""Components named by a dotted module path, as torchx-nightly finds them: ``pkg.module.fn``
and ``pkg.module:fn``, each beside nightly's own lookup and through the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from asynctorchx.errors import ComponentNotFoundException
from asynctorchx.specs.finder import get_component
from tests.nightly import run_nightly

COMPONENTS = '''
import asynctorchx.specs as specs


def hello(msg: str = "hello") -> specs.AppDef:
    """Echo ``msg``."""
    return specs.AppDef("hello", roles=[specs.Role("echo", "/", entrypoint="echo", args=[msg])])
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

NAMES = ["mypkg.comps.hello", "mypkg.comps:hello", "mypkg.comps.nope", "mypkg.comps:nope"]


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "comps.py").write_text(COMPONENTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _ours(name: str) -> str:
    try:
        return get_component(name).fn_name
    except ComponentNotFoundException as error:
        return type(error).__name__


def test_dotted_names_resolve_as_nightly_resolves_them(package: Path) -> None:
    nightly_source = (package / "mypkg" / "comps.py").read_text().replace("asynctorchx", "torchx")
    (package / "mypkg" / "comps.py").write_text(nightly_source)
    theirs = run_nightly(NIGHTLY_LOOKUP, NAMES, env={"PYTHONPATH": str(package)})
    (package / "mypkg" / "comps.py").write_text(COMPONENTS)
    assert {name: _ours(name) for name in NAMES} == theirs
    assert theirs["mypkg.comps.hello"] == "hello"
    assert theirs["mypkg.comps.nope"] == "ComponentNotFoundException"


def test_a_missing_function_of_an_existing_module_names_both(package: Path) -> None:
    with pytest.raises(ComponentNotFoundException, match=r"'mypkg\.comps'.*'nope'"):
        get_component("mypkg.comps.nope")


def test_run_a_dotted_component_from_the_command_line(package: Path) -> None:
    env = {**os.environ, "HOME": str(package), "PYTHONPATH": str(package)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "asynctorchx",
            "run",
            "-s",
            "local_cwd",
            "mypkg.comps.hello",
            "--msg",
            "hi",
        ],
        cwd=package,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "hi" in done.stdout + done.stderr
