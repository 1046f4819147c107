"""A group's journal on ``local_cwd``: written durably, read back, resumed by a new driver.

The killed driver is a real process (``python driver.py``) killed with SIGKILL once its
journal shows what the test waits for; nothing here guesses at timing.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
import types
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from asynctorchx.errors import JournalLockedError, JournalUnsafeError, TrialKeyError
from asynctorchx.runner import Runner, get_runner
from asynctorchx.specs import AppState
from tests.conftest import DOCKER_TEST_IMAGE
from tests.isolation import isolate_from_user_config
from tests.processes import alive
from tests.runner.group_apps import LIMIT, of_kind, records, sh_app

pytestmark = pytest.mark.timeout(3 * LIMIT)

TINY = (0.001, 0.002)  # seconds: backoffs that never slow a test


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_from_user_config(tmp_path, monkeypatch)


async def sweep(runner: Runner, journal: Path, count: int, script: str = "true") -> dict[str, Any]:
    """Run ``count`` trials keyed ``t<i>``; return ``{key: (first handle, final status)}``."""
    keys: dict[str, str] = {}
    found: dict[str, Any] = {}
    async with runner.group(journal=journal, retries=1, retry_backoff=TINY) as group:
        for index in range(count):
            handle = await group.run(sh_app(f"t{index}", script), "local_cwd", key=f"t{index}")
            keys[handle] = f"t{index}"
        async for handle, status in group.as_completed():
            key = keys[group.attempts(handle)[0]]
            assert key not in found
            found[key] = (group.attempts(handle)[0], status)
    return found


async def test_the_journal_holds_trials_attempts_and_statuses_privately(tmp_path: Path) -> None:
    journal = tmp_path / "sweep.journal"
    async with get_runner() as runner:
        with anyio.fail_after(LIMIT):
            found = await sweep(runner, journal, 2)
    assert stat.S_IMODE(journal.stat().st_mode) == 0o600
    assert not Path(f"{journal}.pid").exists()  # the holder's pid goes with the group
    kinds = Counter(record["kind"] for record in records(journal))
    assert kinds == {"trial": 2, "attempt": 2, "status": 2}
    trial = of_kind(journal, "trial")[0]
    assert trial["key"] == "t0"
    assert trial["scheduler"] == "local_cwd"
    assert trial["cfg"] == {}
    assert trial["app"]["roles"][0]["entrypoint"] == "sh"
    attempts = {r["key"]: r for r in of_kind(journal, "attempt")}
    assert attempts["t1"]["attempt"] == 1
    assert attempts["t1"]["budget"] == "first"
    assert attempts["t1"]["handle"] == found["t1"][0]
    statuses = {r["key"]: r for r in of_kind(journal, "status")}
    assert statuses["t0"]["state"] == "SUCCEEDED"
    assert statuses["t0"]["exit_code"] == 0


async def test_a_complete_journal_submits_nothing_and_yields_every_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = tmp_path / "sweep.journal"
    async with get_runner() as runner:
        with anyio.fail_after(LIMIT):
            first = await sweep(runner, journal, 3)
    lines = journal.read_bytes()
    async with get_runner() as runner:
        submits = []

        async def counted(*args: Any, **kwargs: Any) -> str:
            submits.append(args)
            raise AssertionError("a complete journal submits nothing")

        monkeypatch.setattr(runner, "schedule", counted)
        with anyio.fail_after(LIMIT):
            again = await sweep(runner, journal, 3)
    assert submits == []
    assert {key: handle for key, (handle, _) in again.items()} == {
        key: handle for key, (handle, _) in first.items()
    }
    assert {status.state for _, status in again.values()} == {AppState.SUCCEEDED}
    assert journal.read_bytes() == lines  # nothing new to record


async def test_a_torn_last_line_is_cut_and_the_sweep_goes_on(tmp_path: Path) -> None:
    journal = tmp_path / "sweep.journal"
    async with get_runner() as runner:
        with anyio.fail_after(LIMIT):
            await sweep(runner, journal, 1)
        whole = journal.read_bytes()
        with journal.open("ab") as file:
            file.write(b'{"kind":"status","key":"t1","han')  # a crash mid-write
        with anyio.fail_after(LIMIT):
            found = await sweep(runner, journal, 2)
    assert found["t1"][1].state == AppState.SUCCEEDED
    text = journal.read_bytes()
    assert text.startswith(whole)
    assert b'"han\n' not in text
    assert b'"han{' not in text
    assert [r["key"] for r in of_kind(journal, "status")] == ["t0", "t1"]


async def test_a_changed_trial_is_refused_naming_the_key_and_the_change(tmp_path: Path) -> None:
    journal = tmp_path / "sweep.journal"
    async with get_runner() as runner:
        with anyio.fail_after(LIMIT):
            await sweep(runner, journal, 1)
            with pytest.raises(TrialKeyError, match=r"'t0'.*app\.roles") as refused:
                await sweep(runner, journal, 1, script="echo changed")
    assert refused.value.key == "t0"
    assert refused.value.changed == ["app.roles"]


async def test_keys_are_needed_and_unique(tmp_path: Path) -> None:
    journal = tmp_path / "sweep.journal"
    async with get_runner() as runner:
        with anyio.fail_after(LIMIT):
            async with runner.group(journal=journal) as group:
                with pytest.raises(TrialKeyError, match="key="):
                    await group.run(sh_app("a", "true"), "local_cwd")
                await group.run(sh_app("a", "true"), "local_cwd", key="lr=0.1")
                with pytest.raises(TrialKeyError, match=r"'lr=0\.1' was already run"):
                    await group.run(sh_app("b", "true"), "local_cwd", key="lr=0.1")


async def test_a_second_driver_is_refused_naming_the_holder(tmp_path: Path) -> None:
    journal = tmp_path / "sweep.journal"
    async with get_runner() as runner, runner.group(journal=journal):
        with pytest.raises(JournalLockedError, match=f"process {os.getpid()}") as held:
            async with runner.group(journal=journal):
                pass
    assert held.value.pid == os.getpid()
    async with get_runner() as runner, runner.group(journal=journal):
        pass  # released with the first group


async def test_a_journal_others_can_write_is_refused(tmp_path: Path) -> None:
    journal = tmp_path / "sweep.journal"
    journal.touch()
    journal.chmod(0o620)
    async with get_runner() as runner:
        with pytest.raises(JournalUnsafeError, match=f"chmod 600 {journal}"):
            async with runner.group(journal=journal):
                pass


DRIVER = """
import json, sys
import anyio
from asynctorchx.runner import get_runner
from asynctorchx.specs import AppDef, Role

