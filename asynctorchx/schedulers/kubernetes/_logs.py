"""A replica's log from its pod: read, or followed across dropped connections and retries.

The log is always asked for with ``timestamps=true`` (the kubelet prefixes each line
with its RFC 3339 time, which is stripped before the line is yielded). The times serve
``since`` (the ``sinceTime`` parameter, then a local filter), ``until`` (stop at the
first later line) and resuming: when a follow connection breaks, it is reopened with
``sinceTime`` at the last line's time and the lines already yielded at that time are
skipped, so no line is duplicated or lost (several lines can share one time). Lines
follow the toolkit's rule (:mod:`asynctorchx.schedulers.toolkit._lines`): a line over
:data:`~asynctorchx.schedulers.toolkit.MAX_LINE_BYTES` (its time included) comes in
pieces; the pieces after the first carry no time of their own and count as lines of
their first piece's time.

A block's position (:meth:`LogReader.read`) is the same (time, count) before its first
line, a :class:`~asynctorchx.schedulers.toolkit.Stamped` (:attr:`LogReader.position`): a
reader given it asks the kubelet from that time on and skips the lines counted
(:class:`~asynctorchx.schedulers.toolkit.StampSkip`), so a resume reads what came after
that time, not the log again from its start.

``should_tail`` follows the pod until the app is terminal: when Volcano replaces the pod
(a retry) the new pod's log follows; the wait for a pod to start or be replaced is an
await on the scheduler's shared pods watch (:mod:`._informer`), not a poll.

The pod's other containers (sidecars) are read after the replica's own, one after the
other in the pod's order, as TorchX's ``kubernetes_scheduler.log_iter`` reads every
container (TorchX #1203): :func:`other_containers`.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Literal, cast

import anyio

from asynctorchx.errors import KubernetesApiError
from asynctorchx.schedulers.kubernetes._apiserver import ApiServer, StreamBroken
from asynctorchx.schedulers.kubernetes._informer import Informer
from asynctorchx.schedulers.kubernetes._state import Job, Pod
from asynctorchx.schedulers.toolkit import (
    MAX_LINE_BYTES,
    STAMPED_START,
    InContainer,
    LineAssembler,
    LogBlock,
    LogPosition,
    LogQuery,
    Stamped,
    StampSkip,
    format_rfc3339_ns,
    parse_rfc3339_ns,
    position_of,
    race,
)
from asynctorchx.specs.api import is_terminal

#: Seconds a follower waits for the pods watch to show why a log stream ended cleanly
#: before it reconnects anyway (the server may end a follow of a running container).
CLEAN_END_GRACE = 5.0


class LogReader:
    """Reads one replica's log stream(s), resuming at its position (see the module).

    Args:
        api: the API server.
        namespace: the pod's namespace.
        container: the replica's container.
        query: filters (regex, since, until).
        start: 0 (the log's start), or a block's :attr:`position`.
        prefix: put before each line yielded (not before a long line's later pieces);
            ``regex`` is matched without it.

    Raises:
        ValueError: ``start`` is not 0 or a :class:`~asynctorchx.schedulers.toolkit.Stamped`.
    """

    def __init__(
        self,
        api: ApiServer,
        namespace: str,
        container: str,
        query: LogQuery,
        start: LogPosition = 0,
        prefix: str = "",
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.container = container
        self.query = query
        self.prefix = prefix
        self.uid = ""  # the pod (container) whose log is read; "" before the first
        #: The time (ns) of the last line read (0 before any) and how many lines had it.
        self.resume = StampSkip(*(position_of(start, Stamped, "kubernetes") or STAMPED_START))
        self.done = False  # a line after ``until`` was seen
        self.ended = False  # the last request ended cleanly (see read)
        self._in_line = False  # the last line read was a piece of a long line
        self._line_ns: int | None = None  # the time of the line of the pieces

    @property
    def position(self) -> Stamped:
        """Where the log was read up to: the last line's time (ns) and how many lines had
        it; :data:`~asynctorchx.schedulers.toolkit.STAMPED_START` before any line."""
        return Stamped(self.resume.mark, self.resume.count)

    async def read(self, pod: str, follow: bool) -> AsyncGenerator[LogBlock, None]:
        """Yield the new lines of one log request, a received chunk's at a time (its end
        flushes a partial line), each block with the position before its first line
        (:attr:`position`).

        A request that ends early yields no error: its connection broke, or the pod has
        not started (400) or is gone (404); :attr:`ended` then stays ``False`` (the
        caller resumes), and is ``True`` when the kubelet closed the log or a line past
        ``until`` was read.

        Args:
            pod: the pod.
            follow: keep reading while the container runs.

        Raises:
            KubernetesApiError: the server refused the request for another reason.
        """
        self.ended = False
        assembler = LineAssembler(MAX_LINE_BYTES)
        try:
            async with self.api.log(
                self.namespace, pod, self.container, follow, self.begin()
            ) as chunks:
                async for chunk in chunks:
                    at = self.position
                    if block := self.take(assembler.feed(chunk)):
                        yield LogBlock(at, block)
                    if self.done:
                        break
                at = self.position
                if not self.done and (block := self.take(assembler.flush())):
                    yield LogBlock(at, block)
        except StreamBroken:
            return
        except KubernetesApiError as error:
            if error.status not in (400, 404):  # not started yet, or gone: no lines
                raise
            return
        self.ended = True

    def begin(self) -> str | None:
        """Start a request: return its ``sinceTime`` (the last line's time, else ``since``)."""
        self._in_line = False
        since = self.query.since
        since_ns = 0 if since is None else int(since.timestamp() * 1_000_000_000)
        self.resume.begin(max(self.resume.mark, since_ns))
        return format_rfc3339_ns(self.resume.floor) if self.resume.floor else None

    def take(self, lines: list[str]) -> list[str]:
        """The lines (pieces) of a request to yield, up to the first past ``until``; the
        position counts each new one read (a long line's pieces have its first's time).

        Args:
            lines: the request's next lines, as the kubelet sent them (time first).
        """
        kept: list[str] = []
        query = self.query
        until = query.until_timestamp
        for line in lines:
            piece, self._in_line = self._in_line, not line.endswith("\n")
            if piece:
                ns, text = self._line_ns, line
            else:
                stamp, _, text = line.partition(" ")
                ns = self._line_ns = parse_rfc3339_ns(stamp)
            if ns is None:  # no time (not the kubelet's): kept as it is
                if query.matches(line):
                    kept.append(line)
                continue
            if self.resume.repeats(ns):
                continue  # before the request's start (or ``since``), or delivered before
            if until is not None and ns > until * 1_000_000_000:
                self.done = True
                break
            if query.matches(text):
                kept.append(text if piece else self.prefix + text)
        return kept


async def other_containers(
    api: ApiServer,
    namespace: str,
    pod: Pod,
    own: str,
    query: LogQuery,
    start: InContainer | None = None,
) -> AsyncGenerator[LogBlock, None]:
    """Yield the logs of the pod's containers other than the replica's own, as they are
    now, one container after the other in the pod's order; each line starts with the
    container's name and a space (TorchX's, without its terminal colours).

    A block's position is an :class:`~asynctorchx.schedulers.toolkit.InContainer`; a read
    from one goes on in that container's log and reads the containers after it.

    Args:
        api: the API server.
        namespace: the pod's namespace.
        pod: the pod.
        own: the replica's own container, read elsewhere.
        query: filters (regex, since, until), for each container's log.
        start: where to go on, or ``None``: every other container from its start.

    Raises:
        KubernetesApiError: the server refused a log request.
    """
    others = [name for name in pod.containers if name != own]
    first = 0 if start is None else start.container
    for index in range(first, len(others)):
        at = start.at if start is not None and index == start.container else 0
        reader = LogReader(api, namespace, others[index], query, at, prefix=f"{others[index]} ")
        async for block in reader.read(pod.name, follow=False):
            at_block = cast(Stamped, block.position)  # a LogReader's blocks are stamped
            yield LogBlock(InContainer(index, at_block), block.lines)


#: The replica's pod in the pods watch's current cache (``None``: no pod yet); a JobSet's
#: pod names have a random suffix and change when the Job retries a pod.
PodOf = Callable[[], Pod | None]


async def follow(
    reader: LogReader,
    jobs: Informer[Job],
    pods: Informer[Pod],
    job_name: str,
    pod: PodOf,
    listed_pod: Callable[[], Awaitable[Pod | None]],
) -> AsyncGenerator[LogBlock, None]:
    """Follow the pod's log until the app is terminal and its last container's log ended.

    A container's log is complete once a follow opened after it terminated ended
    cleanly (the kubelet then sends everything and closes); any other end is resumed.
    The two watches are not in step: the jobs watch can show the app ended while the
    pods watch still shows the replica's last container pending, so the end is checked
    against the replica's pod listed then (``listed_pod``) before the follow stops.

    Args:
        reader: the replica's reader.
        jobs: the shared jobs (or JobSets) watch of the namespace.
        pods: the shared pods watch of the namespace.
        job_name: the job.
        pod: the replica's pod in ``pods``' cache.
        listed_pod: the replica's pod as the server lists it now (``None``: none).

    Raises:
        KubernetesApiError: the server refused the log request.
    """
    complete_uid = ""  # the container whose log was read to its end
    while not reader.done:
        current = await _started_pod(jobs, pods, job_name, pod, complete_uid)
        if current is None:  # the app ended: unless the pods watch lags behind the jobs'
            current = await listed_pod()
            if current is None or not _readable(current, complete_uid):
                return
        uid = current.uid
        if reader.uid and uid != reader.uid:  # a new container (a retry): all its lines are new
            reader.resume = StampSkip(*STAMPED_START)
        reader.uid = uid  # the first container read may go on from a position given
        terminated = current.over
        async for block in reader.read(current.name, follow=True):
            yield block
        if reader.done:
            return
        if not reader.ended:  # broke, or not started yet, or gone: read again
            continue
        if terminated:
            complete_uid = uid
            continue
        with anyio.move_on_after(CLEAN_END_GRACE):
            await pods.wait_until(functools.partial(_ended, pod, uid))


def _ended(pod: PodOf, uid: str) -> Literal[True] | None:
    """``True`` once the container ``uid`` of the pod is over (terminated, replaced, gone)."""
    current = pod()
    return True if current is None or current.uid != uid or current.over else None


def _readable(pod: Pod, read_uid: str) -> bool:
    """Whether ``pod`` has a container to read: started, and not the finished one read."""
    return pod.phase not in (None, "Pending") and not (pod.uid == read_uid and pod.over)


async def _started_pod(
    jobs: Informer[Job], pods: Informer[Pod], job_name: str, pod: PodOf, read_uid: str
) -> Pod | None:
    """Await the pod with a container to read; ``None`` once the app is terminal with
    nothing more to read."""

    def ready() -> Pod | Literal[False] | None:
        # the pod the check found is returned: looked up again later, the cache may
        # already name the retry's new pod, still pending, and the follow would end early
        if not (pods.synced and jobs.synced):
            return None
        current = pod()
        if current is not None and _readable(current, read_uid):
            return current
        job = jobs.objects.get(job_name)
        return False if job is None or is_terminal(job.state) else None

    # both watches are read until one of them shows the pod readable or the app over
    found: Pod | Literal[False] = await race(
        [lambda: pods.wait_until(ready), lambda: jobs.wait_until(ready)]
    )
    return found or None
