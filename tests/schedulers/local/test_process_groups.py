"""Signalling a replica's process group (``_supervisor.signal_group``)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from asynctorchx.schedulers.local._supervisor import signal_group

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups")


def test_signal_group_says_whether_the_group_still_had_a_process() -> None:
    leader = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        assert signal_group(leader.pid, 0) is True  # signal 0: only the existence check
    finally:
        leader.kill()
        leader.wait()
    # the group is empty: nothing can join it again (the supervisor stops signalling it)
    assert signal_group(leader.pid, signal.SIGKILL) is False
    assert signal_group(None, signal.SIGKILL) is False
