"""StructuredOpts (torchx-nightly's typed run options) and the typed options of every
built-in scheduler, each beside torchx-nightly's own."""

from __future__ import annotations

import json
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from asynctorchx.errors import InvalidRunConfigException
from asynctorchx.schedulers import get_scheduler_factories
from asynctorchx.schedulers.api import StructuredOpts
from asynctorchx.schedulers.docker_scheduler import DockerOpts
from asynctorchx.schedulers.docker_scheduler import Opts as DockerSchedulerOpts
from asynctorchx.schedulers.kubernetes_scheduler import KubernetesOpts
from asynctorchx.schedulers.kubernetes_scheduler import Opts as KubernetesSchedulerOpts
from asynctorchx.schedulers.local_scheduler import LocalOpts
from asynctorchx.schedulers.local_scheduler import Opts as LocalSchedulerOpts
from asynctorchx.schedulers.slurm_scheduler import SlurmOpts
from asynctorchx.specs import AppDef, Role, cases, runopt, runopts
from tests.nightly import run_nightly

# One module, imported by both sides: attribute docstrings need a source file.
SHARED = '''
from dataclasses import dataclass, field

try:
    from torchx.schedulers.api import StructuredOpts
except ImportError:
    from asynctorchx.schedulers.api import StructuredOpts


@dataclass
class Group(StructuredOpts):
    context: str | None = None
    """the kube context"""


@dataclass
class Shared(StructuredOpts):
    cluster: str
    """the cluster to submit to"""

    hpc_identity: str | None = None
    """who submits"""

    retries: int = 3
    """times to retry"""

    mail_user: str | None = field(default=None, metadata={"cfg_key": "mail-user"})
    """who is mailed"""

    tags: list[str] | None = None

    labels: dict[str, str] = field(default_factory=dict)
    """job labels"""

    k8s: Group | None = None


@dataclass
class Other(StructuredOpts):
    retries: int = 5
    debug: bool = False
'''

CASES = [
    {"cluster": "c"},
    {"cluster": "c", "hpcIdentity": "me", "mail-user": "a@b", "retries": 1},
    {"cluster": "c", "hpc_identity": "me", "hpcIdentity": "me", "k8s.context": "kc"},
    {"cluster": "c", "unknown": "kept", "tags": ["x"]},
]

# Both sides print: per case the fields, the mapping (keys in order), lookups by other
# spellings, the merge with Other; the declared runopts; a conflict's error class.
PROGRAM = """
import dataclasses, json, sys, typing
sys.path.insert(0, DIR)
import shared_opts as m
sys.path.remove(DIR)

def typename(tp):
    return getattr(typing.get_origin(tp) or tp, "__name__", str(tp))

def observe(cases):
    out = []
    for cfg in cases:
        o = m.Shared.from_cfg(cfg)
        out.append({
            "fields": {f.name: getattr(o, f.name) if f.name != "k8s" else dict(o.k8s or {})
                       for f in dataclasses.fields(o) if not f.name.startswith("_")},
            "mapping": list(o.items()),
            "len": len(o),
            "camel": [o["hpcIdentity"], o["mailUser"] if "mailUser" in o else "absent",
                      "nope" in o, 1 in o],
            "merged": list((o | m.Other(retries=9)).items()),
        })
    opts = [(k, typename(v.opt_type), v.default, v.is_required, v.help)
            for k, v in m.Shared.as_runopts()]
    try:
        m.Shared.from_cfg({"cluster": "c", "hpc_identity": "a", "hpcIdentity": "b"})
        conflict = None
    except Exception as e:
        conflict = [type(e).__name__, e.args[1:2]]
    return {"cases": out, "runopts": opts, "conflict": conflict,
            "docstrings": m.Shared.get_docstrings()}
"""


def _observe_ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    namespace: dict[str, Any] = {"DIR": str(tmp_path)}
    monkeypatch.delitem(sys.modules, "shared_opts", raising=False)
    exec(PROGRAM, namespace)
    return json.loads(json.dumps(namespace["observe"](CASES)))


def test_structured_opts_read_merge_and_declare_as_nightly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "shared_opts.py").write_text(SHARED)
    ours = _observe_ours(tmp_path, monkeypatch)
    program = f"DIR = {str(tmp_path)!r}\n" + PROGRAM
    program += "\nprint(json.dumps(observe(json.load(sys.stdin))))"
    theirs = run_nightly(program, CASES)
    assert ours == theirs
    # what the comparison covers, so that it cannot pass on two empty answers
    assert ours["cases"][1]["fields"]["hpc_identity"] == "me"
    assert ours["cases"][2]["mapping"][-1] == ["k8s.context", "kc"]
    assert ["unknown", "kept"] in ours["cases"][3]["mapping"]
    assert ours["conflict"][0] == "InvalidRunConfigException"
    assert ["retries", "int", 3, False, "times to retry"] in ours["runopts"]
    assert ["cluster", "str", None, True, "the cluster to submit to"] in ours["runopts"]


