"""Every local scheduler test keeps its app records in its own state directory."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True, name="state")
def _private_state_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point ``ASYNCTORCHX_STATE_DIR`` at ``tmp_path/state`` (records never go to $HOME)."""
    state = tmp_path / "state"
    monkeypatch.setenv("ASYNCTORCHX_STATE_DIR", str(state))
    return state


@pytest.fixture
def no_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A state directory that cannot be made: no records, so logs go to a temporary directory."""
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("ASYNCTORCHX_STATE_DIR", str(tmp_path / "a-file" / "state"))
