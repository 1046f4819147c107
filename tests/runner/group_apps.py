"""What the app group tests share: apps that say when they run, and counts of what is left."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from asynctorchx.runner import Runner
from asynctorchx.specs import AppDef, AppState, Role
from tests.processes import live_processes

LIMIT = 60  # seconds: a safety bound on every await, never a timing guess

# Printed by the process that then sleeps, so that its exec is over when the line is read:
# a process still in execve has no environment to read yet (processes_of would miss it).
_SLEEPER = "import os, time; print('pid', os.getpid(), flush=True); time.sleep(600)"
PRINTS_PID_AND_SLEEPS = f"exec {shlex.quote(sys.executable)} -c {shlex.quote(_SLEEPER)}"


def sh_app(name: str, script: str, image: str | None = None, num_replicas: int = 1) -> AppDef:
    """An app of one role ``r`` running ``sh -c script`` (image: the current directory,
    which ``local_dir`` runs it in)."""
    role = Role(
        "r",
        image=os.getcwd() if image is None else image,
        entrypoint="sh",
        args=["-c", script],
        num_replicas=num_replicas,
    )
    return AppDef(name, roles=[role])


async def first_line(runner: Runner, handle: str) -> str:
    """The first log line of replica 0 (awaited: the replica runs once it is there)."""
    async for line in runner.log_lines(handle, "r", 0, should_tail=True):
        return line
    raise AssertionError(f"{handle} printed nothing")


def processes_of(handles: Iterable[str]) -> list[int]:
    """The live processes of these apps: those whose TORCHX_JOB_ID is one of ``handles``."""
    wanted = {f"TORCHX_JOB_ID={handle}".encode() for handle in handles}
    return [p.pid for p in live_processes("environ") if wanted & set(p.data.split(b"\0"))]


async def states(runner: Runner, handles: Iterable[str]) -> list[AppState]:
    """Each app's state as its scheduler tells it now."""
    found = []
    for handle in handles:
        status = await runner.status(handle)
        assert status is not None, handle
        found.append(status.state)
    return found


def records(journal: Path) -> list[dict[str, Any]]:
    """The journal's full lines, as JSON."""
    return [json.loads(line) for line in journal.read_text().splitlines()]


def of_kind(journal: Path, kind: str) -> list[dict[str, Any]]:
    """The journal's records of ``kind`` (``trial``, ``attempt``, ``status``)."""
    return [record for record in records(journal) if record["kind"] == kind]
