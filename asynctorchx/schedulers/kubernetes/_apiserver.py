"""The connection to the Kubernetes API server, the one module that imports lightkube;
every third-party error is mapped here to :mod:`asynctorchx.errors`.

Objects go in and out as JSON dicts. The two streams lightkube cannot ask for as needed (a
watch with ``allowWatchBookmarks``, a log with ``sinceTime``) go over the ``httpx2`` client
lightkube's ``client_adapter`` builds from the same kubeconfig (server, TLS, credentials).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, NamedTuple, TypeVar

import anyio
import httpx2
from lightkube import AsyncClient, ConfigError, KubeConfig
from lightkube.config import client_adapter
from lightkube.config.client_adapter import ConnectionParams
from lightkube.config.kubeconfig import SingleConfig
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

from asynctorchx.errors import SchedulerClosedError
from asynctorchx.schedulers.kubernetes._errors import (
    InvalidJobSpecError,
    JobSetNotInstalledError,
    KubernetesApiError,
    KubernetesConfigError,
    KubernetesUnreachableError,
    VolcanoNotInstalledError,
)
from asynctorchx.schedulers.kubernetes._jobset import JOBSET_GROUP, JOBSET_VERSION
from asynctorchx.schedulers.kubernetes._request import VOLCANO_GROUP, VOLCANO_VERSION

VolcanoJob = create_namespaced_resource(VOLCANO_GROUP, VOLCANO_VERSION, "Job", "jobs")
JobSetResource = create_namespaced_resource(JOBSET_GROUP, JOBSET_VERSION, "JobSet", "jobsets")


class JobKind(NamedTuple):
    """A job kind: its API group and version, lightkube resource, error when missing."""

    group: str
    version: str
    resource: Any
    missing: type[Exception]

    @property
    def path(self) -> str:
        return f"/apis/{self.group}/{self.version}"


#: The job kinds by plural.
JOB_KINDS: dict[str, JobKind] = {
    "jobs": JobKind(VOLCANO_GROUP, VOLCANO_VERSION, VolcanoJob, VolcanoNotInstalledError),
    "jobsets": JobKind(JOBSET_GROUP, JOBSET_VERSION, JobSetResource, JobSetNotInstalledError),
}
VolcanoCommand = create_namespaced_resource("bus.volcano.sh", "v1alpha1", "Command", "commands")
KUEUE_GROUP = "kueue.x-k8s.io"
KueueWorkload = create_namespaced_resource(KUEUE_GROUP, "v1beta1", "Workload", "workloads")
T = TypeVar("T")
#: Seconds a single request may take (connect, read, write) before it counts as failed.
REQUEST_TIMEOUT = 30.0


class StreamBroken(Exception):
    """A watch or log stream's connection broke (the caller reconnects)."""


BROKEN = (httpx2.RemoteProtocolError, httpx2.ReadError, httpx2.ReadTimeout)


async def _read(stream: AsyncIterator[T]) -> AsyncIterator[T]:
    try:
        async for item in stream:
            yield item
    except BROKEN as error:
        raise StreamBroken(str(error)) from None


def _status_error(response: httpx2.Response, request: str) -> KubernetesApiError:
    """The server's refusal: its ``Status`` body's reason and message (else the body)."""
    try:
        body = response.json()
    except ValueError:
        body = {"message": response.text}
    if not isinstance(body, dict):
        body = {"message": str(body)}
    details = body.get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    return KubernetesApiError(
        response.status_code,
        str(body.get("reason", "")),
        str(body.get("message", "")),
        request,
        tuple(
            (str(cause.get("field", "")), str(cause.get("message", "")))
            for cause in (causes if isinstance(causes, list) else [])
            if isinstance(cause, dict)
        ),
    )


