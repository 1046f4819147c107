"""One watchdog per process that SIGKILLs the replicas still tied when this process dies.

Without ``pidfd_open`` (Linux 5.3) only the groups are killed."""

from __future__ import annotations

from asynctorchx.schedulers.local._subreaper import TOKEN_VARIABLE
from asynctorchx.schedulers.toolkit._lifeline import Lifeline

#: False starts replicas untied (``benchmarks/bench_spawn.py``).
enabled = True

WATCHDOG = Lifeline(["kill", TOKEN_VARIABLE])


def tie(pgid: int, token: str = "") -> None:
    """Have the watchdog kill group ``pgid``, its session and what carries ``token`` if we die."""
    if enabled:
        WATCHDOG.tie(str(pgid), token)


def untie(pgid: int) -> None:
    WATCHDOG.untie(str(pgid))


def watchdog_pid() -> int | None:
    """The watchdog's pid, or None before the first :func:`tie`."""
    return WATCHDOG.pid
