"""The specs names torchx-nightly added: is_started, UNKNOWN, TORCHX_HOME, CapabilityKey,
Resource.tags and the tags of named resources, AppDryRunInfo.cfg; each beside nightly's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from asynctorchx import specs
from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
from asynctorchx.specs import AppDef, AppState, CapabilityKey, Resource, Role, resource_tags
from asynctorchx.specs.converter import from_json, to_json
from tests.nightly import run_nightly


def test_is_started_is_true_from_running_on() -> None:
    started = {state.name for state in AppState if specs.is_started(state)}
    assert started == {"RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"}


def test_is_started_and_unknown_match_nightly() -> None:
    theirs = run_nightly(
        "import json\nfrom torchx import specs\nfrom torchx.specs.api import is_started\n"
        "print(json.dumps({'started': [s.name for s in specs.AppState if is_started(s)],"
        " 'unknown': specs.UNKNOWN}))"
    )
    assert theirs == {
        "started": [state.name for state in AppState if specs.is_started(state)],
        "unknown": specs.UNKNOWN,
    }


def test_torchx_home_is_made_under_the_variable_or_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TORCHX_HOME", raising=False)
    assert specs.TORCHX_HOME("a", "b") == tmp_path / "home/.torchx/a/b"
    assert (tmp_path / "home/.torchx/a/b").is_dir()
    monkeypatch.setenv("TORCHX_HOME", str(tmp_path / "th"))
    assert specs.TORCHX_HOME() == tmp_path / "th"
    assert (tmp_path / "th").is_dir()


def test_torchx_home_matches_nightly(tmp_path: Path) -> None:
    program = "import json\nfrom torchx.specs import TORCHX_HOME\n"
    program += "print(json.dumps(str(TORCHX_HOME('x'))))"
    theirs = run_nightly(program, env={"TORCHX_HOME": str(tmp_path / "theirs")})
    assert theirs == str(tmp_path / "theirs/x")


def test_capability_key_stores_under_the_dotted_key_and_checks_the_type() -> None:
    bandwidth = CapabilityKey("aws", "network_gbps", int)
    resource = Resource(cpu=1, gpu=0, memMB=1)
    assert bandwidth.get(resource) is None
    assert bandwidth.get(resource, default=3) == 3
    bandwidth.set(resource, 400)
    assert resource.capabilities == {"aws.network_gbps": 400}
    assert bandwidth.get(resource) == 400
    resource.capabilities["aws.network_gbps"] = True
    with pytest.raises(TypeError, match=r"'aws.network_gbps' holds True \(bool\), not a int"):
        bandwidth.get(resource)


def test_capability_key_matches_nightly() -> None:
    theirs = run_nightly(
        "import json\nfrom torchx.specs import CapabilityKey, Resource\n"
        "k = CapabilityKey('aws', 'efa', bool)\nr = Resource(cpu=1, gpu=0, memMB=1)\n"
        "k.set(r, True)\nerr = None\n"
        "try:\n    CapabilityKey('aws', 'efa', int).get(r)\n"
        "except TypeError:\n    err = 'TypeError'\n"
        "print(json.dumps([k.key, r.capabilities, k.get(r), err]))"
    )
    key = CapabilityKey("aws", "efa", bool)
    resource = Resource(cpu=1, gpu=0, memMB=1)
    key.set(resource, True)
    with pytest.raises(TypeError):
        CapabilityKey("aws", "efa", int).get(resource)
    assert theirs == [key.key, resource.capabilities, key.get(resource), "TypeError"]


def test_named_resources_are_tagged_with_their_name_and_copies_keep_tags() -> None:
    resource = specs.named_resources["aws_t3.medium"]
    assert resource.tags == {resource_tags.RESOURCE_NAME: "aws_t3.medium"}
    assert resource.get_resource_name() == "aws_t3.medium"
    assert not resource.is_fractional()
    assert Resource.copy(resource, x=1).tags == resource.tags
    assert Resource(cpu=1, gpu=0, memMB=1).get_resource_name() is None
    assert Resource(cpu=1, gpu=0, memMB=1, tags={resource_tags.IS_FRACTIONAL: True}).is_fractional()


def test_tags_reach_a_scheduler_through_the_dry_run_and_json() -> None:
    role = Role("r", "/tmp", entrypoint="echo", resource=specs.resource(h="gpu.small"))
    app = AppDef("tagged", roles=[role])
    info = create_cwd_scheduler("t").submit_dryrun(app, {})
    assert info.app is not None
    assert info.app.roles[0].resource.get_resource_name() == "gpu.small"
    assert from_json(to_json(app), AppDef).roles[0].resource.tags == role.resource.tags


def test_tags_of_named_resources_match_nightly() -> None:
    names = ["aws_t3.medium", "aws_p4d.24xlarge", "gpu.small", "cpu.large"]
    theirs = run_nightly(
        "import json, sys\nfrom torchx import specs\n"
        "print(json.dumps({n: [specs.resource(h=n).tags, specs.resource(h=n).is_fractional()]"
        " for n in json.load(sys.stdin)}))",
        names,
    )
    ours = {n: [specs.resource(h=n).tags, specs.resource(h=n).is_fractional()] for n in names}
    assert ours == theirs


def test_dryrun_info_carries_the_resolved_cfg_and_the_app() -> None:
    app = AppDef("a", roles=[Role("r", "/tmp", entrypoint="echo")])
    info = create_cwd_scheduler("t").submit_dryrun(app, {"log_dir": "/tmp/x"})
    assert info.app is app
    assert info.cfg["log_dir"] == "/tmp/x"
    assert set(info.cfg) == {name for name, _ in create_cwd_scheduler("t").run_opts()}


def test_metadata_keys_match_nightly() -> None:
    program = (
        "import json\nfrom torchx import specs\n"
        "m = specs.app_metadata\n"
        "print(json.dumps([specs.NA, specs.TORCHX_CONTEXT_NAME,"
        " [m.CONTEXT, m.VERSION, m.SCHEDULER, m.ROLES_PREFIX]]))"
    )
    m = specs.app_metadata
    ours = [
        specs.NA,
        specs.TORCHX_CONTEXT_NAME,
        [m.CONTEXT, m.VERSION, m.SCHEDULER, m.ROLES_PREFIX],
    ]
    assert run_nightly(program) == ours


LOOKUP = """
import json, sys, warnings
from torchx import specs
out = []
for name in json.load(sys.stdin):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            r = specs.resource(h=name)
            found = [r.cpu, r.gpu, r.memMB, r.get_resource_name()]
        except KeyError:
            found = None
        specs.get_named_resources("gpu.small")
        specs.named_resources["gpu.small"]
    out.append([found, name in specs.named_resources,
                [w.category.__name__ for w in caught]])
