"""The Runner API TorchX added after 0.7.0: list(cfg), describe_native, run(dryrun=True),
cfg_from_str, component arguments as data, Workspace and Role.workspace."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from asynctorchx.errors import InvalidRunConfigException, UnknownSchedulerException
from asynctorchx.runner import Runner
from asynctorchx.schedulers.api import DescribeAppResponse, ListAppResponse
from asynctorchx.specs.api import AppDef, AppDryRunInfo, AppState, CfgVal, Role, Workspace
from tests.runner.fake_scheduler import FakeScheduler, create_class_opts, create_fake
from tests.schedulers.sync_scheduler import TorchXShapedScheduler

LIMIT = 30  # seconds: a safety bound, never a timing guess


@pytest.fixture(autouse=True)
def _counts() -> Iterator[None]:
    FakeScheduler.created.clear()
    FakeScheduler.closed.clear()
    yield
    FakeScheduler.created.clear()
    FakeScheduler.closed.clear()


class Native(FakeScheduler):
    """Lists with run options, has a raw description, keeps metadata, builds workspaces."""

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__(session_name, **kwargs)
        self.list_cfgs: list[Mapping[str, CfgVal] | None] = []
        self.built: list[tuple[str, str, list[str]]] = []

    async def list(  # type: ignore[override]
        self, cfg: Mapping[str, CfgVal] | None = None
    ) -> list[ListAppResponse]:
        self.list_cfgs.append(cfg)
        label = (cfg or {}).get("label")
        return [
            ListAppResponse(app_id=a, state=AppState.SUCCEEDED)
            for a in self.apps
            if label is None or a.startswith(str(label))
        ]

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        if app_id not in self.apps:
            return None
        return DescribeAppResponse(
            app_id=app_id, state=AppState.SUCCEEDED, metadata={"owner": "me"}
        )

    async def describe_native(self, app_id: str) -> Any | None:
        return {"raw": app_id} if app_id in self.apps else None

    async def build_workspace_and_update_role(
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        files = sorted(str(p.relative_to(workspace)) for p in Path(workspace).rglob("*"))
        self.built.append((role.name, workspace, files))
        role.image = f"built-{role.name}"


def create_native(session_name: str, **kwargs: Any) -> Native:
    return Native(session_name, **kwargs)


create_native.capabilities = Native.capabilities  # type: ignore[attr-defined]


def _app(name: str = "fake", roles: int = 1) -> AppDef:
    return AppDef(
        name=name, roles=[Role(name=f"r{i}", image=".", entrypoint="true") for i in range(roles)]
    )


def _runner() -> Runner:
    return Runner("torchx", {"native": create_native, "fake": create_fake}, handle_signals=False)


async def test_list_passes_cfg_to_a_scheduler_that_takes_it() -> None:
    async with _runner() as runner:
        with anyio.fail_after(LIMIT):
            await runner.run(_app("alpha"), "native")
            await runner.run(_app("beta"), "native")
            everything = await runner.list("native")
            only_beta = await runner.list("native", {"label": "beta"})
    assert [a.name for a in everything] == ["alpha", "beta"]  # filled in by the runner
    assert [a.app_handle for a in only_beta] == ["native://torchx/beta-1"]
    sched = FakeScheduler.created[0]
    assert isinstance(sched, Native)
    assert sched.list_cfgs == [None, {"label": "beta"}]


async def test_list_with_cfg_on_a_torchx_070_scheduler_without_it_lists_every_app() -> None:
    runner = Runner("torchx", {"shaped": TorchXShapedScheduler}, handle_signals=False)  # type: ignore[dict-item]
    async with runner:
        with anyio.fail_after(LIMIT):
            await runner.run(_app(), "shaped")
            apps = await runner.list("shaped", {"label": "x"})
    assert [a.app_id for a in apps] == ["fake-0"]


async def test_describe_native_and_its_default() -> None:
    async with _runner() as runner:
        with anyio.fail_after(LIMIT):
            native = await runner.run(_app(), "native")
            plain = await runner.run(_app(), "fake")
            assert await runner.describe_native(native) == {"raw": "fake-0"}
            assert await runner.describe_native("native://torchx/nope") is None
            assert await runner.describe_native(plain) is None  # the base class's default


async def test_describe_of_an_app_submitted_elsewhere_keeps_its_metadata() -> None:
    async with _runner() as runner, Runner("other", {"native": create_native}) as other:
        with anyio.fail_after(LIMIT):
            handle = await runner.run(_app(), "native")
            app_id = handle.rsplit("/", 1)[1]
            sched = FakeScheduler.created[0]
            assert isinstance(sched, Native)
            # the other session's scheduler is a different instance: give it the app
            await other.list("native")
            other_sched = FakeScheduler.created[1]
            other_sched.apps[app_id] = _app()
            described = await other.describe(f"native://other/{app_id}")
    assert described is not None
    assert described.metadata == {"owner": "me"}


async def test_run_dryrun_returns_the_request_and_submits_nothing() -> None:
    async with _runner() as runner:
        with anyio.fail_after(LIMIT):
            info = await runner.run(_app(), "native", dryrun=True)
            assert isinstance(info, AppDryRunInfo)
            assert info.app is not None
            assert info.app.name == "fake"
            assert await runner.list("native") == []
            handle = await runner.run(_app(), "native")
    assert handle == "native://torchx/fake-0"


def test_cfg_from_str_without_entering_the_runner() -> None:
    runner = Runner("torchx", {"fake": create_class_opts})
    cfg = runner.cfg_from_str("fake", "flag=true,label=a", "label=b")
    assert cfg == {"flag": True, "label": "b"}
    with pytest.raises(InvalidRunConfigException, match="flag"):
        runner.cfg_from_str("fake", "flag=maybe")
    # an unknown key is kept as text, for the dry-run to refuse by name
    assert runner.cfg_from_str("fake", "nope=1") == {"nope": "1"}
    with pytest.raises(UnknownSchedulerException):
        runner.cfg_from_str("missing", "flag=true")


async def test_run_component_with_arguments_as_data() -> None:
    async with _runner() as runner:
        with anyio.fail_after(LIMIT):
            info = await runner.dryrun_component(
                "utils.sh", {"args": ["echo", "hi"], "env": {"A": "1"}}, "native"
            )
    assert info.app is not None
    role = info.app.roles[0]
    assert role.args == ["-c", "echo hi"]
    assert role.env["A"] == "1"


async def test_workspace_string_builds_role_zero_only(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("")
    async with _runner() as runner:
        with anyio.fail_after(LIMIT):
            info = await runner.dryrun(_app(roles=2), "native", workspace=str(tmp_path))
    assert info.app is not None
    assert [r.image for r in info.app.roles] == ["built-r0", "."]
    sched = FakeScheduler.created[0]
    assert isinstance(sched, Native)
    assert sched.built == [("r0", str(tmp_path), ["main.py"])]


async def test_dryrun_leaves_the_callers_app_as_it_was(tmp_path: Path) -> None:
    # torchx-nightly's Runner.dryrun changes a copy; 0.7.0 and we once changed the caller's
    (tmp_path / "main.py").write_text("print('hi')\n")
    app = _app()
    before = copy.deepcopy(app)
    async with _runner() as runner:
        with anyio.fail_after(LIMIT):
            info = await runner.dryrun(app, "native", workspace=str(tmp_path))
            await runner.run(app, "native")
    assert app == before
    assert info.app is not None
    assert info.app.roles[0].image == "built-r0"
    assert "TORCHX_JOB_ID" in info.app.roles[0].env


async def test_role_workspaces_with_mapped_projects(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "a.py").write_text("")
    (tmp_path / "lib.py").write_text("")
    app = _app(roles=2)
    app.roles[1].workspace = Workspace(
        {str(tmp_path / "proj"): "src", str(tmp_path / "lib.py"): ""}
    )
    async with _runner() as runner:
        with anyio.fail_after(LIMIT):
            info = await runner.dryrun(app, "native", workspace=Workspace({str(tmp_path): ""}))
    assert info.app is not None
    assert [r.image for r in info.app.roles] == ["built-r0", "built-r1"]
    sched = FakeScheduler.created[0]
    assert isinstance(sched, Native)
    (_, _, first), (_, staged, second) = sched.built
    assert "proj/a.py" in first
    assert second == ["lib.py", "src", "src/a.py"]
    assert not Path(staged).exists()  # the staging directory is gone after the build


async def test_a_missing_workspace_project_is_reported(tmp_path: Path) -> None:
    app = _app()
    app.roles[0].workspace = Workspace({str(tmp_path / "gone"): "x"})
    async with _runner() as runner:
        with anyio.fail_after(LIMIT), pytest.raises(FileNotFoundError, match="gone"):
            await runner.dryrun(app, "native")
