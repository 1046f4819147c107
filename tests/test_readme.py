"""The README's examples run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_example_runs(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks, "the README has no Python example"
    out = subprocess.run(
        [sys.executable, "-c", blocks[0]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "hi\nSUCCEEDED\n"


def test_readme_first_command_runs_echo_on_local_cwd(tmp_path: Path) -> None:
    first = re.search(r"```sh\n(.*?)\n```", README.read_text(), flags=re.DOTALL)
    assert first is not None
    command = first.group(1)
    assert "asynctorchx run -s local_cwd utils.echo" in command
    run = command.split("&& ", 2)[-1].removeprefix(".venv/bin/asynctorchx ")
    args = [arg.strip('"') for arg in re.findall(r'"[^"]*"|\S+', run)]
    out = subprocess.run(
        [sys.executable, "-m", "asynctorchx", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "echo/0 hello from asynctorchx\n" in out.stderr


def test_an_editable_install_is_visible_to_type_checkers(tmp_path: Path) -> None:
    # After the README's `pip install -e .`, mypy on a user's script outside the repo
    # must resolve the package: a type checker does not run setuptools' import hooks.
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    if not list(site.glob("__editable__*asynctorchx*")):
        pytest.skip("asynctorchx is not installed in editable mode here (pip install -e .)")
    script = tmp_path / "user_script.py"
    script.write_text("from asynctorchx.runner import get_runner\n\nreveal_type(get_runner)\n")
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "asynctorchx.runner._runner.Runner" in out.stdout, out.stdout + out.stderr
    assert out.returncode == 0, out.stdout


def test_the_readme_and_help_say_how_to_open_the_docs() -> None:
    from asynctorchx.cli.main import DOCS_URL

    out = subprocess.run(
        [sys.executable, "-m", "asynctorchx", "--help"], capture_output=True, text=True, check=True
    )
    for said in (README.read_text(), out.stdout):
        words = " ".join(said.split())
        assert "pip install -e '.[docs]'" in words
        assert "mkdocs serve" in words
        assert DOCS_URL in words