print(json.dumps(out))
"""


def test_lookups_ignore_case_and_the_old_ones_warn_as_nightly() -> None:
    import warnings

    names = ["AWS_T3.Medium", "GPU.SMALL", "gpu.small", "Cpu.Large", "gpu.smal", "NULL"]
    ours = []
    for name in names:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                r = specs.resource(h=name)
                found: list[object] | None = [r.cpu, r.gpu, r.memMB, r.get_resource_name()]
            except KeyError:
                found = None
            specs.get_named_resources("gpu.small")
            specs.named_resources["gpu.small"]
        ours.append([found, name in specs.named_resources, [w.category.__name__ for w in caught]])
    assert ours == run_nightly(LOOKUP, names)
    assert ours[0][0][3] == "aws_t3.medium"  # type: ignore[index]
    assert ours[0][2] == ["FutureWarning", "FutureWarning"]


def test_a_name_matching_two_ignoring_case_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from asynctorchx.errors import UnknownNamedResourceException

    monkeypatch.setitem(specs._named_resource_factories, "Box", lambda: Resource(1, 0, 1))
    monkeypatch.setitem(specs._named_resource_factories, "BOX", lambda: Resource(2, 0, 1))
    assert specs.resource(h="BOX").cpu == 2
    with pytest.raises(UnknownNamedResourceException, match="more than one") as refused:
        specs.resource(h="box")
    assert "['BOX', 'Box']" in str(refused.value)
