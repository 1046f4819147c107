"""``Runner.group()`` on ``local_docker``, ``slurm`` and ``kubernetes``: nothing outlives it.

These backends' apps outlive the runner (``local_docker`` without ``cancel_on_close``,
Slurm and Kubernetes jobs always): only the group stops them. Each test counts, right
after the block, what is left running of the apps it made (containers, Slurm jobs,
Kubernetes jobs), and asserts zero. Real systems: the Docker engine
(``bash scripts/docker-engine.sh start``), the Slurm cluster
(``bash scripts/slurm-cluster.sh start``) and the cluster of
``tests/schedulers/kubernetes/conftest.py`` (a real API server, bare or full).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import pytest
from anyio.streams.text import TextReceiveStream

from asynctorchx.errors import AppGroupFailed
from asynctorchx.runner import AppGroup, Runner, _reaper
from asynctorchx.schedulers import get_scheduler_factories
from asynctorchx.specs import AppDef, AppState, BindMount, CfgVal, parse_app_handle
from tests.conftest import DOCKER_TEST_IMAGE
from tests.isolation import isolate_from_user_config
from tests.processes import await_end, killed_on_exit, live_processes
from tests.runner.group_apps import LIMIT, of_kind, sh_app, states
from tests.schedulers.kubernetes.conftest import IMAGE as KUBERNETES_IMAGE
from tests.schedulers.kubernetes.conftest import Cluster, connected
from tests.schedulers.slurm.conftest import slurm_cluster  # noqa: F401 (the fixture)

pytestmark = pytest.mark.timeout(4 * LIMIT)

REAPED_WITHIN = 10  # seconds: the bound for a dead driver's apps to be cancelled

#: Slurm job states of a job still holding (or waiting for) its nodes.
SLURM_ALIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED"}


class Backend:
    """One backend under test: its runner, its apps and a count of what is left."""

    name: str
    image: str = ""
    cfg: dict[str, CfgVal] = {}

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.handles: list[str] = []  # every app the test made

    async def run(self, group: AppGroup, name: str, script: str) -> str:
        app = sh_app(name, script, image=self.image)
        handle = await group.run(app, self.name, self.cfg)
        self.handles.append(handle)
        return handle

    async def start(self, group: AppGroup, script: str = "exec sleep 600") -> str:
        """Start an app running ``script`` in ``group``; return once it runs."""
        handle = await self.run(group, "group", script)
        await self.drive_start(handle)
        with anyio.fail_after(LIMIT):
            async for status in self.runner.watch(handle):
                if status.state == AppState.RUNNING:
                    return handle
        raise AssertionError(f"{handle} ended before it ran")

    async def fail(self, group: AppGroup) -> str:
        """Start an app that exits 3 in ``group``."""
        handle = await self.run(group, "fails", "exit 3")
        await self.drive_exit(handle, 3)
        return handle

    async def succeed(self, group: AppGroup) -> str:
        """Start an app that exits 0 in ``group``."""
        handle = await self.run(group, "ok", "exit 0")
        await self.drive_exit(handle, 0)
        return handle

    async def flaky(self, group: AppGroup, directory: Path, fails: int) -> str:
        """Start an app whose first ``fails`` runs exit 1 and the next ones exit 0 (it
        counts its runs in ``directory``, mounted where it runs)."""
        script = directory / "flaky.sh"
        script.write_text(
            f"n=$(cat {directory}/runs 2>/dev/null || echo 0); n=$((n + 1))\n"
            f'echo "$n" > {directory}/runs\n'
            f'[ "$n" -gt {fails} ]\n'
        )
        app = sh_app("flaky", f"sh {script}", image=self.image)
        app.roles[0].mounts = [BindMount(str(directory), str(directory))]
        handle = await group.run(app, self.name, self.cfg)
        self.handles.append(handle)
        return handle

    async def drive_start(self, handle: str) -> None:
        """Make the app's replica run (only a fake or bare cluster needs it)."""

    async def drive_exit(self, handle: str, exit_code: int) -> None:
        """Make the app's replica end with ``exit_code`` (only a fake or bare cluster needs it)."""

    async def left(self, handles: list[str]) -> int:
        """How many of these apps still run (containers, jobs) on the backend itself."""
        raise NotImplementedError

    async def alive(self, handles: list[str]) -> int:
        """:meth:`left`, leaving the apps as they are (mid-test)."""
        return await self.left(handles)


