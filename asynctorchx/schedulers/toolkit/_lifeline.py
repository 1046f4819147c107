"""A child process that outlives its parent's death and acts on it: the lifeline.

The parent holds the only write end of a pipe; at end of file the program (this file, run as
``python -I -S``, so standard library only) kills or runs a command for the keys still tied.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref

logger = logging.getLogger(__name__)

#: Seconds the program sleeps after each read that got data: a write to a pipe whose
#: reader is blocked wakes it, which would cost each start a context switch (benchmark
#: 3's ms-per-replica row); the price is acting that much later.
READ_INTERVAL = 0.05

#: The pipe size asked for, bytes (Linux's default limit for a user): a burst of ties
#: waits in it meanwhile.
PIPE_SIZE = 1 << 20

PROGRAM = __file__


class Lifeline:
    """One lifeline program and the write end of its pipe, started at the first :meth:`tie`."""

    def __init__(self, action: list[str]) -> None:
        self._action = action
        self._lock = threading.Lock()
        self.pid: int | None = None
        self._fd: int | None = None
        self._tied: dict[str, str] = {}  # key -> payload
        self._unavailable = False
        _LIFELINES.add(self)

    def tie(self, key: str, payload: str = "") -> None:
        """Have the program act on ``key`` if the parent dies before :meth:`untie`."""
        with self._lock:
            if key not in self._tied:
                self._tied[key] = payload
                self._send(f"+{key} {payload}\n")

    def untie(self, key: str) -> None:
        """Forget ``key``; one not tied is ignored."""
        with self._lock:
            if self._tied.pop(key, None) is not None:
                self._send(f"-{key}\n")

    def release(self) -> int | None:
        """Tell the program the parent leaves normally (it then acts on nothing) and let it go;
        return its pid, for the caller to reap, or None if none runs."""
        with self._lock:
            pid, fd = self.pid, self._fd
            self.pid = self._fd = None
            self._tied = {}
            if fd is None:
                return None
            with contextlib.suppress(BrokenPipeError, BlockingIOError):
                os.write(fd, b".\n")
            os.close(fd)
            return pid

    def _start(self) -> bool:
        if self._unavailable:
            return False
        read_fd, write_fd = os.pipe()  # both O_CLOEXEC (PEP 446)
        try:
            if read_fd < 3:  # stdin, stdout or stderr were closed: keep clear of them
                moved = fcntl.fcntl(read_fd, fcntl.F_DUPFD_CLOEXEC, 3)
                os.close(read_fd)
                read_fd = moved
            command = [sys.executable, "-I", "-S", PROGRAM, str(READ_INTERVAL), *self._action]
            pid = os.posix_spawn(
                sys.executable,
                command,
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, read_fd, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                ],
                setsid=True,  # a terminal's Ctrl-C or a signal to the parent's group spares it
            )
        # ValueError: no sys.executable (an embedded interpreter); NotImplementedError: no setsid
        except (OSError, ValueError, NotImplementedError) as error:
            os.close(write_fd)
            self._unavailable = True
            logger.warning("no lifeline process (%s): %s", self._action[0], error)
            return False
        finally:
            os.close(read_fd)
        os.set_blocking(write_fd, False)
        if hasattr(fcntl, "F_SETPIPE_SZ"):
            with contextlib.suppress(OSError):  # above the user's limit: the default stays
                fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        self.pid, self._fd = pid, write_fd
        return True

    def _restart(self) -> None:
        """Replace a program that died, and tell it every tied key."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self.pid is not None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, os.WNOHANG)
            self.pid = None
        if self._start():
            try:
                self._write("".join(f"+{key} {value}\n" for key, value in self._tied.items()))
            except BrokenPipeError:  # it died at once too: the next send starts another
                logger.warning("the lifeline died as it started: a key may not be tied")

    def _write(self, text: str) -> None:
        assert self._fd is not None
        data = text.encode()
        while data:  # one pass for a line (shorter than PIPE_BUF: whole from any thread)
            try:
                data = data[os.write(self._fd, data) :]
            except BlockingIOError:  # the program is stopped and its pipe is full
                logger.warning("the lifeline does not read: a key may not be tied")
                return

    def _send(self, line: str) -> None:
        if self._fd is None and not self._start():
            return
        try:
            self._write(line)
        except BrokenPipeError:
            self._restart()

    def _forget(self) -> None:
        """In a forked child: let go of the parent's program (it is not ours)."""
        if self._fd is not None:
            os.close(self._fd)
        self._lock = threading.Lock()
        self.pid = self._fd = None
        self._tied = {}


