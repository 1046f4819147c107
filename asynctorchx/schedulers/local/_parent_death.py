"""Tying each replica to the life of this process: one watchdog process per host.

A replica is started in a session of its own, so nothing ends it when this process
dies without closing its scheduler: ``SIGKILL``, the OOM killer, a crash. TorchX's
``torchx.schedulers.local_scheduler`` does not tie its replicas to the host.

Here, the first replica start of this process also starts a *watchdog*: the small
program :mod:`._watchdog` (run as a file, ``sys.executable -I -S``) in a session of its own,
whose stdin is the read end of a pipe. Only this process holds the write end (it is
``O_CLOEXEC``, and replicas are started with ``close_fds``). :func:`tie` writes
``+<pgid> <token>`` once a replica's process started (in its own session: its process
group and session are its pid; the token is its ``ASYNCTORCHX_REPLICA_TOKEN``, see
:mod:`._subreaper`), :func:`untie` writes ``-<pgid>`` once it was reaped; each is one
``os.write`` shorter than ``PIPE_BUF``, so it reaches the pipe whole from any thread. The
watchdog keeps the live groups; at end of file, which the kernel gives it when the last
holder of the write end is gone (this process was killed, crashed or simply exited), it
sends ``SIGKILL`` to every group still tied, then looks through ``/proc`` for the
processes that left those groups but are still in the replica's session or carry its
token in their environment (a daemon's ``setsid``, a ``setpgid``): those are orphans of
init by then, not children of this dead process. It kills each through a pid file
descriptor (opened, then checked again, so a reused pid is never hit), awaits their
exits, and looks again until none is found (what they forked meanwhile), then exits.
With no replica left tied (a normal exit), it does not look. It ignores ``SIGINT``,
``SIGTERM`` and ``SIGHUP`` and has a session of its own, so a terminal's Ctrl-C or a
signal to this process's group does not end it before this process has cleaned up; end
of file is what ends it, so it never outlives this process.

The watchdog reads its pipe at most every :data:`READ_INTERVAL` seconds (it sleeps after
each read that got data; idle, it blocks in ``read``): a write to a pipe whose reader is
blocked wakes that reader, which would cost each start and each reap a context switch
(benchmark 3's ms-per-replica row; ``bench_spawn.py`` shows it alone). The pipe is
enlarged to 1 MiB where Linux allows (``F_SETPIPE_SZ``) so that the lines of a burst of
starts wait in it; the price is that the groups are killed up to :data:`READ_INTERVAL`
seconds after this process is gone.

The watchdog belongs to the process, not to an event loop: it is started once per
process (under a lock, from whichever loop or thread starts a replica first) and serves
every loop after, asyncio or trio alike; nothing depends on the thread that forks. Its
cost is one write per start and one per reap (``benchmarks/bench_spawn.py``). A
watchdog that died while this process lives (someone killed it) is started again at the
next write, and told every group still tied.

Limits:

* POSIX only, as the local schedulers are; where ``posix_spawn`` cannot start a session
  (``setsid``), replicas are not tied.
* A descendant that left both the replica's session and its environment (``setsid``
  then ``env -i``, a set-user-ID program whose environment cannot be read) is not found
  and outlives a killed host (``tests/schedulers/local/test_parent_death.py`` shows
  it). The ``/proc`` search needs Linux's ``pidfd_open`` (5.3); elsewhere only the
  groups are killed.
* A host killed between a replica's ``fork`` and its ``+pgid`` write (the start's own
  few hundred microseconds) leaves that replica untied; one killed between a replica's
  reap (its ``-pgid``) and the sweep of its daemons (:mod:`._subreaper`) leaves those.
* Everything holding the write end keeps the watchdog waiting: a child forked from
  Python (``os.fork``, ``multiprocessing``'s ``fork``) closes its copy at once
  (``os.register_at_fork``), but a child forked by native code without ``exec`` keeps
  it, and the replicas are then killed only once that child is gone too.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sys
import threading

from asynctorchx.schedulers.local import _subreaper, _watchdog

logger = logging.getLogger(__name__)

#: Set to False to start replicas untied (what ``benchmarks/bench_spawn.py`` compares).
enabled = True

#: Seconds the watchdog sleeps after each read that got data (see the module).
READ_INTERVAL = 0.05

#: The size asked for the watchdog's pipe (bytes; Linux's default limit for a user).
PIPE_SIZE = 1 << 20

#: The watchdog program, run as a file: ``python -I -S PROGRAM <interval> <variable>``.
PROGRAM = _watchdog.__file__


class _Watchdog:
    """This process's watchdog: its pid, the write end of its pipe, the tied groups."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pid: int | None = None
        self.fd: int | None = None
        self.tied: dict[int, str] = {}  # process group -> its replica's token
        self.unavailable = False

    def start(self) -> bool:
        """Start the watchdog (lock held); False when it cannot be started here."""
        if self.unavailable:
            return False
        read_fd, write_fd = os.pipe()  # both O_CLOEXEC (PEP 446)
        try:
            if read_fd < 3:  # stdin/stdout/stderr were closed: keep clear of them
                moved = fcntl.fcntl(read_fd, fcntl.F_DUPFD_CLOEXEC, 3)
                os.close(read_fd)
                read_fd = moved
            pid = os.posix_spawn(
                sys.executable,
                [
                    sys.executable,
                    *("-I", "-S", PROGRAM, str(READ_INTERVAL), _subreaper.TOKEN_VARIABLE),
                ],
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, read_fd, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                ],
                setsid=True,
            )
        # ValueError: no sys.executable (an embedded interpreter); NotImplementedError: no setsid
        except (OSError, ValueError, NotImplementedError) as error:
            os.close(write_fd)
            self.unavailable = True
            logger.warning("replicas are not tied to this process: no watchdog (%s)", error)
            return False
        finally:
            os.close(read_fd)
        os.set_blocking(write_fd, False)
        if hasattr(fcntl, "F_SETPIPE_SZ"):
            with contextlib.suppress(OSError):  # above the user's limit: the default stays
                fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        self.pid, self.fd = pid, write_fd
        _subreaper.OWN_CHILDREN.add(pid)  # ours, reaped here: the sweeps after exits skip it
        return True

    def restart(self) -> None:
        """Replace a watchdog that died (lock held) and tell it every tied group."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.pid is not None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, os.WNOHANG)
            _subreaper.OWN_CHILDREN.discard(self.pid)
            self.pid = None
        if self.start():
            try:
                self.write("".join(f"+{pgid} {token}\n" for pgid, token in self.tied.items()))
            except BrokenPipeError:  # it died at once too: the next send starts another
                logger.warning("the watchdog died as it started: a replica may not be tied")

    def write(self, text: str) -> None:
        """Write ``text`` to the watchdog (lock held); one that does not read is warned of."""
        assert self.fd is not None
        data = text.encode()
        while data:  # one pass for a line; more only for a restart's many lines
            try:
                data = data[os.write(self.fd, data) :]
            except BlockingIOError:  # the watchdog is stopped and its pipe is full
                logger.warning("the watchdog does not read: a replica may not be tied")
                return

    def send(self, line: str) -> None:
        """Write one line, starting or restarting the watchdog as needed (lock held)."""
        if self.fd is None and not self.start():
            return
        try:
            self.write(line)
        except BrokenPipeError:  # the watchdog died: a new one gets every tied group
            self.restart()

    def forget(self) -> None:
        """In a forked child: let go of the parent's watchdog (it is not ours)."""
        if self.fd is not None:
            os.close(self.fd)
        self.lock = threading.Lock()
        self.pid = self.fd = None
        self.tied = {}


