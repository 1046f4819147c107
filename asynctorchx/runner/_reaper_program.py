"""The reaper program: cancels the apps of a driver that died (see :mod:`._reaper`).

Run as a file by the interpreter in isolated mode, in a session of its own, its standard
input the read end of the driver's pipe::

    python -I _reaper_program.py <python> <directory>

It imports nothing but the standard library. :func:`main` ignores ``SIGINT``,
``SIGTERM`` and ``SIGHUP`` (a closed terminal does not stop it) and leaves the driver's
working directory; :func:`read_tied` reads the driver's lines until end of file. If the
driver did not say it left normally, its apps still tied are cancelled by
``<python> -m asynctorchx.runner._reap_apps <handle>...``, run in ``<directory>`` with the
driver's environment: the configuration the driver's CLI would use.
"""

import os
import signal
import subprocess
import sys


def read_tied(fd: int) -> tuple[list[str], bool]:
    """Read the driver's lines from ``fd`` until end of file.

    ``+<handle>`` ties an app (to cancel if the driver dies), ``-<handle>`` unties it,
    ``.`` says the driver leaves normally.

    Args:
        fd: the read end of the driver's pipe (blocking).

    Returns:
        The handles tied and not untied, in the order they were tied, and whether the
        driver said it left normally.
    """
    tied: dict[str, None] = {}
    released = False
    pending = b""
    while chunk := os.read(fd, 65536):
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            text = line.decode()
            if text[:1] == "+":
                tied[text[1:]] = None
            elif text[:1] == "-":
                tied.pop(text[1:], None)
            elif text == ".":
                released = True
    return list(tied), released


def main() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    python, directory = sys.argv[1:3]
    os.chdir("/")  # holds no mount of the driver's busy
    handles, released = read_tied(sys.stdin.fileno())
    if handles and not released:
        command = [python, "-m", "asynctorchx.runner._reap_apps", *handles]
        subprocess.run(command, cwd=directory, stdin=subprocess.DEVNULL, check=False)


if __name__ == "__main__":
    main()
