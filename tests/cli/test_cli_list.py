"""``asynctorchx list`` run as a subprocess: newest first, a default limit, filters by
state, name and age, the TorchX columns then SUBMITTED and ENDED, and ``--json``.

Most apps are records planted in the state directory (what a finished ``run`` leaves), so
that their submit times are exact; one test runs real apps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from asynctorchx.schedulers.local._records import AppRecord, records_directory, write_record
from asynctorchx.specs.api import AppState

LIMIT = 60  # seconds: a safety bound, never a timing guess
HOUR = 3600.0


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """HOME, cwd and the state directory in tmp_path, no TORCHX_* variables."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ASYNCTORCHX_STATE_DIR", str(tmp_path / "state"))
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("TORCHX")}
    clean["HOME"] = str(tmp_path)
    return clean


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "asynctorchx", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )


def plant(app_id: str, name: str, hours_ago: float, state: AppState = AppState.SUCCEEDED) -> None:
    """Record an app of session ``torchx`` submitted ``hours_ago``, ended a minute later."""
    directory = records_directory("local_cwd", create=True)
    assert directory is not None
    submitted = time.time() - hours_ago * HOUR
    record = AppRecord(
        app_id=app_id,
        backend="local_cwd",
        session="torchx",
        uid=os.geteuid(),
        state=state,
        log_dir="/nonexistent",
        supervisor=None,
        replicas=[],
        name=name,
        submitted=submitted,
        ended=submitted + 60,
    )
    write_record(directory, record)


def handles(out: subprocess.CompletedProcess[str]) -> list[str]:
    """The app ids of a table, in its order."""
    assert out.returncode == 0, out.stderr
    return [line.split()[0].rsplit("/", 1)[1] for line in out.stdout.splitlines()[2:]]


def test_newest_first_with_a_default_limit_of_20_and_all(env: dict[str, str]) -> None:
    # planted in neither name nor time order; one without a submit time goes last
    for i in (3, 0, 24, 7, 1, 13, 20, 2, 9, 5, 11, 4, 6, 8, 10, 12, 14, 15, 16, 17, 18, 19, 21, 22):
        plant(f"app-{i:02d}", "train", hours_ago=i)
    plant("app-none", "train", hours_ago=0)
    write_record(
        str(records_directory("local_cwd", create=False)),
        AppRecord("app-none", "local_cwd", "torchx", os.geteuid(), AppState.FAILED, "/x", None, []),
    )
    listed = cli(env, "list", "-s", "local_cwd")
    assert handles(listed) == [f"app-{i:02d}" for i in range(20)]
    assert "5 more; --all lists every app" in listed.stderr
    every = cli(env, "list", "-s", "local_cwd", "--all")
    newest = [f"app-{i:02d}" for i in (*range(23), 24)]
    assert handles(every) == [*newest, "app-none"]
    assert every.stderr == ""
    assert handles(cli(env, "list", "-s", "local_cwd", "--limit", "2")) == ["app-00", "app-01"]


def test_filters_by_name_age_and_state(env: dict[str, str]) -> None:
    plant("trainer-a", "trainer", hours_ago=1)
    plant("trainer-b", "trainer", hours_ago=3, state=AppState.FAILED)
    plant("eval-c", "eval", hours_ago=0.1)
    plant("pretrain-d", "pretrain", hours_ago=30)

    def listed(*flags: str) -> list[str]:
        return handles(cli(env, "list", "-s", "local_cwd", *flags))

    assert listed("--name", "train") == ["trainer-a", "trainer-b", "pretrain-d"]  # substring
    assert listed("--name", "train*") == ["trainer-a", "trainer-b"]  # a glob: anchored
    assert listed("--name", "?val") == ["eval-c"]
    assert listed("--since", "2h") == ["eval-c", "trainer-a"]
    assert listed("--since", "1d") == ["eval-c", "trainer-a", "trainer-b"]
    assert listed("--since", "30M") == ["eval-c"]
    assert listed("--since", "2w", "--name", "train", "--state", "failed") == ["trainer-b"]


@pytest.mark.parametrize("age", ["2", "h", "2y", "-1h", "1.5h", "2 h"])
def test_a_bad_age_is_a_usage_error(env: dict[str, str], age: str) -> None:
    out = cli(env, "list", "-s", "local_cwd", f"--since={age}")
    assert out.returncode == 2
    assert out.stdout == ""
    assert f"bad age {age!r}" in out.stderr
    assert "30m, 2h or 7d" in out.stderr


def test_columns_and_json_of_real_apps(env: dict[str, str]) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    for args in (["utils.echo", "--msg", "hi"], ["utils.sh", "false"]):
        cli(env, "run", "-s", "local_cwd", *args)
    after = datetime.now(UTC)
    table = cli(env, "list", "-s", "local_cwd")
    assert table.returncode == 0, table.stderr
    header, _, *rows = table.stdout.splitlines()
    assert header.split() == ["APP", "HANDLE", "APP", "NAME", "APP", "STATUS", "SUBMITTED", "ENDED"]
    (sh, echo) = (row.split() for row in rows)
    assert [sh[1:3], echo[1:3]] == [["sh", "FAILED"], ["echo", "SUCCEEDED"]]
    for row in (sh, echo):
        for when in (f"{row[3]} {row[4]}", f"{row[5]} {row[6]}"):  # local time, to the second
            stamp = datetime.strptime(when, "%Y-%m-%d %H:%M:%S").astimezone(UTC)
            assert before <= stamp <= after
    data = json.loads(cli(env, "list", "-s", "local_cwd", "--json").stdout)
    assert [(app["name"], app["state"]) for app in data] == [
        ("sh", "FAILED"),
        ("echo", "SUCCEEDED"),
    ]
    for app in data:
        submitted, ended = (datetime.fromisoformat(app[k]) for k in ("submitted", "ended"))
        assert submitted.utcoffset() == timedelta(0)
        assert before <= submitted <= ended <= after
