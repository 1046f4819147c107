"""A runner's ``workspace=`` over ``roles[0].workspace``, and one build per distinct
(image, workspace): beside torchx-nightly's ``Runner.dryrun``, then on ``local_cwd`` and
the Docker engine."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest

from asynctorchx.runner import Runner, get_runner
from asynctorchx.schedulers.docker_scheduler import DockerScheduler
from asynctorchx.specs.api import AppDef, AppState, CfgVal, Role, Workspace
from tests.nightly import run_nightly
from tests.runner.fake_scheduler import FakeScheduler

LIMIT = 120  # seconds: a safety bound (an image build), never a timing guess


class Recorder(FakeScheduler):
    """Builds nothing: records each build and points the role at ``built:<dir>``."""

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__(session_name, **kwargs)
        self.builds: list[tuple[str, str]] = []

    async def build_workspace_and_update_role(
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        self.builds.append((role.name, workspace))
        role.image = f"built:{workspace}"


# Each case: the roles' (image, own workspace), and the runner's workspace.
CASES: list[dict[str, Any]] = [
    {"roles": [["base", "a"], ["base", None]], "workspace": "b"},  # the runner's wins
    {"roles": [["base", "a"]], "workspace": ""},  # "" keeps role 0's own
    {"roles": [["base", "a"], ["base", "a"], ["base", "a"]], "workspace": None},
    {"roles": [["base", "a"], ["base", "b"]], "workspace": "b"},  # role 1 shares role 0's
    {"roles": [["base", "a"], ["other", "a"]], "workspace": None},  # images differ: two
]

NIGHTLY = """
import json, sys
from torchx.runner.api import Runner
from torchx.schedulers.local_scheduler import CWDImageProvider, LocalScheduler
from torchx.specs import AppDef, Role, Workspace
from torchx.workspace.api import WorkspaceMixin

class Recorder(WorkspaceMixin, LocalScheduler):
    def build_workspace_and_update_role(self, role, workspace, cfg):
        role.image = "built:" + workspace

def create(session_name, **kwargs):
    return Recorder(session_name=session_name, image_provider_class=CWDImageProvider)

out = []
for case in json.load(sys.stdin):
    roles = [
        Role(f"r{i}", image, entrypoint="true", workspace=Workspace({ws: ""}) if ws else None)
        for i, (image, ws) in enumerate(case["roles"])
    ]
    runner = Runner("s", scheduler_factories={"rec": create})
    info = runner.dryrun(AppDef("a", roles), "rec", workspace=case["workspace"])
    out.append([r.image for r in info.app.roles])
print(json.dumps(out))
"""


def _app(roles: list[list[Any]]) -> AppDef:
    return AppDef(
        "a",
        [
            Role(f"r{i}", image, entrypoint="true", workspace=ws and Workspace({ws: ""}))
            for i, (image, ws) in enumerate(roles)
        ],
    )


async def test_workspace_precedence_and_builds_beside_torchx_nightly(tmp_path: Path) -> None:
    def where(ws: str | None) -> str | None:
        return ws and str(tmp_path / ws)

    cases = [
        {"roles": [[im, where(ws)] for im, ws in c["roles"]], "workspace": where(c["workspace"])}
        for c in CASES
    ]
    images: list[list[str]] = []
    builds: list[int] = []
    for case in cases:
        FakeScheduler.created.clear()
        runner = Runner("s", {"rec": Recorder}, handle_signals=False)  # type: ignore[dict-item]
        async with runner:
            with anyio.fail_after(LIMIT):
                app = _app(case["roles"])
                info = await runner.dryrun(app, "rec", None, case["workspace"])
        assert info.app is not None
        images.append([r.image for r in info.app.roles])
        (recorder,) = FakeScheduler.created
        assert isinstance(recorder, Recorder)
        builds.append(len(recorder.builds))
    assert images == run_nightly(NIGHTLY, cases)
    assert images[0] == [f"built:{tmp_path / 'b'}", "base"]
    # torchx-nightly builds once per role with a workspace: 1, 1, 3, 2, 2
    assert builds == [1, 1, 1, 1, 2]


async def test_local_cwd_builds_nothing_beside_torchx_nightly(tmp_path: Path) -> None:
    roles = [[str(tmp_path), str(tmp_path / "a")], [str(tmp_path), None]]
    program = """
import json, sys
from torchx.runner import get_runner
from torchx.specs import AppDef, Role, Workspace
roles = [Role(f"r{i}", im, entrypoint="true", workspace=ws and Workspace({ws: ""}))
         for i, (im, ws) in enumerate(json.load(sys.stdin))]
