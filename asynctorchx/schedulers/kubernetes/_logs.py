"""A replica's log from its pod, read or followed across dropped connections and retries.

The kubelet's RFC 3339 time on each line (``timestamps=true``) serves ``since``, ``until``
and resuming: a broken follow reopens with ``sinceTime`` at the last line's time and skips
the lines already yielded at that time (:class:`~asynctorchx.schedulers.toolkit.StampSkip`).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Literal, cast

import anyio
import attrs

from asynctorchx.schedulers.kubernetes._apiserver import ApiServer, StreamBroken
from asynctorchx.schedulers.kubernetes._errors import KubernetesApiError, KubernetesUnreachableError
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

#: Seconds a follower waits for the pods watch to show why a follow ended cleanly before it
#: reconnects anyway (the server may end a follow of a running container).
CLEAN_END_GRACE = 5.0


def _resume(start: LogPosition) -> StampSkip[int]:
    return StampSkip(*(position_of(start, Stamped, "kubernetes") or STAMPED_START))


@attrs.define(on_setattr=attrs.setters.NO_OP)
class LogReader:
    """Reads one container's log from ``start`` (0 or a block's :attr:`position`); ``prefix``
    goes before each line yielded, ``regex`` is matched without it; :attr:`uid` is the pod
    (container) whose log is read (``""`` before the first), :attr:`done` whether a line
    after ``until`` was seen."""

    api: ApiServer
    namespace: str
    container: str
    query: LogQuery
    resume: StampSkip[int] = attrs.field(default=0, converter=_resume, alias="start")
    prefix: str = ""
    uid: str = attrs.field(default="", init=False)
    done: bool = attrs.field(default=False, init=False)
    ended: bool = attrs.field(default=False, init=False)
    _in_line: bool = attrs.field(default=False, init=False)  # the last line read was a piece
    _line_ns: int | None = attrs.field(default=None, init=False)  # later pieces have no time

    @property
    def position(self) -> Stamped:
        """The last line's time (ns) and how many lines had it."""
        return Stamped(self.resume.mark, self.resume.count)

    async def read(self, pod: str, follow: bool) -> AsyncGenerator[LogBlock, None]:
        """Yield one request's new lines, a chunk at a time, each block with the position
        before it. A broken connection, a pod not started (400) or gone (404), or (when
        following) a server that does not answer, once it answers again, end it quietly with
        :attr:`ended` ``False`` (the caller resumes); :attr:`ended` is ``True``
        when the kubelet closed the log or a line past ``until`` was read."""
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
        except KubernetesUnreachableError:
            if not follow:
                raise
            await self.api.answering()  # the server restarts: the caller resumes after it
            return
        except KubernetesApiError as error:
            if error.status not in (400, 404):  # not started yet, or gone: no lines
                raise
            return
        self.ended = True

    def begin(self) -> str | None:
        """Start a request; return its ``sinceTime``."""
        self._in_line = False
        since = self.query.since
        since_ns = 0 if since is None else int(since.timestamp() * 1_000_000_000)
        self.resume.begin(max(self.resume.mark, since_ns))
        return format_rfc3339_ns(self.resume.floor) if self.resume.floor else None

    def take(self, lines: list[str]) -> list[str]:
        """The lines to yield of those the kubelet sent, up to the first past ``until``."""
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
    """Yield the logs of the pod's containers other than ``own`` as they are now, in the
    pod's order, each line led by the container's name (TorchX's ``log_iter``, TorchX #1203);
    a block's position is an :class:`~asynctorchx.schedulers.toolkit.InContainer`."""
    others = [name for name in pod.containers if name != own]
    first = 0 if start is None else start.container
    for index in range(first, len(others)):
        at = start.at if start is not None and index == start.container else 0
        reader = LogReader(api, namespace, others[index], query, at, prefix=f"{others[index]} ")
        async for block in reader.read(pod.name, follow=False):
            at_block = cast(Stamped, block.position)  # a LogReader's blocks are stamped
            yield LogBlock(InContainer(index, at_block), block.lines)


#: The replica's pod in the pods watch's cache (``None``: none yet); looked up each time
#: because a retry's pod has another name.
PodOf = Callable[[], Pod | None]


async def follow(
    reader: LogReader,
    jobs: Informer[Job],
    pods: Informer[Pod],
    job_name: str,
    pod: PodOf,
    listed_pod: Callable[[], Awaitable[Pod | None]],
) -> AsyncGenerator[LogBlock, None]:
    """Follow the replica's log until the app is terminal and its last container's log ended.

    A container's log is complete once a follow opened after it terminated ended cleanly.
    The jobs watch can show the app ended while the pods watch still shows the last
    container pending, so the end is checked against ``listed_pod()`` (a fresh list).
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
        if reader.done or not reader.ended:  # done: the loop ends; else broke, not started, gone
            continue
        if terminated:
            complete_uid = uid
            continue
        with anyio.move_on_after(CLEAN_END_GRACE):
            await pods.wait_until(functools.partial(_ended, pod, uid))


def _ended(pod: PodOf, uid: str) -> Literal[True] | None:
    """``True`` once the container ``uid`` is over (terminated, replaced, gone)."""
    current = pod()
    return True if current is None or current.uid != uid or current.over else None


def _readable(pod: Pod, read_uid: str) -> bool:
    """Started, and not the finished container already read."""
    return pod.phase not in (None, "Pending") and not (pod.uid == read_uid and pod.over)


async def _started_pod(
    jobs: Informer[Job], pods: Informer[Pod], job_name: str, pod: PodOf, read_uid: str
) -> Pod | None:
    """Await the pod with a container to read; ``None``: the app ended, nothing to read."""

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

    found: Pod | Literal[False] = await race(
        [lambda: pods.wait_until(ready), lambda: jobs.wait_until(ready)]
    )
    return found or None
