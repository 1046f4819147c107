"""Faults on ``local_docker`` against a real Docker engine (issue 12's fault matrix).

Each case counts what is ours on the engine (containers by TorchX's app-id label, cancel
marker volumes, networks) before and after, and asserts what a user relies on: a log
follow ends when its container is removed under it, an app deleted leaves nothing of
its own behind, and leaving the runner does what the ``cancel_on_close`` run option says.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import anyio
import pytest

from asynctorchx.errors import InvalidAppDefException
from asynctorchx.schedulers.docker_scheduler import container_name, create_scheduler
from asynctorchx.specs.api import AppDef, AppState, BindMount, Resource, Role

LIMIT = 60.0  # seconds: a safety bound on awaits, never a timing guess
LABEL = "torchx.pytorch.org/app-id"


def _docker(*args: str) -> list[str]:
    out = subprocess.run(
        ["docker", *args], capture_output=True, text=True, check=True, timeout=LIMIT
    ).stdout
    return out.split()


def containers(app_id: str, *, running: bool = False) -> list[str]:
    """The ids of the app's containers (only the running ones with ``running``)."""
    return _docker("ps", *([] if running else ["-a"]), "-q", "--filter", f"label={LABEL}={app_id}")


def volumes(app_id: str) -> list[str]:
    """The app's volumes (its cancel marker)."""
    return _docker("volume", "ls", "-q", "--filter", f"label={LABEL}={app_id}")


def networks(name: str) -> list[str]:
    """The ids of the networks named ``name`` (other sessions share the engine)."""
    listed = _docker("network", "ls", "--format", "{{.ID}}={{.Name}}")
    return sorted(entry.split("=")[0] for entry in listed if entry.split("=")[1] == name)


def sleeper(image: str, name: str = "sleeper", replicas: int = 2) -> AppDef:
    return AppDef(name, [Role("r", image, entrypoint="sleep", args=["600"], num_replicas=replicas)])


# --------------------------------------------------------------------------- item 9


@pytest.mark.docker
async def test_docker_rm_during_a_log_follow_ends_the_follow(
    docker_image: str, docker_apps: list[str]
) -> None:
    """`docker rm -f` at any moment of a follow ends it cleanly (issue 12, item 9).

    The removal races the follow's inspect, its log request and its open stream; every
    order must end the iteration without an error, and leave no container.
    """
    script = "while true; do echo hi; sleep 0.01; done"
    async with create_scheduler("t") as sched:
        for attempt in range(8):
            app = AppDef("rmf", [Role("r", docker_image, entrypoint="sh", args=["-c", script])])
            app_id = await sched.submit(app, {})
            docker_apps.append(app_id)
            name = container_name(app_id, "r", 0)

            async def remove(delay: float = attempt * 0.005, name: str = name) -> None:
                await anyio.sleep(delay)  # spreads the removal over the follow's steps
                await anyio.run_process(["docker", "rm", "-f", name])

            lines: list[str] = []
            with anyio.fail_after(LIMIT):
                async with anyio.create_task_group() as task_group:
                    task_group.start_soon(remove)
                    async for line in sched.log_iter(app_id, "r", 0, should_tail=True):
                        lines.append(line)
            assert set(lines) <= {"hi\n"}
            assert containers(app_id) == []
            assert await sched.describe(app_id) is None


@pytest.mark.docker
async def test_docker_rm_after_the_first_line_ends_the_follow(
    docker_image: str, docker_apps: list[str]
) -> None:
    app = AppDef(
        "rmf", [Role("r", docker_image, entrypoint="sh", args=["-c", "echo hi; sleep 600"])]
    )
    async with create_scheduler("t") as sched:
        app_id = await sched.submit(app, {})
        docker_apps.append(app_id)
        lines = []
        with anyio.fail_after(LIMIT):
            async for line in sched.log_iter(app_id, "r", 0, should_tail=True):
                lines.append(line)
                await anyio.run_process(["docker", "rm", "-f", container_name(app_id, "r", 0)])
        assert lines == ["hi\n"]
        assert (await sched.describe(app_id)) is None


# --------------------------------------------------------------------------- item 13


