"""asynctorchx.specs.api: handles, the converter, runopts, macros, mounts, status."""

from __future__ import annotations

import json
import string
import typing
from datetime import UTC
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from asynctorchx.errors import InvalidRunConfigException, MalformedAppHandleException
from asynctorchx.schedulers.api import DescribeAppResponse, ListAppResponse
from asynctorchx.specs import (
    NULL_RESOURCE,
    AppDef,
    AppState,
    AppStatus,
    BindMount,
    DeviceMount,
    ReplicaStatus,
    Resource,
    RetryPolicy,
    Role,
    RoleStatus,
    VolumeMount,
    is_terminal,
    macros,
    make_app_handle,
    parse_app_handle,
    parse_mounts,
    runopts,
)
from asynctorchx.specs.api import AppStatusError, get_type_name
from asynctorchx.specs.converter import converter, from_json, to_json

# --------------------------------------------------------------------------- handles

NAME = string.ascii_letters + string.digits + "-_."
schedulers = st.text(NAME, min_size=1, max_size=20)
sessions = st.text(NAME, min_size=1, max_size=20)
app_ids = st.text(NAME + "/", min_size=1, max_size=40)


@given(schedulers, sessions, app_ids)
def test_handle_round_trip(scheduler: str, session: str, app_id: str) -> None:
    parsed = parse_app_handle(make_app_handle(scheduler, session, app_id))
    assert (parsed.scheduler_backend, parsed.session_name, parsed.app_id) == (
        scheduler,
        session,
        app_id,
    )
    # TorchX code unpacks and indexes the parsed handle (a NamedTuple there too).
    backend, session_name, parsed_id = parsed
    assert (backend, session_name, parsed_id) == (scheduler, session, app_id)
    assert parsed[2] == app_id


@given(st.text(max_size=40).filter(lambda text: "://" not in text))
def test_handle_without_scheme_separator_is_malformed(text: str) -> None:
    with pytest.raises(MalformedAppHandleException) as caught:
        parse_app_handle(text)
    assert repr(text) in str(caught.value)


@pytest.mark.parametrize(
    "handle",
    [
        "local_cwd://session",
        "://s/app",
        "local_cwd://s/",
        "local_cwd:///app",  # an empty session name: TorchX refuses it too
        "a b://s/app",
        "local_cwd:/s/app",
        "local_cwd://s/app\n",
        "local_cwd://s/app\nmore",
    ],
)
def test_malformed_handles(handle: str) -> None:
    with pytest.raises(MalformedAppHandleException):
        parse_app_handle(handle)


# --------------------------------------------------------------------------- converter

words = st.text(string.printable, max_size=12)
json_scalars = st.none() | st.booleans() | st.integers() | words
json_values = st.recursive(
    json_scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(words, inner, max_size=3),
    max_leaves=8,
)
resources = st.builds(
    Resource,
    cpu=st.integers(-1, 256),
    gpu=st.integers(-1, 16),
    memMB=st.integers(-1, 2**31),
    capabilities=st.dictionaries(words, json_values, max_size=3),
    devices=st.dictionaries(words, st.integers(0, 64), max_size=2),
)
mounts = st.one_of(
    st.builds(BindMount, words, words, st.booleans()),
    st.builds(VolumeMount, words, words, st.booleans()),
    st.builds(DeviceMount, words, words, st.sampled_from(["r", "rw", "rwm"])),
)
roles = st.builds(
    Role,
    name=words,
    image=words,
    min_replicas=st.none() | st.integers(0, 8),
    base_image=st.none() | words,
    entrypoint=words,
    args=st.lists(words, max_size=4),
    env=st.dictionaries(words, words, max_size=3),
    num_replicas=st.integers(0, 8),
    max_retries=st.integers(0, 5),
    retry_policy=st.sampled_from(RetryPolicy),
    resource=resources,
    port_map=st.dictionaries(words, st.integers(0, 65535), max_size=2),
    metadata=st.dictionaries(words, json_values, max_size=3),
    mounts=st.lists(mounts, max_size=3),
)
apps = st.builds(
    AppDef,
    name=words,
    roles=st.lists(roles, max_size=3),
    metadata=st.dictionaries(words, words, max_size=3),
)


@given(apps)
def test_appdef_json_round_trip(app: AppDef) -> None:
    assert from_json(to_json(app), AppDef) == app