_LIFELINES: weakref.WeakSet[Lifeline] = weakref.WeakSet()


def _forget_all() -> None:
    for lifeline in list(_LIFELINES):
        lifeline._forget()


os.register_at_fork(after_in_child=_forget_all)


# ---------------------------------------------------------------------- the program


def read_tied(fd: int, interval: float) -> dict[bytes, bytes]:
    """Read the parent's lines from ``fd`` (blocking) until end of file or ``.``; return each key
    tied and not untied with its payload, in tie order (none after ``.``)."""
    tied: dict[bytes, bytes] = {}
    pending = b""
    while chunk := os.read(fd, 65536):
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            if line == b".":
                return {}
            if line[:1] == b"+":
                key, _, payload = line[1:].partition(b" ")
                tied[key] = payload
            elif line[:1] == b"-":
                tied.pop(line[1:], None)
        time.sleep(interval)
    return tied


def is_left_behind(pid: int, sessions: dict[int, bytes], environ_tokens: set[bytes]) -> bool:
    """Whether live ``pid`` is in one of ``sessions`` or carries one of ``environ_tokens``
    (``<variable>=<token>``) in its environment (Linux ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        if fields[0] == b"Z":
            return False
        if int(fields[3]) in sessions:  # after the name: state, ppid, pgrp, session
            return True
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return not environ_tokens.isdisjoint(environ.read().split(b"\0"))
    except (OSError, IndexError, ValueError):
        return False


def sweep(groups: dict[int, bytes], variable: bytes) -> None:
    """Kill every process left behind by ``groups`` (group id -> token, the group id also its
    session) until a look finds none; needs ``os.pidfd_open`` (Linux 5.3)."""
    tokens = {variable + b"=" + token for token in groups.values() if token}
    while groups and hasattr(os, "pidfd_open"):
        killed = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            if not is_left_behind(int(entry), groups, tokens):
                continue
            try:
                pidfd = os.pidfd_open(int(entry))
            except OSError:
                continue
            with contextlib.suppress(OSError):
                if is_left_behind(int(entry), groups, tokens):  # the pidfd is that process
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                    killed.append(pidfd)
                    continue
            os.close(pidfd)
        if not killed:
            return
        for pidfd in killed:
            exited = select.poll()  # poll, not select: any number of descriptors
            exited.register(pidfd, select.POLLIN)
            exited.poll()
            os.close(pidfd)


def act(tied: dict[bytes, bytes], action: list[str]) -> None:
    """Do ``action`` (the program's arguments after the interval) for ``tied``."""
    if not tied:
        return
    if action[0] == "kill":  # kill <variable>: SIGKILL each group (key: its id, payload: a token)
        groups = {int(pgid): token for pgid, token in tied.items()}
        for pgid in groups:
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)
        sweep(groups, os.fsencode(action[1]))
    else:  # run <directory> <command>...
        command = [*action[2:], *(os.fsdecode(key) for key in tied)]
        subprocess.run(command, cwd=action[1], stdin=subprocess.DEVNULL, check=False)


def main(argv: list[str]) -> int:
    """The program: ``argv`` is ``[interval, *action]``; returns its exit status, 0."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    os.chdir("/")  # keeps no mount of the parent's busy
    act(read_tied(0, float(argv[0])), argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
