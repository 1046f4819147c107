"""Scheduler plugins: torchx-nightly's ``register`` decorator, namespace-package discovery
and entry points, each beside torchx-nightly's own (its ``torchx_plugins`` is our
``asynctorchx_plugins``, its ``torchx.*`` entry point groups our ``asynctorchx.*``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from asynctorchx.plugins import PluginRegistry, PluginSource, PluginType, register, registry
from tests.nightly import run_nightly

HEADER = """
try:
    from torchx.plugins import register
except ImportError:
    from asynctorchx.plugins import register
"""

# The namespace package, as files under <root>/<ns>/schedulers/ (no __init__.py: a
# namespace package, as TorchX documents).
TREE = {
    "alpha.py": HEADER
    + """
@register.scheduler()
def alpha(session_name, **kwargs):
    return f"alpha:{session_name}"

@register.scheduler(name="local_cwd")
def replaces_local(session_name, **kwargs):
    return "mine"

def untagged(session_name, **kwargs):
    return "no"
""",
    "beta.py": HEADER
    + """
from _ns_.schedulers.alpha import alpha  # imported: not beta's plugin

@register.scheduler(name="alpha")
def second_alpha(session_name, **kwargs):
    return "second"

@register.tracker()
def a_tracker(*args, **kwargs):
    return None
""",
    "_private.py": HEADER + "\n@register.scheduler()\ndef hidden(s, **kw):\n    return s\n",
    "broken.py": "raise RuntimeError('boom')\n",
    "sub/gamma.py": HEADER + "\n@register.scheduler()\ndef gamma(s, **kw):\n    return s\n",
    "pkg/__init__.py": "",
    "pkg/delta.py": HEADER + "\n@register.scheduler()\ndef delta(s, **kw):\n    return s\n",
}

ENTRY_MODULE = "def ep_alpha(session_name, **kwargs):\n    return 'entry point'\n"

# Both sides print the scheduler names, the plugins alone, what `alpha` and `local_cwd`
# make, and the errors (module with the namespace written `_ns_`, name, kind).
PROGRAM = """
import json, os, sys
given = json.load(sys.stdin)
os.environ["TORCHX_PLUGINS_SOURCE"] = given["source"]
sys.path.insert(0, given["root"])
try:
    from torchx import plugins
    from torchx.schedulers import get_scheduler_factories
    NS = "torchx_plugins"
except ImportError:
    from asynctorchx import plugins
    from asynctorchx.schedulers import get_scheduler_factories
    NS = "asynctorchx_plugins"
try:
    factories = get_scheduler_factories()
except ValueError as e:
    print(json.dumps({"ValueError": "TORCHX_PLUGINS_SOURCE" in str(e)}))
    raise SystemExit(0)
errors = plugins.registry().load_errors(plugins.PluginType.SCHEDULER)
mine = list(get_scheduler_factories(skip_defaults=True))
print(json.dumps({
    "names": list(factories),
    "plugins": mine,
    "alpha": factories["alpha"]("s") if "alpha" in mine else None,
    "local_cwd": factories["local_cwd"]("s") if "local_cwd" in mine else None,
    "errors": sorted([e.module.replace(NS, "_ns_").split(":")[0], e.name, e.plugin_type]
                     for e in errors),
}))
"""


def _plant(root: Path, namespace: str, entry_group: str) -> None:
    """Write the namespace package, and a distribution with one entry point (``alpha``)."""
    for relative, text in TREE.items():
        path = root / namespace / "schedulers" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("_ns_", namespace))
    (root / "ep_plugin.py").write_text(ENTRY_MODULE)
    dist = root / "ep_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{entry_group}]\nalpha = ep_plugin:ep_alpha\n")


def _ours(data: dict[str, str]) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        input=json.dumps(data),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize("source", ["3", "1", "2", "0", "7"])
def test_discovery_matches_nightly(tmp_path: Path, source: str) -> None:
    _plant(tmp_path / "theirs", "torchx_plugins", "torchx.schedulers")
    _plant(tmp_path / "ours", "asynctorchx_plugins", "asynctorchx.schedulers")
    theirs = run_nightly(PROGRAM, {"root": str(tmp_path / "theirs"), "source": source})
    ours = _ours({"root": str(tmp_path / "ours"), "source": source})
    builtins = ["local_cwd", "local_dir", "local_docker", "slurm", "kubernetes"]
    # the built-ins are ours (nightly has no local_dir, and puts local_docker first)
    assert set(ours.get("names", [])) - {"local_dir"} == set(theirs.get("names", []))
    assert {k: v for k, v in ours.items() if k != "names"} == {
        k: v for k, v in theirs.items() if k != "names"
    }
    if source == "7":
        assert ours == {"ValueError": True}
        return
    plugins = ours["plugins"]
    assert ours["names"] == plugins + [n for n in builtins if n not in plugins]
    if source in ("3", "1"):
        assert plugins == ["alpha", "local_cwd", "delta", "gamma"]
        assert ours["local_cwd"] == "mine"
        assert ["_ns_.schedulers.broken", None, None] in ours["errors"]
        assert ["_ns_.schedulers.beta", "alpha", "scheduler"] in ours["errors"]
        assert ["_ns_.schedulers.beta", "a_tracker", "tracker"] in ours["errors"]
    if source in ("3", "2"):
        assert ours["alpha"] == "entry point"
    if source == "0":
        assert ours["names"] == builtins


def test_register_tags_and_returns_the_function() -> None:
    def make(session_name: str) -> None: ...

    assert register.scheduler(name="x")(make) is make
    assert (make._plugin_type, make._plugin_name) == (
        PluginType.SCHEDULER,
        "x",
    )
    assert register.tracker()(make)._plugin_name == "make"


def test_nothing_installed_is_no_plugin_and_no_error() -> None:
    found = PluginRegistry(plugin_sources=PluginSource.NAMESPACE_PKG)
    assert found.get(PluginType.SCHEDULER) == {}
    assert found.load_errors() == []


def test_clear_makes_a_new_registry() -> None:
    first = registry()
    first.clear()
    assert registry() is not first


def test_an_entry_point_that_fails_to_load_is_an_error_not_a_scheduler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist = tmp_path / "broken_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[asynctorchx.schedulers]\nbad = no_such_module_anywhere:make\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    found = PluginRegistry(plugin_sources=PluginSource.ENTRYPOINT)
    assert "bad" not in found.get(PluginType.SCHEDULER)
    (error,) = found.errors
    assert error.module == "no_such_module_anywhere:make"
    assert "ModuleNotFoundError" in error.error