_process_watchdog = _Watchdog()
os.register_at_fork(after_in_child=_process_watchdog.forget)


def tie(pgid: int, token: str = "") -> None:
    """Have the watchdog kill the replica ``pgid`` and its daemons if this process dies first.

    Called once a replica's process started in its own session (``pgid`` is its pid);
    starts the watchdog at the first call of the process. Does nothing when
    :data:`enabled` is False or no watchdog can be started here.

    Args:
        pgid: the replica's process group and session (its pid).
        token: the replica's :data:`~._subreaper.TOKEN_VARIABLE` (hex digits), which its
            descendants inherit; empty: only its session is searched.
    """
    if not enabled:
        return
    with _process_watchdog.lock:
        if pgid not in _process_watchdog.tied:
            _process_watchdog.tied[pgid] = token
            _process_watchdog.send(f"+{pgid} {token}\n")


def untie(pgid: int) -> None:
    """Forget the process group ``pgid`` (its replica's main process was reaped).

    Args:
        pgid: the group given to :func:`tie`; one never tied is ignored.
    """
    with _process_watchdog.lock:
        if pgid in _process_watchdog.tied:
            del _process_watchdog.tied[pgid]
            _process_watchdog.send(f"-{pgid}\n")


def watchdog_pid() -> int | None:
    """The pid of this process's watchdog, or None before the first :func:`tie`."""
    return _process_watchdog.pid
