"""Checking the ``log_dir`` of a local app before anything is created in it.

TorchX's ``torchx.schedulers.local_scheduler`` calls ``os.makedirs`` at submit and lets
its ``OSError`` through: a ``log_dir`` that is a file, that this user cannot write, or
whose path is too long ends a submit with ``NotADirectoryError``, ``PermissionError`` or
``OSError: File name too long``, sometimes after creating part of the directories. Here:

* :func:`check_log_dir` runs at dry run and creates nothing: the first existing
  directory on the way to the app's log directory must be a directory this user can
  write to, and no part of a log path may be longer than the file system allows;
* :func:`create_log_dirs` runs at submit: it makes the directories (through
  ``_prepare_log_dirs``, which checks who owns them) and, when that fails,
  removes the ones it created and raises
  :class:`~asynctorchx.errors.InvalidLogDirError` (or the ``UnsafeLogPathError`` of
  ``_prepare_log_dirs``), so a refused submit leaves nothing behind.

In the scheduler's own temporary log directory (0700, made by the first submit) the
directory itself and the session's are made and checked once, not at every submit:
both functions take the set of those ``trusted`` directories.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Container, Sequence

from asynctorchx.errors import InvalidLogDirError, UnsafeLogPathError
from asynctorchx.schedulers.local._log_files import (
    DIRECTORY_MODE,
    STREAM_FILES,
    foreign_file_error,
)
from asynctorchx.schedulers.toolkit import symlink_error

#: The longest file name in a replica's log directory (``combined.log.idx``, ``SUCCESS``).
_LONGEST_FILE = "combined.log.idx"
#: Used when the file system does not say (Linux's NAME_MAX and PATH_MAX).
_NAME_MAX = 255
_PATH_MAX = 4096

_FIX = "choose a log_dir that is a directory you can write to (or leave log_dir unset)"


def _missing_directories(path: str, trusted: Container[str] = frozenset()) -> list[str]:
    """``path`` and those of its parents that do not exist yet (a ``trusted`` one is taken
    to), parents first."""
    missing: list[str] = []
    while path not in trusted and not os.path.lexists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    missing.reverse()
    return missing


def _limit(path: str, name: str, default: int) -> int:
    try:
        return os.pathconf(path, name)
    except (OSError, ValueError):
        return default


def check_log_dir(
    root: str, replica_dirs: Sequence[str], trusted: Container[str] = frozenset()
) -> None:
    """Check that the replicas' log directories can be made under ``root``; create nothing.

    Args:
        root: the ``log_dir`` (its links resolved), or the scheduler's temporary one.
        replica_dirs: each replica's log directory, below ``root``.
        trusted: directories the scheduler made and checked itself (see
            :func:`create_log_dirs`): taken to exist and to be writable, not asked again.

    Raises:
        InvalidLogDirError: the first existing directory on the way is not a directory
            or not writable by this user, or a log path (or a part of it) is longer than
            the file system allows.
    """
    target = replica_dirs[0] if replica_dirs else root
    missing = _missing_directories(target, trusted)
    ancestor = os.path.dirname(missing[0]) if missing else target
    if ancestor not in trusted:
        _check_writable(root, ancestor)
    name_max = _limit(ancestor, "PC_NAME_MAX", _NAME_MAX)
    path_max = _limit(ancestor, "PC_PATH_MAX", _PATH_MAX)
    for replica_dir in replica_dirs:
        _check_lengths(root, replica_dir, name_max, path_max)


def _check_writable(root: str, ancestor: str) -> None:
    """Refuse ``ancestor`` (the first existing directory on the way to the log
    directories) when it is not a directory this user can create files in."""
    if not os.path.isdir(ancestor):
        reason = "it is not a directory" if ancestor == root else f"{ancestor!r} is a file"
        raise InvalidLogDirError(root, reason, _FIX)
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise InvalidLogDirError(
            root, f"this user (uid {os.geteuid()}) cannot create files in {ancestor!r}", _FIX
        )


def _check_lengths(root: str, replica_dir: str, name_max: int, path_max: int) -> None:
    """Refuse a replica's log paths longer than the file system allows (a part longer
    than ``name_max`` bytes, a whole path of ``path_max`` bytes or more)."""
    longest = os.path.join(replica_dir, _LONGEST_FILE)
    too_long = [part for part in longest.split(os.sep) if len(os.fsencode(part)) > name_max]
    if too_long:
        raise InvalidLogDirError(
            root,
            f"the path part {too_long[0][:40]!r}... is {len(os.fsencode(too_long[0]))}"
            f" bytes long, more than the file system's {name_max}",
            "shorten the directory names of log_dir (session and role names are at most"
            " 100 characters)",
        )
    if len(os.fsencode(longest)) >= path_max:
        raise InvalidLogDirError(
            root,
            f"its log paths would be {len(os.fsencode(longest))} bytes long, more than"
            f" the file system's {path_max}",
            "choose a log_dir with a shorter path",
        )


def create_log_dirs(
    root: str, replica_dirs: Sequence[str], trusted: set[str] | None = None
) -> None:
    """Make the replicas' log directories (``_prepare_log_dirs``), all or none.

    Args:
        root: the log root (``log_dir``, or the scheduler's temporary directory).
        replica_dirs: each replica's log directory, below ``root``.
        trusted: for the scheduler's own temporary log directory (0700: no other user
            can change what is in it), the directories it already made and checked
            (``root`` and the session's directory), which are not made or checked again
            (a submit then costs the three ``mkdir`` of the app, role and replica
            directories and no ``lstat``); the caller adds them once a submit succeeded.
            When one of them is gone (removed by this user), the set is emptied and
            every directory made and checked again.

    Raises:
        UnsafeLogPathError: a directory or file on the way is not safe (see
            ``_prepare_log_dirs``); the directories created by this call are removed.
        InvalidLogDirError: a directory could not be created (no permission, a file in
            the way, a read-only file system); the directories created by this call are
            removed.
    """
    created: list[str] = []
    try:
        _prepare_log_dirs(root, replica_dirs, trusted or (), created)
        return
    except UnsafeLogPathError:
        _remove_empty(created)
        raise
    except OSError as error:
        _remove_empty(created)
        if not trusted or not isinstance(error, FileNotFoundError):
            raise _invalid_log_dir(root, error) from error
    # a trusted directory was removed since it was checked: make and check them all again
    trusted.clear()
    create_log_dirs(root, replica_dirs)


def _invalid_log_dir(root: str, error: OSError) -> InvalidLogDirError:
    where = error.filename if isinstance(error.filename, str) else root
    return InvalidLogDirError(where, error.strerror or str(error), _FIX)


def _remove_empty(directories: Sequence[str]) -> None:
    """Remove the ``directories`` this call created, deepest first, if still empty."""
    for directory in sorted(directories, key=len, reverse=True):
        with contextlib.suppress(OSError):
            os.rmdir(directory)


def _prepare_log_dirs(
    root: str, replica_dirs: Sequence[str], trusted: Container[str], made: list[str]
) -> None:
    """Create the log directories of an app under ``root``, private, before it starts.

    ``root`` is the ``log_dir`` run option (or the scheduler's temporary directory); it
    and each missing parent is created 0700. An existing ``root`` must be a directory
    (not a symbolic link: the dry run resolved the option's links) owned by this user or
    by root, and not writable by every user unless sticky (``/tmp`` is fine). Every
    directory below it (session, app, role, replica) is created 0700; an existing one
    must be a directory of this user (its mode is narrowed to 0700). When the app's
    directory already existed, no log file of a replica may be a symbolic link or a
    file of another user.

    ``trusted`` directories are neither created nor checked again; each directory made is
    appended to ``made``, parents first.
    """
    if root not in trusted:
        _make_root(root, made)
    known: dict[str, bool] = {root: False}  # directory -> created by this call
    for replica_dir in replica_dirs:
        parts = os.path.relpath(replica_dir, root).split(os.sep)
        path = root
        fresh = False
        for part in parts:
            path = os.path.join(path, part)
            made_now = known.get(path)
            if made_now is None:
                made_now = known[path] = path not in trusted and _make_private_dir(path)
                if made_now:
                    made.append(path)
            fresh = fresh or made_now
        if not fresh:  # an existing directory: what is in it is not known to be ours
            for name in STREAM_FILES:
                log_path = os.path.join(replica_dir, f"{name}.log")
                _check_existing_file(log_path)
                _check_existing_file(log_path + ".idx")


def _make_root(root: str, created: list[str]) -> None:
    """Create ``root`` and its missing parents (0700, each appended to ``created``), then
    check it."""
    missing = _missing_directories(root)
    for directory in missing:
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, DIRECTORY_MODE)
            created.append(directory)
        _check_root(directory)
    if not missing:
        _check_root(root)


def _check_root(path: str) -> None:
    info = _check_directory(path, (os.geteuid(), 0), "give a directory as log_dir")
    if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
        raise UnsafeLogPathError(
            path,
            "is writable by every user (mode"
            f" {stat.S_IMODE(info.st_mode):04o}), so another user can replace what is in it",
            f"run `chmod o-w {path}` (or `chmod +t`), or choose a log_dir of your own",
        )


def _make_private_dir(path: str) -> bool:
    """Create ``path`` 0700 and return True, or check an existing one and return False."""
    try:
        os.mkdir(path, DIRECTORY_MODE)
    except FileExistsError:
        pass
    else:
        return True
    info = _check_directory(path, (os.geteuid(),), "remove it, or choose another log_dir")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, DIRECTORY_MODE)
    return False


def _check_directory(path: str, owners: tuple[int, ...], fix: str) -> os.stat_result:
    """``path``'s ``lstat``, once it is known to be a directory (not a link) of one of
    ``owners``; else the :class:`UnsafeLogPathError` saying why (``fix`` for a file)."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise symlink_error(path)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeLogPathError(path, "is not a directory", fix)
    if info.st_uid not in owners:
        raise UnsafeLogPathError(
            path,
            f"is owned by uid {info.st_uid}, not by this user (uid {os.geteuid()}), who"
            " could then read or redirect the logs",
            "remove it or choose a log_dir of your own (e.g. under your home directory)",
        )
    return info


def _check_existing_file(path: str) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise symlink_error(path)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_nlink != 1:
        raise foreign_file_error(path)
