"""The README's examples run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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
    assert "echo/0 hello from asynctorchx\n" in out.stdout
