"""One watchdog per process that SIGKILLs the replicas still tied when this process dies.

Limits: a descendant that left the replica's session and environment (``setsid``, ``env -i``)
survives; without ``pidfd_open`` (Linux 5.3) only the groups are killed.
"""

from __future__ import annotations

from asynctorchx.schedulers.local._subreaper import TOKEN_VARIABLE
from asynctorchx.schedulers.toolkit._lifeline import Lifeline

#: Set to False to start replicas untied (what ``benchmarks/bench_spawn.py`` compares).
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
