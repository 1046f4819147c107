"""The ``kubernetes`` scheduler class: Volcano jobs (or JobSets) submitted, watched and tailed.

TorchX's ``torchx.schedulers.kubernetes_scheduler`` is the reference: same manifest,
run options and app ids (``{namespace}:{job}``). The run option ``job_api=jobset``
submits a ``JobSet`` instead (app id ``{namespace}:jobset:{name}``; Kueue with
``queue``); what differs per job API is one record each (:mod:`._jobapi`). What each
call does (``docs/kubernetes.md`` says more):

- ``wait``/``wait_for_state_change`` await the API's watch (list, then watch from the
  list's ``resourceVersion``; relist on ``410 Gone``; a dropped connection is reopened),
  one watch per resource kind and namespace for every waiter of the scheduler;
- ``cancel`` aborts the job (a Volcano ``AbortJob`` command) and keeps it, ending
  ``CANCELLED``; :meth:`KubernetesScheduler.delete` removes it;
- ``describe`` reports each replica from its pod (state, exit code, hostname, why it
  waits) and ``None`` for an unknown app; a pod that can never start (or fails to pull
  its image past ``image_pull_timeout``) ends the app ``FAILED`` with the reason, and
  ``wait`` then stops the job and keeps it (see ``_state`` and ``_jobapi``);
- ``log_iter`` supports ``since`` (``sinceTime``), ``until``, and follows across dropped
  connections and Volcano's retries without duplicating or losing lines; the pod's other
  containers' logs (sidecars) follow the replica's own, each line led by the container's
  name (TorchX's rule);
- a workspace is built into an image on the Docker engine (as ``local_docker`` builds
  it); the dry run renames it ``<image_repo>:<hash>`` and ``schedule`` pushes it there
  before creating the job (TorchX's ``DockerWorkspaceMixin``), so the pods pull it.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio
import attrs

from asynctorchx.errors import UnknownAppException
from asynctorchx.schedulers.api import (
    Capabilities,
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
)
from asynctorchx.schedulers.docker._engine import Engine
from asynctorchx.schedulers.docker._workspace import build_workspace
from asynctorchx.schedulers.kubernetes._apiserver import ApiServer
from asynctorchx.schedulers.kubernetes._informer import Informer
from asynctorchx.schedulers.kubernetes._jobapi import JobApi, for_cfg, for_name
from asynctorchx.schedulers.kubernetes._logs import LogReader, follow, other_containers
from asynctorchx.schedulers.kubernetes._request import (
    LABEL_ORGANIZATION,
    ORGANIZATION,
    KubernetesJob,
    Opts,
    parse_app_ref,
    str_option,
)
from asynctorchx.schedulers.kubernetes._state import (
    Job,
    Pod,
    Replicas,
    describe,
    failure,
    next_deadline,
)
from asynctorchx.schedulers.toolkit import InContainer, LogBlock, LogPosition, LogQuery, race
from asynctorchx.specs.api import (
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    Role,
    make_app_handle,
)

#: The labels of every pod of a TorchX (or asynctorchx) job: the pods watch selects them.
POD_LABELS = {LABEL_ORGANIZATION: ORGANIZATION}


class KubernetesScheduler(Scheduler[KubernetesJob]):
    """The ``kubernetes`` scheduler: one Volcano ``Job`` (or ``JobSet``) per app, one pod
    per replica.

    Args:
        session_name: the runner session (it appears in app handles).
        kubeconfig: the kubeconfig file; ``None``: in-cluster, ``KUBECONFIG``, or
            ``~/.kube/config`` (lightkube's search).
        context: the kubeconfig context; ``None``: its current context.

    The connection is opened on first use; ``close()`` closes it and leaves the jobs
    running (the cluster keeps them). Workspaces are built on, and pushed from, the
    Docker engine ``DOCKER_HOST`` names (else the default socket), reached on first use.

    Raises (from every call that talks to the cluster):
        KubernetesConfigError: no kubeconfig, or it lacks the context.
        KubernetesUnreachableError: the API server does not answer.
        KubernetesApiError: the server refused a request (its message is kept).
        VolcanoNotInstalledError: the cluster has no Volcano ``Job`` resource.
        JobSetNotInstalledError: the cluster has no ``JobSet`` resource (``job_api=jobset``).
        SchedulerClosedError: the scheduler was closed.
    """

    capabilities = Capabilities(  # one log per container
        opts=Opts, log_streams=frozenset({Stream.COMBINED}), workspace="image"
    )

    def __init__(
        self, session_name: str, kubeconfig: str | None = None, context: str | None = None
    ) -> None:
        super().__init__("kubernetes", session_name)
        self.api = ApiServer(kubeconfig, context)
        self._engine = Engine(None, session_name, "kubernetes")
        self._jobs: dict[tuple[str, str], Informer[Job]] = {}
        self._pods: dict[str, Informer[Pod]] = {}

    async def close(self) -> None:
        """Close the connections; idempotent, never raises. Jobs keep running."""
        await self.api.close()
        await self._engine.close()

    def jobs(self, job_api: JobApi, namespace: str) -> Informer[Job]:
        """The shared watch of the job API's jobs in ``namespace`` (made on first use).

        Args:
            job_api: the job API (Volcano's ``jobs`` or ``jobsets``).
            namespace: the namespace.
        """
        key = (job_api.plural, namespace)
        if key not in self._jobs:
            self._jobs[key] = Informer(self.api, job_api.plural, namespace, job_api.parse)
        return self._jobs[key]

    def pods(self, namespace: str) -> Informer[Pod]:
        """The shared watch of TorchX's pods in ``namespace`` (made on first use).

        Args:
            namespace: the namespace.
        """
        if namespace not in self._pods:
            self._pods[namespace] = Informer(self.api, "pods", namespace, Pod.parse, POD_LABELS)
        return self._pods[namespace]

    # ------------------------------------------------------------------ options, dry run

    def _submit_dryrun(
        self, app: AppDef, cfg: Mapping[str, CfgVal]
    ) -> AppDryRunInfo[KubernetesJob]:
        return AppDryRunInfo(for_cfg(cfg).build(app, cfg), str)

    # ------------------------------------------------------------------ submit

    async def build_workspace_and_update_role(
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Build ``workspace`` into an image on the Docker engine; set ``role.image`` to its id.

        The build is ``local_docker``'s (the directory with its ``.dockerignore``, its
        ``Dockerfile.torchx`` or ``FROM <role.image>`` + ``COPY . .``). The image id
        (``sha256:...``) is renamed ``<image_repo>:<hash>`` at dry run and pushed there by
        :meth:`schedule`, as TorchX's ``DockerWorkspaceMixin`` does.

        Args:
            role: the role to patch; its ``image`` is the default Dockerfile's base.
            workspace: the directory to build.
            cfg: the resolved run options (none is read: ``image_repo`` applies at dry run).

        Raises:
            WorkspaceBuildError: the build failed; the message holds the build log.
            NotADirectoryError: ``workspace`` is not a directory.
            SchedulerUnavailableError: no Docker engine answers (or under trio).
        """
        await build_workspace(self._engine, role, workspace, {})

    async def schedule(self, dryrun_info: AppDryRunInfo[KubernetesJob]) -> str:
        """Create the Volcano job (or JobSet); return the app id.

        The app id is ``{namespace}:{job name}`` (TorchX's), or
        ``{namespace}:jobset:{name}`` for a JobSet (run option ``job_api=jobset``).

        Args:
            dryrun_info: the request of :meth:`submit_dryrun`.

        With ``validate_spec`` (the default) the job is first sent as a dry run
        (torchx-nightly does so in its ``submit_dryrun``; here the dry run stays offline).
        Then the local images the dry run renamed (a workspace's) are pushed to
        ``image_repo`` from the Docker engine, and the job is created.

        Raises:
            InvalidJobSpecError: ``validate_spec`` and the server refused the job in the
                dry run; nothing was created.
            KubernetesApiError: the server (or an admission webhook) refused the
                manifest; the message is the server's.
            VolcanoNotInstalledError: the cluster has no Volcano (``job_api=volcano``).
            JobSetNotInstalledError: the cluster has no JobSet (``job_api=jobset``).
            DockerEngineError: a push failed; nothing was created.
            SchedulerUnavailableError: there are images to push and no Docker engine answers.
        """
        job = dryrun_info.request
        job_api = for_name(job.job_api)
        if job.validate_spec:
            await self.api.create_job(job.namespace, job.resource, job_api.plural, dry_run=True)
        for image, (repo, tag) in job.images_to_push.items():
            await self._engine.push_image(image, repo, tag)
        created = await self.api.create_job(job.namespace, job.resource, job_api.plural)
        return job_api.app_id(job.namespace, job_api.parse(created).name)

    def _ref(self, app_id: str) -> tuple[JobApi, str, str]:
        """The app's job API, namespace and job name (raises ``InvalidAppIdException``)."""
        namespace, api, name = parse_app_ref(app_id)
        return for_name(api), namespace, name

    # ------------------------------------------------------------------ describe, list

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        """Describe the app from its job and pods (two requests); ``None`` if no such job.

        The state is the job's Volcano phase (TorchX's table), or the JobSet's
        conditions (:mod:`._jobset`); each replica's state, exit code and hostname
        (its DNS name on the job's headless service) come from its pod.

        Args:
            app_id: ``{namespace}:{job}`` or ``{namespace}:jobset:{name}``.

        Raises:
            InvalidAppIdException: ``app_id`` is not of that form.
        """
        return await self._describe(app_id, stop_failed=False)

    async def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """List the Volcano jobs (or JobSets) of one namespace (one request).

        Args:
            cfg: run options; their ``namespace`` picks the namespace (TorchX's
                ``list(cfg)``), else the kubeconfig context's; their ``job_api`` the
                kind (``volcano`` when unset).

        Raises:
            InvalidRunConfigException: ``job_api`` is neither ``volcano`` nor ``jobset``,
                or ``namespace`` is not a ``str``.
        """
        namespace = str_option(cfg or {}, "namespace") or self.api.default_namespace
        job_api = for_cfg(cfg or {})
        listed, _ = await self.api.list(job_api.plural, namespace)
        jobs = map(job_api.parse, listed)
        return [ListAppResponse(job_api.app_id(namespace, job.name), job.state) for job in jobs]

    # ------------------------------------------------------------------ wait

    async def _job(self, job_api: JobApi, namespace: str, name: str) -> Job | None:
        """The job, read now; ``None`` if there is no such job."""
        job = await self.api.get_job(namespace, name, job_api.plural)
        return None if job is None else job_api.parse(job)

    async def _listed_replicas(self, job_api: JobApi, namespace: str, job: Job) -> Replicas:
        """The job's replicas -> their pods, listed now."""
        listed, _ = await self.api.list("pods", namespace, job_api.pod_labels(job.name))
        return job_api.replicas(job, {pod.name: pod for pod in map(Pod.parse, listed)})

    async def _wait_until(
        self, app_id: str, done: Callable[[AppState], bool], timeout: float | None
    ) -> DescribeAppResponse | None:
        """Await ``done(state)`` on the shared jobs and pods watches (behind ``wait``).

        Every waiter of this scheduler shares one watch per kind and namespace (see
        :mod:`._informer`); the description is read fresh when the watch shows the change.

        The state is the job's phase, or ``FAILED`` when a pod's waiting reason ends the
        app (:func:`._state.failure`); an image pull timeout passing is no event, so
        its deadline is awaited too. The answer is :meth:`_describe`'s, stopping a failed job.
        The caches can be behind that fresh read (their watch has not delivered the change
        yet): when the fresh state is not one ``done`` accepts, the wait goes on until the
        caches change, so the answer always satisfies ``done``.
        """
        job_api, namespace, name = self._ref(app_id)
        wait = _Wait(job_api, name, done, self.jobs(job_api, namespace), self.pods(namespace))
        with anyio.fail_after(timeout):
            if await self._job(job_api, namespace, name) is None:
                return None
            while (outcome := await wait.change()) is not _Outcome.GONE:
                cached = wait.cached()
                if outcome is _Outcome.DEADLINE:
                    wait.deadline = None if cached is None else next_deadline(*cached, time.time())
                    continue
                response = await self._describe(app_id, stop_failed=True)
                if response is None or done(response.state):
                    return response
                wait.behind = cached
        return None

    async def _describe(self, app_id: str, stop_failed: bool) -> DescribeAppResponse | None:
        """Describe the app from a fresh read of its job and pods (two requests); with
        ``stop_failed``, when a pod's waiting reason ends it, first stop the job as its
        job API does (once: the reason's annotation marks it done).

        Read fresh, not from the watches' caches: they go stale (unsynced) as soon as
        the last waiter leaves them.
        """
        job_api, namespace, name = self._ref(app_id)
        job = await self._job(job_api, namespace, name)
        if job is None:
            return None
        replicas = await self._listed_replicas(job_api, namespace, job)
        now = time.time()
        failed = failure(job, replicas, now) if stop_failed else None
        if failed is not None and job.failed is None:
            await job_api.stop_failed(self.api, namespace, job, failed)
        return describe(app_id, job, replicas, now)

    # ------------------------------------------------------------------ cancel, delete

    async def _cancel_existing(self, app_id: str) -> None:
        """Stop the app as its job API does (behind ``cancel``).

        A Volcano job is aborted (a Volcano ``AbortJob`` command): Volcano deletes the
        pods and the job ends ``Aborted`` (``CANCELLED``), kept until ``delete``. A JobSet
        is deleted with its Jobs and pods (see :func:`._jobapi._delete_jobset` for why),
        so the app is then unknown.
        """
        job_api, namespace, name = self._ref(app_id)
        job = await self._job(job_api, namespace, name)
        if job is not None:
            await job_api.cancel(self.api, namespace, job)

    async def _remove(self, app_id: str) -> None:
        """Delete the app's job (or JobSet) and its pods (``delete``); idempotent."""
        job_api, namespace, name = self._ref(app_id)
        await self.api.delete_job(namespace, name, job_api.plural)

    # ------------------------------------------------------------------ logs

    async def _log_blocks(
        self, app_id: str, query: LogQuery, start: LogPosition
    ) -> AsyncIterator[LogBlock]:
        """Yield a replica's log lines a received chunk's at a time (see :mod:`._logs`;
        a block's position is the kubelet's time of the line before it and how many lines
        had that time, so a resume asks for the log from that time on).

        Then the logs of the pod's other containers (sidecars), as they are then, each
        line led by the container's name (:func:`._logs.other_containers`). Only the
        combined stream exists (the kubelet keeps one log per container). The replica's
        pod is found in a fresh list (a JobSet's by its labels and completion index: its
        name has a random suffix), or in the pods watch when following.

        Args:
            app_id: ``{namespace}:{job}`` or ``{namespace}:jobset:{name}``.
            query: the replica, filters and follow mode.
            start: 0 (the log's start), or a block's position.

        Raises:
            InvalidAppIdException: ``app_id`` is not of that form.
            UnknownAppException: there is no such job.
            ValueError: no such role or replica, a stream other than combined, or
                ``start`` is not a position.
        """
        job_api, namespace, name = self._ref(app_id)
        if query.streams not in (None, Stream.COMBINED):
            raise ValueError("the kubernetes scheduler has only the combined log stream")
        job = await self._job(job_api, namespace, name)
        if job is None:
            raise UnknownAppException(make_app_handle(self.backend, self.session_name, app_id))
        query.check_replica(app_id, {role.name: role.num_replicas for role in job.roles})
        replica = (query.role_name, query.k)
        own = job.containers[replica]
        in_other = start if isinstance(start, InContainer) else None

        async def listed_pod() -> Pod | None:
            return (await self._listed_replicas(job_api, namespace, job))[replica]

        listed: Pod | None = None
        if in_other is None:
            reader = LogReader(self.api, namespace, own, query, start)
            if query.should_tail:  # looked up in the pods watch's cache (replaced on a relist)
                pods = self.pods(namespace)

                def pod() -> Pod | None:
                    return job_api.replicas(job, pods.objects)[replica]

                jobs = self.jobs(job_api, namespace)
                source = follow(reader, jobs, pods, name, pod, listed_pod)
            else:
                listed = await listed_pod()
                if listed is None:
                    return
                source = reader.read(listed.name, follow=False)
            async with contextlib.aclosing(source) as blocks:
                async for block in blocks:
                    yield block
        if listed is None:  # after a follow: the pod as it is at the app's end
            listed = await listed_pod()
        if listed is not None:
            others = other_containers(self.api, namespace, listed, own, query, in_other)
            async with contextlib.aclosing(others) as blocks:
                async for block in blocks:
                    yield block


def create_scheduler(session_name: str, **kwargs: Any) -> KubernetesScheduler:
    """Create a :class:`KubernetesScheduler` (the ``kubernetes`` factory).

    Args:
        session_name: the runner session.
        **kwargs: ``kubeconfig`` (a file) and ``context``; other keys (the Runner passes
            every ``TORCHX_*`` environment variable) are ignored.
    """
    kubeconfig, context = kwargs.get("kubeconfig"), kwargs.get("context")
    return KubernetesScheduler(
        session_name,
        kubeconfig=None if kubeconfig is None else str(kubeconfig),
        context=None if context is None else str(context),
    )


class _Outcome(enum.Enum):
    """What one wait on the watches saw (:meth:`_Wait.change`)."""

    DONE = "done"  # the caches show a state ``done`` accepts: read it fresh
    GONE = "gone"  # the job left the cache it was in: deleted
    DEADLINE = "deadline"  # an image pull deadline appeared, moved or passed


@attrs.define
class _Wait:
    """One ``wait``'s view of its job in the shared watches, and what it learnt so far.

    Attributes:
        job_api: the job's job API.
        name: the job's name.
        done: whether an app state is the one awaited.
        jobs: the shared watch of the job API's jobs in the job's namespace.
        pods: the shared watch of the pods in that namespace.
        seen: the job was in the jobs cache once (its absence then means it was deleted;
            before, its ``ADDED`` may not have been read yet).
        deadline: the image pull deadline (epoch seconds) awaited, ``None``: none.
        behind: the cached job and replicas a fresh read found behind, not judged again
            until they change (``None``: none).
    """

    job_api: JobApi
    name: str
    done: Callable[[AppState], bool]
    jobs: Informer[Job]
    pods: Informer[Pod]
    seen: bool = False
    deadline: float | None = None
    behind: tuple[Job, Replicas] | None = None

    def cached(self) -> tuple[Job, Replicas] | None:
        """The job and its replicas in the caches (no pods before the pods watch is
        synced); ``None`` when the job is not in the jobs cache."""
        job = self.jobs.objects.get(self.name)
        if job is None:
            return None
        return job, self.job_api.replicas(job, self.pods.objects if self.pods.synced else {})

    def check(self) -> _Outcome | None:
        """What the caches show now; ``None``: nothing to act on."""
        cached = self.cached()
        if cached is None:  # not in the cache: deleted, or its ADDED not read yet
            return _Outcome.GONE if self.seen else None
        self.seen = True
        if cached == self.behind:
            return None
        job, replicas = cached
        now = time.time()
        if self.done(AppState.FAILED if failure(job, replicas, now) is not None else job.state):
            return _Outcome.DONE
        return _Outcome.DEADLINE if next_deadline(job, replicas, now) != self.deadline else None

    async def change(self) -> _Outcome:
        """Await the next outcome of either watch, or the deadline passing."""
        return await race(
            [
                functools.partial(self.jobs.wait_until, self.check),
                functools.partial(self.pods.wait_until, self.check),
                self._deadline_passed,
            ]
        )

    async def _deadline_passed(self) -> _Outcome:
        await anyio.sleep(
            math.inf if self.deadline is None else max(self.deadline - time.time(), 0)
        )
        return _Outcome.DEADLINE
