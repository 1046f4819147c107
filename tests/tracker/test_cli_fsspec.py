"""``asynctorchx tracker list ...`` over the built-in ``fsspec`` tracker named in the
``.torchxconfig``, as a TorchX user configures it (``[torchx:tracker]`` ``fsspec =``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from asynctorchx.cli.main import run_cli
from asynctorchx.tracker import AppRun

RUN = "local_cwd://sess/app-1"


def test_the_cli_reads_what_a_run_recorded(
    fsspec_config: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    Path(".torchxconfig").write_text(
        f"[torchx:tracker]\nfsspec =\n\n[tracker:fsspec]\nconfig = {fsspec_config}\n"
    )
    monkeypatch.setenv("TORCHX_JOB_ID", RUN)
    monkeypatch.setenv("TORCHX_TRACKERS", "fsspec")
    monkeypatch.setenv("TORCHX_TRACKER_FSSPEC_CONFIG", str(fsspec_config))
    AppRun.run_from_env.cache_clear()
    try:
        AppRun.run_from_env().add_metadata(lr=0.5)
    finally:
        AppRun.run_from_env.cache_clear()
    for name in ("TORCHX_JOB_ID", "TORCHX_TRACKERS", "TORCHX_TRACKER_FSSPEC_CONFIG"):
        monkeypatch.delenv(name)
    assert run_cli(["tracker", "list", "jobs"]) == 0
    assert RUN in capsys.readouterr().out
    assert run_cli(["tracker", "list", "metadata", RUN]) == 0
    assert capsys.readouterr().out.splitlines()[2].split() == ["lr", "0.5"]