@given(apps)
def test_unstructured_form_is_plain_json(app: AppDef) -> None:
    data = converter.unstructure(app)
    for role, encoded in zip(app.roles, data["roles"], strict=True):
        assert encoded["retry_policy"] == role.retry_policy.name
        assert [m["type"] for m in encoded["mounts"]] == [type(m).__name__ for m in role.mounts]


times = st.none() | st.datetimes(timezones=st.just(UTC))
replica_statuses = st.builds(
    ReplicaStatus,
    started=times,
    ended=times,
    id=st.integers(0, 8),
    state=st.sampled_from(AppState),
    role=words,
    hostname=words,
    structured_error_msg=words,
    exit_code=st.none() | st.integers(-255, 255),
)
statuses = st.builds(
    AppStatus,
    state=st.sampled_from(AppState),
    num_restarts=st.integers(-1, 10),
    msg=words,
    structured_error_msg=words,
    ui_url=st.none() | words,
    roles=st.lists(
        st.builds(RoleStatus, words, st.lists(replica_statuses, max_size=3)), max_size=2
    ),
    pending_reason=st.none() | words,
    submitted=times,
    started=times,
    ended=times,
)


@given(statuses)
def test_appstatus_json_round_trip(status: AppStatus) -> None:
    assert from_json(to_json(status), AppStatus) == status


describe_responses = st.builds(
    DescribeAppResponse,
    app_id=words,
    state=st.sampled_from(AppState),
    num_restarts=st.integers(-1, 10),
    msg=words,
    structured_error_msg=words,
    ui_url=st.none() | words,
    roles_statuses=st.lists(
        st.builds(RoleStatus, words, st.lists(replica_statuses, max_size=2)), max_size=2
    ),
    roles=st.lists(roles, max_size=2),
    pending_reason=st.none() | words,
    submitted=times,
    started=times,
    ended=times,
)
list_responses = st.lists(
    st.builds(ListAppResponse, app_id=words, state=st.sampled_from(AppState), app_handle=words),
    max_size=3,
)


@given(describe_responses)
def test_describe_response_json_round_trip(response: DescribeAppResponse) -> None:
    encoded = to_json(response)
    assert from_json(encoded, DescribeAppResponse) == response
    assert json.loads(encoded)["state"] == response.state.name


@given(list_responses)
def test_list_responses_json_round_trip(responses: list[ListAppResponse]) -> None:
    assert from_json(to_json(responses), list[ListAppResponse]) == responses


# --------------------------------------------------------------------------- runopts


def make_opts() -> runopts:
    opts = runopts()
    opts.add("cluster_id", type_=int, help="cluster to submit the job", required=True)
    opts.add("run_as_user", type_=str, help="user to run the job as")
    opts.add("priority", type_=float, default=0.5, help="job priority")
    opts.add("preemptible", type_=bool, default=False, help="is the job preemptible")
    opts.add("tags", type_=list[str], default=["a"], help="tags")
    return opts


def test_resolve_fills_defaults_without_mutating() -> None:
    cfg = {"cluster_id": 3, "priority": 1}
    resolved = make_opts().resolve(cfg)
    assert resolved == {
        "cluster_id": 3,
        "run_as_user": None,
        "priority": 1,
        "preemptible": False,
        "tags": ["a"],
    }
    assert cfg == {"cluster_id": 3, "priority": 1}


def test_resolve_missing_required_names_key_and_type() -> None:
    with pytest.raises(InvalidRunConfigException) as caught:
        make_opts().resolve({})
    assert caught.value.cfg_key == "cluster_id"
    assert "'cluster_id'" in str(caught.value)
    assert "int" in str(caught.value)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("cluster_id", "3", "int"),
        ("cluster_id", True, "int"),
        ("preemptible", 1, "bool"),
        ("priority", "high", "float"),
        ("tags", ["a", 1], "List[str]"),
        ("tags", "a", "List[str]"),
    ],
)
def test_resolve_wrong_type_names_key_and_type(key: str, value: Any, expected: str) -> None:
    with pytest.raises(InvalidRunConfigException) as caught:
        make_opts().resolve({"cluster_id": 1, key: value})
    assert caught.value.cfg_key == key
    assert f"'{key}'" in str(caught.value)
    assert expected in str(caught.value)


def test_resolve_unknown_key_lists_the_accepted() -> None:
    with pytest.raises(InvalidRunConfigException) as caught:
        make_opts().resolve({"cluster_id": 1, "clustr": 2})
    assert caught.value.cfg_key == "clustr"
    assert "cluster_id" in str(caught.value)
    assert "preemptible" in str(caught.value)