def test_a_multi_line_help_is_one_line_and_a_missing_one_is_the_name() -> None:
    @dataclass
    class Local(StructuredOpts):
        a: int = 1

    assert Local.as_runopts().get("a") == runopt(1, int, False, "a")
    assert LocalSchedulerOpts.get_docstrings()["prepend_cwd"].startswith("if set, prepends")
    assert "\n" not in LocalSchedulerOpts.get_docstrings()["prepend_cwd"]
    assert SlurmOpts.get_docstrings()["mail_user"] == "who Slurm mails about the job"


def test_help_is_read_for_a_class_nested_in_a_function_or_a_class() -> None:
    """The help of a class defined in a function, or inside another class, is its own
    fields' docstrings, as for a module-level class."""

    @dataclass
    class Outer(StructuredOpts):
        @dataclass
        class Inner(StructuredOpts):
            depth: int = 2
            """how deep
            it goes"""

        name: str = "n"
        """the name"""

    assert Outer.get_docstrings() == {"name": "the name"}
    assert Outer.Inner.as_runopts().get("depth") == runopt(2, int, False, "how deep it goes")


def test_cases_convert_as_nightly() -> None:
    names = ["hpc_identity", "a", "mail_user_x", "hpcIdentity", "HTTPServer", "x1Y"]
    theirs = run_nightly(
        "import json, sys\nfrom torchx.specs import cases\n"
        "n = json.load(sys.stdin)\n"
        "print(json.dumps([[cases.snake_to_camel(x), cases.camel_to_snake(x)] for x in n]))",
        names,
    )
    assert [[cases.snake_to_camel(x), cases.camel_to_snake(x)] for x in names] == theirs


def test_runopts_update_and_or_merge_the_later_wins() -> None:
    a, b = runopts(), runopts()
    a.add("x", type_=int, help="x", default=1)
    a.add("y", type_=str, help="y")
    b.add("x", type_=int, help="x of b", default=2)
    merged = a | b
    assert [(k, o.default) for k, o in merged] == [("x", 2), ("y", None)]
    assert [(k, o.default) for k, o in a] == [("x", 1), ("y", None)]
    a.update(b)
    assert a.get("x").help == "x of b"  # type: ignore[union-attr]


# --------------------------------------------------------------------------- schedulers

NIGHTLY_OPTS = {
    "local_cwd": "torchx.schedulers.local_scheduler:Opts",
    "local_docker": "torchx.schedulers.docker_scheduler:Opts",
    "slurm": "torchx.schedulers.slurm_scheduler:SlurmOpts",
    "kubernetes": "torchx.schedulers.kubernetes_scheduler:Opts",
}
#: What a scheduler declares that nightly's does not, and the reverse.
OURS_ONLY = {
    "local_cwd": {"stop_timeout"},
    "local_docker": {"image_repo", "quiet", "network", "init", "cancel_on_close"},
    "slurm": {"history", "signal"},
    "kubernetes": {"image_repo", "image_pull_timeout", "job_api"},
}
NIGHTLY_ONLY: dict[str, set[str]] = {}
#: Options whose default or requiredness is ours on purpose (docs/coming-from-torchx.md).
DIFFERENT = {"kubernetes": {"queue"}}


def _declared(opts: runopts) -> dict[str, list[Any]]:
    def typename(tp: Any) -> str:
        return getattr(typing.get_origin(tp) or tp, "__name__", str(tp))

    return {k: [typename(o.opt_type), o.default, o.is_required] for k, o in opts}


def test_every_scheduler_declares_its_options_once_as_a_structured_opts() -> None:
    app = AppDef("a", roles=[Role("r", "/tmp", entrypoint="echo")])
    for name, factory in get_scheduler_factories().items():
        scheduler = factory("t")
        opts = type(scheduler).capabilities.opts
        assert opts is not None, name
        assert issubclass(opts, StructuredOpts), name
        assert _declared(scheduler.run_opts()) == _declared(opts.as_runopts()), name
        info = scheduler.submit_dryrun(app, {"queue": "q"} if name == "kubernetes" else {})
        assert isinstance(info.cfg, opts), name  # nightly: AppDryRunInfo.cfg is typed
        assert set(info.cfg) == {key for key, _ in scheduler.run_opts()}, name


