"""Run pytest in one process of the measurement (both sides), then end the process.

Usage: ``python compat/_launch.py <dir to append to sys.path>... -- <pytest args>``.

* multiprocessing starts children with ``spawn``: on our side the synchronous face runs
  an event loop in a thread, and a ``fork`` taken while that thread holds a lock leaves
  the child deadlocked (TorchX's ``test_no_orphan_process_function`` forks);
* after pytest has written its report, what a test left running is stopped (within
  30 seconds) and the process ends without waiting for leftover threads or children.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading


def main() -> None:
    """Extend ``sys.path``, run pytest, stop the synchronous face, exit with pytest's code."""
    split = sys.argv.index("--")
    sys.path.extend(sys.argv[1:split])
    multiprocessing.set_start_method("spawn", force=True)
    import pytest

    code = pytest.main(sys.argv[split + 1 :])
    sync = sys.modules.get("torchx_sync")
    if sync is not None:  # close what tests left open, but never wait forever
        stopper = threading.Thread(target=sync._stop_portal, daemon=True)
        stopper.start()
        stopper.join(timeout=30)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(code))


if __name__ == "__main__":
    main()