class Docker(Backend):
    name = "local_docker"
    image = DOCKER_TEST_IMAGE

    async def left(self, handles: list[str]) -> int:
        count = 0
        for handle in handles:
            label = f"label=torchx.pytorch.org/app-id={parse_app_handle(handle).app_id}"
            listed = await anyio.run_process(["docker", "ps", "-a", "-q", "--filter", label])
            if not listed.stdout.split():
                continue
            # inspect, not ps: ps reads the engine's view of its containers, which it
            # updates after sending the `die` event (moby's handleContainerExit)
            ids = listed.stdout.decode().split()
            command = ["docker", "inspect", "--format", "{{.State.Running}}", *ids]
            inspected = await anyio.run_process(command, check=False)
            count += inspected.stdout.split().count(b"true")
        return count


class Slurm(Backend):
    name = "slurm"

    def __init__(self, runner: Runner, job_dir: Path) -> None:
        super().__init__(runner)
        self.cfg = {"job_dir": str(job_dir), "time": "5"}

    async def left(self, handles: list[str]) -> int:
        ids = {parse_app_handle(handle).app_id for handle in handles}
        done = await anyio.run_process(["squeue", "-h", "-o", "%i %T"])
        listed = (line.split() for line in done.stdout.decode().splitlines())
        return len({job.split("+")[0] for job, state in listed if state in SLURM_ALIVE} & ids)


class Kubernetes(Backend):
    name = "kubernetes"
    image = KUBERNETES_IMAGE
    cfg = {"queue": "default"}

    def __init__(self, runner: Runner, cluster: Cluster, observer: Any) -> None:
        super().__init__(runner)
        self.cluster = cluster
        self.observer = observer  # a scheduler of its own: the cluster's view

    async def drive_start(self, handle: str) -> None:
        await self.cluster.start(parse_app_handle(handle).app_id, "r-0")

    async def drive_exit(self, handle: str, exit_code: int) -> None:
        await self.cluster.run(parse_app_handle(handle).app_id, "r-0", exit_code=exit_code)

    async def alive(self, handles: list[str]) -> int:
        count = 0
        for handle in handles:
            response = await self.observer.describe(parse_app_handle(handle).app_id)
            if response is not None and response.state not in (
                AppState.SUCCEEDED,
                AppState.FAILED,
                AppState.CANCELLED,
            ):
                count += 1
        return count

    async def left(self, handles: list[str]) -> int:
        count = await self.alive(handles)
        for handle in handles:  # the test's jobs go with it
            await self.observer.delete(parse_app_handle(handle).app_id)
        return count


@contextlib.asynccontextmanager
async def _backend(
    name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Backend]:
    """The backend ``name`` with a runner of its own (a context manager, not a fixture: the
    fake API server's task group must be entered and left in the test's own task)."""
    factories = get_scheduler_factories()
    if name == "local_docker":
        async with Runner("torchx", factories, scheduler_params={}) as runner:
            docker = Docker(runner)
            try:
                yield docker
            finally:
                with anyio.CancelScope(shield=True):  # the containers go too
                    for handle in docker.handles:
                        await runner.delete(handle)
    elif name == "slurm":
        tick = {"poll_interval": 0.2}
        async with Runner("torchx", factories, scheduler_params=tick) as runner:
            yield Slurm(runner, tmp_path / "jobs")
    elif name == "kubernetes_node":  # real pods, the Volcano stand-in in this process
        from tests.schedulers.kubernetes.test_node import IMAGE, on_node, require_node

        async with on_node() as (_, observer):
            cluster = Cluster(require_node())
            kubeconfig = {"kubeconfig": cluster.kubeconfig}
            async with Runner("torchx", factories, scheduler_params=kubeconfig) as runner:
                node = Kubernetes(runner, cluster, observer)
                node.image = IMAGE
                yield node
    else:
        async with connected(tmp_path) as (cluster, observer):
            kubeconfig = {"kubeconfig": cluster.kubeconfig}
            async with Runner("torchx", factories, scheduler_params=kubeconfig) as runner:
                yield Kubernetes(runner, cluster, observer)


