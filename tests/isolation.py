"""Keep a test away from the user's TorchX setup: what runner and CLI tests share."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def isolate_from_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test in ``tmp_path`` with a fresh ``HOME`` and no ``TORCHX*`` variables.

    So no user ``.torchxconfig`` (in ``HOME`` or the working directory) and no
    ``TORCHX_*`` setting of the outer environment reaches the code under test.

    Args:
        tmp_path: the test's temporary directory; it becomes the working directory.
        monkeypatch: the test's monkeypatch, which undoes all of it afterwards.

    Returns:
        The new, empty ``HOME`` (``tmp_path / "home"``).
    """
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    for key in list(os.environ):
        if key.upper().startswith("TORCHX"):
            monkeypatch.delenv(key)
    return home