def test_add_rejects_bad_definitions() -> None:
    opts = runopts()
    with pytest.raises(ValueError, match="'illegal'"):
        opts.add("illegal", type_=int, help="h", default=10, required=True)
    with pytest.raises(TypeError, match="'bad_type'"):
        opts.add("bad_type", type_=str, help="h", default=10)


def test_is_type() -> None:
    assert runopts.is_type(["a"], list[str])
    assert not runopts.is_type(["a", 1], list[str])
    assert not runopts.is_type(True, int)
    assert runopts.is_type(1, float)
    assert not runopts.is_type(1, bool)


@pytest.mark.parametrize("list_type", [list[str], typing.List[str]])  # noqa: UP006
@pytest.mark.parametrize("dict_type", [dict[str, str], typing.Dict[str, str]])  # noqa: UP006
def test_typing_generics_work_as_option_types(list_type: Any, dict_type: Any) -> None:
    # TorchX schedulers declare `type_=List[str]`; porting them must not need a rewrite.
    opts = runopts()
    opts.add("tags", type_=list_type, default=["a"], help="tags")
    opts.add("labels", type_=dict_type, default={"k": "v"}, help="labels")
    assert runopts.is_type(["x"], list_type)
    assert not runopts.is_type(["x", 1], list_type)
    assert not runopts.is_type("x", list_type)
    assert runopts.is_type({"a": "b"}, dict_type)
    assert not runopts.is_type({"a": 1}, dict_type)
    assert opts.cfg_from_str("tags=x;y,labels=team:ml,tier:1") == {
        "tags": ["x", "y"],
        "labels": {"team": "ml", "tier": "1"},
    }
    assert opts.resolve({}) == {"tags": ["a"], "labels": {"k": "v"}}
    with pytest.raises(
        InvalidRunConfigException, match=r"'labels' must be of type Dict\[str, str\]"
    ):
        opts.resolve({"labels": ["x"]})
    with pytest.raises(InvalidRunConfigException, match=r"'labels'.*name:value"):
        opts.cfg_from_str("labels=novalue")
    text = str(opts)
    assert f"tags=TAGS ({get_type_name(list_type)}, ['a'])" in text
    assert f"labels=LABELS ({get_type_name(dict_type)}, {{'k': 'v'}})" in text


def test_every_resolve_error_lists_the_accepted_options() -> None:
    for cfg in ({}, {"cluster_id": "x"}, {"cluster_id": 1, "clustr": 2}):
        with pytest.raises(InvalidRunConfigException) as caught:
            make_opts().resolve(cfg)
        assert "accepts cluster_id (int), preemptible (bool), priority (float)" in str(caught.value)


def test_cfg_from_json_repr() -> None:
    assert make_opts().cfg_from_json_repr('{"cluster_id": 1, "tags": ["x"]}') == {
        "cluster_id": 1,
        "tags": ["x"],
    }
    for bad in ("[1]", "{nope"):
        with pytest.raises(InvalidRunConfigException, match="JSON"):
            make_opts().cfg_from_json_repr(bad)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cluster_id=1", {"cluster_id": 1}),
        ("cluster_id=1,priority=0.25", {"cluster_id": 1, "priority": 0.25}),
        ("cluster_id=1;priority=0.25", {"cluster_id": 1, "priority": 0.25}),
        ("tags=x,y;z,preemptible=TRUE", {"tags": ["x", "y", "z"], "preemptible": True}),
        ("preemptible=false;tags=x", {"preemptible": False, "tags": ["x"]}),
        (" run_as_user = bob ", {"run_as_user": "bob"}),
        ("unknown=v", {"unknown": "v"}),
        ("", {}),
    ],
)
def test_cfg_from_str_separators(text: str, expected: dict[str, Any]) -> None:
    assert make_opts().cfg_from_str(text) == expected


@pytest.mark.parametrize(
    ("text", "key"), [("cluster_id=x", "cluster_id"), ("preemptible=2", "preemptible")]
)
def test_cfg_from_str_bad_values(text: str, key: str) -> None:
    with pytest.raises(InvalidRunConfigException, match=f"'{key}'"):
        make_opts().cfg_from_str(text)


def test_cfg_from_str_needs_pairs() -> None:
    with pytest.raises(InvalidRunConfigException, match="key=value"):
        make_opts().cfg_from_str("justaword")


