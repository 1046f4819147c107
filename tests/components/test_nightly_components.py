"""The component arguments torchx-nightly added: ``rdzv_conf`` and ``metadata`` on the
``dist`` components, ``mounts`` on ``utils.python`` and ``utils.copy``; beside nightly's."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from asynctorchx.components import dist, utils
from asynctorchx.specs import AppDef, BindMount, VolumeMount
from asynctorchx.specs.converter import converter
from tests.nightly import run_nightly

# as the command line gives ``--mounts type=bind,src=/data,...``: split at commas
MOUNTS = [
    "type=bind",
    "src=/data",
    "dst=/data",
    "readonly",
    "type=volume",
    "src=cache",
    "dst=/cache",
]


def _torchrun_words(app: AppDef) -> list[str]:
    """The torchrun command line of a dist app, whichever way it is started."""
    role = app.roles[0]
    return shlex.split(role.args[1]) if role.entrypoint == "bash" else role.args


@pytest.mark.parametrize("j", ["1x2", "2x2"])
def test_rdzv_conf_follows_the_backend_and_metadata_reaches_the_app(j: str) -> None:
    app = dist.ddp(script="train.py", j=j, rdzv_conf="timeout=600", metadata={"team": "ml"})
    words = _torchrun_words(app)
    backend = words.index("--rdzv_backend")
    assert words[backend + 2 : backend + 5] == ["--rdzv_conf", "timeout=600", "--rdzv_endpoint"]
    assert app.metadata == {"team": "ml"}
    assert "--rdzv_conf" not in _torchrun_words(dist.ddp(script="train.py", j=j))
    assert dist.torchrun(script="t.py", metadata={"a": "b"}).metadata == {"a": "b"}
    spmd = dist.spmd(script="t.py", h="gpu.small", j="1x1", metadata={"a": "b"})
    assert spmd.metadata == {"a": "b"}


def test_metadata_is_copied_not_shared() -> None:
    metadata = {"team": "ml"}
    app = dist.ddp(script="train.py", metadata=metadata)
    app.metadata["x"] = "y"
    assert metadata == {"team": "ml"}


def test_dist_arguments_match_nightly() -> None:
    theirs = run_nightly(
        "import json, shlex\nfrom torchx.components import dist\n"
        "app = dist.ddp(script='t.py', j='2x2', rdzv_conf='timeout=600,join_timeout=9',"
        " metadata={'team': 'ml'})\n"
        "words = shlex.split(app.roles[0].args[1])\n"
        "spmd = dist.spmd(script='t.py', h='gpu.small', j='1x1', metadata={'a': 'b'})\n"
        "env = {k: v for k, v in app.roles[0].env.items() if k.startswith('TORCHX_TRACKING')}\n"
        "print(json.dumps([words[words.index('--rdzv_conf') + 1], app.metadata, spmd.metadata,"
        " env]))"
    )
    app = dist.ddp(
        script="t.py", j="2x2", rdzv_conf="timeout=600,join_timeout=9", metadata={"team": "ml"}
    )
    words = _torchrun_words(app)
    spmd = dist.spmd(script="t.py", h="gpu.small", j="1x1", metadata={"a": "b"})
    env = {k: v for k, v in app.roles[0].env.items() if k.startswith("TORCHX_TRACKING")}
    assert theirs == [words[words.index("--rdzv_conf") + 1], app.metadata, spmd.metadata, env]


def test_utils_python_and_copy_take_mounts() -> None:
    expected = [BindMount("/data", "/data", read_only=True), VolumeMount("cache", "/cache")]
    assert utils.python(script="t.py", mounts=MOUNTS).roles[0].mounts == expected
    assert utils.copy("a", "b", mounts=MOUNTS).roles[0].mounts == expected
    assert utils.sh("true", mounts=MOUNTS).roles[0].mounts == expected
    assert utils.python(script="t.py").roles[0].mounts == []


def _mounts(app: AppDef) -> list[dict[str, Any]]:
    mounts: list[dict[str, Any]] = converter.unstructure(app.roles[0].mounts)
    return mounts


def test_utils_mounts_match_nightly() -> None:
    theirs = run_nightly(
        "import dataclasses, json, sys\nfrom torchx.components import utils\n"
        "mounts = json.load(sys.stdin)\n"
        "apps = [utils.python(script='t.py', mounts=mounts), utils.copy('a', 'b', mounts=mounts),"
        " utils.sh('true', mounts=mounts)]\n"
        "print(json.dumps([[dataclasses.asdict(m) for m in a.roles[0].mounts] for a in apps]))",
        MOUNTS,
    )
    ours = [
        utils.python(script="t.py", mounts=MOUNTS),
        utils.copy("a", "b", mounts=MOUNTS),
        utils.sh("true", mounts=MOUNTS),
    ]
    for their_mounts, app in zip(theirs, ours, strict=True):
        mine = [{k: v for k, v in m.items() if k != "type"} for m in _mounts(app)]
        assert mine == their_mounts
