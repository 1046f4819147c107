"""``local_docker`` against a real Docker engine, with the local busybox test image only.

``bash scripts/docker-engine.sh start`` provides the engine and the image; without them
the ``docker`` tests skip (or fail under ``ASYNCTORCHX_REQUIRE_DOCKER=1``). Every app a
test starts is deleted after it; replicas that talk use the test's own network.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import anyio.abc
import pytest

from asynctorchx.errors import (
    InvalidAppIdException,
    SchedulerUnavailableError,
    WorkspaceBuildError,
)
from asynctorchx.schedulers import get_scheduler_factories
from asynctorchx.schedulers.api import DescribeAppResponse, Stream
from asynctorchx.schedulers.docker._network import ensure_network
from asynctorchx.schedulers.docker_scheduler import (
    DEFAULT_STOP_TIMEOUT,
    DockerJob,
    DockerScheduler,
    container_name,
    create_scheduler,
)
from asynctorchx.schedulers.toolkit import sanitize_app_name, validate_app_id
from asynctorchx.specs import named_resources
from asynctorchx.specs.api import AppDef, AppState, Resource, Role, parse_mounts
from asynctorchx.workspace.docker_workspace import build_context, is_ignored, parse_dockerignore

LIMIT = 60.0  # seconds: a safety bound on awaits, never a timing guess

# the deprecated ``grace`` alias is used only where a test asserts its warning
pytestmark = pytest.mark.filterwarnings("error:.*grace is deprecated:DeprecationWarning")


def _docker(*args: str) -> str:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, check=True, timeout=LIMIT
    ).stdout


def _inspect(app_id: str) -> list[dict[str, object]]:
    ids = _docker("ps", "-a", "-q", "--filter", f"label=torchx.pytorch.org/app-id={app_id}").split()
    return json.loads(_docker("inspect", *ids)) if ids else []


@pytest.fixture
def network() -> Iterator[str]:
    """A network of the test's own, removed afterwards."""
    name = f"asynctorchx-test-{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run(["docker", "network", "rm", name], capture_output=True, check=False)