class ApiServer:
    """One scheduler's connection to the API server, opened on first use (``kubeconfig``
    ``None``: lightkube's search; ``context`` ``None``: the current one).

    Raises (from every call):
        KubernetesConfigError: no kubeconfig, or it lacks the context.
        KubernetesUnreachableError: the server does not answer.
        KubernetesApiError: the server refused the request.
        SchedulerClosedError: :meth:`close` was called.
    """

    def __init__(self, kubeconfig: str | None = None, context: str | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.context = context
        self._config: SingleConfig | None = None
        self._client: AsyncClient | None = None
        self._http: httpx2.AsyncClient | None = None
        self._closed = False
        self._checked: set[str] = set()

    def config(self) -> SingleConfig:
        if self._config is None:
            try:
                if self.kubeconfig is not None:
                    loaded = KubeConfig.from_file(self.kubeconfig)
                else:
                    loaded = KubeConfig.from_env()
                config = loaded.get(self.context)
            except (ConfigError, OSError, ValueError, KeyError) as error:
                raise KubernetesConfigError(str(error) or type(error).__name__) from None
            if config is None:  # pragma: no cover
                raise KubernetesConfigError("the kubeconfig has no context")
            self._config = config
        return self._config

    @property
    def server(self) -> str:
        return str(self._config.cluster.server) if self._config is not None else "?"

    @property
    def default_namespace(self) -> str:
        return str(self.config().namespace or "default")

    def _clients(self) -> tuple[AsyncClient, httpx2.AsyncClient]:
        if self._closed:
            raise SchedulerClosedError("the kubernetes scheduler was closed")
        if self._client is None or self._http is None:
            config = self.config()
            timeout = httpx2.Timeout(REQUEST_TIMEOUT)
            try:
                self._client = AsyncClient(config=config, timeout=timeout)
                params = ConnectionParams(timeout=httpx2.Timeout(REQUEST_TIMEOUT, read=None))
                self._http = client_adapter.AsyncClient(config, params)
            except (ConfigError, OSError, ValueError, AssertionError) as error:
                raise KubernetesConfigError(str(error) or type(error).__name__) from None
        return self._client, self._http

    async def close(self) -> None:
        """Close both clients; idempotent, never raises."""
        self._closed = True
        client, http = self._client, self._http
        self._client = self._http = None
        with anyio.CancelScope(shield=True):
            for closing in (client, http):
                if closing is not None:
                    with contextlib.suppress(Exception):
                        await closing.aclose()

    @contextlib.contextmanager
    def _errors(self, request: str, missing_ok: bool = False) -> Any:
        """Map one request's errors to ours (``missing_ok``: a ``404`` ends the block quietly)."""
        try:
            yield
        except ApiError as error:
            if missing_ok and error.response.status_code == 404:
                return
            raise _status_error(error.response, request) from None
        except httpx2.TransportError as error:
            raise KubernetesUnreachableError(
                self.server, str(error) or type(error).__name__
            ) from None

    async def _job_kind(self, plural: str) -> tuple[AsyncClient, Any, str]:
        """The client, resource and name of a job kind, its API group checked once (raises
        ``VolcanoNotInstalledError`` or ``JobSetNotInstalledError`` when missing)."""
        kind = JOB_KINDS[plural]
        client, http = self._clients()
        if plural not in self._checked:
            with self._errors(f"GET {kind.path}"):
                response = await http.get(kind.path)
            if response.status_code == 404:
                raise kind.missing(self.server)
            if response.is_error:
                raise _status_error(response, f"GET {kind.path}")
            self._checked.add(plural)
        return client, kind.resource, f"{kind.group} {plural}"

    async def create_job(
        self, namespace: str, manifest: dict[str, Any], plural: str = "jobs", dry_run: bool = False
    ) -> dict[str, Any]:
        """Create the job (``dry_run``: only validate and admit it, ``dryRun=All``); return it
        as stored. A dry run's refusal (``400``, ``422``) is ``InvalidJobSpecError``."""
        client, resource, kind = await self._job_kind(plural)
        request = f"POST {kind} in {namespace}" + (" (dry run)" if dry_run else "")
        body = {**manifest, "metadata": {**manifest["metadata"], "namespace": namespace}}
        try:
            with self._errors(request):
                created = await client.create(resource.from_dict(body), dry_run=dry_run)
        except KubernetesApiError as error:
            if dry_run and error.status in (400, 422):
                raise InvalidJobSpecError(
                    error.status, error.reason, error.message, error.request, error.causes
                ) from None
            raise
        return dict(created)

    async def get_job(
        self, namespace: str, name: str, plural: str = "jobs"
    ) -> dict[str, Any] | None:
        """The job, or ``None`` if there is no such object."""
        client, resource, kind = await self._job_kind(plural)
        with self._errors(f"GET {kind} {namespace}/{name}", missing_ok=True):
            return dict(await client.get(resource, name, namespace=namespace))
        return None

    async def delete_job(self, namespace: str, name: str, plural: str = "jobs") -> bool:
        """Delete the job (its pods go with it); ``False`` if it did not exist."""
        client, resource, kind = await self._job_kind(plural)
        with self._errors(f"DELETE {kind} {namespace}/{name}", missing_ok=True):
            await client.delete(resource, name, namespace=namespace)
            return True
        return False

    async def patch_job(
        self, namespace: str, name: str, patch: dict[str, Any], plural: str = "jobs"
    ) -> None:
        """Merge ``patch`` into the job (a JSON merge patch, RFC 7386)."""
        client, resource, kind = await self._job_kind(plural)
        with self._errors(f"PATCH {kind} {namespace}/{name}"):
            await client.patch(
                resource, name, patch, namespace=namespace, patch_type=PatchType.MERGE
            )

    async def deactivate_workloads(self, namespace: str, owner_uid: str) -> None:
        """Deactivate the job's Kueue workloads (``spec.active: false``): Kueue evicts them
        and stops counting their quota; a cluster without Kueue has none."""
        client, _ = self._clients()
        labels: dict[str, Any] = {"kueue.x-k8s.io/job-uid": owner_uid}
        names: list[str] = []
        with self._errors(f"GET {KUEUE_GROUP} workloads in {namespace}", missing_ok=True):
            listed: Any = client.list(KueueWorkload, namespace=namespace, labels=labels)
            names = [item.metadata.name async for item in listed]
        for name in names:
            with self._errors(f"PATCH {KUEUE_GROUP} workloads {namespace}/{name}", missing_ok=True):
                await client.patch(
                    KueueWorkload,
                    name,
                    {"spec": {"active": False}},
                    namespace=namespace,
                    patch_type=PatchType.MERGE,
                )

    async def abort_job(self, namespace: str, name: str, uid: str) -> None:
        """Abort the job with a Volcano ``AbortJob`` command (``vcctl job suspend``'s): its pods
        are killed, it ends ``Aborted`` and stays until deleted."""
        client, _ = self._clients()
        owner = {
            "apiVersion": f"{VOLCANO_GROUP}/{VOLCANO_VERSION}",
            "kind": "Job",
            "name": name,
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
        command = {
            "apiVersion": "bus.volcano.sh/v1alpha1",
            "kind": "Command",
            "metadata": {
                "generateName": f"{name}-abortjob-",
                "namespace": namespace,
                "ownerReferences": [owner],
            },
            "action": "AbortJob",
            "target": owner,
        }
        with self._errors(f"POST bus.volcano.sh commands in {namespace}"):
            await client.create(VolcanoCommand.from_dict(command))

    async def list(
        self, plural: str, namespace: str, labels: Mapping[str, str] | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """The namespace's ``jobs``, ``jobsets`` or ``pods`` with ``labels``, and the list's
        ``resourceVersion``."""
        if plural == "pods":
            client, resource, kind = self._clients()[0], Pod, "pods"
        else:
            client, resource, kind = await self._job_kind(plural)
        with self._errors(f"GET {kind} in {namespace}"):
            listed = client.list(resource, namespace=namespace, labels=dict(labels or {}))
            return [item.to_dict() async for item in listed], listed.resourceVersion

    @contextlib.asynccontextmanager
    async def _stream(self, path: str, params: dict[str, str]) -> AsyncIterator[httpx2.Response]:
        _, http = self._clients()
        try:
            async with http.stream("GET", path, params=params) as response:
                if response.is_error:
                    await response.aread()
                    raise _status_error(response, f"GET {path}")
                yield response
        except BROKEN as error:
            raise StreamBroken(str(error)) from None
        except httpx2.TransportError as error:
            raise KubernetesUnreachableError(
                self.server, str(error) or type(error).__name__
            ) from None

    @contextlib.asynccontextmanager
    async def watch(
        self,
        plural: str,
        namespace: str,
        resource_version: str,
        labels: dict[str, str] | None = None,
    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        """Yield the events (``{"type", "object"}``, bookmarks asked for) of a watch from
        ``resource_version``; a broken connection is :class:`StreamBroken`."""
        root = JOB_KINDS[plural].path if plural in JOB_KINDS else "/api/v1"
        path = f"{root}/namespaces/{namespace}/{plural}"
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
        }
        if labels:
            params["labelSelector"] = ",".join(f"{key}={value}" for key, value in labels.items())
        async with self._stream(path, params) as response:
            yield (json.loads(line) async for line in _read(response.aiter_lines()) if line.strip())

    @contextlib.asynccontextmanager
    async def log(
        self, namespace: str, pod: str, container: str, follow: bool, since_time: str | None
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """Yield a pod's log bytes, with timestamps, from ``since_time`` (RFC 3339, inclusive);
        a pod gone (404) or not started (400) is ``KubernetesApiError``, a broken connection
        :class:`StreamBroken`."""
        params = {"container": container, "timestamps": "true", "follow": str(follow).lower()}
        if since_time is not None:
            params["sinceTime"] = since_time
        path = f"/api/v1/namespaces/{namespace}/pods/{pod}/log"
        async with self._stream(path, params) as response:
            yield _read(response.aiter_bytes())