info = get_runner().dryrun(AppDef("a", roles), "local_cwd", workspace=roles[0].image + "/b")
print(json.dumps([r.image for r in info.app.roles]))
"""
    async with get_runner(handle_signals=False) as runner:
        with anyio.fail_after(LIMIT):
            info = await runner.dryrun(_app(roles), "local_cwd", workspace=str(tmp_path / "b"))
    assert info.app is not None
    assert [r.image for r in info.app.roles] == run_nightly(program, roles) == [str(tmp_path)] * 2


@pytest.mark.docker
async def test_local_docker_builds_the_runner_workspace_once_for_two_roles(
    docker_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name}.txt").write_text(f"from {name}\n")
    built: list[str] = []
    build = DockerScheduler.build_workspace_and_update_role

    async def counted(self: DockerScheduler, role: Role, workspace: str, cfg: Any) -> None:
        built.append(workspace)
        await build(self, role, workspace, cfg)

    monkeypatch.setattr(DockerScheduler, "build_workspace_and_update_role", counted)
    script = "cat b.txt; cat a.txt 2>/dev/null || echo no a"
    app = AppDef(
        "ws",
        [
            Role(
                name,
                docker_image,
                entrypoint="sh",
                args=["-c", script],
                workspace=Workspace({str(tmp_path / own): ""}),
            )
            for name, own in (("r0", "a"), ("r1", "b"))
        ],
    )
    async with get_runner(handle_signals=False) as runner:
        handle = await runner.run(app, "local_docker", workspace=str(tmp_path / "b"))
        try:
            with anyio.fail_after(LIMIT):
                status = await runner.wait(handle, wait_interval=0.1)
                assert status is not None
                assert status.state == AppState.SUCCEEDED
                for role in ("r0", "r1"):
                    lines = [line async for line in runner.log_lines(handle, role)]
                    assert lines == ["from b\n", "no a\n"]
            ran = await runner.describe(handle)
        finally:
            await runner.delete(handle)
    assert built == [str(tmp_path / "b")]
    assert ran is not None
    assert ran.roles[0].image == ran.roles[1].image != docker_image
    subprocess.run(["docker", "rmi", ran.roles[0].image], capture_output=True, check=False)


class WorkspaceRecorder(Recorder):
    """A :class:`Recorder` whose capabilities say it builds workspaces into images."""

    capabilities = attrs.evolve(Recorder.capabilities, workspace="image")


# Each case: the roles' (image, own workspace), and the workspace given to submit.
SUBMIT_CASES: list[dict[str, Any]] = [
    {"roles": [["base", "a"], ["base", None]], "workspace": "b"},  # role 0's is replaced
    {"roles": [["base", "a"], ["base", "c"]], "workspace": None},  # nothing is built
    {"roles": [["base", "a"], ["base", "c"]], "workspace": "b"},  # role 1's own is built too
    {"roles": [["base", None], ["base", "b"]], "workspace": "b"},  # one build for both
]

NIGHTLY_SUBMIT = """
import json, sys
from torchx.schedulers.local_scheduler import CWDImageProvider, LocalScheduler
from torchx.specs import AppDef, Role, Workspace
from torchx.workspace.api import WorkspaceMixin

class Recorder(WorkspaceMixin, LocalScheduler):
    def build_workspace_and_update_role(self, role, workspace, cfg):
        role.image = "built:" + workspace
    def schedule(self, dryrun_info):
        return "submitted"

def app(roles):
    return AppDef("a", [
        Role(f"r{i}", image, entrypoint="true", workspace=Workspace({ws: ""}) if ws else None)
        for i, (image, ws) in enumerate(roles)
    ])

out = []
for case in json.load(sys.stdin):
    submitted = app(case["roles"])
    Recorder("s", image_provider_class=CWDImageProvider).submit(submitted, {}, case["workspace"])
    out.append([[r.image, r.workspace and str(r.workspace)] for r in submitted.roles])
try:
    LocalScheduler("s", image_provider_class=CWDImageProvider).submit(app([["b", None]]), {}, "x")
    out.append("submitted")
except ValueError:
    out.append("ValueError")
print(json.dumps(out))
"""


async def test_scheduler_submit_workspace_beside_torchx_nightly(tmp_path: Path) -> None:
    def where(ws: str | None) -> str | None:
        return ws and str(tmp_path / ws)

    cases = [
        {"roles": [[im, where(ws)] for im, ws in c["roles"]], "workspace": where(c["workspace"])}
        for c in SUBMIT_CASES
    ]
    ours: list[Any] = []
    builds: list[int] = []
    for case in cases:
        async with WorkspaceRecorder("s") as recorder:
            app = _app(case["roles"])
            await recorder.submit(app, {}, case["workspace"])
        ours.append([[r.image, r.workspace and str(r.workspace)] for r in app.roles])
        builds.append(len(recorder.builds))
    async with Recorder("s") as no_builds:  # its capabilities say it builds no workspace
        with pytest.raises(ValueError, match="builds no workspace"):
            await no_builds.submit(_app([["b", None]]), {}, "x")
    ours.append("ValueError")
    assert ours == run_nightly(NIGHTLY_SUBMIT, cases)
    assert ours[2] == [[f"built:{where('b')}", where("b")], [f"built:{where('c')}", where("c")]]
    # torchx-nightly's built-in builders build once per role with a workspace: 1, 0, 2, 2
    assert builds == [1, 0, 2, 1]
