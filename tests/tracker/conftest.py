"""What the tracker tests need: the ``tracker`` extra (fsspec) for the ``fsspec`` tracker.

Without it those tests skip with ``pip install -e '.[tracker]'``, except when
``ASYNCTORCHX_REQUIRE_TRACKER=1`` (set by ``.ci/run``): then they fail, so CI cannot
pass by skipping them (as ``tests/examples/conftest.py`` does for the ``web`` extra).
The modules import fsspec only inside a test, after this fixture, so the suite
collects without the extra (``tests/test_collection.py``).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from tests.isolation import isolate_from_user_config

HINT = "the tracker extra is not installed (no fsspec): pip install -e '.[tracker]'"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user .torchxconfig, no TORCHX_* from the outer environment."""
    isolate_from_user_config(tmp_path, monkeypatch)


@pytest.fixture
def fsspec_config(tmp_path: Path) -> Path:
    """A config file of the ``fsspec`` tracker (``protocol = file``) over a fresh root
    directory ``tmp_path / "runs"``; skips (or fails under CI) without fsspec."""
    if importlib.util.find_spec("fsspec") is None:
        if os.environ.get("ASYNCTORCHX_REQUIRE_TRACKER"):
            pytest.fail(HINT)
        pytest.skip(HINT)
    root = tmp_path / "runs"
    root.mkdir()
    config = tmp_path / "tracker.cfg"
    config.write_text(f"# the test's tracker\nprotocol = file\nroot_path = {root}\n")
    return config
