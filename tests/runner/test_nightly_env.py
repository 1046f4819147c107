"""The environment torchx-nightly sets in every replica: the session id (every
scheduler) and ``TORCHX_IMAGE`` (container schedulers); beside nightly's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from asynctorchx.runner import get_runner
from asynctorchx.schedulers.docker_scheduler import DockerScheduler
from asynctorchx.specs import AppDef, Role
from asynctorchx.util.session import TORCHX_INTERNAL_SESSION_ID, get_session_id_or_create_new
from tests.nightly import run_nightly


def _app() -> AppDef:
    return AppDef("e", [Role("r", "img:1", entrypoint="echo", num_replicas=2)])


async def test_every_role_gets_one_session_id_per_process() -> None:
    async with get_runner() as runner:
        first = await runner.dryrun(_app(), "local_cwd")
        second = await runner.dryrun(_app(), "local_docker")
    ids = {
        info.app.roles[0].env[TORCHX_INTERNAL_SESSION_ID] for info in (first, second) if info.app
    }
    assert ids == {get_session_id_or_create_new()}


def test_a_process_started_with_a_session_keeps_it() -> None:
    program = "from asynctorchx.util.session import get_session_id_or_create_new as g\n"
    program += "print(g(), g())"
    env = {**os.environ, TORCHX_INTERNAL_SESSION_ID: "outer"}
    done = subprocess.run(
        [sys.executable, "-c", program],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[2],
    )
    assert done.stdout.split() == ["outer", "outer"]


def test_docker_containers_get_their_image() -> None:
    request = DockerScheduler("t").submit_dryrun(_app(), {}).request
    for container in request.containers:
        assert f"TORCHX_IMAGE={container.image}" in container.config["Env"]


async def test_replica_env_names_match_nightly() -> None:
    program = (
        "import json\nfrom torchx import specs\nfrom torchx.runner import get_runner\n"
        "app = specs.AppDef('e', [specs.Role('r', 'img:1', entrypoint='echo')])\n"
        "with get_runner() as runner:\n"
        "    info = runner.dryrun(app, 'local_docker')\n"
        "env = info.request.containers[0].kwargs['environment']\n"
        "print(json.dumps(sorted(k for k in env if k.startswith('TORCHX_'))))"
    )
    theirs = set(run_nightly(program, env={TORCHX_INTERNAL_SESSION_ID: ""}))
    async with get_runner() as runner:
        info = await runner.dryrun(
            AppDef("e", [Role("r", "img:1", entrypoint="echo")]), "local_docker"
        )
    ours = {item.split("=", 1)[0] for item in info.request.containers[0].config["Env"]}
    assert {"TORCHX_IMAGE", TORCHX_INTERNAL_SESSION_ID} <= theirs
    assert theirs <= ours
