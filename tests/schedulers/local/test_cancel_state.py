"""A cancelled local app reports CANCELLED only once its processes have exited.

TorchX's ``torchx.schedulers.local_scheduler`` sets CANCELLED as soon as it signals the
replicas; here a terminal state promises that nothing of the app still runs (see
docs/coming-from-torchx.md, "A cancelled local app stays RUNNING ...").
"""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path

import anyio

from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
from asynctorchx.specs.api import AppDef, AppState, Role

LIMIT = 30  # seconds; each step awaits an event, this only bounds a hang


async def test_cancelled_app_is_running_until_its_sigterm_handler_has_finished(
    tmp_path: Path,
) -> None:
    go = tmp_path / "go"
    # on SIGTERM: say so, then keep running until the test lets it finish
    script = (
        f"trap 'echo stopping; while [ ! -e {go} ]; do sleep 0.01; done; exit 0' TERM;"
        " echo ready; while :; do sleep 0.01; done"
    )
    app = AppDef("app", [Role("r", "x", entrypoint="sh", args=["-c", script])])
    async with create_cwd_scheduler("sess") as scheduler:
        app_id = await scheduler.submit(app, {"stop_timeout": LIMIT})
        lines = scheduler.log_iter(app_id, "r", 0, should_tail=True)
        async with aclosing(lines):  # type: ignore[type-var]
            with anyio.fail_after(LIMIT):
                assert await anext(lines) == "ready\n"
                await scheduler.cancel(app_id)
                async for line in lines:  # the shell may first report its killed `sleep`
                    if line == "stopping\n":  # its SIGTERM handler runs
                        break
                described = await scheduler.describe(app_id)
                assert described is not None
                assert described.state == AppState.RUNNING
                go.touch()
                final = await scheduler.wait(app_id)
        assert final is not None
        assert final.state == AppState.CANCELLED
