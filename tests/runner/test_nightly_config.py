"""torchx-nightly's environment switches: ``TORCHXCONFIG=""`` (no config file) and
``TORCHX_CUSTOM_NAMED_RESOURCES`` (named resources from a module), beside nightly's own."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from asynctorchx import specs
from asynctorchx.runner import config
from asynctorchx.specs import _named_resources as nr
from tests.isolation import isolate_from_user_config
from tests.nightly import run_nightly

CUSTOM = """
from {package}.specs import Resource

def big() -> Resource:
    return Resource(cpu=96, gpu=8, memMB=1_000_000, capabilities={{"k": "v"}})

NAMED_RESOURCES = {{"my.big": big, "gpu.small": lambda: Resource(cpu=1, gpu=1, memMB=1)}}
"""


@pytest.fixture
def custom_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A module ``custom_named_resources_under_test`` on ``sys.path`` and named by the variable."""
    (tmp_path / "ours").mkdir()
    (tmp_path / "ours/custom_named_resources_under_test.py").write_text(
        CUSTOM.format(package="asynctorchx")
    )
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs/custom_named_resources_under_test.py").write_text(
        CUSTOM.format(package="torchx")
    )
    monkeypatch.delitem(sys.modules, "custom_named_resources_under_test", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "ours"))
    monkeypatch.setenv("TORCHX_CUSTOM_NAMED_RESOURCES", "custom_named_resources_under_test")
    nr.reload()
    yield tmp_path
    sys.modules.pop("custom_named_resources_under_test", None)
    monkeypatch.delenv("TORCHX_CUSTOM_NAMED_RESOURCES")
    nr.reload()


def test_empty_torchxconfig_reads_no_file_as_nightly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = isolate_from_user_config(tmp_path, monkeypatch)
    (home / ".torchxconfig").write_text("[local_cwd]\nlog_dir = /from_home\n")
    (tmp_path / ".torchxconfig").write_text("[local_cwd]\nlog_dir = /from_cwd\n")
    monkeypatch.setenv("TORCHXCONFIG", "")
    program = "import json\nfrom torchx.runner.config import find_configs\n"
    program += "print(json.dumps(find_configs()))"
    assert run_nightly(program) == config.find_configs() == []


def test_custom_module_registers_its_names_tagged(custom_module: Path) -> None:
    big = specs.resource(h="my.big")
    assert (big.cpu, big.gpu, big.memMB, big.capabilities) == (96, 8, 1_000_000, {"k": "v"})
    assert big.get_resource_name() == "my.big"
    assert specs.named_resources["gpu.small"].cpu == 1  # wins over the builtins
    assert "aws_t3.medium" in specs.named_resources  # beside them


def test_custom_module_matches_nightly(custom_module: Path) -> None:
    program = "import json, sys\nfrom torchx import specs\n"
    program += "print(json.dumps({n: specs.resource(h=n).tags for n in json.load(sys.stdin)}))"
    names = ["my.big", "gpu.small"]
    theirs = run_nightly(program, names, env={"PYTHONPATH": str(custom_module / "theirs")})
    assert theirs == {name: specs.resource(h=name).tags for name in names}
    program = "import json\nfrom torchx import specs\nr = specs.resource(h='gpu.small')\n"
    program += "print(json.dumps([r.cpu, r.gpu, r.memMB]))"
    theirs = run_nightly(program, env={"PYTHONPATH": str(custom_module / "theirs")})
    small = specs.resource(h="gpu.small")
    assert theirs == [small.cpu, small.gpu, small.memMB]


def test_a_module_that_is_not_there_is_named_with_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TORCHX_CUSTOM_NAMED_RESOURCES", "no_such_module_here")
    nr.reload()
    try:
        with pytest.raises(ImportError, match=r"TORCHX_CUSTOM_NAMED_RESOURCES='no_such.*unset it"):
            specs.resource(h="gpu.small")
    finally:
        monkeypatch.delenv("TORCHX_CUSTOM_NAMED_RESOURCES")
        nr.reload()


def test_importing_specs_does_not_import_the_custom_module(custom_module: Path) -> None:
    program = (
        "import sys, asynctorchx.specs\nprint('custom_named_resources_under_test' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        check=True,
        env={
            "PYTHONPATH": f"{custom_module / 'ours'}",
            "TORCHX_CUSTOM_NAMED_RESOURCES": "custom_named_resources_under_test",
        },
        cwd=Path(__file__).parents[2],
    )
    assert done.stdout.strip() == "False"
