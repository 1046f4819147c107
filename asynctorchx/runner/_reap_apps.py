"""``python -m asynctorchx.runner._reap_apps <handle>...``: cancel a dead driver's apps."""

from __future__ import annotations

import functools
import logging
import sys
from collections import defaultdict

import anyio

from asynctorchx.runner._runner import Runner
from asynctorchx.runner.api import get_runner
from asynctorchx.schedulers.toolkit import gather
from asynctorchx.specs.api import AppHandle, parse_app_handle

logger = logging.getLogger(__name__)


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
    anyio.run(cancel_apps, sys.argv[1:])
