"""The ``SUCCESS`` file: the app's logs are complete and can be read.

TorchX's ``torchx.schedulers.local_scheduler`` writes ``<app log dir>/SUCCESS`` once an
app has ended and its log files are closed, whatever the app's final state (the name
says the logs were closed successfully, not that the app succeeded). Tools that read a
local app's logs wait for it. It is JSON, indented by 2: ``app_id``, ``log_dir``,
``final_state`` (the ``AppState`` name), ``last_updated`` (seconds since the epoch) and
``roles``, per role name a list of its replicas with ``replica_id``, ``pid``,
``exitcode``, ``stdout``, ``stderr`` (the log files) and ``error_file`` (the
TorchElastic error file).

It is written here when the app reaches its terminal state, after every line of output
was written to the logs and before any waiter of the app wakes, so a caller of ``wait``
finds it. Unlike TorchX's (``open(path, "w")``), it is written like the other files of
the log directory: a 0600 temporary file created with ``O_CREAT | O_EXCL | O_NOFOLLOW``,
then renamed over ``SUCCESS`` (a planted symbolic link is replaced, never followed), so a
reader sees the whole file or none.

The text is TorchX's ``json.dumps(info, indent=2)``.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from asynctorchx.schedulers.local._private_files import replace_private_file
from asynctorchx.schedulers.local._supervisor import LocalApp

logger = logging.getLogger(__name__)

#: The file's name in the app's log directory (TorchX's).
SUCCESS_FILE = "SUCCESS"


def success_info(app: LocalApp, now: float | None = None) -> dict[str, Any]:
    """The content of ``app``'s ``SUCCESS`` file (TorchX's keys).

    Args:
        app: the app, normally terminal.
        now: ``last_updated``, seconds since the epoch (default: the current time).
    """
    roles = {
        role_name: [
            {
                "replica_id": replica.replica_id,
                "pid": replica.pid,
                "exitcode": replica.exit_code,
                "stdout": replica.param.stdout,
                "stderr": replica.param.stderr,
                "error_file": replica.error_file,
            }
            for replica in replicas
        ]
        for role_name, replicas in app.replicas.items()
    }
    return {
        "app_id": app.request.app_id,
        "log_dir": app.request.log_dir,
        "final_state": app.state.name,
        "last_updated": time.time() if now is None else now,
        "roles": roles,
    }


def write_success_file(app: LocalApp) -> None:
    """Write ``<app log dir>/SUCCESS`` atomically (0600); log, never raise, on failure.

    A failure (the log directory removed, a full disk) is logged as a warning: the app
    has ended either way, and its state is what the scheduler reports.

    Args:
        app: the app that has just ended.
    """
    directory = app.request.log_dir
    data = json.dumps(success_info(app), indent=2).encode()
    try:
        replace_private_file(directory, SUCCESS_FILE, data)
    except OSError as error:
        logger.warning(
            "%s: could not write %s in %s: %s", app.request.app_id, SUCCESS_FILE, directory, error
        )
