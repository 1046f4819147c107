"""The ``kubernetes`` scheduler: Volcano jobs (or JobSets) submitted, watched and tailed, as
TorchX's ``torchx.schedulers.kubernetes_scheduler`` (``docs/kubernetes.md`` says more)."""

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
from asynctorchx.schedulers.toolkit import (
    TRIAL_LABEL,
    InContainer,
    LogBlock,
    LogPosition,
    LogQuery,
    race,
)
from asynctorchx.specs.api import (
    AppDef,
    AppDryRunInfo,
    CfgVal,
    Role,
    make_app_handle,
)
from asynctorchx.workspace.docker_workspace import DockerEngine, build_workspace

POD_LABELS = {LABEL_ORGANIZATION: ORGANIZATION}


class KubernetesScheduler(Scheduler[KubernetesJob]):
    """The ``kubernetes`` scheduler: one Volcano ``Job`` (or, with ``job_api=jobset``, a
    ``JobSet``) per app, one pod per replica; app ids ``{namespace}:{job}`` (TorchX's) or
    ``{namespace}:jobset:{name}``.

    ``wait`` awaits one shared list-then-watch per kind and namespace; ``cancel`` aborts a
    Volcano job (kept, ``CANCELLED``) or deletes a JobSet; a pod that can never start (or
    fails to pull its image past ``image_pull_timeout``) ends the app ``FAILED``; logs
    resume across dropped connections and retries without a lost or repeated line.

    Args:
        session_name: the runner session (it appears in app handles).
        kubeconfig: the kubeconfig file; ``None``: in-cluster, ``KUBECONFIG``, or
            ``~/.kube/config`` (lightkube's search).
        context: the kubeconfig context; ``None``: its current context.

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
        self._engine = DockerEngine(None, session_name, "kubernetes")
        self._jobs: dict[tuple[str, str], Informer[Job]] = {}
        self._pods: dict[str, Informer[Pod]] = {}

    async def close(self) -> None:
        """Close the connections; idempotent, never raises. Jobs keep running."""
        await self.api.close()
        await self._engine.close()

    def jobs(self, job_api: JobApi, namespace: str) -> Informer[Job]:
        """The shared watch of the job API's jobs in ``namespace``."""
        key = (job_api.plural, namespace)
        if key not in self._jobs:
            self._jobs[key] = Informer(self.api, job_api.plural, namespace, job_api.parse)
        return self._jobs[key]

    def pods(self, namespace: str) -> Informer[Pod]:
        """The shared watch of TorchX's pods in ``namespace``."""
        if namespace not in self._pods:
            self._pods[namespace] = Informer(self.api, "pods", namespace, Pod.parse, POD_LABELS)
        return self._pods[namespace]

    def _submit_dryrun(
        self, app: AppDef, cfg: Mapping[str, CfgVal]
    ) -> AppDryRunInfo[KubernetesJob]:
        return AppDryRunInfo(for_cfg(cfg).build(app, cfg), str)

    async def build_workspace_and_update_role(
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Build ``workspace`` into an image on the Docker engine (``local_docker``'s build) and
        set ``role.image`` to its id, which the dry run renames ``<image_repo>:<hash>`` and
        :meth:`schedule` pushes (TorchX's ``DockerWorkspaceMixin``).

        Raises:
            WorkspaceBuildError: the build failed; the message holds the build log.
            NotADirectoryError: ``workspace`` is not a directory.
            SchedulerUnavailableError: no Docker engine answers (or under trio).
        """
        await build_workspace(self._engine, role, workspace, {})

    async def schedule(self, dryrun_info: AppDryRunInfo[KubernetesJob]) -> str:
        """Create the job; return the app id. With ``validate_spec`` it is first sent as a
        dry run; local images the dry run renamed are pushed to ``image_repo`` before.

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

    def _mark(self, dryrun_info: AppDryRunInfo[KubernetesJob], mark: str) -> None:
        """Label the job with ``mark`` (:data:`TRIAL_LABEL`)."""
        metadata = dryrun_info.request.resource.setdefault("metadata", {})
        metadata.setdefault("labels", {})[TRIAL_LABEL] = mark

    async def _find_marked(self, dryrun_info: AppDryRunInfo[KubernetesJob], mark: str) -> list[str]:
        """The jobs of the request's namespace labelled ``mark`` (one list request)."""
        job, job_api = dryrun_info.request, for_name(dryrun_info.request.job_api)
        listed, _ = await self.api.list(job_api.plural, job.namespace, {TRIAL_LABEL: mark})
        return [job_api.app_id(job.namespace, job_api.parse(found).name) for found in listed]

    def _ref(self, app_id: str) -> tuple[JobApi, str, str]:
        namespace, api, name = parse_app_ref(app_id)
        return for_name(api), namespace, name

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        """Describe the app from its job and pods (two requests); ``None`` if no such job.
        Raises ``InvalidAppIdException`` for an id of neither form."""
        return await self._describe(app_id, stop_failed=False)

    async def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """List the Volcano jobs (or JobSets) of one namespace (one request).

        Args:
            cfg: run options: ``namespace`` (else the kubeconfig context's) and ``job_api``.

        Raises:
            InvalidRunConfigException: ``job_api`` or ``namespace`` is not valid.
        """
        namespace = str_option(cfg or {}, "namespace") or self.api.default_namespace
        job_api = for_cfg(cfg or {})
        listed, _ = await self.api.list(job_api.plural, namespace)
        return [
            ListAppResponse(
                job_api.app_id(namespace, job.name),
                job.state,
                name=job.app_name,
                submitted=job.created,
                ended=job.ended,
            )
            for job in map(job_api.parse, listed)
        ]

    async def _job(self, job_api: JobApi, namespace: str, name: str) -> Job | None:
        job = await self.api.get_job(namespace, name, job_api.plural)
        return None if job is None else job_api.parse(job)

    async def _listed_replicas(self, job_api: JobApi, namespace: str, job: Job) -> Replicas:
        listed, _ = await self.api.list("pods", namespace, {job_api.pod_label: job.name})
        return job_api.replicas(job, {pod.name: pod for pod in map(Pod.parse, listed)})

    async def _wait_until(
        self, app_id: str, done: Callable[[DescribeAppResponse], bool], timeout: float | None
    ) -> DescribeAppResponse | None:
        """Await ``done(description)`` on the shared watches. A change they show is read fresh; when
        they are behind that read (its state not ``done``), the wait goes on until they
        change again. An image pull deadline is no event: it is slept on too."""
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
                if response is None or done(response):
                    return response
                wait.behind = cached
        return None

    async def _describe(self, app_id: str, stop_failed: bool) -> DescribeAppResponse | None:
        """Describe the app from a fresh read (the watches' caches go stale when their last
        waiter leaves); ``stop_failed``: first stop a job a pod's reason ended, once."""
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

    async def _cancel_existing(self, app_id: str) -> None:
        job_api, namespace, name = self._ref(app_id)
        job = await self._job(job_api, namespace, name)
        if job is not None:
            await job_api.cancel(self.api, namespace, job)

    async def _remove(self, app_id: str) -> None:
        job_api, namespace, name = self._ref(app_id)
        await self.api.delete_job(namespace, name, job_api.plural)

    async def _log_blocks(
        self, app_id: str, query: LogQuery, start: LogPosition
    ) -> AsyncIterator[LogBlock]:
        """The replica's log (:mod:`._logs`), then its pod's other containers' as they are
        then (one combined stream per container, as the kubelet keeps it)."""
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
            if query.should_tail:
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
        **kwargs: ``kubeconfig`` (a file) and ``context``; other keys are ignored.
    """
    kubeconfig, context = kwargs.get("kubeconfig"), kwargs.get("context")
    return KubernetesScheduler(
        session_name,
        kubeconfig=None if kubeconfig is None else str(kubeconfig),
        context=None if context is None else str(context),
    )


class _Outcome(enum.Enum):
    DONE = "done"  # the caches show a state ``done`` accepts: read it fresh
    GONE = "gone"  # the job left the cache it was in: deleted
    DEADLINE = "deadline"  # an image pull deadline appeared, moved or passed


@attrs.define
class _Wait:
    """One ``wait``'s view of its job in the shared watches. ``seen``: the job was cached
    once (its absence then means deleted); ``behind``: the cached state a fresh read found
    behind, not judged again until it changes."""

    job_api: JobApi
    name: str
    done: Callable[[DescribeAppResponse], bool]
    jobs: Informer[Job]
    pods: Informer[Pod]
    seen: bool = False
    deadline: float | None = None
    behind: tuple[Job, Replicas] | None = None

    def cached(self) -> tuple[Job, Replicas] | None:
        job = self.jobs.objects.get(self.name)
        if job is None:
            return None
        return job, self.job_api.replicas(job, self.pods.objects if self.pods.synced else {})

    def check(self) -> _Outcome | None:
        cached = self.cached()
        if cached is None:  # not in the cache: deleted, or its ADDED not read yet
            return _Outcome.GONE if self.seen else None
        self.seen = True
        if cached == self.behind:
            return None
        job, replicas = cached
        now = time.time()
        if self.done(describe(self.name, job, replicas, now)):
            return _Outcome.DONE
        return _Outcome.DEADLINE if next_deadline(job, replicas, now) != self.deadline else None

    async def change(self) -> _Outcome:
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
