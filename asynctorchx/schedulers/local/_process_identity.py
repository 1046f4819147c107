"""Knowing a process again later from another process: pid, start time and boot (Linux only)."""

# No ``from __future__ import annotations``: see ``_records``.
import contextlib
import ctypes
import functools
import os
import select
import signal
from pathlib import Path

import attrs


@attrs.define(frozen=True)
class ProcessIdentity:
    """One process, for good: its pid, start time and the boot it ran in."""

    pid: int
    start_time: int
    boot_id: str

    @classmethod
    def of(cls, pid: int, parent: int | None = None) -> "ProcessIdentity | None":
        """The identity of the process ``pid`` now; None if it is gone or off Linux."""
        stat = proc_stat(pid)
        if stat is None or (parent is not None and stat[1] != parent):
            return None
        return cls(pid, stat[4], boot_id())

    def is_running(self) -> bool:
        """Whether this very process still runs (same start time and boot, not exited)."""
        stat = proc_stat(self.pid)
        return (
            stat is not None
            and stat[0] != "Z"
            and stat[4] == self.start_time
            and self.boot_id == boot_id()
        )


@functools.lru_cache(maxsize=1)
def boot_id() -> str:
    """The kernel's boot id (``/proc/sys/kernel/random/boot_id``), "" when unknown."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as file:
            return file.read().strip()
    except OSError:
        return ""


def proc_stat(pid: int) -> tuple[str, int, int, int, int] | None:
    """``(state, parent, process group, session, start time)`` of ``pid`` from ``/proc/<pid>/stat``;
    None if it is gone or unreadable (off Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
        # after the command's ")": field 3 (state) is fields[0], so field N is fields[N - 3]
        return fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


@functools.cache
def pidfd_supported() -> bool:
    """Whether this kernel and Python have ``pidfd_open`` (Linux 5.3)."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


@functools.lru_cache(maxsize=1)
def libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def this_process() -> ProcessIdentity | None:
    """The identity of this process (read again after a fork); None off Linux."""
    return _identity_of(os.getpid())


@functools.lru_cache(maxsize=1)  # one entry: this process's pid, another after a fork
def _identity_of(pid: int) -> ProcessIdentity | None:
    return ProcessIdentity.of(pid)


def signal_group_if_same(identity: ProcessIdentity, pgid: int, signum: int) -> bool:
    """Signal the process group ``pgid`` led by ``identity``, if it still is that process."""
    try:
        pidfd = os.pidfd_open(identity.pid)
    except (AttributeError, OSError):  # gone (ProcessLookupError), or no pidfd_open here
        return False
    try:
        stat = proc_stat(identity.pid)
        if not identity.is_running() or stat is None or stat[2] != pgid:
            return False
        try:
            signal.pidfd_send_signal(pidfd, signum)
        except OSError:  # it exited since the check
            return False
        if not select.select([pidfd], [], [], 0)[0]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signum)
        return True
    finally:
        os.close(pidfd)
