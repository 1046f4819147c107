"""``asynctorchx.workspace``: TorchX's ``WorkspaceMixin`` on our scheduler's workspace hook."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

import asynctorchx.workspace.api as workspace_api
from asynctorchx import specs, workspace
from asynctorchx.runner import Runner
from asynctorchx.schedulers.docker_scheduler import DockerScheduler
from asynctorchx.schedulers.kubernetes_scheduler import KubernetesScheduler
from asynctorchx.schedulers.local_scheduler import LocalScheduler
from asynctorchx.specs.api import AppDef, CfgVal, Role
from asynctorchx.workspace import WorkspaceMixin
from tests.runner.fake_scheduler import FakeScheduler

LIMIT = 30  # seconds


@pytest.fixture(autouse=True)
def _forget_fakes() -> Iterator[None]:
    yield
    FakeScheduler.created.clear()
    FakeScheduler.closed.clear()


class BuildingScheduler(WorkspaceMixin[None], FakeScheduler):
    """A ported TorchX workspace scheduler: the mixin first, then the scheduler."""

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__(session_name, **kwargs)
        self.built: list[tuple[str, str]] = []

    async def build_workspace_and_update_role(
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        self.built.append((role.name, workspace))
        role.image = f"{role.image}_new"


def _app() -> AppDef:
    return AppDef(
        "app",
        roles=[
            Role("a", image="foo", entrypoint="sleep", args=["1"]),
            Role("b", image="bar", entrypoint="sleep", args=["1"]),
        ],
    )


def test_torchx_import_paths() -> None:
    assert workspace_api.WorkspaceMixin is workspace.WorkspaceMixin is WorkspaceMixin
    assert workspace_api.Workspace is workspace.Workspace is specs.Workspace


async def test_the_runner_builds_role_zero_with_a_mixin_scheduler(tmp_path: Path) -> None:
    factories = {"building": BuildingScheduler, "plain": FakeScheduler}
    async with Runner("session", factories) as runner:
        with anyio.fail_after(LIMIT):
            built = await runner.dryrun(_app(), "building", workspace=str(tmp_path))
            plain = await runner.dryrun(_app(), "plain", workspace=str(tmp_path))
    assert built.app is not None
    assert plain.app is not None
    assert [role.image for role in built.app.roles] == ["foo_new", "bar"]
    assert [role.image for role in plain.app.roles] == ["foo", "bar"]


def test_isinstance_follows_what_the_scheduler_builds() -> None:
    assert isinstance(BuildingScheduler("s"), WorkspaceMixin)
    assert BuildingScheduler.capabilities.workspace == "image"  # the mixin says it
    assert FakeScheduler.capabilities.workspace is None
    assert not isinstance(FakeScheduler("s"), WorkspaceMixin)
    assert issubclass(DockerScheduler, WorkspaceMixin)
    assert issubclass(KubernetesScheduler, WorkspaceMixin)  # as TorchX's (DockerWorkspaceMixin)
    assert not issubclass(LocalScheduler, WorkspaceMixin)
    assert not issubclass(int, WorkspaceMixin)


def test_a_mixin_scheduler_must_build() -> None:
    class NoBuild(WorkspaceMixin[None], FakeScheduler):
        pass

    with pytest.raises(TypeError, match="build_workspace_and_update_role"):
        NoBuild("s")  # type: ignore[abstract]


async def test_defaults_push_nothing() -> None:
    scheduler = BuildingScheduler("s")
    assert scheduler.workspace_opts().resolve({}) == {}
    with pytest.raises(NotImplementedError, match="does not push images"):
        scheduler.dryrun_push_images(_app(), {})
    with pytest.raises(NotImplementedError, match="does not push images"):
        await scheduler.push_images(None)