count, quick, journal, workdir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]


def trial(index):
    # each run leaves a file; the slow trials run until the test creates `release`
    wait = "" if index < quick else f"while [ ! -e {workdir}/release ]; do sleep 0.02; done; "
    script = f"touch {workdir}/ran-{index}-$$$$; {wait}exit 0"
    role = Role("r", image=workdir, entrypoint="sh", args=["-c", script])
    return AppDef(f"t{index}", roles=[role])


async def main():
    async with get_runner() as runner:
        async with runner.group(retries=0, journal=journal) as group:
            keys = {}
            for index in range(count):
                keys[await group.run(trial(index), "local_cwd", key=f"t{index}")] = f"t{index}"
            async for handle, status in group.as_completed():
                key = keys[group.attempts(handle)[0]]
                print(json.dumps({"key": key, "state": status.state.name}), flush=True)


anyio.run(main)
"""


async def test_a_driver_killed_mid_sweep_resumes_every_trial_exactly_once(tmp_path: Path) -> None:
    count, quick = 6, 3
    journal = tmp_path / "sweep.journal"
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(DRIVER))
    command = [sys.executable, str(driver), str(count), str(quick), str(journal), str(tmp_path)]
    (tmp_path / "tmp").mkdir()  # the killed driver's log directories stay there
    path = os.pathsep.join(p for p in sys.path if p)
    env = {**os.environ, "PYTHONPATH": path, "TMPDIR": str(tmp_path / "tmp")}
    first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    try:
        with anyio.fail_after(LIMIT):  # the quick trials ended, the slow ones run
            while not (
                journal.exists()
                and len(of_kind(journal, "status")) == quick
                and len(of_kind(journal, "attempt")) == count
                and len(list(tmp_path.glob("ran-*"))) == count
            ):
                await anyio.sleep(0.02)
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
    slow = [
        int(p.name.split("-")[2])
        for p in tmp_path.glob("ran-*")
        if p.name.split("-")[1] >= str(quick)
    ]
    with anyio.fail_after(LIMIT):  # the slow trials' processes end with their driver
        while any(alive(pid) for pid in slow):
            await anyio.sleep(0.02)
    (tmp_path / "release").touch()
    with anyio.fail_after(LIMIT):
        second = await anyio.run_process(command, env=env, check=False)
    assert second.returncode == 0, second.stderr.decode()
    results = [json.loads(line) for line in second.stdout.decode().splitlines()]
    assert sorted(r["key"] for r in results) == [f"t{i}" for i in range(count)]
    assert {r["state"] for r in results} == {"SUCCEEDED"}
    runs = Counter(path.name.split("-")[1] for path in tmp_path.glob("ran-*"))
    assert all(runs[str(i)] == 1 for i in range(quick)), runs  # no SUCCEEDED trial twice
    assert all(runs[str(i)] == 2 for i in range(quick, count)), runs  # lost, then run again
    budgets: dict[str, list[str]] = {}
    for attempt in of_kind(journal, "attempt"):
        budgets.setdefault(attempt["key"], []).append(attempt["budget"])
    # retries=0, yet the lost trials ran again: the loss spent no retry
    assert budgets == {f"t{i}": ["first"] if i < quick else ["first", "lost"] for i in range(count)}
    ended = Counter(r["key"] for r in of_kind(journal, "status"))
    assert ended == {f"t{i}": 1 for i in range(count)}


async def test_the_cli_shows_a_journal_as_a_table_and_as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from asynctorchx.cli.main import run_cli

    journal = tmp_path / "sweep.journal"
    async with get_runner() as runner:
        with anyio.fail_after(LIMIT):
            found = await sweep(runner, journal, 2)
    with journal.open("a") as file:  # a trial not yet submitted
        file.write('{"key":"t9","app":{},"scheduler":"local_cwd","cfg":{},"kind":"trial"}\n')
    capsys.readouterr()
    assert await anyio.to_thread.run_sync(run_cli, ["journal", str(journal)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["KEY", "ATTEMPTS", "STATE", "APP", "HANDLE", "ENDED"]
    assert table[2].split()[:4] == ["t0", "1", "SUCCEEDED", found["t0"][0]]
    assert table[4].split() == ["t9", "0", "-", "-", "-"]
    assert await anyio.to_thread.run_sync(run_cli, ["journal", "--json", str(journal)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["key"] for row in rows] == ["t0", "t1", "t9"]
    assert rows[1]["handle"] == found["t1"][0]
    assert rows[1]["ended"].endswith("+00:00")
    assert rows[2] == {"key": "t9", "attempts": 0, "state": None, "handle": None, "ended": None}


async def test_a_trial_failed_with_its_retries_spent_is_not_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = tmp_path / "sweep.journal"
    async with get_runner() as runner:
        with anyio.fail_after(LIMIT):
            first = await sweep(runner, journal, 1, script="exit 3")
    assert first["t0"][1].state == AppState.FAILED
    budgets = [r["budget"] for r in of_kind(journal, "attempt")]
    assert budgets == ["first", "retry"]  # retries=1, spent
    assert of_kind(journal, "status")[-1]["exit_code"] == 3
    async with get_runner() as runner:

        async def refused(*args: Any, **kwargs: Any) -> str:
            raise AssertionError("the trial's retries are spent: nothing is submitted")

        monkeypatch.setattr(runner, "schedule", refused)
        with anyio.fail_after(LIMIT):
            again = await sweep(runner, journal, 1, script="exit 3")
    assert again["t0"][0] == first["t0"][0]
    assert again["t0"][1].state == AppState.FAILED


async def test_a_backoff_the_dead_driver_outlasted_is_not_waited_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asynctorchx.runner import _group

    journal = tmp_path / "sweep.journal"
    async with get_runner() as runner:
        async with runner.group(journal=journal) as group:  # retries=0: it ends FAILED
            await group.run(sh_app("t0", "exit 3"), "local_cwd", key="t0")
        later = types.SimpleNamespace(time=lambda: time.time() + 1000)  # 1000 s after it
        monkeypatch.setattr(_group, "time", later)
        with anyio.fail_after(LIMIT):  # a 600 s backoff, 1000 s of it gone
            async with runner.group(journal=journal, retries=1, retry_backoff=(600, 600)) as group:
                await group.run(sh_app("t0", "exit 3"), "local_cwd", key="t0")
                ((_, status),) = [ended async for ended in group.as_completed()]
    assert status.state == AppState.FAILED
    assert [r["budget"] for r in of_kind(journal, "attempt")] == ["first", "retry"]


def docker_app() -> Any:
    from asynctorchx.specs import AppDef, Role

    role = Role("r", image=DOCKER_TEST_IMAGE, entrypoint="sleep", args=["600"])
    return AppDef("adopted", roles=[role])


@pytest.mark.docker
async def test_leaving_the_block_by_an_error_cancels_at_once_still(
    tmp_path: Path, docker_apps: list[str]
) -> None:
    from asynctorchx.specs import parse_app_handle
    from tests.runner.test_group_backends import reapers

    async with get_runner() as runner:
        group = runner.group(journal=tmp_path / "sweep.journal")  # adopt_within: its default

        async def block() -> None:
            async with group:
                handle = await group.run(docker_app(), "local_docker", key="only")
                docker_apps.append(parse_app_handle(handle).app_id)
                assert len(await reapers()) == 1
                raise RuntimeError("stop")

        with pytest.raises(RuntimeError, match="stop"), anyio.fail_after(LIMIT):
            await block()
        (handle,) = group.handles
        status = await runner.status(handle)
    assert status is not None
    assert status.state == AppState.CANCELLED
    assert await reapers() == []


async def test_a_reaper_waits_for_another_driver_unless_told_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asynctorchx.runner import _reap_apps
    from asynctorchx.runner._reaper import AT_ONCE, Reaper

    cancelled: list[list[str]] = []

    async def cancel_apps(handles: list[str]) -> None:
        cancelled.append(handles)

    monkeypatch.setattr(_reap_apps, "cancel_apps", cancel_apps)
    journal = tmp_path / "sweep.journal"
    Path(f"{journal}.pid").write_text("123\n")  # the dead driver's
    adopt = ["--adopt", str(journal), "123", str(LIMIT)]
    with anyio.fail_after(LIMIT / 2):  # at once: the group chose to cancel
        await _reap_apps.main([*adopt, "h1", AT_ONCE, "h2"])
    assert cancelled == [["h1", "h2"]]
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_reap_apps.main, [*adopt, "h1"])
        await anyio.wait_all_tasks_blocked()
        Path(f"{journal}.pid").write_text("456\n")  # the next driver holds it
    assert cancelled == [["h1", "h2"]]  # handed over: nothing more cancelled
    with anyio.fail_after(LIMIT):  # nobody comes: the deadline passes
        await _reap_apps.main(["--adopt", str(journal), "456", "0.1", "h3"])
    assert cancelled == [["h1", "h2"], ["h3"]]
    reaper = Reaper(str(journal), LIMIT)
    reaper.at_once()  # the group is stopping: a reaper started later is told it too
    assert reaper.pid is None  # no app tied yet: no process
    reaper.tie("h4")
    assert list(reaper._tied) == ["h4", AT_ONCE]
    await reaper.close()


async def test_a_bad_adopt_within_is_refused_with_the_value() -> None:
    async with get_runner() as runner:
        for bad in (-1, float("inf"), float("nan")):
            with pytest.raises(ValueError, match=r"adopt_within=.*seconds >= 0"):
                runner.group(adopt_within=bad)
        with pytest.raises(TypeError, match="adopt_within='60'"):
            runner.group(adopt_within="60")  # type: ignore[arg-type]
        runner.group(adopt_within=0)  # today's behaviour: cancel at once
