"""What the Runner asks of its schedulers: one instance per name, options from the class."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from asynctorchx.runner import Runner
from asynctorchx.schedulers import get_scheduler_capabilities, get_scheduler_factories
from asynctorchx.schedulers.api import Scheduler
from asynctorchx.specs.api import AppDef, AppDryRunInfo, AppState, CfgVal, Role, runopts
from tests.isolation import isolate_from_user_config
from tests.runner.fake_scheduler import (
    ClassOptsScheduler,
    FakeScheduler,
    create_class_opts,
    create_fake,
)

LIMIT = 30  # seconds: a safety bound, never a timing guess


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No user .torchxconfig, no TORCHX_* variables, fresh instance counts."""
    isolate_from_user_config(tmp_path, monkeypatch)
    FakeScheduler.created.clear()
    FakeScheduler.closed.clear()
    yield
    FakeScheduler.created.clear()
    FakeScheduler.closed.clear()


def _app() -> AppDef:
    return AppDef(name="fake", roles=[Role(name="r", image=".", entrypoint="true")])


@pytest.mark.parametrize("factory", [create_fake, create_class_opts])
async def test_run_options_then_run_create_one_scheduler(factory: object) -> None:
    runner = Runner("torchx", {"fake": factory})  # type: ignore[dict-item]
    assert "flag" in runner.scheduler_run_opts("fake")
    assert "flag" in runner.scheduler_run_opts("fake")
    async with runner:
        with anyio.fail_after(LIMIT):
            handle = await runner.run(_app(), "fake", {"flag": True})
            status = await runner.wait(handle)
        assert status is not None
        assert status.state == AppState.SUCCEEDED
        assert "label" in runner.scheduler_run_opts("fake")
    assert len(FakeScheduler.created) == 1
    assert FakeScheduler.closed == FakeScheduler.created


async def test_a_factory_exposing_capabilities_creates_no_scheduler_for_options() -> None:
    runner = Runner("torchx", {"fake": create_class_opts})
    assert "flag" in runner.scheduler_run_opts("fake")
    assert runner.scheduler_capabilities("fake") is ClassOptsScheduler.capabilities
    assert FakeScheduler.created == []


async def test_an_options_only_scheduler_is_closed_with_the_runner() -> None:
    runner = Runner("torchx", {"fake": create_fake})
    assert runner.scheduler_capabilities("fake") is FakeScheduler.capabilities
    async with runner:
        pass
    assert len(FakeScheduler.created) == 1
    assert FakeScheduler.closed == FakeScheduler.created


def test_builtin_factories_give_capabilities_and_options_without_instances() -> None:
    for name, factory in get_scheduler_factories().items():
        caps = get_scheduler_capabilities(factory)
        assert caps is not None, name
        assert caps.run_opts is not None, name
        assert len(caps.run_opts()) > 0, name
    assert get_scheduler_capabilities(create_fake) is None  # type: ignore[arg-type]
    assert FakeScheduler.capabilities.run_opts is None  # TorchX's _run_opts(self)
    assert get_scheduler_capabilities(create_class_opts) is ClassOptsScheduler.capabilities


def test_each_builtin_says_where_its_apps_live_and_what_a_workspace_becomes() -> None:
    runner = Runner("torchx", get_scheduler_factories())  # no scheduler is created
    declared = {
        name: (caps.apps_live_in_process, caps.workspace)
        for name in runner.scheduler_backends()
        for caps in [runner.scheduler_capabilities(name)]
    }
    assert declared == {
        "local_cwd": (True, None),  # replicas are this process's children, run in place
        "local_dir": (True, None),
        "local_docker": (False, "image"),
        "slurm": (False, "directory"),  # copied into job_dir, as TorchX's DirWorkspaceMixin
        "kubernetes": (False, "image"),  # built on the Docker engine, pushed to image_repo
    }


async def test_get_runner_then_run_component_reads_the_config_files_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".torchxconfig").write_text(
        "[component:utils.echo]\nmsg = configured\n[torchx:tracker]\nfsspec =\n"
    )
    from asynctorchx.runner import config, get_runner

    reads: list[str] = []
    real_read = config._read

    def counting_read(path: str) -> Any:
        reads.append(path)
        return real_read(path)

    monkeypatch.setattr(config, "_read", counting_read)
    monkeypatch.setattr(
        "asynctorchx.schedulers.get_scheduler_factories", lambda: {"fake": create_class_opts}
    )
    async with get_runner() as runner:
        info = await runner.dryrun_component("utils.echo", [], "fake")
        await runner.run_component("utils.echo", [], "fake")
    assert info.request.roles[0].args == ["configured"]
    assert info.request.roles[0].env["TORCHX_TRACKERS"] == "fsspec"
    assert reads == [str(tmp_path / ".torchxconfig")]


COUNTED = f"{Path(__file__).parent / 'counted_component.py'}:counted"


async def test_run_component_calls_the_component_function_once(tmp_path: Path) -> None:
    marker = tmp_path / "calls"
    async with Runner("torchx", {"fake": create_class_opts}) as runner:
        await runner.run_component(COUNTED, ["--marker", str(marker)], "fake")
        assert marker.read_text() == "called\n"
        await runner.dryrun_component(COUNTED, ["--marker", str(marker)], "fake")
        assert marker.read_text() == "called\n" * 2


async def test_run_resolves_the_run_options_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, object]] = []
    real_resolve = runopts.resolve

    def counting_resolve(self: runopts, cfg: Mapping[str, CfgVal]) -> dict[str, CfgVal]:
        calls.append(dict(cfg))
        return real_resolve(self, cfg)

    monkeypatch.setattr(runopts, "resolve", counting_resolve)
    async with Runner("torchx", {"fake": create_class_opts}) as runner:
        await runner.run(_app(), "fake", {"flag": True})
    assert calls == [{"flag": True}]


async def test_dry_run_info_names_its_app_and_scheduler() -> None:
    async with Runner("torchx", {"fake": create_class_opts}) as runner:
        app = _app()
        info = await runner.dryrun(app, "fake")
        assert info.app is not None
        assert info.app.name == app.name  # a copy: the caller's app is left as it was
        assert info.scheduler == "fake"
        assert info._app is info.app  # TorchX's names stay readable
        assert info._scheduler == "fake"
        with pytest.raises(AttributeError):
            info._scheduler = "other"  # type: ignore[misc]
        with pytest.raises(ValueError, match=r"did not come from Runner\.dryrun"):
            await runner.schedule(AppDryRunInfo(app.roles[0]))


async def test_wait_awaits_the_schedulers_wait_even_the_polling_fallback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    polled: list[list[str]] = []
    real = Scheduler._describe_many

    async def spy(self: Scheduler[Any], app_ids: Collection[str]) -> Any:
        polled.append(list(app_ids))
        return await real(self, app_ids)

    monkeypatch.setattr(Scheduler, "_describe_many", spy)
    async with Runner("torchx", {"fake": create_class_opts}) as runner:
        handle = await runner.run(_app(), "fake")
        with anyio.fail_after(LIMIT):
            status = await runner.wait(handle, wait_interval=3600)  # ignored
    assert status is not None
    assert status.state == AppState.SUCCEEDED
    assert polled == [[handle.rsplit("/", 1)[1]]]
