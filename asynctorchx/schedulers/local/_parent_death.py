"""Tying each replica to the life of this process: one watchdog per process.

A replica runs in a session of its own, so nothing ends it when this process dies
without closing its scheduler (TorchX's local scheduler leaves it running). The first
replica start starts a :class:`~asynctorchx.schedulers.toolkit._lifeline.Lifeline` that,
once this process is gone, SIGKILLs every replica group still tied and then every
process of their sessions or carrying their ``ASYNCTORCHX_REPLICA_TOKEN``.

Limits: a descendant that left both the replica's session and its environment
(``setsid`` then ``env -i``) outlives a killed host; without ``pidfd_open`` (Linux 5.3)
only the groups are killed; a host killed between a replica's reap and the sweep of its
daemons (:mod:`._subreaper`) leaves those.
"""

from __future__ import annotations

from asynctorchx.schedulers.local._subreaper import TOKEN_VARIABLE
from asynctorchx.schedulers.toolkit._lifeline import Lifeline

#: Set to False to start replicas untied (what ``benchmarks/bench_spawn.py`` compares).
enabled = True

WATCHDOG = Lifeline(["kill", TOKEN_VARIABLE])


def tie(pgid: int, token: str = "") -> None:
    """Have the watchdog kill replica ``pgid`` (its group and session) and what carries
    ``token`` (its :data:`~._subreaper.TOKEN_VARIABLE`) if this process dies first."""
    if enabled:
        WATCHDOG.tie(str(pgid), token)


def untie(pgid: int) -> None:
    """Forget the replica ``pgid`` (its main process was reaped)."""
    WATCHDOG.untie(str(pgid))


def watchdog_pid() -> int | None:
    """The pid of this process's watchdog, or None before the first :func:`tie`."""
    return WATCHDOG.pid