def test_the_public_names_are_nightlys() -> None:
    assert KubernetesOpts is KubernetesSchedulerOpts
    assert SlurmOpts(partition="p")["partition"] == "p"
    assert DockerSchedulerOpts(privileged=True)["privileged"] is True
    assert LocalSchedulerOpts.from_cfg({"logDir": "/x"}).log_dir == "/x"


def test_scheduler_options_match_nightlys() -> None:
    program = """
import importlib, json, sys, typing
def typename(tp):
    return getattr(typing.get_origin(tp) or tp, "__name__", str(tp))
out = {}
for name, target in json.load(sys.stdin).items():
    module, cls = target.split(":")
    opts = getattr(importlib.import_module(module), cls).as_runopts()
    out[name] = {k: [typename(o.opt_type), o.default, o.is_required] for k, o in opts}
print(json.dumps(out))
"""
    theirs = run_nightly(program, NIGHTLY_OPTS)
    factories = get_scheduler_factories()
    for name in NIGHTLY_OPTS:
        ours = _declared(factories[name]("t").run_opts())
        assert set(ours) - set(theirs[name]) == OURS_ONLY.get(name, set()), name
        assert set(theirs[name]) - set(ours) == NIGHTLY_ONLY.get(name, set()), name
        shared = set(ours) & set(theirs[name]) - DIFFERENT.get(name, set())
        assert {k: ours[k] for k in shared} == {k: theirs[name][k] for k in shared}, name


@pytest.mark.parametrize(
    ("typed_dict", "opts"), [(LocalOpts, LocalSchedulerOpts), (DockerOpts, DockerSchedulerOpts)]
)
def test_torchx_070_typed_dicts_name_the_same_options(typed_dict: Any, opts: Any) -> None:
    assert set(typing.get_type_hints(typed_dict)) == {key for key, _ in opts.as_runopts()}


def test_a_conflict_names_the_option() -> None:
    with pytest.raises(InvalidRunConfigException, match="mail-user") as info:
        SlurmOpts.from_cfg({"mail-user": "a", "mailUser": "b"})
    assert info.value.cfg_key == "mail-user"


def test_a_field_without_default_is_required_in_the_runopts() -> None:
    @dataclass
    class Needs(StructuredOpts):
        cluster: str
        extra: list[str] = field(default_factory=list)

    opts = Needs.as_runopts()
    with pytest.raises(InvalidRunConfigException, match="cluster"):
        opts.resolve({})
    assert Needs.from_cfg({"cluster": "c"}).extra == []


RESOLVE = """
import json, sys
try:
    from torchx.specs import runopts
except ImportError:
    from asynctorchx.specs import runopts
opts = runopts()
opts.add("log_dir", type_=str, help="d")
opts.add("max_retries", type_=int, help="r", default=3)
opts.add("prepend_cwd", type_=bool, help="p", default=False)
out = []
for cfg, ignore in json.load(sys.stdin):
    try:
        out.append(opts.resolve(cfg, ignore_unknown=ignore))
    except Exception as e:
        out.append([type(e).__name__, e.cfg_key])
out.append([opts.canonical_key(k) for k in ["log_dir", "logDir", "LogDir", "nope"]])
print(json.dumps(out))
"""


def test_runopts_resolve_takes_camel_case_and_ignore_unknown_as_nightly() -> None:
    cases_ = [
        [{"logDir": "/x", "maxRetries": 1}, False],
        [{"log_dir": "/x", "logDir": "/x"}, False],
        [{"log_dir": "/x", "logDir": "/y"}, False],
        [{"nope": 1}, False],
        [{"nope": 1, "prependCwd": True}, True],
        [{"maxRetries": "1"}, False],
    ]
    namespace: dict[str, Any] = {"CASES": cases_}
    exec(RESOLVE.replace("json.load(sys.stdin)", "CASES").replace("print(", "str("), namespace)
    ours = json.loads(json.dumps(namespace["out"]))
    assert ours == run_nightly(RESOLVE, cases_)
    assert ours[0] == {"log_dir": "/x", "max_retries": 1, "prepend_cwd": False}
    assert ours[2] == ["InvalidRunConfigException", "log_dir"]
    assert ours[4] == {"log_dir": None, "max_retries": 3, "prepend_cwd": True, "nope": 1}
