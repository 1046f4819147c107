"""App ids of the local schedulers follow the toolkit's one policy, as ``local_docker``'s do."""

from __future__ import annotations

from pathlib import Path

import anyio

from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
from asynctorchx.specs.api import AppDef, AppState, Role

LIMIT = 30  # seconds: a deadline for a hung test, never a guess at timing


async def test_an_app_name_with_a_space_and_a_slash_runs_under_a_sanitised_id(
    tmp_path: Path,
) -> None:
    app = AppDef("my app/x", [Role("worker", "unused", entrypoint="echo", args=["hi"])])
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(app, {"log_dir": str(tmp_path)})
        with anyio.fail_after(LIMIT):
            response = await scheduler.wait(app_id)
        assert response is not None
        assert response.state == AppState.SUCCEEDED
        assert app_id.startswith("my-app-x-")
        assert [line async for line in scheduler.log_iter(app_id, "worker")] == ["hi\n"]
        assert response.ui_url is not None
        log_dir = Path(response.ui_url.removeprefix("file://")).resolve()
    assert log_dir.is_relative_to(tmp_path.resolve())
    assert (log_dir / "worker" / "0" / "stdout.log").read_text() == "hi\n"
