"""The user-defined bridge network replicas join (TorchX's ``torchx``), created once.

Docker checks ``CheckDuplicate`` without a lock, so concurrent creates all succeed and this
module settles on one network.
"""

from __future__ import annotations

import contextlib
import time

import anyio
from anyio.lowlevel import RunVar

from asynctorchx import __version__
from asynctorchx.schedulers.docker._engine import Engine, EngineEvents, Network
from asynctorchx.schedulers.docker._errors import DockerEngineError
from asynctorchx.schedulers.docker._request import LABEL_VERSION

#: A network older than this (s) is settled: no concurrent create of its name is running.
NETWORK_SETTLE_S = 10.0

#: Per event loop, (engine, network name) -> the lock this process creates it under.
_LOCKS: RunVar[dict[tuple[str, str], anyio.Lock]] = RunVar("asynctorchx_docker_network_locks")


def _lock(engine: str, name: str) -> anyio.Lock:
    """The lock under which this event loop looks for (and creates) network ``name``."""
    locks = _LOCKS.get(None)
    if locks is None:
        locks = {}
        _LOCKS.set(locks)
    return locks.setdefault((engine, name), anyio.Lock())


def _settled_network(found: list[Network]) -> str | None:
    """The oldest network of ``found`` created over ``NETWORK_SETTLE_S`` ago, if any."""
    horizon = time.time_ns() - int(NETWORK_SETTLE_S * 1e9)
    settled = [
        (net.created_ns or 0, net.id)
        for net in found
        if net.created_ns is None or net.created_ns < horizon
    ]
    return min(settled)[1] if settled else None


async def ensure_network(engine: Engine, name: str) -> str:
    """Return the id of the bridge network ``name``, creating it when missing."""
    await engine.connect()  # the clear error under trio or without an engine, first
    async with _lock(engine.key, name):
        for _ in range(3):
            found = await engine.networks(name)
            settled = _settled_network(found)
            if settled is not None:
                return settled
            filters = {"type": ["network"], "event": ["create", "destroy"], "network": [name]}
            since = time.time_ns() - int(NETWORK_SETTLE_S * 1e9)
            mine: str | None = None
            async with engine.events(filters, since_ns=since) as events:
                if not found:
                    mine = await _create_network(engine, name)
                winner = await _network_winner(engine, name, events, mine)
            if mine is not None and winner != mine:
                with contextlib.suppress(Exception):  # best effort: the losing network is unused
                    await engine.remove_network(mine)
            if winner is not None:
                return winner
    raise RuntimeError(
        f"network {name!r} vanished right after it was created, three times:"
        " is something removing it? Retry"
    )


async def _create_network(engine: Engine, name: str) -> str | None:
    """Create the bridge network ``name``; ``None`` if the engine says it exists."""
    try:
        return await engine.create_network(name, {LABEL_VERSION: __version__})
    except DockerEngineError as err:
        if err.status == 409 or "already exists" in err.message:
            return None
        raise


async def _network_winner(
    engine: Engine, name: str, events: EngineEvents, mine: str | None
) -> str | None:
    """The network of ``name`` whose ``create`` the engine logged first, still there."""
    found = await engine.networks(name)
    settled = _settled_network(found)
    if settled is not None:
        return settled
    need = {net.id for net in found} | ({mine} if mine else set())
    created: list[str] = []
    gone: set[str] = set()
    oldest_young_ns = min((net.created_ns or 0 for net in found), default=time.time_ns())
    patience = oldest_young_ns / 1e9 + NETWORK_SETTLE_S - time.time()
    with anyio.move_on_after(max(patience, 0.0)):
        while not need <= set(created) | gone:
            for event in await events.next_batch():
                if event.name != name:
                    continue
                if event.action == "create" and event.id not in created:
                    created.append(event.id)
                elif event.action == "destroy":
                    gone.add(event.id)
    alive = [nid for nid in created if nid not in gone]
    if alive:
        return alive[0]
    found = await engine.networks(name)
    return min((net.created_ns or 0, net.id) for net in found)[1] if found else None
