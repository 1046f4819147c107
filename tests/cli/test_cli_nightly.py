"""The CLI additions from TorchX after 0.7.0 (in-process runs): status --json,
describe --json, list -cfg and the [cli:list] section."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from asynctorchx.cli._output import to_json_with_nulls
from asynctorchx.cli.main import run_cli
from asynctorchx.schedulers import SchedulerFactory
from asynctorchx.schedulers.api import DescribeAppResponse, ListAppResponse
from asynctorchx.specs.api import AppDef, AppState, CfgVal, ReplicaStatus, Role, RoleStatus
from tests.isolation import isolate_from_user_config
from tests.runner.fake_scheduler import ClassOptsScheduler


class Shared(ClassOptsScheduler):
    """Keeps its apps in the class, so that one CLI call sees what another submitted."""

    store: ClassVar[dict[str, AppDef]] = {}
    list_cfgs: ClassVar[list[Mapping[str, CfgVal] | None]] = []

    async def schedule(self, dryrun_info: Any) -> str:
        app_id = f"{dryrun_info.request.name}-{len(Shared.store)}"
        Shared.store[app_id] = dryrun_info.request
        return app_id

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        app = Shared.store.get(app_id)
        if app is None:
            return None
        replica = ReplicaStatus(0, AppState.SUCCEEDED, app.roles[0].name, "host")
        return DescribeAppResponse(
            app_id=app_id,
            state=AppState.SUCCEEDED,
            roles=app.roles,
            roles_statuses=[RoleStatus(app.roles[0].name, [replica])],
        )

    async def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        Shared.list_cfgs.append(cfg)
        return [ListAppResponse(a, AppState.SUCCEEDED, name="echo") for a in Shared.store]


def create_shared(session_name: str, **kwargs: Any) -> Shared:
    return Shared(session_name, **kwargs)


create_shared.capabilities = Shared.capabilities  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def shared_scheduler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    isolate_from_user_config(tmp_path, monkeypatch)
    factories: dict[str, SchedulerFactory] = {"shared": create_shared}
    monkeypatch.setattr("asynctorchx.schedulers.get_scheduler_factories", lambda: factories)
    Shared.store.clear()
    Shared.list_cfgs.clear()
    yield
    Shared.store.clear()
    Shared.list_cfgs.clear()


def _submit(capsys: pytest.CaptureFixture[str]) -> str:
    assert run_cli(["run", "-s", "shared", "utils.echo", "--msg", "hi"]) == 0
    return capsys.readouterr().out.splitlines()[0]


def test_status_json_is_torchx_to_json_with_nulls(capsys: pytest.CaptureFixture[str]) -> None:
    handle = _submit(capsys)
    assert run_cli(["status", "--json", handle]) == 0
    out = capsys.readouterr().out
    data = json.loads(out)
    assert data["state"] == "SUCCEEDED"
    assert data["structured_error_msg"] is None
    assert data["roles"][0]["replicas"][0]["hostname"] == "host"
    assert "<NONE>" not in out
    assert run_cli(["status", "--json", "--roles", "other", handle]) == 0
    assert json.loads(capsys.readouterr().out)["roles"] == []


def test_describe_json_has_no_placeholders(capsys: pytest.CaptureFixture[str]) -> None:
    handle = _submit(capsys)
    assert run_cli(["describe", "--json", handle]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["roles"][0]["args"] == ["hi"]
    assert "<NONE>" not in out
    assert "<MISSING>" not in out


def test_placeholders_become_null() -> None:
    data = json.loads(to_json_with_nulls(Role("r", "img")))
    assert data["entrypoint"] is None  # <MISSING>
    assert data["base_image"] is None


def test_list_cfg_and_name_column(capsys: pytest.CaptureFixture[str]) -> None:
    _submit(capsys)
    assert run_cli(["list", "-s", "shared", "-cfg", "label=team"]) == 0
    out = capsys.readouterr().out
    assert out.split()[:6] == ["APP", "HANDLE", "APP", "NAME", "APP", "STATUS"]
    assert "echo" in out
    assert Shared.list_cfgs == [{"label": "team"}]


def test_cli_list_section_gives_the_defaults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".torchxconfig").write_text(
        "[cli:list]\nscheduler = shared\nscheduler_args = label=fromfile,flag=true\n"
    )
    assert run_cli(["list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert run_cli(["list", "-cfg", "label=flag"]) == 0  # the flag wins
    assert Shared.list_cfgs == [{"label": "fromfile", "flag": True}, {"label": "flag"}]


def test_list_cfg_with_a_bad_value_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["list", "-s", "shared", "-cfg", "flag=maybe"]) == 2
    assert "flag" in capsys.readouterr().err