DOCKER = pytest.param("local_docker", marks=pytest.mark.docker)


@pytest.fixture(params=[DOCKER, "slurm", "kubernetes"])
def backend_name(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    isolate_from_user_config(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)  # the slurm scheduler writes .torchxslurmjobdirs here
    if request.param == "slurm":
        request.getfixturevalue("slurm_cluster")  # skips (or fails) without a cluster
    return str(request.param)


async def test_leaving_normally_waits_for_every_app(
    backend_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with _backend(backend_name, request, tmp_path) as backend:
        with anyio.fail_after(LIMIT):
            async with backend.runner.group() as group:
                ok = await backend.succeed(group)
                failed = await backend.fail(group)
        statuses = await group.wait()
        assert [statuses[ok].state, statuses[failed].state] == [
            AppState.SUCCEEDED,
            AppState.FAILED,
        ]
        assert await backend.left(group.handles) == 0


async def test_an_exception_in_the_block_stops_every_app(
    backend_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with _backend(backend_name, request, tmp_path) as backend:
        group = backend.runner.group()

        async def block() -> None:
            async with group:
                await backend.start(group)
                await backend.start(group)
                raise LookupError("raised in the block")

        with pytest.raises(LookupError, match="raised in the block"), anyio.fail_after(LIMIT):
            await block()
        assert await states(backend.runner, group.handles) == [AppState.CANCELLED] * 2
        assert await backend.left(group.handles) == 0


async def test_an_enclosing_cancel_scope_stops_every_app(
    backend_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with _backend(backend_name, request, tmp_path) as backend:
        with anyio.fail_after(LIMIT), anyio.CancelScope() as enclosing:
            async with backend.runner.group() as group:
                await backend.start(group)
                await backend.start(group)
                enclosing.cancel()
                await anyio.sleep_forever()
        assert enclosing.cancelled_caught
        assert await states(backend.runner, group.handles) == [AppState.CANCELLED] * 2
        assert await backend.left(group.handles) == 0


async def test_fail_fast_stops_the_others(
    backend_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with _backend(backend_name, request, tmp_path) as backend:
        group = backend.runner.group(fail_fast=True)

        async def block() -> None:
            async with group:
                await backend.start(group)
                await backend.fail(group)
                await anyio.sleep_forever()  # cancelled by the failure

        with pytest.raises(AppGroupFailed) as raised, anyio.fail_after(LIMIT):
            await block()
        running, failing = group.handles
        assert raised.value.failed == failing
        assert {handle: status.state for handle, status in raised.value.statuses.items()} == {
            running: AppState.CANCELLED,
            failing: AppState.FAILED,
        }
        assert await backend.left(group.handles) == 0


async def test_at_most_max_concurrent_apps_run_on_the_backend(
    backend_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with _backend(backend_name, request, tmp_path) as backend:
        runner = backend.runner
        with anyio.fail_after(LIMIT), anyio.CancelScope() as enclosing:
            async with runner.group(max_concurrent=2) as group:
                first = await backend.start(group)
                await backend.start(group)
                third = anyio.Event()

                async def start_third() -> None:
                    await backend.start(group)
                    # it runs: the first ended before it was submitted
                    assert await backend.alive(group.handles) == 2
                    third.set()

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(start_third)
                    await anyio.wait_all_tasks_blocked()  # the third run waits for a slot
                    assert await backend.alive(group.handles) == 2
                    assert not third.is_set()
                    await runner.cancel(first)  # its slot frees once it is terminal
                    await third.wait()
                assert len(group.handles) == 3
                assert await backend.alive(group.handles) == 2
                enclosing.cancel()
        assert await backend.left(group.handles) == 0


async def test_an_app_that_fails_twice_then_succeeds_ends_succeeded(
    backend_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with _backend(backend_name, request, tmp_path) as backend:
        with anyio.fail_after(LIMIT):
            async with backend.runner.group(retries=3, retry_backoff=(0.001, 0.002)) as group:
                first = await backend.flaky(group, tmp_path, fails=2)
                for attempt, exit_code in enumerate([1, 1, 0]):
                    while len(group.attempts(first)) <= attempt:  # the retry, after its backoff
                        await anyio.sleep(0.05)
                    await backend.drive_exit(group.attempts(first)[attempt], exit_code)
        attempts = group.attempts(first)
        backend.handles += attempts[1:]
        assert len(attempts) == 3
        assert await states(backend.runner, attempts) == [
            AppState.FAILED,
            AppState.FAILED,
            AppState.SUCCEEDED,
        ]
        assert {handle: status.state for handle, status in (await group.wait()).items()} == {
            attempts[-1]: AppState.SUCCEEDED
        }
        assert await backend.left(attempts) == 0


SCRIPT = textwrap.dedent(
    """
    import sys
    import anyio
    from asynctorchx.runner import get_runner
    from asynctorchx.specs import AppState
    from tests.runner.group_apps import sh_app

    scheduler, image = sys.argv[1], None if sys.argv[2] == "-" else sys.argv[2]
    cfg = dict(arg.split("=", 1) for arg in sys.argv[3:])

    async def main():
        async with get_runner() as runner, runner.group() as group:
            handle = await group.run(sh_app("s", "exec sleep 600", image=image), scheduler, cfg)
            print(handle, flush=True)
            async for status in runner.watch(handle):
                if status.state == AppState.RUNNING:
                    break
            print("ready", flush=True)
            await anyio.sleep_forever()

    anyio.run(main)
    """
)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
@pytest.mark.parametrize("backend_name", [DOCKER, "slurm", "kubernetes"])
async def test_a_signal_to_a_plain_script_stops_the_group(
    backend_name: str,
    signum: signal.Signals,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    isolate_from_user_config(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    if backend_name == "slurm":
        request.getfixturevalue("slurm_cluster")
    async with _backend(backend_name, request, tmp_path) as backend:
        args = [backend.name, backend.image or "-"]
        args += [f"{key}={value}" for key, value in backend.cfg.items()]
        repo = Path(__file__).resolve().parents[2]
        env = {**os.environ, "PYTHONPATH": str(repo)}
        if isinstance(backend, Kubernetes):  # a runner's parameter from TORCHX_* variables
            env["TORCHX_KUBECONFIG"] = backend.cluster.kubeconfig
        command = [sys.executable, "-c", SCRIPT, *args]
        async with killed_on_exit(command, cwd=tmp_path, env=env, stderr=None) as process:
            assert process.stdout is not None
            with anyio.fail_after(LIMIT):
                output = ""
                async for chunk in TextReceiveStream(process.stdout):
                    started = "\n" in output
                    output += chunk
                    if output.endswith("ready\n"):
                        break
                    if not started and "\n" in output:  # the handle: a fake cluster's pod starts
                        await backend.drive_start(output.partition("\n")[0])
                (handle,) = output.split()[:-1]
                backend.handles.append(handle)
                assert await backend.left([handle]) == 1
                (reaper,) = await reapers(process.pid)
                process.send_signal(signum)
                assert await process.wait() == -signum
        if signum == signal.SIGKILL:  # the group's reaper cancels the app: give it 10 s
            with anyio.fail_after(REAPED_WITHIN):
                while await backend.alive([handle]):
                    await anyio.sleep(0.2)
                # ...and then exits: orphaned, it may have become this (subreaper)
                # process's child, which later tests count.
                await await_end(reaper)
        assert reaper not in await reapers()
        assert await backend.left([handle]) == 0


RESUMABLE_DRIVER = textwrap.dedent(
    """
    import json, os, signal, sys
    import anyio
    from asynctorchx.runner import _journal, get_runner
    from tests.runner.test_group_backends import resumable_app

    spec = json.loads(sys.argv[1])
    append = _journal.Journal.append

    async def dies_before_the_attempt_record(self, record):
        if isinstance(record, _journal.AttemptRecord):
            os.kill(os.getpid(), signal.SIGKILL)  # the app is submitted, the journal lacks it
        await append(self, record)

    if spec["point"] == "submitted":
        _journal.Journal.append = dies_before_the_attempt_record

    async def main():
        app = resumable_app(spec["image"], spec["directory"], spec["fails"])
        group_args = {"journal": spec["journal"], "adopt_within": spec["adopt_within"]}
        async with get_runner() as runner, runner.group(
            **group_args, retries=1, retry_backoff=(600.0, 600.0)
        ) as group:
            await group.run(app, spec["scheduler"], spec["cfg"], key="t")
            await group.wait()

    anyio.run(main)
    """
)
TINY = (0.001, 0.002)  # seconds: the resumed driver's backoff, never slowing a test


def resumable_app(image: str, directory: str, fails: int) -> AppDef:
    """An app that counts its runs in ``directory/runs``, exits 3 in its first ``fails``,
    then waits for ``directory/release`` to exist and exits 0."""
    script = (
        f"n=$(($(cat {directory}/runs 2>/dev/null || echo 0) + 1)); echo $n > {directory}/runs;"
        f" [ $n -gt {fails} ] || exit 3;"
        f" while [ ! -e {directory}/release ]; do sleep 0.1; done"
    )
    app = sh_app("t", script, image=image or None)
    app.roles[0].mounts = [BindMount(directory, directory)]
    return app


class Killed(NamedTuple):
    """A driver killed by :func:`killed_driver`."""

    pid: int
    handle: str | None  # its first attempt's, None when it died before recording it
    killed: float  # when, in anyio's clock


async def killed_driver(
    backend: Backend, tmp_path: Path, point: str, adopt_within: float = LIMIT
) -> Killed:
    """Run RESUMABLE_DRIVER on ``backend`` and have it SIGKILLed: by itself between its
    submit and its record (``submitted``), once its app runs and its reaper started
    (``running``) or once its first attempt failed, in its 600 s backoff (``backoff``)."""
    journal, directory = tmp_path / "sweep.journal", tmp_path / "runs"
    directory.mkdir()
    spec = {"journal": str(journal), "scheduler": backend.name, "image": backend.image}
    spec |= {"cfg": backend.cfg, "directory": str(directory), "point": point}
    spec |= {"fails": int(point == "backoff"), "adopt_within": adopt_within}
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    if isinstance(backend, Kubernetes):
        env["TORCHX_KUBECONFIG"] = backend.cluster.kubeconfig
    command = [sys.executable, "-c", RESUMABLE_DRIVER, json.dumps(spec)]
    async with killed_on_exit(command, cwd=tmp_path, env=env, stderr=None) as driver:
        with anyio.fail_after(LIMIT):
            if point == "submitted":
                assert await driver.wait() == -signal.SIGKILL
                return Killed(driver.pid, None, anyio.current_time())
            while not (journal.exists() and of_kind(journal, "attempt")):
                await anyio.sleep(0.02)
            (handle,) = [attempt["handle"] for attempt in of_kind(journal, "attempt")]
            backend.handles.append(handle)
            if point == "backoff":
                await backend.drive_exit(handle, 3)
                while not of_kind(journal, "status"):
                    await anyio.sleep(0.02)
            else:
                await backend.drive_start(handle)
                async for status in backend.runner.watch(handle):
                    if status.state == AppState.RUNNING:
                        break
                assert await reapers(driver.pid)
        driver.send_signal(signal.SIGKILL)
        assert await driver.wait() == -signal.SIGKILL
    return Killed(driver.pid, handle, anyio.current_time())


@pytest.fixture(params=[DOCKER, "slurm", "kubernetes", "kubernetes_node"])
def resumed_on(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """:func:`backend_name`, and the node cluster's real pods (``kubernetes_node``)."""
    isolate_from_user_config(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    if request.param == "slurm":
        request.getfixturevalue("slurm_cluster")
    return str(request.param)


async def no_reaper_of(driver: int) -> None:
    """Return once no reaper of the dead ``driver`` runs (it names the pid in its args)."""
    module, pid = _reaper.COMMAND[-1].encode(), str(driver).encode()
    with anyio.fail_after(LIMIT):
        while any(
            module in args and pid in args
            for args in (p.data.split(b"\0") for p in live_processes("cmdline"))
        ):
            await anyio.sleep(0.05)


def runs(tmp_path: Path, backend: Backend) -> int | None:
    """How often the app ran (None on a bare cluster, whose pods run nothing)."""
    if isinstance(backend, Kubernetes) and backend.cluster.bare is not None:
        return None
    return int((tmp_path / "runs" / "runs").read_text())


async def test_an_app_submitted_but_not_journaled_is_adopted_not_run_twice(
    resumed_on: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    journal = tmp_path / "sweep.journal"
    async with _backend(resumed_on, request, tmp_path) as backend:
        driver = await killed_driver(backend, tmp_path, "submitted")
        (trial,) = of_kind(journal, "trial")
        assert of_kind(journal, "attempt") == []
        app = resumable_app(backend.image, str(tmp_path / "runs"), fails=0)
        info = await backend.runner.dryrun(app, backend.name, backend.cfg)
        (submitted,) = await backend.runner._find_marked(info, trial["mark"])
        backend.handles.append(submitted)
        with anyio.fail_after(LIMIT):
            async with backend.runner.group(journal=journal) as group:
                handle = await group.run(app, backend.name, backend.cfg, key="t")
                await no_reaper_of(driver.pid)  # it saw this driver take the journal, and left
                assert await backend.runner._find_marked(info, trial["mark"]) == [submitted]
                (tmp_path / "runs" / "release").touch()
                await backend.drive_start(handle)
                await backend.drive_exit(handle, 0)
                ((_, status),) = [ended async for ended in group.as_completed()]
        assert parse_app_handle(handle).app_id == parse_app_handle(submitted).app_id
        assert status.state == AppState.SUCCEEDED
        assert [a["budget"] for a in of_kind(journal, "attempt")] == ["first"]
        assert [s["state"] for s in of_kind(journal, "status")] == ["SUCCEEDED"]
        assert runs(tmp_path, backend) in (1, None)
        assert await backend.left([handle]) == 0


async def test_a_killed_drivers_running_app_is_adopted_and_ends_once(
    resumed_on: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    journal = tmp_path / "sweep.journal"
    async with _backend(resumed_on, request, tmp_path) as backend:
        driver = await killed_driver(backend, tmp_path, "running")
        app = resumable_app(backend.image, str(tmp_path / "runs"), fails=0)
        with anyio.fail_after(LIMIT):
            async with backend.runner.group(
                journal=journal, retries=1, retry_backoff=TINY
            ) as group:
                assert await group.run(app, backend.name, backend.cfg, key="t") == driver.handle
                await no_reaper_of(driver.pid)  # it saw this driver take the journal, and left
                assert await backend.alive([driver.handle]) == 1  # nothing cancelled
                (tmp_path / "runs" / "release").touch()
                await backend.drive_exit(driver.handle, 0)
                ended = [item async for item in group.as_completed()]
        assert [(handle, status.state) for handle, status in ended] == [
            (driver.handle, AppState.SUCCEEDED)
        ]
        assert [a["handle"] for a in of_kind(journal, "attempt")] == [driver.handle]
        assert [s["state"] for s in of_kind(journal, "status")] == ["SUCCEEDED"]
        assert runs(tmp_path, backend) in (1, None)  # run once, never submitted again
        assert await backend.left([driver.handle]) == 0


async def test_a_driver_killed_in_a_backoff_retries_once_when_resumed(
    resumed_on: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    journal = tmp_path / "sweep.journal"
    async with _backend(resumed_on, request, tmp_path) as backend:
        driver = await killed_driver(backend, tmp_path, "backoff")
        first = driver.handle
        (tmp_path / "runs" / "release").touch()
        app = resumable_app(backend.image, str(tmp_path / "runs"), fails=1)
        with anyio.fail_after(LIMIT):
            async with backend.runner.group(
                journal=journal, retries=1, retry_backoff=TINY
            ) as group:
                assert await group.run(app, backend.name, backend.cfg, key="t") == first
                await no_reaper_of(driver.pid)
                while len(group.attempts(first)) < 2:  # the retry, after the tiny backoff
                    await anyio.sleep(0.02)
                retry = group.attempts(first)[1]
                backend.handles.append(retry)
                await backend.drive_start(retry)
                await backend.drive_exit(retry, 0)
                ended = [item async for item in group.as_completed()]
        assert [(handle, status.state) for handle, status in ended] == [(retry, AppState.SUCCEEDED)]
        attempts = of_kind(journal, "attempt")
        assert [(a["handle"], a["budget"]) for a in attempts] == [
            (first, "first"),
            (retry, "retry"),
        ]
        assert [s["state"] for s in of_kind(journal, "status")] == ["FAILED", "SUCCEEDED"]
        assert runs(tmp_path, backend) in (2, None)
        assert await backend.left([first, retry]) == 0


async def test_with_nobody_resuming_the_reaper_cancels_after_adopt_within(
    resumed_on: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    adopt_within = 5.0  # well above how long cancelling at once takes
    async with _backend(resumed_on, request, tmp_path) as backend:
        driver = await killed_driver(backend, tmp_path, "running", adopt_within)
        assert driver.handle is not None
        with anyio.fail_after(adopt_within + REAPED_WITHIN):
            while await backend.alive([driver.handle]):
                await anyio.sleep(0.2)
        assert anyio.current_time() - driver.killed >= adopt_within  # not before: it waited
        await no_reaper_of(driver.pid)
        status = await backend.runner.status(driver.handle)
        assert status is not None
        assert status.state == AppState.CANCELLED
        assert of_kind(tmp_path / "sweep.journal", "status") == []  # no driver saw it end


def _reaper_scan(parent: int) -> tuple[list[int], bool]:
    """The live reaper processes whose parent is ``parent``, and whether a child of
    ``parent`` is still in ``execve`` (no command line yet: maybe a reaper starting)."""
    children = [p for p in live_processes("cmdline") if p.ppid == parent]
    module = _reaper.COMMAND[-1].encode()
    found = [p.pid for p in children if module in p.data.split(b"\0")]
    return found, any(p.data == b"" for p in children)


async def reapers(parent: int | None = None) -> list[int]:
    """The live reaper processes (see ``asynctorchx.runner._reaper``) whose parent is
    ``parent`` (default: this process), once no child of it is still in ``execve``
    (the reaper's start returns before its exec is over)."""
    parent = os.getpid() if parent is None else parent
    with anyio.fail_after(LIMIT):
        while True:
            found, in_exec = _reaper_scan(parent)
            if not in_exec:
                return found
            await anyio.sleep(0.01)


async def test_a_normal_exit_cancels_nothing_and_leaves_no_reaper(
    backend_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with _backend(backend_name, request, tmp_path) as backend:
        with anyio.fail_after(LIMIT):
            async with backend.runner.group() as group:
                ok = await backend.run(group, "ok", "exit 0")
                assert len(await reapers()) == 1  # it knows the app from its submit
                await backend.drive_exit(ok, 0)
        assert await reapers() == []
        assert (await group.wait())[ok].state == AppState.SUCCEEDED
