"""The ``kubernetes`` scheduler class: Volcano jobs submitted, watched and tailed over lightkube.

TorchX's ``torchx.schedulers.kubernetes_scheduler`` is the reference: same manifest,
run options and app ids (``{namespace}:{job}``). It differs on purpose (see
``docs/kubernetes.md``):

- ``wait``/``wait_for_state_change`` await the API's watch (list, then watch from the
  list's ``resourceVersion``; relist on ``410 Gone``; a dropped connection is reopened),
  one watch per resource kind and namespace for every waiter of the scheduler;
- ``cancel`` aborts the job (a Volcano ``AbortJob`` command) and keeps it, ending
  ``CANCELLED``; :meth:`KubernetesScheduler.delete` removes it;
- ``describe`` reports each replica from its pod (state, exit code, hostname, why it
  waits) and ``None`` for an unknown app; a pod that can never start (or fails to pull
  its image past ``image_pull_timeout``) ends the app ``FAILED`` with the reason, and
  ``wait`` then aborts the job (see ``_state``);
- ``log_iter`` supports ``since`` (``sinceTime``), ``until``, and follows across dropped
  connections and Volcano's retries without duplicating or losing lines;
- local images are renamed to ``image_repo`` but not pushed (no Docker client here).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio

from asynctorchx.errors import UnknownAppException
from asynctorchx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, Stream
from asynctorchx.schedulers.kubernetes._apiserver import ApiServer
from asynctorchx.schedulers.kubernetes._informer import Informer
from asynctorchx.schedulers.kubernetes._logs import log_blocks
from asynctorchx.schedulers.kubernetes._request import (
    LABEL_ORGANIZATION,
    LABEL_REPLICA_ID,
    LABEL_ROLE_NAME,
    LABEL_UNIQUE_NAME,
    ORGANIZATION,
    KubernetesJob,
    build_job,
    kubernetes_runopts,
    parse_app_id,
)
from asynctorchx.schedulers.kubernetes._state import (
    ANNOTATION_FAILED,
    describe_job,
    job_failure,
    job_state,
    pull_deadline,
    pull_timeout,
)
from asynctorchx.schedulers.toolkit import LogBlock, LogQuery, lines_of, race
from asynctorchx.specs.api import (
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    is_terminal,
    make_app_handle,
    runopts,
)

#: The labels of every pod of a TorchX (or asynctorchx) job: the pods watch selects them.
POD_LABELS = {LABEL_ORGANIZATION: ORGANIZATION}


class KubernetesScheduler(Scheduler[KubernetesJob]):
    """The ``kubernetes`` scheduler: one Volcano ``Job`` per app, one pod per replica.

    Args:
        session_name: the runner session (it appears in app handles).
        kubeconfig: the kubeconfig file; ``None``: in-cluster, ``KUBECONFIG``, or
            ``~/.kube/config`` (lightkube's search).
        context: the kubeconfig context; ``None``: its current context.

    The connection is opened on first use; ``close()`` closes it and leaves the jobs
    running (the cluster keeps them).

    Raises (from every call that talks to the cluster):
        KubernetesConfigError: no kubeconfig, or it lacks the context.
        KubernetesUnreachableError: the API server does not answer.
        KubernetesApiError: the server refused a request (its message is kept).
        VolcanoNotInstalledError: the cluster has no Volcano ``Job`` resource.
        SchedulerClosedError: the scheduler was closed.
    """

    supported_log_streams = frozenset({Stream.COMBINED})  # one log per container

    def __init__(
        self, session_name: str, kubeconfig: str | None = None, context: str | None = None
    ) -> None:
        super().__init__("kubernetes", session_name)
        self.api = ApiServer(kubeconfig, context)
        self._informers: dict[tuple[str, str], Informer] = {}

    async def close(self) -> None:
        """Close the connection; idempotent, never raises. Jobs keep running."""
        await self.api.close()

    def informer(self, plural: str, namespace: str) -> Informer:
        """The shared watch of ``jobs`` or ``pods`` in ``namespace`` (created on first use).

        Args:
            plural: ``jobs`` or ``pods``.
            namespace: the namespace.
        """
        key = (plural, namespace)
        if key not in self._informers:
            labels = POD_LABELS if plural == "pods" else None
            self._informers[key] = Informer(self.api, plural, namespace, labels)
        return self._informers[key]

    # ------------------------------------------------------------------ options, dry run

    @classmethod
    def _run_opts(cls) -> runopts:
        """TorchX's run options: ``namespace``, ``queue``, ``image_repo``,
        ``service_account``, ``priority_class`` (see ``_request.kubernetes_runopts``)."""
        return kubernetes_runopts()

    def _submit_dryrun(
        self, app: AppDef, cfg: Mapping[str, CfgVal]
    ) -> AppDryRunInfo[KubernetesJob]:
        return AppDryRunInfo(build_job(app, cfg), str)

    # ------------------------------------------------------------------ submit

    async def schedule(self, dryrun_info: AppDryRunInfo[KubernetesJob]) -> str:
        """Create the Volcano job; return the app id ``{namespace}:{job name}``.

        Args:
            dryrun_info: the request of :meth:`submit_dryrun`.

        Raises:
            KubernetesApiError: the server (or Volcano's admission webhook) refused the
                manifest; the message is the server's.
            VolcanoNotInstalledError: the cluster has no Volcano.
        """
        job = dryrun_info.request
        created = await self.api.create_job(job.namespace, job.resource)
        return f"{job.namespace}:{created['metadata']['name']}"

    # ------------------------------------------------------------------ describe, list

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        """Describe the app from its job and pods (two requests); ``None`` if no such job.

        The state is the job's Volcano phase (TorchX's table); each replica's state,
        exit code and hostname (``{pod}.{job}``, its DNS name) come from its pod.

        Args:
            app_id: ``{namespace}:{job}``.

        Raises:
            InvalidAppIdException: ``app_id`` is not of that form.
        """
        namespace, name = parse_app_id(app_id)
        job = await self.api.get_job(namespace, name)
        if job is None:
            return None
        pods, _ = await self.api.list_pods(namespace, {"volcano.sh/job-name": name})
        return describe_job(
            app_id, job, {pod["metadata"]["name"]: pod for pod in pods}, time.time()
        )

    async def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """List the Volcano jobs of one namespace (one request).

        Args:
            cfg: run options; their ``namespace`` picks the namespace (TorchX's
                ``list(cfg)``), else the kubeconfig context's.
        """
        namespace = self.api.default_namespace
        if cfg and isinstance(cfg.get("namespace"), str) and cfg["namespace"]:
            namespace = str(cfg["namespace"])
        jobs, _ = await self.api.list_jobs(namespace)
        return [
            ListAppResponse(app_id=f"{namespace}:{job['metadata']['name']}", state=job_state(job))
            for job in jobs
        ]

    # ------------------------------------------------------------------ wait

    def _job_pods(self, pods: Informer, name: str) -> dict[str, dict[str, Any]]:
        """The job's pods in the pods watch's cache (none before it is synced)."""
        if not pods.synced:
            return {}
        return {
            key: pod
            for key, pod in pods.objects.items()
            if (pod["metadata"].get("labels") or {}).get(LABEL_UNIQUE_NAME) == name
        }

    async def _await_job(
        self, app_id: str, done: Callable[[AppState], bool], timeout: float | None
    ) -> DescribeAppResponse | None:
        """Await ``done(state)`` on the shared jobs and pods watches.

        The state is the job's phase, or ``FAILED`` when a pod's waiting reason ends the
        app (:func:`._state.job_failure`); an image pull timeout passing is no event, so
        its deadline is awaited too. When a pod's reason ended the app, the job is
        annotated with it and aborted, so nothing of a failed app stays pending.
        """
        namespace, name = parse_app_id(app_id)
        jobs, pods = self.informer("jobs", namespace), self.informer("pods", namespace)
        seen: set[str] = set()
        with anyio.fail_after(timeout):
            if await self.api.get_job(namespace, name) is None:
                return None
            planned: float | None = None
            while (outcome := await self._change(jobs, pods, name, done, seen, planned)) == "plan":
                job = jobs.objects.get(name)
                planned = None if job is None else _next_deadline(job, self._job_pods(pods, name))
            if outcome == "gone":
                return None
            cached, job_pods = jobs.objects.get(name), self._job_pods(pods, name)
            if cached is not None and job_failure(cached, job_pods, time.time()) is not None:
                await self._abort_failed(namespace, name, job_pods)
            return await self.describe(app_id)

    async def _change(
        self,
        jobs: Informer,
        pods: Informer,
        name: str,
        done: Callable[[AppState], bool],
        seen: set[str],
        planned: float | None,
    ) -> str:
        """One wait on both watches: ``done``, ``gone`` (deleted), or ``plan`` (a new pull
        deadline, or the planned one passed)."""

        def check() -> str | None:
            job = jobs.objects.get(name)
            if job is None:  # not in the cache: deleted, or its ADDED not read yet
                return None if name not in seen else "gone"
            seen.add(name)
            job_pods = self._job_pods(pods, name)
            failed = job_failure(job, job_pods, time.time())
            if done(AppState.FAILED if failed is not None else job_state(job)):
                return "done"
            return "plan" if _next_deadline(job, job_pods) != planned else None

        outcome: list[str] = []

        async def until(informer: Informer) -> None:
            outcome.append(await informer.wait_until(check))

        async def deadline() -> None:
            if planned is None:
                await anyio.sleep_forever()
            await anyio.sleep(max(float(planned or 0) - time.time(), 0))
            outcome.append("plan")

        await race([functools.partial(until, jobs), functools.partial(until, pods), deadline])
        return outcome[0]

    async def _abort_failed(
        self, namespace: str, name: str, pods: Mapping[str, Mapping[str, Any]]
    ) -> None:
        """Annotate and abort a job that a pod's waiting reason ended (once; read fresh,
        since the cache said so)."""
        job = await self.api.get_job(namespace, name)
        if job is None or ANNOTATION_FAILED in (job["metadata"].get("annotations") or {}):
            return
        failed = job_failure(job, pods, time.time())
        if failed is not None:
            await self.api.annotate_job(namespace, name, {ANNOTATION_FAILED: failed})
            await self.api.abort_job(namespace, job)

    async def wait(self, app_id: str, timeout: float | None = None) -> DescribeAppResponse | None:
        """Await the app's terminal state on the jobs watch; return its description.

        Every waiter of this scheduler shares one watch of the namespace's jobs (see
        :mod:`._informer`); the description is read fresh when the watch shows the end.

        Args:
            app_id: ``{namespace}:{job}``.
            timeout: seconds to wait at most (``None``: no limit).

        Returns:
            the description, or ``None`` for an unknown (or deleted) app.

        Raises:
            InvalidAppIdException: ``app_id`` is not of that form.
            TimeoutError: ``timeout`` seconds passed first.
        """
        return await self._await_job(app_id, is_terminal, timeout)

    async def wait_for_state_change(
        self, app_id: str, state: AppState, timeout: float | None = None
    ) -> DescribeAppResponse | None:
        """Await the app's state differing from ``state`` (on the shared jobs watch).

        Args:
            app_id: ``{namespace}:{job}``.
            state: the state to wait out.
            timeout: seconds to wait at most (``None``: no limit).

        Returns:
            the description, or ``None`` for an unknown (or deleted) app.

        Raises:
            InvalidAppIdException: ``app_id`` is not of that form.
            TimeoutError: ``timeout`` seconds passed first.
        """
        return await self._await_job(
            app_id, lambda current: current != state or is_terminal(current), timeout
        )

    # ------------------------------------------------------------------ cancel, delete

    async def cancel(self, app_id: str) -> None:
        """Abort the app's job (a Volcano ``AbortJob`` command); the job is kept.

        Volcano deletes the pods and the job ends ``Aborted`` (``CANCELLED``). A no-op
        for an unknown or finished app. Does not wait: ``await wait(app_id)``.

        Args:
            app_id: ``{namespace}:{job}``.

        Raises:
            InvalidAppIdException: ``app_id`` is not of that form.
        """
        namespace, name = parse_app_id(app_id)
        job = await self.api.get_job(namespace, name)
        if job is not None and not is_terminal(job_state(job)):
            await self.api.abort_job(namespace, job)

    async def _cancel_existing(self, app_id: str) -> None:
        await self.cancel(app_id)

    async def delete(self, app_id: str) -> None:
        """Delete the app's job and its pods (running ones are killed); idempotent.

        Args:
            app_id: ``{namespace}:{job}``.

        Raises:
            InvalidAppIdException: ``app_id`` is not of that form.
        """
        namespace, name = parse_app_id(app_id)
        await self.api.delete_job(namespace, name)

    # ------------------------------------------------------------------ logs

    def _log_iter(self, app_id: str, query: LogQuery) -> AsyncIterator[str]:
        """The lines of :meth:`_log_blocks` from the log's start."""
        return lines_of(self._log_blocks(app_id, query, 0))

    async def _log_blocks(
        self, app_id: str, query: LogQuery, start: int
    ) -> AsyncIterator[LogBlock]:
        """Yield a replica's log lines a received chunk's at a time (see :mod:`._logs`;
        a block's position is the number of lines before it).

        Only the combined stream exists (the kubelet keeps one log per container).

        Args:
            app_id: ``{namespace}:{job}``.
            query: the replica, filters and follow mode.
            start: the lines to skip (0, or a block's position).

        Raises:
            InvalidAppIdException: ``app_id`` is not of that form.
            UnknownAppException: there is no such job.
            ValueError: no such role or replica, or a stream other than combined.
        """
        namespace, name = parse_app_id(app_id)
        if query.streams not in (None, Stream.COMBINED):
            raise ValueError("the kubernetes scheduler has only the combined log stream")
        job = await self.api.get_job(namespace, name)
        if job is None:
            raise UnknownAppException(make_app_handle(self.backend, self.session_name, app_id))
        replicas: dict[tuple[str, int], str] = {}
        for task in job["spec"]["tasks"]:
            labels = task["template"]["metadata"]["labels"]
            replicas[(labels[LABEL_ROLE_NAME], int(labels[LABEL_REPLICA_ID]))] = task["name"]
        counts: dict[str, int] = {}
        for role, _ in replicas:
            counts[role] = counts.get(role, 0) + 1
        query.check_replica(app_id, counts)
        task_name = replicas[(query.role_name, query.k)]
        blocks = log_blocks(
            self.api,
            self.informer("jobs", namespace),
            self.informer("pods", namespace),
            name,
            f"{name}-{task_name}-0",
            task_name,
            query,
            start,
        )
        async with contextlib.aclosing(blocks) as produced:
            async for block in produced:
                yield block


def _next_deadline(job: Mapping[str, Any], pods: Mapping[str, Mapping[str, Any]]) -> float | None:
    """The earliest future image pull deadline of the job's pods, or ``None``."""
    now = time.time()
    deadlines = [pull_deadline(pod, pull_timeout(job)) for pod in pods.values()]
    future = [deadline for deadline in deadlines if deadline is not None and deadline > now]
    return min(future) if future else None


def create_scheduler(session_name: str, **kwargs: Any) -> KubernetesScheduler:
    """Create a :class:`KubernetesScheduler` (the ``kubernetes`` factory).

    Args:
        session_name: the runner session.
        **kwargs: ``kubeconfig`` (a file) and ``context``; other keys (the Runner passes
            every ``TORCHX_*`` environment variable) are ignored.
    """
    kubeconfig = kwargs.get("kubeconfig")
    context = kwargs.get("context")
    return KubernetesScheduler(
        session_name,
        kubeconfig=None if kubeconfig is None else str(kubeconfig),
        context=None if context is None else str(context),
    )
