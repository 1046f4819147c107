"""``asynctorchx.util.entrypoints`` (TorchX's ``torchx.util.entrypoints``) and the finder's
``_load_components``, against a real installed distribution."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from asynctorchx.specs import finder
from asynctorchx.util import entrypoints

PLUGIN = '''
from asynctorchx.specs import AppDef

def make(name: str = "default") -> str:
    return "made " + name

def unannotated(x) -> AppDef:
    """Unannotated.

    Args:
        x: x
    """
    return AppDef(name="u")
'''


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / "my_plugin.py").write_text(PLUGIN)
    dist = tmp_path / "my_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[my.group]\nfn = my_plugin:make\nmod = my_plugin\n"
        "[asynctorchx.components]\nplug = my_plugin\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    finder.reload()
    yield tmp_path
    finder.reload()


def test_load_group_defers_loading(installed: Path) -> None:
    group = entrypoints.load_group("my.group")
    assert isinstance(group, dict)
    assert sorted(group) == ["fn", "mod"]
    assert group["fn"]("x") == "made x"  # a function entry is called with the arguments
    module = group["mod"]("ignored")  # a module entry is returned, the arguments ignored
    assert isinstance(module, ModuleType)
    assert module.__name__ == "my_plugin"


def test_load_group_default_when_the_group_is_empty(installed: Path) -> None:
    assert entrypoints.load_group("no.such.group") is None
    assert entrypoints.load_group("no.such.group", default={"a": 1}) == {"a": 1}


def test_load_one_entry(installed: Path) -> None:
    assert entrypoints.load("my.group", "fn")() == "made default"
    assert entrypoints.load("my.group", "nope", default="fallback") == "fallback"
    with pytest.raises(KeyError, match=r"'nope' in group 'my.group' \(it has: fn, mod\)"):
        entrypoints.load("my.group", "nope")


def test_load_components_lists_invalid_components_with_their_errors(installed: Path) -> None:
    """``_load_components`` (TorchX's private name) keeps what ``get_components`` hides."""
    every = finder._load_components()
    assert len(every["plug.unannotated"].validation_errors) == 1
    assert "plug.unannotated" not in finder.get_components()
    assert "utils.echo" in every  # merged over the builtins


def test_load_components_scans_again_on_each_call(
    installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "plug.unannotated" in finder._load_components()
    monkeypatch.setattr(entrypoints, "entry_points", lambda group: [])
    assert "plug.unannotated" not in finder._load_components()


def test_resetting_torchx_cache_variable_rescans(installed: Path) -> None:
    """TorchX's tests and tools reset ``finder._components = None`` to rescan."""
    assert "plug.unannotated" not in finder.get_components()  # scanned: invalid, hidden
    (installed / "my_plugin.py").write_text(
        PLUGIN + "\ndef added() -> AppDef:\n    return AppDef(name='a')\n"
    )
    import sys

    sys.modules.pop("my_plugin", None)
    assert "plug.added" not in finder.get_components()  # still the cached scan
    finder._components = None
    assert "plug.added" in finder.get_components()


def _moved_on(directory: Path, before: int) -> None:
    """Make sure ``directory``'s modification time is past ``before`` (ns), as a change
    later than one tick of the file system's clock leaves it (importlib.metadata's own
    directory lookups rely on it too)."""
    later = max(directory.stat().st_mtime_ns, before + 10_000_000)
    os.utime(directory, ns=(later, later))


def _install(directory: Path, name: str, entries: str) -> Path:
    """Write the distribution ``name`` into ``directory``, ``entries`` its
    ``entry_points.txt``."""
    before = directory.stat().st_mtime_ns
    dist = directory / f"{name}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(entries)
    _moved_on(directory, before)
    return dist


def test_a_distribution_installed_or_removed_later_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    assert list(entrypoints.entry_points("late.group")) == []
    dist = _install(tmp_path, "late_plugin", "[late.group]\nx = late_plugin:x\n")
    assert [entry.name for entry in entrypoints.entry_points("late.group")] == ["x"]
    before = tmp_path.stat().st_mtime_ns
    shutil.rmtree(dist)
    _moved_on(tmp_path, before)
    assert list(entrypoints.entry_points("late.group")) == []


def test_a_directory_put_on_sys_path_later_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(tmp_path, "path_plugin", "[path.group]\ny = path_plugin:y\n")
    assert list(entrypoints.entry_points("path.group")) == []
    monkeypatch.syspath_prepend(str(tmp_path))
    assert [entry.name for entry in entrypoints.entry_points("path.group")] == ["y"]


def test_installed_entry_points_are_read_once_while_nothing_changes(
    installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several groups asked in a row (a CLI run asks three times) are one read; a patched
    ``importlib.metadata.entry_points`` is called, not bypassed."""
    reads: list[None] = []
    real = importlib.metadata.entry_points

    def counted() -> object:
        reads.append(None)
        return real()

    monkeypatch.setattr(importlib.metadata, "entry_points", counted)
    assert sorted(entrypoints.entry_points("my.group").names) == ["fn", "mod"]
    assert entrypoints.entry_points("asynctorchx.components").names == {"plug"}
    assert list(entrypoints.entry_points("asynctorchx.schedulers")) == []
    assert len(reads) == 1
    entrypoints.invalidate_caches()  # after an entry_points.txt was edited in place
    assert sorted(entrypoints.entry_points("my.group").names) == ["fn", "mod"]
    assert len(reads) == 2