@pytest.mark.docker
async def test_runner_delete_leaves_nothing_of_the_app_on_the_engine(
    docker_image: str, docker_apps: list[str]
) -> None:
    """Runner.delete of a running, a cancelled and a finished app (issue 12 item 13)."""
    from asynctorchx.runner import get_runner

    async with get_runner(handle_signals=False) as runner:
        first = await runner.run(sleeper(docker_image), "local_docker")  # the network exists now
        shared = networks("torchx")  # the one network apps share, never per app
        cancelled = await runner.run(sleeper(docker_image, "cancelled"), "local_docker")
        done = AppDef("done", [Role("r", docker_image, entrypoint="true")])
        finished = await runner.run(done, "local_docker")
        docker_apps.extend(handle.rsplit("/", 1)[-1] for handle in (first, cancelled, finished))
        await runner.cancel(cancelled)
        with anyio.fail_after(LIMIT):
            assert (await runner.wait(cancelled)).state == AppState.CANCELLED  # type: ignore[union-attr]
            assert (await runner.wait(finished)).state == AppState.SUCCEEDED  # type: ignore[union-attr]
        assert volumes(cancelled.rsplit("/", 1)[-1])  # the cancel marker, until the delete
        for handle in (first, cancelled, finished):
            app_id = handle.rsplit("/", 1)[-1]
            assert containers(app_id)
            with anyio.fail_after(LIMIT):
                await runner.delete(handle)
            assert (containers(app_id), volumes(app_id), networks(app_id)) == ([], [], [])
            assert await runner.status(handle) is None
            assert await runner.describe(handle) is None
            await runner.delete(handle)  # idempotent
        assert networks("torchx") == shared


@pytest.mark.docker
async def test_scheduler_delete_stops_a_running_app_gracefully_first(
    docker_image: str, docker_apps: list[str]
) -> None:
    """delete cancels a running app (the stop signal reaches it) before removing it."""
    script = "echo up; sleep 600"
    app = AppDef("graceful", [Role("r", docker_image, entrypoint="sh", args=["-c", script])])
    async with create_scheduler("t") as sched:
        app_id = await sched.submit(app, {})
        docker_apps.append(app_id)
        with anyio.fail_after(LIMIT):
            async for line in sched.log_iter(app_id, "r", 0, should_tail=True):
                assert line == "up\n"
                break
        since = f"{time.time() - 1:.3f}"
        with anyio.fail_after(LIMIT):
            await sched.delete(app_id)
        until = f"{time.time() + 1:.3f}"
        actions = _docker(
            "events", "--since", since, "--until", until, "--filter", f"label={LABEL}={app_id}",
            "--format", "{{.Action}}",
        )  # fmt: skip
        assert (containers(app_id), volumes(app_id)) == ([], [])
        # the stop (signal, then SIGKILL after stop_timeout) first, the removal after
        assert "stop" in actions
        assert actions.index("stop") < actions.index("destroy")


# --------------------------------------------------------------------------- item 8

LEAVE_BY_SIGTERM = """
import sys, anyio
from asynctorchx.runner import get_runner
from asynctorchx.specs.api import AppDef, Role

async def main() -> None:
    app = AppDef("sig", [Role("r", sys.argv[1], entrypoint="sleep", args=["600"], num_replicas=2)])
    cfg = {"cancel_on_close": sys.argv[2] == "True"}
    async with get_runner() as runner:  # a plain script: the runner owns SIGTERM
        print(await runner.run(app, "local_docker", cfg), flush=True)
        await anyio.sleep_forever()

anyio.run(main)
"""


async def _leave(how: str, image: str, cfg: dict[str, bool]) -> str:
    """Run a 2-replica app, leave the runner ``how``; return the app id."""
    from asynctorchx.runner import get_runner

    if how == "sigterm":
        import sys

        async with await anyio.open_process(
            [sys.executable, "-c", LEAVE_BY_SIGTERM, image, str(cfg["cancel_on_close"])]
        ) as process:
            assert process.stdout is not None
            with anyio.fail_after(LIMIT):
                handle = (await process.stdout.receive()).decode().split()[0]
                process.terminate()
                assert await process.wait() == -15  # died of the signal, after closing
        return handle.rsplit("/", 1)[-1]
    handle = ""
    try:
        async with get_runner(handle_signals=False) as runner:
            handle = await runner.run(sleeper(image), "local_docker", cfg)
            if how == "close":
                with anyio.fail_after(LIMIT):
                    await runner.close()
            elif how == "exception":
                raise KeyError("boom")
    except KeyError:
        assert how == "exception"
    return handle.rsplit("/", 1)[-1]


