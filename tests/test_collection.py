"""The test suite collects without the optional extras, as the README's test command installs it.

The README's test command installs ``.[test]`` only. A test module that imports an
extra's package at module level (``import httpx``) stops pytest's collection for the
whole suite on such a machine, so every module imports them where a test runs, after
its conftest has skipped it (or, under CI's ``ASYNCTORCHX_REQUIRE_*``, failed it).
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: the extras the README's test command leaves out
ABSENT_EXTRAS = ("web", "torch", "docs", "tracker")


def _normalized(name: str) -> str:
    """A distribution's name as the packaging specification compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _extras_distributions() -> set[str]:
    """The distributions the :data:`ABSENT_EXTRAS` of ``pyproject.toml`` name, normalized."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    return {
        _normalized(re.split(r"[<>=!~ \[;]", requirement, maxsplit=1)[0])
        for extra in ABSENT_EXTRAS
        for requirement in extras[extra]
    }


def _site_packages(python: str) -> Path:
    """The ``site-packages`` directory of the interpreter ``python``."""
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    done = subprocess.run([python, "-c", where], capture_output=True, text=True, check=True)
    return Path(done.stdout.strip())


def _venv_without_extras(target: Path) -> Path:
    """A venv holding this one's site-packages minus the extras' distributions; its python.

    Every entry of this interpreter's site-packages is linked into the new venv's, except
    the top-level packages and ``.dist-info`` directories of the extras' distributions:
    what ``pip install -e '.[test]'`` leaves, without installing anything again.

    Args:
        target: the directory to create the venv in.
    """
    absent = _extras_distributions()
    hidden: set[str] = set()
    for distribution in importlib.metadata.distributions():
        if _normalized(distribution.metadata["Name"]) in absent:
            hidden.update(Path(str(file)).parts[0] for file in distribution.files or ())
    venv.EnvBuilder(with_pip=False).create(target)
    python = target / "bin" / "python"
    ours, theirs = _site_packages(sys.executable), _site_packages(str(python))
    for entry in ours.iterdir():
        if entry.name not in hidden and not (theirs / entry.name).exists():
            (theirs / entry.name).symlink_to(entry)
    return python


def test_the_suite_collects_without_the_web_torch_docs_and_tracker_extras(tmp_path: Path) -> None:
    python = _venv_without_extras(tmp_path / "venv")
    gone = subprocess.run(
        [str(python), "-c", "import httpx"], capture_output=True, text=True, check=False
    )
    assert "No module named 'httpx'" in gone.stderr, "the venv still has the web extra"
    collected = subprocess.run(
        [str(python), "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert collected.returncode == 0, collected.stdout[-4000:] + collected.stderr[-2000:]
    assert re.search(r"^\d+ tests collected", collected.stdout, flags=re.MULTILINE)
