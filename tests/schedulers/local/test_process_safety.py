"""Process safety of the local schedulers under faults: file descriptors running out.

Each case runs a host program in a subprocess (its limits are its own) and counts the
processes and log lines it leaves. Nothing sleeps to guess at timing: replicas are
released together once every one of them printed its first line (a barrier of files).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

LIMIT = 60  # seconds: a deadline for a hung test, never a guess at timing

FD_HOST = textwrap.dedent(
    """
    import anyio, json, os, resource, sys
    from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
    from asynctorchx.specs.api import AppDef, Role

    extra, hard_extra, replicas, barrier, marker = sys.argv[1:6]

    async def main():
        result = {}
        async with create_cwd_scheduler("fd") as scheduler:
            base = len(os.listdir("/proc/self/fd"))
            hard = base + int(hard_extra) if int(hard_extra) else 4096
            resource.setrlimit(resource.RLIMIT_NOFILE, (base + int(extra), hard))
            # each replica prints a line (its logs are open), waits for all, prints again
            script = (
                f": {marker}; echo first $1; touch {barrier}/$1;"
                f" while [ $(ls {barrier} | wc -l) -lt {replicas} ]; do sleep 0.01; done;"
                " echo second $1"
            )
            role = Role(
                "r", "x", entrypoint="sh", args=["-c", script, "sh", "${replica_id}"],
                num_replicas=int(replicas),
            )
            try:
                app_id = await scheduler.submit(AppDef("fd", [role]), {"stop_timeout": 1})
            except Exception as error:
                result["error"] = [type(error).__name__, getattr(error, "errno", None)]
            else:
                response = await scheduler.wait(app_id)
                result["state"] = response.state.name
                result["replicas"] = [
                    [r.state.name, [line async for line in scheduler.log_iter(app_id, "r", r.id)]]
                    for r in response.roles_statuses[0].replicas
                ]
        print(json.dumps(result))

    anyio.run(main)
    """
)


def processes_with(marker: str) -> list[int]:
    """The live processes whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if marker.encode() in cmdline.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def run_fd_host(tmp_path: Path, extra: int, hard_extra: int, replicas: int = 10) -> dict[str, Any]:
    """Run the host with ``extra`` descriptors above its baseline (soft limit), the
    hard limit ``hard_extra`` above it (0: 4096); return its result, check it left no
    replica behind."""
    marker = f"fd-{uuid.uuid4().hex}"
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    argv = [sys.executable, "-c", FD_HOST, str(extra), str(hard_extra), str(replicas)]
    proc = subprocess.run(
        [*argv, str(barrier), marker],
        capture_output=True,
        text=True,
        timeout=LIMIT,
    )
    assert proc.returncode == 0, proc.stderr
    assert processes_with(marker) == []
    result: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
    return result


def test_a_low_soft_open_file_limit_is_raised_and_no_line_is_lost(tmp_path: Path) -> None:
    # soft limit 20 above the baseline, hard 4096: 10 replicas need more than 60
    result = run_fd_host(tmp_path, extra=20, hard_extra=0)
    assert result.get("state") == "SUCCEEDED", result
    assert result["replicas"] == [
        ["SUCCEEDED", [f"first {k}\n", f"second {k}\n"]] for k in range(10)
    ]


def test_a_submit_that_cannot_create_its_pipes_fails_whole_with_a_typed_error(
    tmp_path: Path,
) -> None:
    # hard limit 12 above the baseline: the pipes of 10 replicas cannot all be created
    result = run_fd_host(tmp_path, extra=12, hard_extra=12)
    assert result == {"error": ["OpenFileLimitError", 24]}


def test_lost_output_never_ends_succeeded(tmp_path: Path) -> None:
    # enough descriptors for the pipes, not for every replica's log files
    result = run_fd_host(tmp_path, extra=40, hard_extra=40)
    if "error" in result:  # the pipes themselves ran out: refused whole, typed
        assert result == {"error": ["OpenFileLimitError", 24]}
        return
    complete = [
        lines == [f"first {k}\n", f"second {k}\n"]
        for k, (_, lines) in enumerate(result["replicas"])
    ]
    assert not all(complete), "the limit was meant to lose some output"
    for (state, _), whole in zip(result["replicas"], complete, strict=True):
        assert whole or state == "FAILED", result
    assert result["state"] == "FAILED"


async def test_an_entrypoint_that_is_not_executable_raises_and_starts_nothing(
    tmp_path: Path,
) -> None:
    # replicas start through a wrapper on Linux: its exec failure must still be the
    # submit's error, as a direct start's is
    from asynctorchx.errors import ReplicaLaunchError
    from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
    from asynctorchx.specs.api import AppDef, Role

    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\necho hi\n")
    role = Role("r", str(tmp_path), entrypoint=str(script))
    async with create_cwd_scheduler("test") as scheduler:
        with pytest.raises(ReplicaLaunchError, match=f"chmod \\+x {script}") as caught:
            await scheduler.submit(AppDef("noexec", [role]), {})
        assert caught.value.errno == errno.EACCES
        assert await scheduler.list() == []
