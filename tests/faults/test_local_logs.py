"""Fault cases of the local schedulers' logs, counted: host memory, bytes, temp directories.

Issue 12's adversarial run: a replica writing ``\\r`` progress without a newline raised
the host's memory with the output; temporary log directories were left behind. Each
case runs a real host process where what is counted (peak RSS, files) is its own.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import anyio
import pytest

from asynctorchx.runner import get_runner
from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
from asynctorchx.specs.api import AppDef, AppState, Role

LIMIT = 60  # seconds: a deadline for a hung test, never a guess at timing


def temp_log_dirs(directory: str | Path) -> list[str]:
    """The temporary log directories of local schedulers in ``directory``."""
    return sorted(name for name in os.listdir(directory) if name.startswith("asynctorchx_"))


@pytest.fixture
def tmp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary-directory root of this test's own, counted alone; no records directory,
    so that the local schedulers write the logs there (with records, they are kept beside
    them)."""
    root = tmp_path / "tmp"
    root.mkdir()
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("ASYNCTORCHX_STATE_DIR", str(tmp_path / "a-file" / "state"))
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    monkeypatch.setenv("TMPDIR", str(root))
    return root


def sleep_app(script: str = "echo ready; exec sleep 600") -> AppDef:
    return AppDef("t", [Role("worker", "unused", entrypoint="sh", args=["-c", script])])


#: A replica printing ``\\r`` progress records, never a newline: ``RECORDS`` x 100 B.
PROGRESS_WRITER = textwrap.dedent(
    """
    import sys
    out = sys.stdout.buffer
    for batch in range(int(sys.argv[1]) // 1000):
        out.write(b"".join(b"\\r%10d%%|" % (batch * 1000 + k) + b"#" * 88 for k in range(1000)))
    """
)

#: The host: runs the writer, reads its output back through log_iter (stdout and
#: combined), and reports the growth of its peak RSS and digests of what came back.
HOST = textwrap.dedent(
    """
    import hashlib, json, resource, sys
    import anyio
    from asynctorchx.schedulers.api import Stream
    from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
    from asynctorchx.specs.api import AppDef, Role

    writer, records = sys.argv[1], int(sys.argv[2])

    def app(n):
        return AppDef("p", [Role("r", "x", entrypoint=sys.executable, args=["-c", writer, str(n)])])

    async def digest(scheduler, app_id, stream):
        sha, longest, pieces = hashlib.sha256(), 0, 0
        async for line in scheduler.log_iter(app_id, "r", streams=stream):
            data = line.encode()
            longest = max(longest, len(data))
            pieces += 1
            sha.update(data)  # pieces of a cut line come with no byte added
        return {"sha": sha.hexdigest(), "longest": longest, "pieces": pieces}

    async def main():
        async with create_cwd_scheduler("rss") as scheduler:
            warm = await scheduler.submit(app(1000), {})  # every code path loaded
            await scheduler.wait(warm)
            await digest(scheduler, warm, Stream.COMBINED)
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            app_id = await scheduler.submit(app(records), {})
            await scheduler.wait(app_id)
            out = await digest(scheduler, app_id, Stream.STDOUT)
            combined = await digest(scheduler, app_id, Stream.COMBINED)
            after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        expected = hashlib.sha256()
        for batch in range(records // 1000):
            expected.update(
                b"".join(b"\\r%10d%%|" % (batch * 1000 + k) + b"#" * 88 for k in range(1000))
            )
        print(json.dumps({
            "growth_kib": after - before, "expected": expected.hexdigest(),
            "stdout": out, "combined": combined,
        }))

    anyio.run(main)
    """
)