def test_str_reads_like_help() -> None:
    text = str(make_opts())
    assert text.index("required arguments:") < text.index("cluster_id=CLUSTER_ID (int)")
    assert text.index("cluster_id=CLUSTER_ID (int)") < text.index("optional arguments:")
    assert "priority=PRIORITY (float, 0.5)" in text
    assert "job priority" in text


# --------------------------------------------------------------------------- macros


def test_macros_applied_per_replica_not_to_entrypoint_or_image() -> None:
    role = Role(
        name="trainer",
        image=f"{macros.img_root}/image",
        entrypoint=f"{macros.img_root}/main.py",
        args=["--id", macros.app_id, f"--rank={macros.replica_id}", "$${escaped}", "${other}"],
        env={"HOST_VAR": macros.rank0_env, "ROOT": macros.img_root},
        metadata={"nested": {"list": [macros.replica_id, 3]}, "plain": macros.app_id},
    )
    applied = []
    for replica_id in range(2):
        values = macros.Values(
            img_root="/root", app_id="app-7", replica_id=str(replica_id), rank0_env="RANK0"
        )
        applied.append(values.apply(role))
    for replica_id, replica in enumerate(applied):
        assert replica.args == ["--id", "app-7", f"--rank={replica_id}", "${escaped}", "${other}"]
        assert replica.env == {"HOST_VAR": "RANK0", "ROOT": "/root"}
        assert replica.metadata == {"nested": {"list": [str(replica_id), 3]}, "plain": "app-7"}
        assert replica.entrypoint == "${img_root}/main.py"
        assert replica.image == "${img_root}/image"
    assert role.args[1] == macros.app_id  # the original is untouched
    assert role.metadata["nested"]["list"][0] == macros.replica_id


def test_substitute() -> None:
    values = macros.Values(img_root="/i", app_id="a", replica_id="0", rank0_env="R")
    assert values.substitute("${img_root}/x-${app_id}-${unknown}") == "/i/x-a-${unknown}"
    assert values.substitute("${base_img_root}") == "DEPRECATED"


# --------------------------------------------------------------------------- mounts


@pytest.mark.parametrize(
    ("opts", "expected"),
    [
        (["type=bind", "src=/a", "dst=/b"], [BindMount("/a", "/b")]),
        (["type=bind,source=/a,target=/b,readonly"], [BindMount("/a", "/b", True)]),
        (["type=volume,src=v,destination=/d"], [VolumeMount("v", "/d")]),
        (["type=device,src=/dev/fuse"], [DeviceMount("/dev/fuse", "/dev/fuse", "rwm")]),
        (["type=device,src=/dev/x,dst=/dev/y,perm=r"], [DeviceMount("/dev/x", "/dev/y", "r")]),
        (
            ["type=bind,src=/a,dst=/b", "type=volume", "src=v", "dst=/v", "readonly"],
            [BindMount("/a", "/b"), VolumeMount("v", "/v", True)],
        ),
        ([], []),
    ],
)
def test_parse_mounts(opts: list[str], expected: list[object]) -> None:
    assert parse_mounts(opts) == expected


