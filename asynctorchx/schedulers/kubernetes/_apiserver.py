"""The connection to the Kubernetes API server, the one module that imports lightkube;
every third-party error is mapped here to :mod:`asynctorchx.errors`.

Objects go in and out as JSON dicts, over the ``httpx2`` client lightkube's
``client_adapter`` builds from the kubeconfig (server, TLS, credentials): one client for the
requests and for the two streams lightkube's own client cannot ask for as needed (a watch
with ``allowWatchBookmarks``, a log with ``sinceTime``).
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any, NamedTuple

import anyio
import httpx2
from lightkube import ConfigError, KubeConfig
from lightkube.config import client_adapter
from lightkube.config.client_adapter import ConnectionParams
from lightkube.config.kubeconfig import SingleConfig

from asynctorchx.errors import SchedulerClosedError
from asynctorchx.schedulers.kubernetes._errors import (
    InvalidJobSpecError,
    JobSetNotInstalledError,
    KubernetesApiError,
    KubernetesConfigError,
    KubernetesUnreachableError,
    VolcanoNotInstalledError,
)
from asynctorchx.schedulers.kubernetes._jobset import JOBSET_API_VERSION, JOBSET_GROUP
from asynctorchx.schedulers.kubernetes._request import VOLCANO_API_VERSION, VOLCANO_GROUP
from asynctorchx.schedulers.toolkit import answered


class JobKind(NamedTuple):
    """A job kind: its API group, the group version's path, error when missing."""

    group: str
    path: str
    missing: type[Exception]


#: The job kinds by plural.
JOB_KINDS: dict[str, JobKind] = {
    "jobs": JobKind(VOLCANO_GROUP, f"/apis/{VOLCANO_API_VERSION}", VolcanoNotInstalledError),
    "jobsets": JobKind(JOBSET_GROUP, f"/apis/{JOBSET_API_VERSION}", JobSetNotInstalledError),
}
VOLCANO_COMMANDS = "/apis/bus.volcano.sh/v1alpha1"
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_WORKLOADS = f"/apis/{KUEUE_GROUP}/v1beta1"
MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}
#: Seconds a single request may take (connect, read, write) before it counts as failed.
REQUEST_TIMEOUT = 30.0
#: Requests (not streams) in flight at once per scheduler: a group's creates queue here.
MAX_REQUESTS = 16


class StreamBroken(Exception):
    """A watch or log stream's connection broke (the caller reconnects)."""


BROKEN = (httpx2.RemoteProtocolError, httpx2.ReadError, httpx2.ReadTimeout)


def status_error(code: int, body: object, request: str) -> KubernetesApiError:
    """The server's refusal from its ``Status`` object (a response's body, or a watch's
    ``ERROR`` event): its reason, message and causes (else the body as the message)."""
    if not isinstance(body, dict):
        body = {"message": str(body)}
    details = body.get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    return KubernetesApiError(
        code,
        str(body.get("reason", "")),
        str(body.get("message", "")),
        request,
        tuple(
            (str(cause.get("field", "")), str(cause.get("message", "")))
            for cause in (causes if isinstance(causes, list) else [])
            if isinstance(cause, dict)
        ),
    )


def _status_error(response: httpx2.Response, request: str) -> KubernetesApiError:
    try:
        body = response.json()
    except ValueError:
        body = response.text
    return status_error(response.status_code, body, request)


