"""The config module's public names can be replaced, as TorchX's users do.

``torchx.runner.config.get_scheduler_factories`` and ``DEFAULT_CONFIG_DIRS`` are public
module attributes that code patches (e.g. to register a test scheduler); the config
functions read them through their module.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from unittest.mock import patch

import pytest

from asynctorchx.runner import config
from tests.runner.fake_scheduler import create_class_opts


def test_config_functions_use_the_factories_named_in_runner_config() -> None:
    fake = {"fake": create_class_opts}
    with patch("asynctorchx.runner.config.get_scheduler_factories", return_value=fake):
        assert "label" in config.scheduler_run_opts("fake")
        out = io.StringIO()
        config.dump(out)
        cfg: dict[str, object] = {}
        config.load("fake", io.StringIO("[fake]\nflag = true\n"), cfg)
    assert out.getvalue().splitlines()[0] == "[fake]"
    assert cfg == {"flag": True}


def test_find_configs_honours_a_replaced_default_config_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TORCHXCONFIG", raising=False)
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    (chosen / ".torchxconfig").write_text("[local_cwd]\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / ".torchxconfig").write_text("[local_cwd]\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(elsewhere)
    # untouched: $HOME and the current directory at the call (here: elsewhere)
    assert config.find_configs() == [str(elsewhere / ".torchxconfig")]
    with patch("asynctorchx.runner.config.DEFAULT_CONFIG_DIRS", [str(chosen)]):
        assert config.find_configs() == [str(chosen / ".torchxconfig")]
    monkeypatch.setattr(config, "DEFAULT_CONFIG_DIRS", [*config.DEFAULT_CONFIG_DIRS])
    config.DEFAULT_CONFIG_DIRS.append(str(chosen))  # changed in place: honoured too
    assert str(chosen / ".torchxconfig") in config.find_configs()


def test_runner_api_imports_no_backend() -> None:
    code = (
        "import asynctorchx.runner.api, asynctorchx.runner.config, sys;"
        " print(sorted(m for m in sys.modules if m.startswith('asynctorchx.schedulers.')"
        " and m.split('.')[2] in ('docker', 'slurm', 'kubernetes', 'local')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
