"""The specs names TorchX added after 0.7.0: Workspace, Role.workspace, RetryPolicy.ROLE,
ReplicaStatus.hostaddr and the to_json methods of the statuses."""

from __future__ import annotations

import json

import pytest

from asynctorchx import specs
from asynctorchx.specs.api import (
    NONE,
    AppState,
    AppStatus,
    ReplicaStatus,
    RetryPolicy,
    Role,
    RoleStatus,
    Workspace,
)
from asynctorchx.specs.converter import from_json, to_json


def test_workspace_is_exported_where_torchx_users_look() -> None:
    assert specs.Workspace is Workspace


@pytest.mark.parametrize(
    ("text", "projects"),
    [
        ("~/proj", {"~/proj": ""}),
        ('{"~/proj": "proj", "~/lib": null}', {"~/proj": "proj", "~/lib": ""}),
        ("~/proj: proj\n~/lib:\n", {"~/proj": "proj", "~/lib": ""}),
    ],
)
def test_workspace_from_str(text: str, projects: dict[str, str]) -> None:
    assert Workspace.from_str(text).projects == projects


def test_workspace_from_a_json_list_is_refused() -> None:
    with pytest.raises(ValueError, match="maps paths to sub-directories"):
        Workspace.from_str('{"a": 1}')


def test_workspace_that_is_not_yaml_is_refused_on_one_line() -> None:
    with pytest.raises(ValueError, match="is not YAML") as caught:
        Workspace.from_str("a: b: c")
    assert "\n" not in str(caught.value)


def test_workspace_str_and_single_project() -> None:
    assert str(Workspace({"/p": ""})) == "/p"
    assert Workspace({"/p": ""}).is_unmapped_single_project()
    assert str(Workspace({"/p": "p", "/q": ""})) == "/p:p;/q"
    assert not Workspace({"/p": "p"}).is_unmapped_single_project()


def test_role_workspace_defaults_to_none_and_round_trips_through_json() -> None:
    assert Role("r", "img").workspace is None
    role = Role("r", "img", workspace=Workspace({"/src": "src"}))
    assert from_json(to_json(role), Role) == role
    # an AppDef stored before the field existed (a Docker label) still decodes
    assert from_json('{"name": "r", "image": "img"}', Role).workspace is None


def test_retry_policy_role() -> None:
    assert RetryPolicy("ROLE") is RetryPolicy.ROLE
    assert from_json(to_json(Role("r", "i", retry_policy=RetryPolicy.ROLE)), Role).retry_policy == (
        RetryPolicy.ROLE
    )


def test_hostaddr_is_keyword_only_and_optional() -> None:
    replica = ReplicaStatus(0, AppState.RUNNING, "r", "host", NONE, None, hostaddr="10.0.0.2")
    assert replica.hostaddr == "10.0.0.2"
    assert ReplicaStatus(0, AppState.RUNNING, "r", "host").hostaddr is None


def _status() -> AppStatus:
    replicas = [
        ReplicaStatus(0, AppState.FAILED, "trainer", "h0", '{"message": "boom"}', 3),
        ReplicaStatus(1, AppState.SUCCEEDED, "trainer", "h1", hostaddr="10.0.0.1"),
    ]
    return AppStatus(
        AppState.FAILED,
        roles=[RoleStatus("trainer", replicas), RoleStatus("ps", [])],
        ui_url="file:///tmp/x",
        msg=NONE,
    )


def test_app_status_to_json_has_torchx_keys_and_nulls_for_unset_values() -> None:
    data = _status().to_json()
    assert json.loads(json.dumps(data)) == data  # JSON-able as it is
    assert data["state"] == "FAILED"
    assert data["num_restarts"] == 0
    assert data["msg"] is None
    assert data["structured_error_msg"] is None
    assert data["url"] == "file:///tmp/x"
    first, second = data["roles"][0]["replicas"]
    assert first == {
        "id": 0,
        "state": "FAILED",
        "role": "trainer",
        "hostname": "h0",
        "hostaddr": None,
        "structured_error_msg": '{"message": "boom"}',
        "exit_code": 3,
        "started": None,
        "ended": None,
    }
    assert second["structured_error_msg"] is None
    assert second["hostaddr"] == "10.0.0.1"
    assert "<NONE>" not in json.dumps(data)


def test_app_status_to_json_filters_roles() -> None:
    assert [r["role"] for r in _status().to_json(["ps"])["roles"]] == ["ps"]
    assert [r["role"] for r in _status().to_json([])["roles"]] == ["trainer", "ps"]


def test_materialize_appdef_takes_arguments_as_data() -> None:
    from asynctorchx.components.utils import echo
    from asynctorchx.specs.builders import ComponentUsageError, materialize_appdef

    # data wins over the command line; a required argument given as data is not required
    app = materialize_appdef(echo, ["--msg", "cli"], None, {"msg": "data", "num_replicas": 2})
    assert app.roles[0].args == ["data"]
    assert app.roles[0].num_replicas == 2
    # a string is decoded as the command line would decode it
    assert materialize_appdef(echo, [], None, {"num_replicas": "3"}).roles[0].num_replicas == 3
    with pytest.raises(ComponentUsageError, match="no argument 'nope'"):
        materialize_appdef(echo, [], None, {"nope": 1})
