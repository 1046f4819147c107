"""The TorchElastic error files of local replicas.

Each replica gets ``TORCHELASTIC_ERROR_FILE=<replica_log_dir>/error.json``; a replica
that fails may write its error there. As in TorchX's ``torchx.schedulers.local_scheduler``,
a replica's status shows its file; the app's structured error, the earliest of them, is
chosen by :func:`asynctorchx.schedulers.toolkit.earliest_error`.
"""

from __future__ import annotations

import os
import time

from asynctorchx.specs.api import NONE


def keep_error_file(path: str) -> None:
    """Move a previous attempt's error file aside so the new attempt starts clean.

    It becomes ``<path>.<milliseconds since the epoch>``; a missing file is fine.

    Args:
        path: the replica's error file.

    Raises:
        OSError: the file exists and could not be renamed.
    """
    if os.path.exists(path):
        os.replace(path, f"{path}.{int(time.time() * 1000)}")


def read_error_file(path: str) -> str:
    """Return the text of the error file at ``path``, or ``NONE`` if it cannot be read.

    Args:
        path: the replica's error file.
    """
    try:
        with open(path, encoding="utf-8") as error_file:
            return error_file.read()
    except OSError:
        return NONE
