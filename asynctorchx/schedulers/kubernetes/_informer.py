"""One list-then-watch per resource kind and namespace, shared by every waiter of a scheduler.

Kubernetes clients keep a cache of a resource kind by listing it and then watching from
the list's ``resourceVersion`` (client-go calls this an informer). Here every ``wait``,
``wait_for_state_change`` and log follower of one scheduler that needs jobs (or pods) of
one namespace reads the same cache, fed by ONE watch connection, however many apps they
watch.

The waiting is the toolkit's :class:`~asynctorchx.schedulers.toolkit.SharedFeed` (as for
the Slurm poll): the first waiter that finds nobody reading the watch reads its next
event for everyone, then wakes them all; the open watch is handed to the next reader,
not reopened. It is
reopened only when the server ends it (from the last ``resourceVersion`` seen, bookmarks
included), when its connection breaks, or when its reader was cancelled mid-read; after
a ``410 Gone`` the kind is listed again, and a list whose connection broke is made
again. It is closed when the last waiter leaves (and the next waiter lists again, since
nothing kept the cache current meanwhile).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Generic, TypeVar

import anyio

from asynctorchx.errors import KubernetesApiError, KubernetesUnreachableError
from asynctorchx.schedulers.kubernetes._apiserver import ApiServer, StreamBroken
from asynctorchx.schedulers.toolkit import SharedFeed

T = TypeVar("T")
Obj = TypeVar("Obj")

#: Consecutive failed reconnections after which waiters get the error.
MAX_RECONNECTS = 5
#: Seconds before the first reconnection after a failed one (doubled each time, up to 2 s).
RECONNECT_DELAY = 0.05


class Informer(SharedFeed, Generic[Obj]):
    """A cache of one kind's objects in one namespace, kept by one shared watch.

    Args:
        api: the API server connection.
        plural: ``jobs`` (Volcano), ``jobsets`` or ``pods``.
        namespace: the namespace.
        parse: reads an object's JSON once, as it arrives (pods: ``Pod.parse``).
        labels: label -> value every object has (pods: TorchX's managed-by label).

    :attr:`objects` maps name -> the object as last seen; :attr:`lists` and
    :attr:`watches` count the requests made (tests and benchmarks read them).
    """

    def __init__(
        self,
        api: ApiServer,
        plural: str,
        namespace: str,
        parse: Callable[[dict[str, Any]], Obj],
        labels: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.parse = parse
        self.api = api
        self.plural = plural
        self.namespace = namespace
        self.labels = dict(labels or {})
        self.objects: dict[str, Obj] = {}
        self.synced = False
        self.resource_version = ""
        self.lists = 0
        self.watches = 0
        self._stack: contextlib.AsyncExitStack | None = None
        self._events: AsyncIterator[dict[str, Any]] | None = None
        self._failed_connects = 0

    async def wait_until(self, check: Callable[[], T | None]) -> T:
        """Wait until ``check()`` (called on the synced cache) returns something; return it.

        Args:
            check: reads :attr:`objects`; ``None`` means "not yet".

        Raises:
            KubernetesUnreachableError: the watch could not be reopened.
            KubernetesApiError: the server refused the list or the watch.
        """
        return await self.wait_for(lambda: check() if self.synced else None)

    async def _idle(self) -> None:
        self.synced = False  # nobody reads the watch now: the cache goes stale
        await self._close()

    async def _read(self) -> None:
        """List (when not synced) or read the next watch event, for every waiter."""
        if not self.synced:
            await self._list()
        else:
            await self._read_one()

    async def _list(self) -> None:
        """List (again); a connection dropped mid-list is retried as a dropped watch is (a
        list is idempotent), at most :data:`MAX_RECONNECTS` times in a row."""
        await self._close()
        try:
            items, version = await self.api.list(self.plural, self.namespace, self.labels)
        except KubernetesUnreachableError as error:
            await self._back_off(error)
            return
        self._failed_connects = 0
        self.lists += 1
        self.objects = {item["metadata"]["name"]: self.parse(item) for item in items}
        self.resource_version = version
        self.synced = True

    async def _back_off(self, error: KubernetesUnreachableError) -> None:
        """Sleep before reconnecting; raise ``error`` once :data:`MAX_RECONNECTS` failed in
        a row."""
        self._failed_connects += 1
        if self._failed_connects >= MAX_RECONNECTS:
            raise error
        await anyio.sleep(min(RECONNECT_DELAY * 2**self._failed_connects, 2.0))

    async def _open(self) -> AsyncIterator[dict[str, Any]]:
        if self._events is not None:
            return self._events
        stack = contextlib.AsyncExitStack()  # holds nothing if the watch fails to open
        events = await stack.enter_async_context(
            self.api.watch(self.plural, self.namespace, self.resource_version, self.labels)
        )
        self.watches += 1
        self._stack, self._events = stack, events
        return events

    async def _read_one(self) -> None:
        try:
            events = await self._open()
            self._failed_connects = 0
            event = await events.__anext__()
        except BaseException as error:  # the stream is reopened from where it was
            await self._close()  # a read cancelled mid-event cannot be handed over either
            if isinstance(error, KubernetesUnreachableError):
                await self._back_off(error)
            elif not isinstance(error, (StopAsyncIteration, StreamBroken)):  # ended or broke
                raise
            return
        self._apply(event)

    def _apply(self, event: dict[str, Any]) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:  # too old: list again
                self.synced = False
                return
            raise KubernetesApiError(
                int(obj.get("code") or 500),
                str(obj.get("reason", "")),
                str(obj.get("message", "")),
                f"GET {self.plural} in {self.namespace} (watch)",
            )
        metadata = obj.get("metadata") or {}
        self.resource_version = str(metadata.get("resourceVersion") or self.resource_version)
        name = str(metadata.get("name") or "")
        if kind == "DELETED":
            self.objects.pop(name, None)
        elif kind in ("ADDED", "MODIFIED") and name:
            self.objects[name] = self.parse(obj)

    async def _close(self) -> None:
        stack, self._stack, self._events = self._stack, None, None
        if stack is not None:
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(Exception):
                    await stack.aclose()