def test_50_mb_of_progress_without_newline_keeps_the_host_small_and_every_byte() -> None:
    records = 500_000  # 50 MB
    result = subprocess.run(
        [sys.executable, "-c", HOST, PROGRESS_WRITER, str(records)],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    report = json.loads(result.stdout)
    assert report["stdout"]["sha"] == report["expected"]  # every byte, in order
    assert report["combined"]["sha"] == report["expected"]
    assert report["stdout"]["longest"] <= 4 << 20  # read in pieces of at most 4 MiB
    assert report["combined"]["longest"] <= 4 << 20
    assert report["combined"]["pieces"] >= 50_000_000 // (4 << 20)
    # the output held in memory is bounded by the 4 MiB line limit, not by its 50 MB
    assert report["growth_kib"] < 48 * 1024, report["growth_kib"]


async def test_a_dry_run_creates_no_directory_whatever_the_scheduler_state(
    tmp_root: Path,
) -> None:
    never_entered = create_cwd_scheduler("test")
    info = never_entered.submit_dryrun(sleep_app(), {})
    async with create_cwd_scheduler("test") as entered:
        entered.submit_dryrun(sleep_app(), {})
        assert temp_log_dirs(tmp_root) == []
    closed = entered
    closed.submit_dryrun(sleep_app(), {})
    assert temp_log_dirs(tmp_root) == []
    assert not os.path.lexists(info.request.log_dir)


async def test_the_temporary_log_directory_lives_from_the_first_app_to_close(
    tmp_root: Path,
) -> None:
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sleep_app("echo hi"), {})
        await scheduler.wait(app_id)
        (created,) = temp_log_dirs(tmp_root)
        assert stat.S_IMODE(os.lstat(tmp_root / created).st_mode) == 0o700
    assert temp_log_dirs(tmp_root) == []


HOST_OWNING_SIGNALS = textwrap.dedent(
    """
    import sys
    import anyio
    from asynctorchx.runner import get_runner
    from asynctorchx.specs.api import AppDef, Role

    async def main():
        async with get_runner("sig") as runner:  # owns SIGTERM/SIGHUP by default
            app = AppDef("t", [Role("w", "x", entrypoint="sh", args=["-c", "exec sleep 600"])])
            await runner.run(app, "local_cwd", {"stop_timeout": 5})
            print("ready", flush=True)
            await anyio.sleep_forever()

    anyio.run(main)
    """
)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signalled_host_leaves_no_temporary_log_directory(
    tmp_root: Path, signum: signal.Signals
) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", HOST_OWNING_SIGNALS],
        stdout=subprocess.PIPE,
        text=True,
    ) as host:
        assert host.stdout is not None
        assert host.stdout.readline() == "ready\n"
        assert len(temp_log_dirs(tmp_root)) == 1
        host.send_signal(signum)
        assert host.wait(timeout=LIMIT) == -signum
    assert temp_log_dirs(tmp_root) == []


async def test_150_running_apps_are_all_accepted_and_only_cache_size_finished_kept(
    tmp_root: Path,
) -> None:
    go = tmp_root.parent / "go"
    script = f"while [ ! -e {go} ]; do sleep 0.05; done"
    async with get_runner() as runner:  # defaults: cache_size 100
        handles = [await runner.run(sleep_app(script), "local_cwd") for _ in range(150)]
        listed = await runner.list("local_cwd")
        assert len(listed) == 150
        assert {app.state for app in listed} == {AppState.RUNNING}
        (temporary,) = temp_log_dirs(tmp_root)
        app_dirs = tmp_root / temporary / runner.name()
        assert len(os.listdir(app_dirs)) == 150
        go.touch()
        with anyio.fail_after(LIMIT):
            for handle in handles:
                await runner.wait(handle, wait_interval=0.1)
        kept = {app.app_id for app in await runner.list("local_cwd")}
        assert len(kept) == 100
        assert set(os.listdir(app_dirs)) == kept  # the forgotten ones' logs are gone
        assert kept <= {handle.rsplit("/", 1)[1] for handle in handles}


async def test_an_app_whose_log_directory_vanished_still_ends_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # the replica removes its own app's log directory: no SUCCESS file can be written,
    # and that must neither change the app's end nor hang its waiters
    monkeypatch.setenv("ASYNCTORCHX_STATE_DIR", str(tmp_path / "state"))
    remove = 'rm -rf "$(dirname "$(dirname "$PET_LOG_DIR")")"'
    app = AppDef("vanish", [Role("r", "x", entrypoint="sh", args=["-c", remove])])
    logs = tmp_path / "logs"
    async with create_cwd_scheduler("sess") as scheduler:
        app_id = await scheduler.submit(app, {"log_dir": str(logs)})
        status = await scheduler.wait(app_id, timeout=LIMIT)
        assert status is not None
        assert status.state == AppState.SUCCEEDED
    assert not (logs / "sess" / app_id).exists()  # nothing recreated
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("could not write SUCCESS" in message for message in warnings)
