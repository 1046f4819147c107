"""The watchdog program: kills the replicas of a host that is gone (see :mod:`._parent_death`).

Run as a file by the interpreter in isolated mode, its standard input the read end of
the host's pipe::

    python -I -S _watchdog.py <read interval in seconds> <token variable>

It imports nothing but the standard library (isolated mode puts neither this directory
nor the package on ``sys.path``). :func:`main` ignores ``SIGINT``, ``SIGTERM`` and
``SIGHUP`` and leaves the host's working directory, then :func:`watch` reads
``+<pgid> <token>`` and ``-<pgid>`` lines until end of file, ``SIGKILL``\\ s every group
still tied, and sweeps ``/proc`` for the processes those groups left behind
(:func:`sweep`).
"""

import contextlib
import os
import select
import signal
import sys
import time


def read_groups(fd: int, interval: float) -> dict[int, bytes]:
    """Read the host's lines from ``fd`` until end of file; return the groups still tied.

    ``+<pgid> <token>`` ties a group (its token may be empty), ``-<pgid>`` unties it.
    After each read that got data it sleeps ``interval`` seconds, so that a busy host's
    writes land in the pipe without waking this reader each time.

    Args:
        fd: the read end of the host's pipe (blocking).
        interval: seconds slept after each read that got data.

    Returns:
        Each process group tied and not untied, with its replica's token.

    Raises:
        ValueError: a line names no integer process group (not a host's line).
    """
    groups: dict[int, bytes] = {}
    pending = b""
    while chunk := os.read(fd, 65536):
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            if line[:1] == b"+":
                pgid, _, token = line[1:].partition(b" ")
                groups[int(pgid)] = token
            elif line[:1] == b"-":
                groups.pop(int(line[1:]), None)
        time.sleep(interval)
    return groups


def kill_groups(groups: dict[int, bytes]) -> None:
    """Send ``SIGKILL`` to each process group of ``groups``; a group already gone is fine.

    Args:
        groups: process group -> token, as :func:`read_groups` returns.
    """
    for pgid in groups:
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)


def is_left_behind(pid: int, sessions: dict[int, bytes], environ_tokens: set[bytes]) -> bool:
    """Whether the live process ``pid`` belongs to a tied replica (Linux ``/proc``).

    Args:
        pid: a process id.
        sessions: the tied groups, whose ids are also their replicas' sessions.
        environ_tokens: ``<token variable>=<token>`` entries of the tied replicas.

    Returns:
        True when it is not a zombie and it is in one of the ``sessions``, or one of
        ``environ_tokens`` is in its environment; False when it is gone or unreadable.
    """
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
    """Kill every process left behind by ``groups`` (see :func:`is_left_behind`), until
    a look finds none.

    Each is killed through a pid file descriptor, opened then checked again, so a
    reused pid is never hit, and its exit awaited, so that the next look finds what it
    forked meanwhile. Does nothing for no groups, or without ``os.pidfd_open`` (Linux
    5.3).

    Args:
        groups: process group -> token, as :func:`read_groups` returns.
        variable: the name of the environment variable holding a replica's token.
    """
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
            try:
                if is_left_behind(int(entry), groups, tokens):  # the pidfd is that process
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                    killed.append(pidfd)
                    continue
            except OSError:
                pass
            os.close(pidfd)
        if not killed:
            return
        for pidfd in killed:
            exited = select.poll()
            exited.register(pidfd, select.POLLIN)
            exited.poll()
            os.close(pidfd)


def watch(fd: int, interval: float, variable: bytes) -> None:
    """Read the host's lines from ``fd`` until end of file, then kill what is left tied.

    Args:
        fd: the read end of the host's pipe.
        interval: seconds slept after each read that got data (see :func:`read_groups`).
        variable: the name of the environment variable holding a replica's token.
    """
    groups = read_groups(fd, interval)
    kill_groups(groups)
    sweep(groups, variable)


def main(argv: list[str] | None = None) -> int:
    """The program: detach from the host's signals and directory, then :func:`watch`
    standard input.

    Args:
        argv: ``[interval, variable]`` (default: ``sys.argv[1:]``).

    Returns:
        0, its exit status.
    """
    interval, variable = sys.argv[1:] if argv is None else argv
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    os.chdir("/")
    watch(0, float(interval), os.fsencode(variable))
    return 0


if __name__ == "__main__":
    sys.exit(main())
