"""Private files replaced atomically: what the local scheduler writes for other readers.

An app record (:mod:`._records`) and TorchX's ``SUCCESS`` file (:mod:`._success_file`)
are read by other processes while they may be rewritten. Each is written whole to a
temporary file of the same directory, created 0600 with ``O_CREAT | O_EXCL |
O_NOFOLLOW`` (a planted symbolic link is never followed), then renamed over the old one
with ``os.replace``: a reader sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import os
import secrets

#: The mode of every file written here: the user's alone.
PRIVATE_FILE_MODE = 0o600

_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def replace_private_file(directory: str, name: str, data: bytes) -> None:
    """Make ``<directory>/<name>`` hold ``data``, atomically, mode 0600.

    Args:
        directory: an existing directory of this user (the temporary file goes there,
            so the rename never crosses filesystems).
        name: the file's name in ``directory``.
        data: the whole content.

    Raises:
        OSError: it could not be written (a full disk, a removed directory); the old
            file, if any, stays whole and no temporary file is left.
    """
    temporary = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temporary, _FLAGS, PRIVATE_FILE_MODE)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(temporary, os.path.join(directory, name))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
