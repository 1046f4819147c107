"""One list-then-watch per resource kind and namespace, shared by every waiter of a scheduler
(client-go's informer): the toolkit's :class:`~asynctorchx.schedulers.toolkit.SharedFeed`
hands the open watch from reader to reader; it is reopened from the last
``resourceVersion`` when the server ends it or it breaks, relisted after ``410 Gone``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any, Generic, TypeVar

import anyio
import attrs

from asynctorchx.schedulers.kubernetes._apiserver import ApiServer, StreamBroken, status_error
from asynctorchx.schedulers.kubernetes._errors import KubernetesUnreachableError
from asynctorchx.schedulers.toolkit import SharedFeed

logger = logging.getLogger(__name__)

T = TypeVar("T")
Obj = TypeVar("Obj")

#: Consecutive failed first connections after which waiters get the error; once the server
#: answered, an outage (its restart) is waited through, logged once.
MAX_RECONNECTS = 5
#: Seconds before the first reconnection after a failed one (doubled each time, up to 2 s).
RECONNECT_DELAY = 0.05


@attrs.define(eq=False)
class Informer(SharedFeed, Generic[Obj]):
    """A cache of one kind's objects (``jobs``, ``jobsets`` or ``pods``) in one namespace,
    each parsed once by ``parse``; :attr:`lists` and :attr:`watches` count the requests."""

    api: ApiServer
    plural: str
    namespace: str
    parse: Callable[[dict[str, Any]], Obj]
    labels: Mapping[str, str] = attrs.field(factory=dict)
    objects: dict[str, Obj] = attrs.field(factory=dict, init=False)
    synced: bool = attrs.field(default=False, init=False)
    resource_version: str = attrs.field(default="", init=False)
    lists: int = attrs.field(default=0, init=False)
    watches: int = attrs.field(default=0, init=False)
    _events: AsyncGenerator[dict[str, Any], None] | None = attrs.field(default=None, init=False)
    _failed_connects: int = attrs.field(default=0, init=False)
    _answered: bool = attrs.field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        super().__init__()

    async def wait_until(self, check: Callable[[], T | None]) -> T:
        """Wait until ``check()``, called on the synced cache, returns something but
        ``None``; return it.

        Raises:
            KubernetesUnreachableError: the watch could not be reopened.
            KubernetesApiError: the server refused the list or the watch.
        """
        return await self.wait_for(lambda: check() if self.synced else None)

    async def _idle(self) -> None:
        self.synced = False  # nobody reads the watch now: the cache goes stale
        await self._close()

    async def _read(self) -> None:
        if not self.synced:
            await self._list()
        else:
            await self._read_one()

    async def _list(self) -> None:
        # a list is idempotent: a dropped one is retried as a dropped watch is
        await self._close()
        try:
            items, version = await self.api.list(self.plural, self.namespace, self.labels)
        except KubernetesUnreachableError as error:
            await self._back_off(error)
            return
        if self._failed_connects and self._answered:
            logger.warning("the Kubernetes API server answers again")
        self._failed_connects = 0
        self._answered = True
        self.lists += 1
        self.objects = {item["metadata"]["name"]: self.parse(item) for item in items}
        self.resource_version = version
        self.synced = True

    async def _back_off(self, error: KubernetesUnreachableError) -> None:
        self._failed_connects += 1
        if not self._answered and self._failed_connects >= MAX_RECONNECTS:
            raise error
        if self._failed_connects == 1 and self._answered:
            logger.warning("%s; waiting for it to answer again", error)
        await anyio.sleep(min(RECONNECT_DELAY * 2**self._failed_connects, 2.0))

    async def _read_one(self) -> None:
        if self._events is None:
            watch = self.api.watch(self.plural, self.namespace, self.resource_version, self.labels)
            self._events = watch
            self.watches += 1
        try:
            event = await self._events.__anext__()
            self._failed_connects = 0
        except BaseException as error:
            await self._close()  # a read cancelled mid-event cannot be handed over
            if isinstance(error, KubernetesUnreachableError):
                await self._back_off(error)
            elif not isinstance(error, (StopAsyncIteration, StreamBroken)):  # ended or broke
                raise
            return
        self._apply(event)

    def _apply(self, event: dict[str, Any]) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                self.synced = False
                return
            request = f"GET {self.plural} in {self.namespace} (watch)"
            raise status_error(int(obj.get("code") or 500), obj, request)
        metadata = obj.get("metadata") or {}
        self.resource_version = str(metadata.get("resourceVersion") or self.resource_version)
        name = str(metadata.get("name") or "")
        if kind == "DELETED":
            self.objects.pop(name, None)
        elif kind in ("ADDED", "MODIFIED") and name:
            self.objects[name] = self.parse(obj)

    async def _close(self) -> None:
        events, self._events = self._events, None
        if events is not None:
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await events.aclose()
