"""Named-resource, tracker and event-handler plugins: torchx-nightly's
``register.named_resource`` (aliases, fractional shares, its helpers) and where each kind
is read from the plugin registry, each beside torchx-nightly's own (its
``torchx_plugins`` is our ``asynctorchx_plugins``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.nightly import run_nightly

HEADER = """
try:
    from torchx import plugins
    from torchx.specs import Resource
except ImportError:
    from asynctorchx import plugins
    from asynctorchx.specs import Resource
register, WHOLE = plugins.register, plugins.WHOLE
"""

# The namespace package's files under <root>/<ns>/ (no __init__.py: namespace packages).
TREE = {
    "named_resources/hosts.py": HEADER
    + """
@register.named_resource(aliases=["big_gpu"], fractionals=plugins.powers_of_two_gpus)
def my_gpu(fractional=WHOLE):
    return Resource(cpu=int(32 * fractional), gpu=int(8 * fractional),
                    memMB=int(256 * 1024 * fractional))

@register.named_resource(name="mem_host", fractionals=plugins.halve_mem_down_to(minGiB=16))
def mem(fractional=WHOLE):
    return Resource(cpu=int(8 * fractional), gpu=0, memMB=int(64 * 1024 * fractional))

@register.named_resource(fractionals={WHOLE: "full", plugins.QUARTER: "quarter"})
def shares(fractional=WHOLE):
    return Resource(cpu=int(4 * fractional), gpu=0, memMB=int(4096 * fractional))

@register.named_resource()
def same():
    return Resource(cpu=1, gpu=0, memMB=1024)

@register.named_resource()
def differs():
    return Resource(cpu=1, gpu=0, memMB=1024)
""",
    "named_resources/again.py": HEADER
    + """
@register.named_resource()
def same():  # equal to hosts.same: one plugin, no error
    return Resource(cpu=1, gpu=0, memMB=1024)

@register.named_resource()
def differs():  # not equal to hosts.differs: an error
    return Resource(cpu=2, gpu=0, memMB=1024)
""",
    "tracker/mine.py": HEADER
    + """
class Tracker:
    def __init__(self, config):
        self.config = config

@register.tracker(name="mytracker")
def make(config):
    return Tracker(config)
""",
    "event_handlers/sink.py": HEADER
    + """
import logging
SEEN = []

class Sink(logging.Handler):
    def emit(self, record):
        SEEN.append(record.getMessage())

@register.event_handler(name="sink")
def sink():
    return Sink()
""",
}

PROGRAM = """
import json, sys
root = json.load(sys.stdin)
sys.path.insert(0, root)
try:
    from torchx import plugins, specs
    from torchx.runner import events
    from torchx.runner.events.api import TorchxEvent
    from torchx.runner.events.handlers import get_logging_handler
    from torchx.tracker.api import build_trackers
    NS = "torchx_plugins"
except ImportError:
    from asynctorchx import plugins, specs
    from asynctorchx.runner import events
    from asynctorchx.runner.events import TorchxEvent
    from asynctorchx.runner.events.handlers import get_logging_handler
    from asynctorchx.tracker.api import build_trackers
    NS = "asynctorchx_plugins"
import importlib

def resource(name):
    r = specs.resource(h=name)
    return [r.cpu, r.gpu, r.memMB, r.get_resource_name(), r.is_fractional()]

def refused(call):
    try:
        call()
    except ValueError:
        return True
    return False

found = plugins.registry().get(plugins.PluginType.NAMED_RESOURCE)
hosts = importlib.import_module(NS + ".named_resources.hosts")
(tracker,) = build_trackers({"mytracker": "cfg"})
event = TorchxEvent(session="s", scheduler="local_cwd", api="run_through_plugin")
events.record(event, "sink")
sink = importlib.import_module(NS + ".event_handlers.sink")
R = specs.Resource
print(json.dumps({
    "plugins": sorted(found),
    "resources": {name: resource(name) for name in sorted(found)},
    "module": sorted(hosts.NAMED_RESOURCES),
    "attributes": sorted(a for a in dir(hosts) if a.startswith(("my_gpu", "big", "mem", "sha"))),
    "errors": sorted([e.module.replace(NS, "_ns_"), e.name, e.plugin_type]
                     for e in plugins.registry().load_errors(plugins.PluginType.NAMED_RESOURCE)),
    "powers": plugins.powers_of_two_gpus(R(cpu=1, gpu=4, memMB=1)),
    "halves": plugins.halve_mem_down_to(minGiB=3)(R(cpu=1, gpu=0, memMB=48 * 1024)),
    "refused": [
        refused(lambda: plugins.powers_of_two_gpus(R(cpu=1, gpu=6, memMB=1))),
        refused(lambda: plugins.powers_of_two_gpus(R(cpu=1, gpu=0, memMB=1))),
        refused(lambda: plugins.halve_mem_down_to(minGiB=8)(R(cpu=1, gpu=0, memMB=1000))),
        refused(lambda: plugins.halve_mem_down_to(minGiB=2)(R(cpu=1, gpu=0, memMB=48 * 1024))),
    ],
    "shares": [plugins.WHOLE, plugins.HALF, plugins.QUARTER, plugins.EIGHTH, plugins.SIXTEENTH],
    "tracker": [type(tracker).__name__, tracker.config],
    "handlers": [type(get_logging_handler("sink")).__name__,
                 type(get_logging_handler("console")).__name__,
                 type(get_logging_handler("null")).__name__],
    "recorded": [json.loads(m)["api"] for m in sink.SEEN],
}))
"""


def _plant(root: Path, namespace: str) -> str:
    for relative, text in TREE.items():
        path = root / namespace / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(root)


def _ours(root: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        input=json.dumps(root),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_named_resource_tracker_and_event_handler_plugins_as_nightly(tmp_path: Path) -> None:
    ours = _ours(_plant(tmp_path / "ours", "asynctorchx_plugins"))
    theirs = run_nightly(PROGRAM, _plant(tmp_path / "theirs", "torchx_plugins"))
    assert ours == theirs
    gpu = ours["resources"]
    assert gpu["my_gpu"] == [32, 8, 256 * 1024, "my_gpu", False]
    assert gpu["big_gpu"] == [32, 8, 256 * 1024, "my_gpu", False]  # an alias: the base's tags
    assert gpu["my_gpu_2"] == [8, 2, 64 * 1024, "my_gpu_2", True]
    assert gpu["my_gpu_8"][3:] == ["my_gpu_8", False]  # the whole host is no fraction
    assert {"mem_host_64", "mem_host_16", "shares_quarter"} <= set(ours["plugins"])
    assert "mem_host_8" not in ours["plugins"]
    # modules are scanned in name order: again.py's `differs` is found first and kept
    assert ours["errors"] == [["_ns_.named_resources.hosts", "differs", "named_resource"]]
    assert gpu["differs"][:3] == [2, 0, 1024]
    assert ours["refused"] == [True, True, True, True]
    assert ours["tracker"] == ["Tracker", "cfg"]
    assert ours["handlers"] == ["Sink", "StreamHandler", "NullHandler"]
    assert ours["recorded"] == ["run_through_plugin"]