def test_parse_mounts_takes_torchx_spellings_and_expands_home(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOME", "/home/someone")
    assert parse_mounts(["type=bind", "src=~/data", "dst=/data", "read_only"]) == [
        BindMount("/home/someone/data", "/data", True)
    ]
    assert parse_mounts(["type=volume,src=v,dst=/v,read_only"]) == [VolumeMount("v", "/v", True)]


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (["src=/a,type=bind,dst=/b"], "before any `type=`"),
        (["type=tmpfs,src=a,dst=b"], "invalid mount type 'tmpfs'"),
        (["type=bind,src=/a,dst=/b,color=red"], "unknown mount option color, "),
        (["type=bind,dst=/b"], "no `src=`"),
        (["type=bind,src=/a"], "no `dst=`"),
        (["type=volume,src=v"], "no `dst=`"),
        (["type=device,src=/dev/x,perm=rx"], "'rx'"),
    ],
)
def test_parse_mounts_errors(opts: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parse_mounts(opts)


# --------------------------------------------------------------------------- status


def test_terminal_states() -> None:
    terminal = {state for state in AppState if is_terminal(state)}
    assert terminal == {AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED}
    assert AppStatus(AppState.RUNNING).is_terminal() is False
    assert AppStatus(AppState.CANCELLED).is_terminal() is True


def test_state_values_and_text_are_torchx() -> None:
    assert [(state.name, state.value) for state in AppState] == [
        ("UNSUBMITTED", 0),
        ("SUBMITTED", 1),
        ("PENDING", 2),
        ("RUNNING", 3),
        ("SUCCEEDED", 4),
        ("FAILED", 5),
        ("CANCELLED", 6),
        ("UNKNOWN", 7),
    ]
    assert str(AppState.FAILED) == "FAILED"
    assert repr(AppState.FAILED) == "FAILED (5)"
    assert [policy.value for policy in RetryPolicy] == ["REPLICA", "APPLICATION", "ROLE"]


def make_status(state: AppState) -> AppStatus:
    return AppStatus(
        state,
        num_restarts=1,
        msg="boom",
        ui_url="file:///tmp/logs",
        roles=[
            RoleStatus(
                "trainer",
                [
                    ReplicaStatus(0, AppState.SUCCEEDED, "trainer", "localhost", exit_code=0),
                    ReplicaStatus(1, state, "trainer", "localhost", '{"message": "x"}', 3),
                ],
            ),
            RoleStatus("ps", [ReplicaStatus(0, AppState.RUNNING, "ps", "host2")]),
        ],
    )


def test_format() -> None:
    text = make_status(AppState.FAILED).format()
    assert "State: FAILED" in text
    assert "Num Restarts: 1" in text
    assert "Msg: boom" in text
    assert "UI URL: file:///tmp/logs" in text
    assert "\n *trainer[0]:SUCCEEDED\n" in text
    assert "\n  trainer[1]:FAILED (exitcode: 3)\n        error_msg: x\n" in text
    assert "\n *ps[0]:RUNNING\n" in text
    filtered = make_status(AppState.FAILED).format(filter_roles=["ps"])
    assert "ps[0]" in filtered
    assert "trainer[" not in filtered


def test_raise_for_status() -> None:
    make_status(AppState.SUCCEEDED).raise_for_status()
    for state in (AppState.FAILED, AppState.CANCELLED, AppState.RUNNING, AppState.UNKNOWN):
        status = make_status(state)
        with pytest.raises(AppStatusError) as caught:
            status.raise_for_status()
        assert caught.value.status is status
        assert state.name in str(caught.value)


# --------------------------------------------------------------------------- resources


def test_resource_copy_merges_capabilities() -> None:
    original = Resource(cpu=1, gpu=0, memMB=10, capabilities={"a": 1, "b": 2}, devices={"d": 1})
    copied = Resource.copy(original, b=3, c=4)
    assert copied.capabilities == {"a": 1, "b": 3, "c": 4}
    assert (copied.cpu, copied.gpu, copied.memMB, copied.devices) == (1, 0, 10, {"d": 1})
    copied.devices["d"] = 2
    assert original.devices == {"d": 1}
    assert original.capabilities == {"a": 1, "b": 2}
    assert Resource(-1, -1, -1) == NULL_RESOURCE


def test_role_validators_name_the_value() -> None:
    with pytest.raises(TypeError, match="num_replicas"):
        Role("r", "i", num_replicas="2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"max_retries.*-1"):
        Role("r", "i", max_retries=-1)


# --------------------------------------------------------------------------- exports


def test_torchx_specs_names_are_exported() -> None:
    # `from torchx.specs import X` ports by changing the import: every name TorchX
    # 0.7.0's torchx.specs exports is here too.
    import asynctorchx.specs as specs
    from asynctorchx.specs.builders import materialize_appdef

    torchx_names = {
        "ALL", "AppDef", "AppDryRunInfo", "AppHandle", "AppState", "AppStatus", "BindMount",
        "CfgVal", "DeviceMount", "InvalidRunConfigException", "MISSING",
        "MalformedAppHandleException", "MountType", "NONE", "NULL_RESOURCE", "ReplicaState",
        "ReplicaStatus", "Resource", "RetryPolicy", "Role", "RoleStatus",
        "UnknownAppException", "UnknownSchedulerException", "VolumeMount",
        "get_named_resources", "get_type_name", "is_terminal", "macros", "make_app_handle",
        "materialize_appdef", "named_resources", "parse_app_handle", "parse_mounts",
        "resource", "runopt", "runopts",
    }  # fmt: skip
    assert torchx_names <= set(specs.__all__)
    for name in specs.__all__:
        assert getattr(specs, name) is not None
    assert specs.materialize_appdef is materialize_appdef
    assert specs.ALL == "all"
    assert specs.get_type_name(int) == "int"
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = specs.no_such_name
