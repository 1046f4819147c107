"""Cross-process ``status``/``log``/``describe``/``list`` on ``local_docker`` apps.

``local_docker`` keeps its state in the Docker engine, so a second ``asynctorchx``
process can inspect an app the first one ran.

"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DOCKER_TEST_IMAGE as IMAGE

LIMIT = 120  # seconds: a safety bound, never a timing guess

# needs the engine and the local busybox image (tests/conftest.py skips, or fails under CI)
pytestmark = [pytest.mark.docker]


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "asynctorchx", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(tmp_path)
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("TORCHX")}
    clean["HOME"] = str(home)
    return clean


def _remove_app(app_id: str) -> None:
    """Remove the app's containers and the images `run` built of the current directory
    (the test leaves nothing behind on the engine)."""
    label = f"label=torchx.pytorch.org/app-id={app_id}"
    listed = subprocess.run(
        ["docker", "ps", "-a", "--filter", label, "--format", "{{.ID}} {{.Image}}"],
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=True,
    ).stdout.split()
    ids, images = listed[::2], set(listed[1::2]) - {IMAGE}
    if ids:
        subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, timeout=LIMIT, check=True)
    if images:
        subprocess.run(["docker", "rmi", *images], capture_output=True, timeout=LIMIT, check=False)


def test_status_log_describe_list_from_another_process(env: dict[str, str]) -> None:
    ran = cli(
        env, "run", "-s", "local_docker", "utils.sh", "--image", IMAGE, "sh", "-c", "echo hi-docker"
    )
    assert ran.returncode == 0, ran.stderr
    handle = ran.stdout.splitlines()[0]
    assert handle.startswith("local_docker://torchx/")
    try:
        status = cli(env, "status", "--json", handle)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["state"] == "SUCCEEDED"

        log = cli(env, "log", handle)
        assert log.returncode == 0, log.stderr
        assert any(line.endswith(" hi-docker") for line in log.stdout.splitlines())

        described = cli(env, "describe", "--json", handle)
        assert described.returncode == 0, described.stderr
        assert json.loads(described.stdout)["roles"]

        listed = cli(env, "list", "-s", "local_docker", "--all", "--json")
        assert listed.returncode == 0, listed.stderr
        assert handle in {app["app_handle"] for app in json.loads(listed.stdout)}

        cancelled = cli(env, "cancel", handle)  # a finished app: a no-op
        assert cancelled.returncode == 0, cancelled.stderr
    finally:
        _remove_app(handle.rsplit("/", 1)[-1])


def _ours(app_id: str) -> tuple[list[str], list[str]]:
    """The app's containers and volumes (its cancel marker) on the engine."""
    label = f"label=torchx.pytorch.org/app-id={app_id}"
    found = [
        subprocess.run(
            ["docker", *kind, "-q", "--filter", label],
            capture_output=True,
            text=True,
            timeout=LIMIT,
            check=True,
        ).stdout.split()
        for kind in (["ps", "-a"], ["volume", "ls"])
    ]
    return found[0], found[1]


def test_delete_removes_a_running_or_cancelled_app_and_says_when_unknown(
    env: dict[str, str],
) -> None:
    app_ids: list[str] = []
    try:
        for cancel_first in (False, True):
            # no workspace build: delete removes the containers that name a built image
            command = ["run", "-s", "local_docker", "--workspace", ""]
            ran = cli(env, *command, "utils.sh", "--image", IMAGE, "sleep", "600")
            assert ran.returncode == 0, ran.stderr
            handle = ran.stdout.splitlines()[0]
            app_ids.append(handle.rsplit("/", 1)[-1])
            if cancel_first:
                assert cli(env, "cancel", handle).returncode == 0
                assert _ours(app_ids[-1])[1]  # the cancel marker volume
            deleted = cli(env, "delete", handle)
            assert deleted.returncode == 0, deleted.stderr
            assert _ours(app_ids[-1]) == ([], [])
            assert cli(env, "status", handle).returncode == 1  # not found any more
            again = cli(env, "delete", handle)
            assert again.returncode == 1
            assert "not found" in again.stderr
    finally:
        for app_id in app_ids:
            _remove_app(app_id)


def test_run_with_cancel_on_close_stays_follows_the_logs_and_waits(env: dict[str, str]) -> None:
    """The app ends with this `run`, so `run` stays for it, as for local apps."""
    script = "echo tied-to-run"
    ran = cli(
        env, "run", "-s", "local_docker", "-cfg", "cancel_on_close=true",
        "utils.sh", "--image", IMAGE, "sh", "-c", script,
    )  # fmt: skip
    handle = ran.stdout.splitlines()[0]
    try:
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout == f"{handle}\n"
        assert "sh/0 tied-to-run" in ran.stderr.splitlines()
        assert "finished: SUCCEEDED" in ran.stderr
    finally:
        _remove_app(handle.rsplit("/", 1)[-1])
