"""``python -m asynctorchx.runner._reap_apps [--adopt JOURNAL DRIVER SECONDS] <handle>...``:
cancel a dead driver's apps, unless another driver opens its journal within ``SECONDS``."""

from __future__ import annotations

import functools
import logging
import sys
from collections import defaultdict

import anyio

from asynctorchx.runner._journal import _holder
from asynctorchx.runner._reaper import AT_ONCE
from asynctorchx.runner._runner import Runner
from asynctorchx.runner.api import get_runner
from asynctorchx.schedulers.toolkit import gather
from asynctorchx.specs.api import AppHandle, parse_app_handle

logger = logging.getLogger(__name__)

#: Seconds between looks at the journal's holder during a hand-over: the next driver is a
#: program with no channel to this one, its pid in ``JOURNAL.pid`` the one sign it came.
LOOK_INTERVAL = 0.5


async def main(argv: list[str]) -> None:
    """Cancel the handles of ``argv`` (see the module), unless the journal is adopted; a
    ``--at-once`` among them (the group chose to cancel) skips the wait."""
    handles = [arg for arg in argv if arg != AT_ONCE]
    if argv[:1] == ["--adopt"]:
        journal, driver, within = handles[1:4]
        handles = handles[4:]
        if AT_ONCE not in argv and await adopted(journal, int(driver), float(within)):
            return
    await cancel_apps(handles)


async def adopted(journal: str, driver: int, within: float) -> bool:
    """Whether a driver other than ``driver`` opens ``journal`` within ``within`` seconds
    (``Journal.open`` writes its pid to ``JOURNAL.pid`` once it holds the journal)."""
    with anyio.move_on_after(within):
        # None: a driver opened and closed it since; the apps it ran have ended by then, and
        # those it did not run are still this reaper's to cancel.
        while _holder(journal) in (driver, None):  # noqa: ASYNC110 (another process: no Event)
            await anyio.sleep(LOOK_INTERVAL)
        return True
    return False


async def cancel_apps(handles: list[AppHandle]) -> None:
    """Cancel ``handles`` with a runner per session; a failure is logged, the rest go on."""
    sessions: defaultdict[str, list[AppHandle]] = defaultdict(list)
    for handle in handles:
        sessions[parse_app_handle(handle).session_name].append(handle)
    for session, of_session in sessions.items():
        async with get_runner(session, handle_signals=False) as runner:
            await gather(functools.partial(_cancel, runner, handle) for handle in of_session)


async def _cancel(runner: Runner, handle: AppHandle) -> None:
    try:
        await runner.cancel(handle)
    except Exception:
        logger.exception("could not cancel %s", handle)


if __name__ == "__main__":
    logging.basicConfig()
    anyio.run(main, sys.argv[1:])
