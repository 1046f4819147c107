"""The process groups of live replicas, and signalling a whole group.

Every local replica is started in a session of its own (``start_new_session``, as
TorchX's ``torchx.schedulers.local_scheduler`` does), so its process id is also the id
of a process group holding its whole tree: :func:`signal_group` reaches every process
the replica started. :class:`ProcessGroups` is the registry of one scheduler's groups
still alive, so that it can end them all when it closes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator


def signal_group(pid: int | None, signum: int) -> bool:
    """Send ``signum`` to the process group led by ``pid``; a gone group is fine.

    Args:
        pid: the group leader's process id (the replica's), or None (nothing is sent).
        signum: the signal, e.g. ``signal.SIGTERM``.

    Returns:
        False when the group has no process left (``ESRCH``) or ``pid`` is None: an
        empty group can never get members again (joining a group needs a member of
        it), and its id is free for a new group once the leader's pid is reused.
    """
    if pid is None:
        return False
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member this user cannot signal: the group still exists
        pass
    return True


class ProcessGroups:
    """The process groups of live replicas that must not outlive their owner.

    The supervisor adds a replica's group once its process started and discards it
    once the process was reaped; the owner signals every group still registered.
    """

    __slots__ = ("_leaders",)

    def __init__(self) -> None:
        self._leaders: set[int] = set()

    def add(self, pgid: int) -> None:
        """Register the live group ``pgid`` (its leader's process id)."""
        self._leaders.add(pgid)

    def discard(self, pgid: int) -> None:
        """Forget the group ``pgid`` (its leader was reaped); an unknown group is fine."""
        self._leaders.discard(pgid)

    def signal_all(self, signum: int) -> None:
        """Send ``signum`` to every registered group (see :func:`signal_group`)."""
        for pgid in list(self._leaders):
            signal_group(pgid, signum)

    def __contains__(self, pgid: object) -> bool:
        return pgid in self._leaders

    def __iter__(self) -> Iterator[int]:
        return iter(list(self._leaders))

    def __len__(self) -> int:
        return len(self._leaders)