def _selecting(labels: Mapping[str, str] | None) -> dict[str, str]:
    """The query parameters selecting ``labels`` (none: every object)."""
    if not labels:
        return {}
    return {"labelSelector": ",".join(f"{key}={value}" for key, value in labels.items())}


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
        self._http: httpx2.AsyncClient | None = None
        self._closed = False
        self._checked: set[str] = set()
        self._limiter = anyio.CapacityLimiter(MAX_REQUESTS)
        self._checking = anyio.Lock()  # many first creates ask for the job kind once

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

    def _client(self) -> httpx2.AsyncClient:
        if self._closed:
            raise SchedulerClosedError("the kubernetes scheduler was closed")
        if self._http is None:
            config = self.config()
            # no read timeout for the streams; every other request has REQUEST_TIMEOUT
            params = ConnectionParams(timeout=httpx2.Timeout(REQUEST_TIMEOUT, read=None))
            try:
                self._http = client_adapter.AsyncClient(config, params)
            except (ConfigError, OSError, ValueError, AssertionError) as error:
                raise KubernetesConfigError(str(error) or type(error).__name__) from None
        return self._http

    async def close(self) -> None:
        """Close the client; idempotent, never raises."""
        self._closed = True
        http, self._http = self._http, None
        if http is not None:
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await http.aclose()

    def _unreachable(self, error: httpx2.TransportError) -> KubernetesUnreachableError:
        return KubernetesUnreachableError(self.server, str(error) or type(error).__name__)

    def _refused(
        self, response: httpx2.Response, request: str
    ) -> KubernetesApiError | KubernetesUnreachableError:
        error = _status_error(response, request)
        if error.status == 503:  # "server is starting", or its etcd is down: it restarts
            return KubernetesUnreachableError(self.server, str(error))
        return error

    async def _call(
        self, method: str, path: str, request: str, missing_ok: bool = False, **kwargs: Any
    ) -> dict[str, Any]:
        """One request's JSON answer, ``request`` naming it in errors; ``missing_ok``: 404 is {}."""
        try:
            async with self._limiter:
                response = await self._client().request(
                    method, path, timeout=REQUEST_TIMEOUT, **kwargs
                )
        except httpx2.TransportError as error:
            raise self._unreachable(error) from None
        if missing_ok and response.status_code == 404:
            return {}
        if response.is_error:
            raise self._refused(response, request)
        return dict(response.json())

    async def answering(self) -> None:
        """Return once the server answers ``GET /version`` (the toolkit's :func:`answered`)."""
        await answered(functools.partial(self._call, "GET", "/version", "GET /version"))

    async def _collection(self, plural: str, namespace: str) -> tuple[str, str]:
        """The path of a namespace's ``jobs``, ``jobsets`` or ``pods`` and their name in
        errors; a job kind's API group is checked once (raises ``VolcanoNotInstalledError``
        or ``JobSetNotInstalledError`` when missing)."""
        if plural not in JOB_KINDS:
            return f"/api/v1/namespaces/{namespace}/{plural}", plural
        kind = JOB_KINDS[plural]
        async with self._checking:
            if plural not in self._checked:
                if not await self._call("GET", kind.path, f"GET {kind.path}", missing_ok=True):
                    raise kind.missing(self.server)
                self._checked.add(plural)
        return f"{kind.path}/namespaces/{namespace}/{plural}", f"{kind.group} {plural}"

    async def _on_job(
        self, method: str, namespace: str, name: str, plural: str, **kwargs: Any
    ) -> dict[str, Any]:
        path, kind = await self._collection(plural, namespace)
        request = f"{method} {kind} {namespace}/{name}"
        return await self._call(method, f"{path}/{name}", request, **kwargs)

    async def create_job(
        self, namespace: str, manifest: dict[str, Any], plural: str = "jobs", dry_run: bool = False
    ) -> dict[str, Any]:
        """Create the job (``dry_run``: only validate and admit it, ``dryRun=All``); return it
        as stored. A dry run's refusal (``400``, ``422``) is ``InvalidJobSpecError``."""
        path, kind = await self._collection(plural, namespace)
        request = f"POST {kind} in {namespace}" + (" (dry run)" if dry_run else "")
        body = {**manifest, "metadata": {**manifest["metadata"], "namespace": namespace}}
        params = {"dryRun": "All"} if dry_run else {}
        try:
            return await self._call("POST", path, request, json=body, params=params)
        except KubernetesApiError as error:
            if dry_run and error.status in (400, 422):
                raise InvalidJobSpecError(
                    error.status, error.reason, error.message, error.request, error.causes
                ) from None
            raise

    async def get_job(
        self, namespace: str, name: str, plural: str = "jobs"
    ) -> dict[str, Any] | None:
        """The job, or ``None`` if there is no such object."""
        return await self._on_job("GET", namespace, name, plural, missing_ok=True) or None

    async def delete_job(self, namespace: str, name: str, plural: str = "jobs") -> bool:
        """Delete the job (its pods go with it); ``False`` if it did not exist."""
        return bool(await self._on_job("DELETE", namespace, name, plural, missing_ok=True))

    async def patch_job(
        self, namespace: str, name: str, patch: dict[str, Any], plural: str = "jobs"
    ) -> None:
        """Merge ``patch`` into the job (a JSON merge patch, RFC 7386)."""
        await self._on_job("PATCH", namespace, name, plural, json=patch, headers=MERGE_PATCH)

    async def deactivate_workloads(self, namespace: str, owner_uid: str) -> None:
        """Deactivate the job's Kueue workloads (``spec.active: false``): Kueue evicts them
        and stops counting their quota; a cluster without Kueue has none."""
        path = f"{KUEUE_WORKLOADS}/namespaces/{namespace}/workloads"
        request = f"GET {KUEUE_GROUP} workloads in {namespace}"
        params = _selecting({"kueue.x-k8s.io/job-uid": owner_uid})
        listed = await self._call("GET", path, request, missing_ok=True, params=params)
        for item in listed.get("items") or []:
            name = item["metadata"]["name"]
            request = f"PATCH {KUEUE_GROUP} workloads {namespace}/{name}"
            patch = {"spec": {"active": False}}
            await self._call(
                "PATCH", f"{path}/{name}", request, missing_ok=True, json=patch, headers=MERGE_PATCH
            )

    async def abort_job(self, namespace: str, name: str, uid: str) -> None:
        """Abort the job with a Volcano ``AbortJob`` command (``vcctl job suspend``'s): its pods
        are killed, it ends ``Aborted`` and stays until deleted."""
        owner = {
            "apiVersion": VOLCANO_API_VERSION,
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
        path = f"{VOLCANO_COMMANDS}/namespaces/{namespace}/commands"
        await self._call("POST", path, f"POST bus.volcano.sh commands in {namespace}", json=command)

    async def list(
        self, plural: str, namespace: str, labels: Mapping[str, str] | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """The namespace's ``jobs``, ``jobsets`` or ``pods`` with ``labels``, and the list's
        ``resourceVersion``."""
        path, kind = await self._collection(plural, namespace)
        listed = await self._call(
            "GET", path, f"GET {kind} in {namespace}", params=_selecting(labels)
        )
        return listed.get("items") or [], str(listed["metadata"]["resourceVersion"])

    @contextlib.asynccontextmanager
    async def _stream(self, path: str, params: dict[str, str]) -> AsyncIterator[httpx2.Response]:
        """A ``GET`` read as it comes; a connection broken meanwhile is :class:`StreamBroken`."""
        try:
            async with self._client().stream("GET", path, params=params) as response:
                if response.is_error:
                    await response.aread()
                    raise self._refused(response, f"GET {path}")
                yield response
        except BROKEN as error:
            raise StreamBroken(str(error)) from None
        except httpx2.TransportError as error:
            raise self._unreachable(error) from None

    async def watch(
        self,
        plural: str,
        namespace: str,
        resource_version: str,
        labels: Mapping[str, str] | None = None,
    ) -> AsyncGenerator[dict[str, Any], None]:
        """Yield the events (``{"type", "object"}``, bookmarks asked for) of a watch from
        ``resource_version``, opened at the first; a broken connection is :class:`StreamBroken`.
        Close it with ``aclose()``."""
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            **_selecting(labels),
        }
        path, _ = await self._collection(plural, namespace)
        async with self._stream(path, params) as response:
            async for line in response.aiter_lines():
                if line.strip():
                    yield json.loads(line)

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
            yield response.aiter_bytes()
