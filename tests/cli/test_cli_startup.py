"""What one ``asynctorchx run`` reads and imports before its app starts (benchmark 6)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from asynctorchx import plugins
from asynctorchx.cli.main import run_cli
from asynctorchx.util import entrypoints
from tests.isolation import isolate_from_user_config


def test_run_reads_the_installed_entry_points_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The scheduler registry (asked by the CLI and by the runner) and the component
    finder share one read of the installed distributions."""
    isolate_from_user_config(tmp_path, monkeypatch)
    monkeypatch.setenv("ASYNCTORCHX_STATE_DIR", str(tmp_path / "state"))
    reads: list[None] = []
    real = importlib.metadata.distributions

    def counted(**kwargs: Any) -> Any:  # what every read of the entry points lists
        reads.append(None)
        return real(**kwargs)

    monkeypatch.setattr(importlib.metadata, "distributions", counted)
    entrypoints.invalidate_caches()  # an earlier test's read does not count
    plugins.registry().clear()  # nor the plugins an earlier test found (once per process)
    assert run_cli(["run", "-s", "local_cwd", "utils.echo", "--msg", "hi"]) == 0
    assert "echo/0 hi" in capsys.readouterr().err
    assert len(reads) == 1


def test_run_imports_no_other_component_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run utils.echo`` imports the builtin module ``utils`` only: not the other
    builtins, nor ``component_test_base`` (and its ``unittest``)."""
    code = (
        "import sys\n"
        "from asynctorchx.cli.main import run_cli\n"
        "assert run_cli(['run', '--dryrun', '-s', 'local_cwd', 'utils.echo']) == 0\n"
        "components = [m for m in sys.modules if m.startswith('asynctorchx.components.')]\n"
        "print(sorted(components), 'unittest' in sys.modules, file=sys.stderr)\n"
    )
    isolate_from_user_config(tmp_path, monkeypatch)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stderr.splitlines()[-1] == "['asynctorchx.components.utils'] False"


def test_run_imports_only_what_it_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``run -s local_cwd utils.echo`` (to its end) imports no tracker, tracing, group
    reaper, other backend, nor their third-party packages, nor (stderr not a terminal)
    the status line's."""
    code = (
        "import sys\n"
        "from asynctorchx.cli.main import run_cli\n"
        "assert run_cli(['run', '-s', 'local_cwd', 'utils.echo']) == 0\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    isolate_from_user_config(tmp_path, monkeypatch)
    monkeypatch.setenv("ASYNCTORCHX_STATE_DIR", str(tmp_path / "state"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "echo/0 hello world" in proc.stderr
    modules = proc.stderr.splitlines()[-1].split()
    unused = (
        "asynctorchx.tracker",
        "asynctorchx.runner._tracing",
        "asynctorchx.runner._reap",
        "asynctorchx.schedulers.docker",
        "asynctorchx.schedulers.slurm",
        "asynctorchx.schedulers.kubernetes",
        "aiodocker",
        "lightkube",
        "opentelemetry",
        "rich",  # the status line's, on a terminal only
    )
    assert "asynctorchx.schedulers.local._scheduler" in modules
    assert [name for name in modules if name.startswith(unused)] == []