@pytest.mark.docker
@pytest.mark.parametrize("how", ["normal", "exception", "close", "sigterm"])
@pytest.mark.parametrize("cancel_on_close", [False, True])
async def test_leaving_the_runner_detaches_or_cancels_as_the_run_option_says(
    docker_image: str, docker_apps: list[str], how: str, cancel_on_close: bool
) -> None:
    """Issue 12 item 8: detached by default (TorchX), cancelled with ``cancel_on_close``."""
    app_id = await _leave(how, docker_image, {"cancel_on_close": cancel_on_close})
    docker_apps.append(app_id)
    assert len(containers(app_id)) == 2
    async with create_scheduler("other-process") as sched:
        described = await sched.describe(app_id)
    assert described is not None
    if cancel_on_close:
        assert containers(app_id, running=True) == []  # stopped before the runner left
        assert described.state == AppState.CANCELLED
    else:
        assert len(containers(app_id, running=True)) == 2
        assert described.state == AppState.RUNNING


# --------------------------------------------------------------------------- item 14


def _dryrun(role: Role) -> None:
    from asynctorchx.schedulers.docker_scheduler import DockerScheduler

    DockerScheduler("t").submit_dryrun(AppDef("bad", [role]), {})


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"env": {"A=B": "x"}}, "'A=B'"),
        ({"env": {"": "x"}}, "key ''"),
        ({"env": {"A\0": "x"}}, "NUL"),
        ({"env": {"A": "x\0"}}, "NUL"),
        ({"env": {"A": 1}}, "'A' has the value 1 \\(int\\)"),
        ({"resource": Resource(cpu=1, gpu=0, memMB=-512)}, "memMB=-512"),
        ({"resource": Resource(cpu=-2, gpu=0, memMB=64)}, "cpu=-2"),
        ({"resource": Resource(cpu=float("nan"), gpu=0, memMB=64)}, "cpu=nan"),  # type: ignore[arg-type]
        ({"mounts": [BindMount("/no/such/dir-atx", "/data")]}, "'/no/such/dir-atx'"),
    ],
)
def test_bad_inputs_are_typed_errors_at_dry_run(changes: dict[str, object], named: str) -> None:
    role = Role("r", "img", entrypoint="true", **changes)  # type: ignore[arg-type]
    with pytest.raises(InvalidAppDefException, match=named) as caught:
        _dryrun(role)
    assert "role 'r'" in str(caught.value)


def test_unset_resources_stay_accepted() -> None:
    _dryrun(Role("r", "img", entrypoint="true"))  # NULL_RESOURCE: -1 everywhere
    _dryrun(Role("r", "img", entrypoint="true", resource=Resource(cpu=-1, gpu=-1, memMB=-1)))


@pytest.mark.docker
async def test_a_bad_app_creates_nothing_on_the_engine(docker_image: str, tmp_path: Path) -> None:
    """Refused at dry run (bind source) or before any container (missing image)."""
    from asynctorchx.errors import DockerEngineError

    name = f"bad{uuid.uuid4().hex[:8]}"  # other sessions may share the engine: count ours
    async with create_scheduler("t") as sched:
        missing = BindMount(str(tmp_path / "gone"), "/data")
        bad_mount = Role("r", docker_image, entrypoint="true", mounts=[missing])
        with pytest.raises(InvalidAppDefException, match="gone"):
            await sched.submit(AppDef(name, [bad_mount]), {})
        no_image = Role("r", "asynctorchx-test/no-such-image:0", entrypoint="true")
        with pytest.raises(DockerEngineError, match=r"no-such-image.*build or load it first"):
            await sched.submit(AppDef(name, [no_image]), {})
    ours = _docker("ps", "-a", "-q", "--filter", f"name={name}")
    assert (ours, _docker("volume", "ls", "-q", "--filter", f"name={name}")) == ([], [])