def sh(name: str, image: str, script: str, **kwargs: object) -> Role:
    return Role(name=name, image=image, entrypoint="sh", args=["-c", script], **kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- no engine needed


def test_dryrun_maps_resources_mounts_ports_and_retries(tmp_path: Path) -> None:
    sched = DockerScheduler("t")
    role = Role(
        name="trainer",
        image="img:1",
        entrypoint="python",
        args=["-m", "train", "--id", "${replica_id}", "--app", "${app_id}"],
        num_replicas=2,
        max_retries=3,
        resource=Resource(cpu=2, gpu=1, memMB=512, devices={"vpc.amazonaws.com/efa": 2}),
        port_map={"tb": 6006},
        mounts=parse_mounts(
            [
                f"type=bind,src={tmp_path},dst=/data,readonly",
                "type=volume,src=v,dst=/v",
                "type=device,src=/dev/fuse",
            ]
        ),
        env={"RANK_ID": "${replica_id}"},
    )
    info = sched.submit_dryrun(AppDef("My App!", [role]), {"privileged": True})
    job = info.request
    assert isinstance(job, DockerJob)
    assert job.app_id.startswith("My-App-")
    first, second = job.containers
    assert first.name == container_name(job.app_id, "trainer", 0)
    assert first.command == ["python", "-m", "train", "--id", "0", "--app", job.app_id]
    assert second.command[4] == "1"
    config = first.config
    host = config["HostConfig"]
    assert host["Memory"] == host["ShmSize"] == 512 * 1024 * 1024
    assert host["NanoCpus"] == 2_000_000_000
    assert host["DeviceRequests"] == [{"Count": 1, "Capabilities": [["compute", "utility"]]}]
    assert host["RestartPolicy"] == {"Name": "on-failure", "MaximumRetryCount": 3}
    assert host["Privileged"] is True
    assert "PortBindings" not in host  # exposed, not published on the host
    assert config["ExposedPorts"] == {"6006/tcp": {}}
    assert host["Mounts"] == [
        {"Type": "bind", "Source": str(tmp_path), "Target": "/data", "ReadOnly": True},
        {"Type": "volume", "Source": "v", "Target": "/v", "ReadOnly": False},
    ]
    device_paths = [d["PathOnHost"] for d in host["Devices"]]
    assert device_paths == ["/dev/infiniband/uverbs0", "/dev/infiniband/uverbs1", "/dev/fuse"]
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["RANK_ID"] == "0"
    assert env["TORCHX_RANK0_HOST"] == first.name
    assert config["Hostname"] == first.name
    text = str(info)
    assert f"logs: the engine's log of the container (docker logs {first.name})" in text
    assert '"NanoCpus": 2000000000' in text


def test_dryrun_app_ids_follow_the_policy_of_every_backend() -> None:
    # one id policy (the toolkit's): an id local_docker makes is one it accepts back
    sched = DockerScheduler("t")
    role = Role("r", "img", entrypoint="e")
    for name, prefix in [("a..b", "a-b-"), ("my app/x", "my-app-x-"), ("-.x", "x-")]:
        app_id = sched.submit_dryrun(AppDef(name, [role]), {}).request.app_id
        assert app_id.startswith(prefix)
        assert validate_app_id(app_id) == app_id
        assert sanitize_app_name(name) == app_id[: -len("-0123456789")]


def _host_devices(resource: Resource) -> list[str]:
    role = Role("r", "img", entrypoint="e", resource=resource)
    (container,) = DockerScheduler("t").submit_dryrun(AppDef("dev", [role]), {}).request.containers
    devices = container.config["HostConfig"]["Devices"]
    assert all(d["PathOnHost"] == d["PathInContainer"] for d in devices)
    assert {d["CgroupPermissions"] for d in devices} == {"rwm"}
    return [d["PathOnHost"] for d in devices]


def test_dryrun_maps_neuron_and_efa_devices_of_aws_named_resources() -> None:
    # every aws_trn1.* named resource asks for Neuron devices (and the large ones EFA)
    assert _host_devices(named_resources["aws_trn1.2xlarge"]) == ["/dev/neuron0"]
    paths = _host_devices(named_resources["aws_trn1.32xlarge"])
    assert sorted(paths) == sorted(
        [f"/dev/infiniband/uverbs{i}" for i in range(8)] + [f"/dev/neuron{i}" for i in range(16)]
    )
    assert _host_devices(named_resources["aws_p4d.24xlarge"]) == [
        f"/dev/infiniband/uverbs{i}" for i in range(4)
    ]


def test_dryrun_rejects_an_unknown_resource_device() -> None:
    with pytest.raises(ValueError, match=r"role 'r'.*'example.com/tpu'"):
        _host_devices(Resource(cpu=1, gpu=0, memMB=1, devices={"example.com/tpu": 1}))


def test_container_name_is_bounded_and_valid() -> None:
    app_id = "a" * 50 + "-xyz"
    name = container_name(app_id, "r" * 40 + "/x", 12)
    # a hostname (63 at most): the app part makes room for the replica id's 2 digits
    assert name.startswith(f"{app_id[-29:]}-{'r' * 21}-")
    assert name.endswith("-12")
    assert len(name) == 63


def test_dryrun_rejects_bad_apps_and_env() -> None:
    sched = DockerScheduler("t")
    with pytest.raises(ValueError, match="entrypoint"):
        sched.submit_dryrun(AppDef("x", [Role("r", "img")]), {})
    with pytest.raises(ValueError, match="KEY=VALUE"):
        sched.submit_dryrun(AppDef("x", [Role("r", "img", entrypoint="e")]), {"env": ["NOPE"]})


def test_registered_as_local_docker() -> None:
    sched = get_scheduler_factories()["local_docker"]("s")
    assert isinstance(sched, DockerScheduler)
    assert sched.backend == "local_docker"


async def test_stop_timeout_is_the_grace_period_and_grace_its_deprecated_name(
    tmp_path: Path,
) -> None:
    # one name on every backend: the local schedulers' stop_timeout (seconds)
    assert DockerScheduler("t").stop_timeout == DEFAULT_STOP_TIMEOUT == 10.0
    assert DockerScheduler("t", stop_timeout=3).stop_timeout == 3
    assert create_scheduler("t", stop_timeout="4").stop_timeout == 4.0
    with pytest.warns(DeprecationWarning, match="use stop_timeout"):
        assert DockerScheduler("t", grace=2).stop_timeout == 2
    with pytest.warns(DeprecationWarning, match="use stop_timeout"):
        sched = create_scheduler("t", grace=5, docker_host=f"unix://{tmp_path}/none.sock")
    assert sched.stop_timeout == 5.0
    with pytest.warns(DeprecationWarning, match="use stop_timeout"):
        assert sched.grace == 5.0
    with pytest.raises(TypeError, match="stop_timeout only"):
        DockerScheduler("t", stop_timeout=1, grace=2)
    await sched.close()


async def test_no_engine_is_a_clear_error(tmp_path: Path) -> None:
    sched = DockerScheduler("t", docker_host=f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(SchedulerUnavailableError, match="no Docker engine"):
        await sched.describe("app-1")
    await sched.close()


def test_under_trio_is_a_clear_error() -> None:
    pytest.importorskip("trio")

    async def main() -> None:
        async with DockerScheduler("t") as sched:
            await sched.describe("app-1")

    with pytest.raises(SchedulerUnavailableError, match="asyncio"):
        anyio.run(main, backend="trio")


def test_dockerignore_rules(tmp_path: Path) -> None:
    rules = parse_dockerignore("# c\n*.log\n/build\n**/secret*\n!keep.log\n")
    assert is_ignored("a.log", rules)
    assert not is_ignored("keep.log", rules)
    assert is_ignored("build/x/y.txt", rules)
    assert is_ignored("deep/dir/secret.key", rules)
    assert not is_ignored("sub/a.log", rules)  # `*` does not cross `/`
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "a.log").write_text("a")
    (tmp_path / ".dockerignore").write_text("*.log\n")
    data = build_context(str(tmp_path), "base:1")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = tar.getnames()
    assert sorted(names) == [".dockerignore", "Dockerfile.torchx", "a.txt"]


# --------------------------------------------------------------------------- real engine


@pytest.mark.docker
async def test_two_roles_several_replicas_succeed_with_right_logs(
    docker_image: str, docker_apps: list[str]
) -> None:
    app = AppDef(
        "two-roles",
        [
            sh("trainer", docker_image, "echo trainer-${replica_id}; echo warn-${replica_id} >&2",
               num_replicas=3),
            sh("reader", docker_image, "printf 'part-'; echo reader-${replica_id}",
               num_replicas=2),
        ],
    )  # fmt: skip
    async with create_scheduler("t") as sched:
        app_id = await sched.submit(app, {})
        docker_apps.append(app_id)
        done = await sched.wait(app_id, timeout=LIMIT)
        assert done is not None
        assert done.state == AppState.SUCCEEDED
        assert [(rs.role, [r.id for r in rs.replicas]) for rs in done.roles_statuses] == [
            ("trainer", [0, 1, 2]),
            ("reader", [0, 1]),
        ]
        assert all(r.exit_code == 0 for rs in done.roles_statuses for r in rs.replicas)
        assert [role.name for role in done.roles] == ["trainer", "reader"]
        assert done.roles[0].args == app.roles[0].args
        for k in range(3):
            out = [x async for x in sched.log_iter(app_id, "trainer", k, streams=Stream.STDOUT)]
            err = [x async for x in sched.log_iter(app_id, "trainer", k, streams=Stream.STDERR)]
            both = [x async for x in sched.log_iter(app_id, "trainer", k)]
            assert out == [f"trainer-{k}\n"]
            assert err == [f"warn-{k}\n"]
            assert sorted(both) == sorted(out + err)
        for k in range(2):
            lines = [x async for x in sched.log_iter(app_id, "reader", k)]
            assert lines == [f"part-reader-{k}\n"]
        matched = [x async for x in sched.log_iter(app_id, "trainer", 1, regex="^warn")]
        assert matched == ["warn-1\n"]


@pytest.mark.docker
async def test_failing_replica_is_failed_with_its_exit_code(
    docker_image: str, docker_apps: list[str]
) -> None:
    app = AppDef("fails", [sh("r", docker_image, "exit $((${replica_id} * 7))", num_replicas=2)])
    async with create_scheduler("t") as sched:
        app_id = await sched.submit(app, {})
        docker_apps.append(app_id)
        done = await sched.wait(app_id, timeout=LIMIT)
        assert done is not None
        assert done.state == AppState.FAILED
        replicas = done.roles_statuses[0].replicas
        assert [(r.state, r.exit_code) for r in replicas] == [
            (AppState.SUCCEEDED, 0),
            (AppState.FAILED, 7),
        ]
        assert "exit code 7" in done.msg
        assert next(a for a in await sched.list() if a.app_id == app_id).state == AppState.FAILED


@pytest.mark.docker
async def test_retries_restart_count_and_wait_returns_at_the_end(
    docker_image: str, docker_apps: list[str], tmp_path: Path
) -> None:
    # `flaky` fails on its first run only (a counter on a bind mount); `doomed` always fails.
    flaky = sh(
        "flaky",
        docker_image,
        "n=$(cat /state/n 2>/dev/null || echo 0); echo $((n + 1)) > /state/n;"
        ' echo "attempt $n"; [ "$n" -ge 1 ]',
        max_retries=3,
        mounts=parse_mounts([f"type=bind,src={tmp_path},dst=/state"]),
    )
    doomed = sh("doomed", docker_image, "echo try; exit 4", max_retries=2)
    async with create_scheduler("t") as sched:
        ok_id = await sched.submit(AppDef("flaky", [flaky]), {})
        docker_apps.append(ok_id)
        bad_id = await sched.submit(AppDef("doomed", [doomed]), {})
        docker_apps.append(bad_id)
        ok = await sched.wait(ok_id, timeout=LIMIT)
        bad = await sched.wait(bad_id, timeout=LIMIT)
        assert ok is not None
        assert bad is not None
        assert (ok.state, ok.num_restarts) == (AppState.SUCCEEDED, 1)
        assert (bad.state, bad.num_restarts) == (AppState.FAILED, 2)
        assert bad.roles_statuses[0].replicas[0].exit_code == 4
        assert (tmp_path / "n").read_text().strip() == "2"
        logs = [x async for x in sched.log_iter(bad_id, "doomed", 0)]
        assert logs == ["try\n"] * 3


@pytest.mark.docker
async def test_cancel_is_fast_cancelled_and_stops_every_container(
    docker_image: str, docker_apps: list[str]
) -> None:
    app = AppDef("cancel-me", [Role("r", docker_image, entrypoint="sleep", args=["600"],
                                    num_replicas=3)])  # fmt: skip
    async with create_scheduler("t") as sched:
        app_id = await sched.submit(app, {})
        docker_apps.append(app_id)
        started = time.monotonic()
        await sched.cancel(app_id)
        elapsed = time.monotonic() - started
        done = await sched.wait(app_id, timeout=LIMIT)
        assert done is not None
        assert done.state == AppState.CANCELLED
        assert all(r.state == AppState.CANCELLED for r in done.roles_statuses[0].replicas)
        assert elapsed < 5.0, f"cancel took {elapsed:.1f} s (grace is 10 s: the stop was not fast)"
        assert [c["State"]["Running"] for c in _inspect(app_id)] == [False] * 3  # type: ignore[index]
        assert next(a for a in await sched.list() if a.app_id == app_id).state == (
            AppState.CANCELLED
        )
        await sched.cancel(app_id)  # a finished app: a no-op
        # a stop_timeout of 0 kills a program that ignores the stop signal
        stubborn = AppDef("stubborn", [sh("r", docker_image, "trap '' TERM; sleep 600 & wait")])
        stubborn_id = await sched.submit(stubborn, {"init": False})
        docker_apps.append(stubborn_id)
        sched.stop_timeout = 0  # the scheduler's, read at each cancel
        await sched.cancel(stubborn_id)
        sched.stop_timeout = DEFAULT_STOP_TIMEOUT
        after = await sched.describe(stubborn_id)
        assert after is not None
        assert after.state == AppState.CANCELLED
        # a replica that exits 0 on the stop signal was still ended by the cancel
        polite = AppDef("polite", [sh("r", docker_image, "trap 'exit 0' TERM; sleep 600 & wait",
                                      num_replicas=2)])  # fmt: skip
        polite_id = await sched.submit(polite, {"init": False})
        docker_apps.append(polite_id)
        await sched.cancel(polite_id)
        ended = await sched.wait(polite_id, timeout=LIMIT)
        assert ended is not None
        assert ended.state == AppState.CANCELLED
        assert [r.exit_code for r in ended.roles_statuses[0].replicas] == [0, 0]
        listed = {a.app_id: a.state for a in await sched.list()}
        assert listed[polite_id] == AppState.CANCELLED


@pytest.mark.docker
async def test_replicas_reach_rank0_by_hostname(
    docker_image: str, docker_apps: list[str], network: str
) -> None:
    server = (
        'if [ "${replica_id}" = 0 ]; then nc -l -p 29500; else'
        " i=0; until echo hello-from-${replica_id} | nc $TORCHX_RANK0_HOST 29500; do"
        " i=$((i + 1)); [ $i -lt 200 ] || exit 9; sleep 0.1; done; fi"
    )
    app = AppDef("rdzv", [sh("node", docker_image, server, num_replicas=2)])
    async with create_scheduler("t") as sched:
        app_id = await sched.submit(app, {"network": network})
        docker_apps.append(app_id)
        done = await sched.wait(app_id, timeout=LIMIT)
        logs = [
            [x async for x in sched.log_iter(app_id, "node", 0)],
            [x async for x in sched.log_iter(app_id, "node", 1)],
        ]
        assert done is not None
        assert done.state == AppState.SUCCEEDED, (done, logs)
        assert logs[0] == ["hello-from-1\n"], (done, logs)
        hosts = [r.hostname for r in done.roles_statuses[0].replicas]
        assert hosts == [container_name(app_id, "node", 0), container_name(app_id, "node", 1)]


@pytest.mark.docker
async def test_mounts_and_env_are_visible_inside(
    docker_image: str, docker_apps: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "in.txt").write_text("from-host\n")
    volume = f"asynctorchx-test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("ATX_COPIED_ONE", "copied")
    role = sh(
        "r",
        docker_image,
        "cat /data/in.txt; echo $ATX_COPIED_ONE $FROM_CFG $FROM_ROLE;"
        " echo v > /vol/f && cat /vol/f; touch /data/x 2>/dev/null || echo ro",
        env={"FROM_ROLE": "role-${replica_id}"},
        mounts=parse_mounts(
            [f"type=bind,src={tmp_path},dst=/data,readonly", f"type=volume,src={volume},dst=/vol"]
        ),
    )
    cfg = {"copy_env": ["ATX_COPIED_*"], "env": ["FROM_CFG=cfg", "FROM_ROLE=loses"]}
    try:
        async with create_scheduler("t") as sched:
            app_id = await sched.submit(AppDef("mounts", [role]), cfg)
            docker_apps.append(app_id)
            done = await sched.wait(app_id, timeout=LIMIT)
            assert done is not None
            assert done.state == AppState.SUCCEEDED
            lines = [x async for x in sched.log_iter(app_id, "r", 0)]
            assert lines == ["from-host\n", "copied cfg role-0\n", "v\n", "ro\n"]
            await sched.delete(app_id)
    finally:
        subprocess.run(["docker", "volume", "rm", volume], capture_output=True, check=False)


@pytest.mark.docker
async def test_a_second_instance_describes_lists_and_tails(
    docker_image: str, docker_apps: list[str]
) -> None:
    app = AppDef("shared", [sh("r", docker_image, "echo one; sleep 0.3; echo two", num_replicas=2)])
    async with create_scheduler("first") as first:
        app_id = await first.submit(app, {})
        docker_apps.append(app_id)
    # the app outlives the scheduler that started it
    async with create_scheduler("second") as second:
        tailed = [x async for x in second.log_iter(app_id, "r", 1, should_tail=True)]
        assert tailed == ["one\n", "two\n"]
        done = await second.wait(app_id, timeout=LIMIT)
        assert done is not None
        assert done.state == AppState.SUCCEEDED
        assert done.roles[0].args == app.roles[0].args
        listed = {a.app_id: a.state for a in await second.list()}
        assert listed[app_id] == AppState.SUCCEEDED
        assert await second.describe(f"unknown-{uuid.uuid4().hex[:8]}") is None
        with pytest.raises(InvalidAppIdException):
            await second.describe("../etc")


@pytest.mark.docker
async def test_list_agrees_with_wait_and_describe_right_after_the_end(
    docker_image: str, docker_apps: list[str]
) -> None:
    # wait returns at the die event; the engine's container listing still says
    # "running" for a moment then, and list must not contradict wait or describe.
    # (The replica sleeps so that it usually ends while wait is already subscribed:
    # the assertions hold however the timing falls.)
    async with create_scheduler("t") as sched:
        for _ in range(3):
            app_id = await sched.submit(AppDef("ends", [sh("r", docker_image, "sleep 0.5")]), {})
            docker_apps.append(app_id)
            done = await sched.wait(app_id, timeout=LIMIT)
            listed = {a.app_id: a.state for a in await sched.list()}
            assert done is not None
            assert done.state == AppState.SUCCEEDED
            assert listed[app_id] == AppState.SUCCEEDED


@pytest.mark.docker
async def test_list_gives_the_app_name_its_submit_time_and_an_inspected_end(
    docker_image: str, docker_apps: list[str]
) -> None:
    before = datetime.now(UTC).replace(microsecond=0)  # a listing's Created: whole seconds
    async with create_scheduler("t") as sched:
        app_id = await sched.submit(AppDef("named", [sh("r", docker_image, "sleep 600")]), {})
        docker_apps.append(app_id)
        running = {a.app_id: a for a in await sched.list()}[app_id]
        await sched.cancel(app_id)
        await sched.wait(app_id, timeout=LIMIT)
        # a cancelled app's containers are inspected by list: their FinishedAt is its end
        cancelled = {a.app_id: a for a in await sched.list()}[app_id]
    after = datetime.now(UTC)
    assert (running.name, running.state, running.ended) == ("named", AppState.RUNNING, None)
    assert running.submitted is not None
    assert before <= running.submitted <= after
    assert (cancelled.name, cancelled.state) == ("named", AppState.CANCELLED)
    assert cancelled.submitted == running.submitted
    assert cancelled.ended is not None
    assert running.submitted <= cancelled.ended <= after


@pytest.mark.docker
async def test_log_iter_since_until_and_tail_across_restarts(
    docker_image: str, docker_apps: list[str], tmp_path: Path
) -> None:
    role = sh(
        "r",
        docker_image,
        "n=$(cat /s/n 2>/dev/null || echo 0); echo $((n + 1)) > /s/n; echo run-$n; [ $n -ge 2 ]",
        max_retries=5,
        mounts=parse_mounts([f"type=bind,src={tmp_path},dst=/s"]),
    )
    async with create_scheduler("t") as sched:
        app_id = await sched.submit(AppDef("tail", [role]), {})
        docker_apps.append(app_id)
        tailed = [x async for x in sched.log_iter(app_id, "r", 0, should_tail=True)]
        assert tailed == ["run-0\n", "run-1\n", "run-2\n"]
        done = await sched.wait(app_id, timeout=LIMIT)
        assert done is not None
        assert (done.state, done.num_restarts) == (AppState.SUCCEEDED, 2)
        future = datetime.now() + timedelta(hours=1)
        past = datetime.now() - timedelta(hours=1)
        assert [x async for x in sched.log_iter(app_id, "r", 0, since=future)] == []
        assert [x async for x in sched.log_iter(app_id, "r", 0, until=past)] == []
        assert len([x async for x in sched.log_iter(app_id, "r", 0, since=past)]) == 3


@pytest.mark.docker
@pytest.mark.parametrize("should_tail", [False, True])
async def test_log_iter_returns_lines_over_16_kib_whole(
    docker_image: str, docker_apps: list[str], tmp_path: Path, should_tail: bool
) -> None:
    # The engine splits a line over 16 KiB into several frames with the same timestamp;
    # `docker logs` has every byte, and so must log_iter. The replica writes the long
    # lines once /s/go exists: a follower is then following when they arrive.
    script = (
        "echo ready; while [ ! -e /s/go ]; do sleep 0.01; done;"
        " head -c 100001 /dev/zero | tr '\\0' x; echo;"
        " head -c 1048576 /dev/zero | tr '\\0' y; echo; echo end"
    )
    role = sh("r", docker_image, script, mounts=parse_mounts([f"type=bind,src={tmp_path},dst=/s"]))
    expected = ["ready\n", "x" * 100_001 + "\n", "y" * 1_048_576 + "\n", "end\n"]
    async with create_scheduler("t") as sched:
        if not should_tail:
            (tmp_path / "go").touch()
        app_id = await sched.submit(AppDef("long-lines", [role]), {})
        docker_apps.append(app_id)
        if not should_tail:
            done = await sched.wait(app_id, timeout=LIMIT)
            assert done is not None
            assert done.state == AppState.SUCCEEDED
        lines: list[str] = []
        with anyio.fail_after(LIMIT):
            async for line in sched.log_iter(app_id, "r", 0, should_tail=should_tail):
                lines.append(line)
                if line == "ready\n":
                    (tmp_path / "go").touch(exist_ok=True)
        assert [len(line) for line in lines] == [len(line) for line in expected]
        assert lines == expected
        with pytest.raises(ValueError, match="no role 'nope'; its roles: r"):
            await anext(aiter(sched.log_iter(app_id, "nope", 0)))
        with pytest.raises(ValueError, match=r"has replicas 0\.\.0, not 1"):
            await anext(aiter(sched.log_iter(app_id, "r", 1)))


@pytest.mark.docker
async def test_workspace_build_and_build_error(
    docker_image: str, docker_apps: list[str], tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hello.txt").write_text("hello-workspace\n")
    (ws / "skip.log").write_text("must not be copied\n")
    (ws / ".dockerignore").write_text("*.log\n")
    role = sh("r", docker_image, "cat hello.txt; ls skip.log 2>/dev/null || echo no-log")
    async with create_scheduler("t") as sched:
        app_id = await sched.submit(AppDef("ws", [role]), {}, workspace=str(ws))
        docker_apps.append(app_id)
        assert role.image.startswith("sha256:")
        done = await sched.wait(app_id, timeout=LIMIT)
        assert done is not None
        assert done.state == AppState.SUCCEEDED
        assert [x async for x in sched.log_iter(app_id, "r", 0)] == [
            "hello-workspace\n",
            "no-log\n",
        ]
        await sched.delete(app_id)
        subprocess.run(["docker", "rmi", role.image], capture_output=True, check=False)

        bad = tmp_path / "bad"
        bad.mkdir()
        (bad / "Dockerfile.torchx").write_text(f"FROM {docker_image}\nRUN echo building; exit 7\n")
        with pytest.raises(WorkspaceBuildError, match="building"):
            await sched.build_workspace_and_update_role(sh("r", docker_image, "true"), str(bad), {})


@pytest.mark.docker
async def test_labels_match_torchx(docker_image: str, docker_apps: list[str]) -> None:
    async with create_scheduler("t") as sched:
        app_id = await sched.submit(AppDef("labels", [sh("worker", docker_image, "true")]), {})
        docker_apps.append(app_id)
        await sched.wait(app_id, timeout=LIMIT)
    (info,) = _inspect(app_id)
    labels = info["Config"]["Labels"]  # type: ignore[index]
    # TorchX 0.7.0's torchx/schedulers/docker_scheduler.py label keys, verbatim
    assert labels["torchx.pytorch.org/app-id"] == app_id
    assert labels["torchx.pytorch.org/role-name"] == "worker"
    assert labels["torchx.pytorch.org/replica-id"] == "0"
    assert "torchx.pytorch.org/version" in labels
    assert json.loads(labels["asynctorchx.pytorch.org/app-def"])["roles"][0]["name"] == "worker"
    assert info["Name"] == "/" + container_name(app_id, "worker", 0)  # type: ignore[index]


@pytest.mark.docker
async def test_network_created_once_when_two_schedulers_race(network: str) -> None:
    async with create_scheduler("a") as one, create_scheduler("b") as two:
        ids: list[str] = []

        async def ensure(sched: DockerScheduler) -> None:
            ids.append(await ensure_network(sched._engine, network))

        async with anyio.create_task_group() as tg:
            for sched in (one, two, one, two):
                tg.start_soon(ensure, sched)
        assert len(set(ids)) == 1
        listed = _docker("network", "ls", "-q", "--no-trunc", "--filter", f"name=^{network}$")
        assert listed.split() == ids[:1]
        # an existing network is used as it is
        assert await ensure_network(one._engine, network) == ids[0]


_ENSURE_IN_CHILD = """
import sys, anyio
from asynctorchx.schedulers.docker._network import ensure_network
from asynctorchx.schedulers.docker_scheduler import create_scheduler

async def main() -> None:
    async with create_scheduler("child") as sched:
        await sched._engine.connect()
        print("ready", flush=True)
        sys.stdin.readline()  # the parent releases every child at once
        print(await ensure_network(sched._engine, sys.argv[1]), flush=True)

anyio.run(main)
"""


@pytest.mark.docker
async def test_network_created_once_when_processes_race(network: str) -> None:
    # Docker 20.10's CheckDuplicate is not atomic: processes that create at once all
    # succeed unless the scheduler settles on one network.
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _ENSURE_IN_CHILD, network],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline() == "ready\n"
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        results = [child.communicate(timeout=LIMIT) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert [child.returncode for child in children] == [0] * 4, [err for _, err in results]
    ids = {out.strip() for out, _ in results}
    assert len(ids) == 1
    listed = _docker("network", "ls", "-q", "--no-trunc", "--filter", f"name=^{network}$")
    assert set(listed.split()) == ids


class _EngineProxy:
    """A unix-socket proxy to the Docker engine that sees which connections carry events."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events_opened = anyio.Event()
        self.events_closed = anyio.Event()

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        engine = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        assert engine.startswith("unix://"), "this test proxies a unix socket engine"
        listener = await anyio.create_unix_listener(self.path)

        async def handle(client: anyio.abc.SocketStream) -> None:
            carried_events = False
            async with client, await anyio.connect_unix(engine[len("unix://") :]) as upstream:

                async def pump(src: anyio.abc.SocketStream, dst: anyio.abc.SocketStream) -> None:
                    nonlocal carried_events
                    with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                        while True:
                            data = await src.receive()
                            if src is client and b" /v1." in data and b"/events?" in data:
                                carried_events = True
                                self.events_opened.set()
                            await dst.send(data)
                    tg.cancel_scope.cancel()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(pump, client, upstream)
                    tg.start_soon(pump, upstream, client)
            if carried_events:
                self.events_closed.set()

        async with listener:
            task_status.started()
            await listener.serve(handle)


def _tasks_but_the_proxys() -> set[asyncio.Task[object]]:
    return {task for task in asyncio.all_tasks() if "_EngineProxy" not in task.get_name()}


@pytest.mark.docker
async def test_cancelling_wait_closes_the_events_stream(
    docker_image: str, docker_apps: list[str], tmp_path: Path
) -> None:
    proxy = _EngineProxy(tmp_path / "engine.sock")
    async with anyio.create_task_group() as tg:
        await tg.start(proxy.serve)
        async with DockerScheduler("t", docker_host=f"unix://{proxy.path}") as sched:
            app_id = await sched.submit(
                AppDef("waited", [Role("r", docker_image, entrypoint="sleep", args=["600"])]), {}
            )
            docker_apps.append(app_id)
            tasks_before = _tasks_but_the_proxys()
            async with anyio.create_task_group() as waiting:
                waiting.start_soon(sched.wait, app_id)
                with anyio.fail_after(LIMIT):
                    await proxy.events_opened.wait()
                waiting.cancel_scope.cancel()
            with anyio.fail_after(LIMIT):
                await proxy.events_closed.wait()  # the engine connection is gone, not pooled
            assert _tasks_but_the_proxys() == tasks_before  # no task left behind
            running = await sched.describe(app_id)
            assert running is not None
            assert running.state == AppState.RUNNING
            sched.stop_timeout = 0
            await sched.cancel(app_id)
        tg.cancel_scope.cancel()


@pytest.mark.docker
async def test_wait_returns_when_a_restart_fails_without_an_event(
    docker_image: str, docker_apps: list[str], tmp_path: Path
) -> None:
    # The replica exits 1 once its bind source is removed; the engine then fails to start
    # it again and marks it exited without logging any event.
    source = tmp_path / "src"
    source.mkdir()
    role = sh(
        "r",
        docker_image,
        'echo up; while [ "$(stat -c %h /s)" != 0 ]; do sleep 0.05; done; exit 1',
        max_retries=3,
        mounts=parse_mounts([f"type=bind,src={source},dst=/s"]),
    )
    async with create_scheduler("t") as sched:
        app_id = await sched.submit(AppDef("lost-source", [role]), {})
        docker_apps.append(app_id)
        async with anyio.create_task_group() as tg:
            results: list[object] = []

            async def wait() -> None:
                results.append(await sched.wait(app_id, timeout=LIMIT))

            tg.start_soon(wait)
            async for line in sched.log_iter(app_id, "r", 0, should_tail=True):
                assert line == "up\n"
                source.rmdir()
        (done,) = results
        assert isinstance(done, DescribeAppResponse)
        assert done.state == AppState.FAILED
        assert "no such file or directory" in done.msg


@pytest.mark.docker
async def test_wait_for_state_change_and_cancel_while_restarting(
    docker_image: str, docker_apps: list[str]
) -> None:
    async with create_scheduler("t") as sched:
        app_id = await sched.submit(
            AppDef("watched", [Role("r", docker_image, entrypoint="sleep", args=["600"])]), {}
        )
        docker_apps.append(app_id)
        running = await sched.describe(app_id)
        assert running is not None
        assert running.state == AppState.RUNNING
        async with anyio.create_task_group() as tg:
            changes: list[object] = []

            async def watch() -> None:
                changes.append(await sched.wait_for_state_change(app_id, AppState.RUNNING))

            tg.start_soon(watch)
            await sched.cancel(app_id)
        (changed,) = changes
        assert isinstance(changed, DescribeAppResponse)
        assert changed.state == AppState.CANCELLED
        unknown = f"unknown-{uuid.uuid4().hex[:8]}"
        assert await sched.wait_for_state_change(unknown, AppState.RUNNING) is None

        # always failing: the engine keeps restarting it (with its back-off) until cancelled
        flapping = await sched.submit(AppDef("flapping", [sh("r", docker_image, "exit 3",
                                                              max_retries=1000)]), {})  # fmt: skip
        docker_apps.append(flapping)
        await sched.cancel(flapping)
        done = await sched.wait(flapping, timeout=LIMIT)
        assert done is not None
        assert done.state == AppState.CANCELLED
