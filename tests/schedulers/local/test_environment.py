"""What a local replica finds in its environment: TorchX's variables and ``PATH``.

The reference is TorchX 0.7.0's ``torchx.schedulers.local_scheduler``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from asynctorchx.schedulers.local_scheduler import (
    CWDImageProvider,
    LocalDirectoryImageProvider,
    create_cwd_scheduler,
    create_dir_scheduler,
    create_scheduler,
)
from asynctorchx.specs.api import AppDef, CfgVal, Role


def test_cwd_image_provider_runs_in_the_current_directory_whatever_the_image() -> None:
    provider = CWDImageProvider({})
    assert provider.get_cwd("ghcr.io/pytorch/torchx:0.7.0") == os.getcwd()
    assert LocalDirectoryImageProvider({}).get_cwd("/srv/image") == "/srv/image"


def test_pet_log_dir_is_the_roles_torchelastic_directory_of_the_app(tmp_path: Path) -> None:
    # torch.distributed.run writes its workers' logs there; kept with the app's logs
    scheduler = create_cwd_scheduler("sess")
    app = AppDef("app", [Role("trainer", "x", entrypoint="true", num_replicas=2)])
    request = scheduler.submit_dryrun(app, {"log_dir": str(tmp_path)}).request
    expected = str(tmp_path / "sess" / request.app_id / "torchelastic" / "trainer")
    assert [p.env["PET_LOG_DIR"] for p in request.role_params["trainer"]] == [expected] * 2
    own = Role("trainer", "x", entrypoint="true", env={"PET_LOG_DIR": "/mine"})
    request = scheduler.submit_dryrun(AppDef("app", [own]), {}).request
    assert request.role_params["trainer"][0].env["PET_LOG_DIR"] == "/mine"


def _path_of(image: str, cfg: dict[str, CfgVal], extra_paths: list[str]) -> list[str]:
    scheduler = create_scheduler(
        "sess", extra_paths=extra_paths, image_provider_class=LocalDirectoryImageProvider
    )
    role = Role("r", image, entrypoint="tool", env={"PATH": "/role/bin"})
    request = scheduler.submit_dryrun(AppDef("app", [role]), cfg)
    return request.request.role_params["r"][0].env["PATH"].split(os.pathsep)


@pytest.mark.parametrize("prepend_cwd", [False, True])
def test_image_directory_comes_before_the_hosts_path(tmp_path: Path, prepend_cwd: bool) -> None:
    image = str(tmp_path)
    host = os.environ["PATH"].split(os.pathsep)
    path = _path_of(image, {"prepend_cwd": prepend_cwd}, extra_paths=["/extra/bin"])
    if prepend_cwd:
        assert path == [image, "/extra/bin", "/role/bin", *host]
    else:
        assert path == ["/extra/bin", "/role/bin", image, *host]


async def test_local_dir_replica_runs_a_program_of_its_image_by_name(tmp_path: Path) -> None:
    tool = tmp_path / "asynctorchx-image-tool"
    tool.write_text("#!/bin/sh\necho from the image\n")
    tool.chmod(0o755)
    role = Role("r", str(tmp_path), entrypoint="sh", args=["-c", "asynctorchx-image-tool"])
    async with create_dir_scheduler("test") as scheduler:
        app_id = await scheduler.submit(AppDef("dir", [role]), {})
        status = await scheduler.wait(app_id, timeout=30)
        assert status is not None
        assert status.state.name == "SUCCEEDED"
        lines = [line async for line in scheduler.log_iter(app_id, "r")]
        assert lines == ["from the image\n"]
