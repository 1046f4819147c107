"""Run TorchX 0.7.0's own unit tests against asynctorchx, as a TorchX user who switched would.

Usage (from the repository root, with the project's venv)::

    python compat/run_torchx_tests.py            # both sides, the whole applicable set
    python compat/run_torchx_tests.py -k finder  # only test files whose path contains "finder"
    python compat/run_torchx_tests.py --side ours --keep   # keep the temp dir to rerun by hand

Nothing of TorchX is committed: at run time the script takes TorchX 0.7.0's test files
from its source (a source tree given with ``--source``, else the git mirror of
pytorch/torchx at tag ``v0.7.0``), checks that the library files of that source are
byte-identical to the installed TorchX (``--torchx-python``'s ``torchx`` package), and
copies the tests into a temp dir twice:

* ``torchx/``: TorchX's tests as they are, run by TorchX's own venv (TorchX's figure);
* ``ours/``: the same tests with ``torchx`` imports rewritten to ``asynctorchx``, the
  schedulers and the runner taken from ``compat/torchx_sync`` (a blocking wrapper over our
  async methods), run by this venv.

Changes made on both sides alike: ``torchx.test.fixtures`` imports torch lazily (the
torch-only helper is not used by the applicable tests), and the Docker tests' ``busybox``
image is the local test image (there is no registry). Each side runs pytest once; the
per-test outcomes are compared and printed.
"""

from __future__ import annotations

import argparse
import ast
import filecmp
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VERSION = "0.7.0"
#: TorchX 0.7.0's venv: the one the benchmarks and .ci/run make
DEFAULT_TORCHX_PYTHON = str(REPO / "benchmarks" / ".venv-torchx" / "bin" / "python")
#: a git mirror of pytorch/torchx (``git clone --mirror``), when neither option names one
MIRROR_VARIABLE = "ASYNCTORCHX_TORCHX_MIRROR"
DOCKER_TEST_IMAGE = "asynctorchx-test/busybox:latest"

#: TorchX's unit tests of specs, runner, components and the local and Docker schedulers
APPLICABLE_FILES = [
    "specs/test/api_test.py",
    "specs/test/builders_test.py",
    "specs/test/file_linter_test.py",
    "specs/test/finder_test.py",
    "specs/test/named_resources_aws_test.py",
    "specs/test/named_resources_generic_test.py",
    "specs/test/named_resources_test.py",
    "runner/test/api_test.py",
    "runner/test/config_test.py",
    "components/test/dist_test.py",
    "components/test/metrics_test.py",
    "components/test/serve_test.py",
    "components/test/structured_arg_test.py",
    "components/test/utils_test.py",
    "schedulers/test/local_scheduler_test.py",
    "schedulers/test/docker_scheduler_test.py",
]

#: test infrastructure of TorchX's (not under test), copied next to the ported tests
INFRA = ["test", "specs/test", "runner/test", "components/test", "schedulers/test", "util"]

#: ``from <TorchX module> import`` -> the synchronous face of ours (compat/torchx_sync)
SYNC_MODULES = {
    "torchx.runner.api": "torchx_sync.runner_api",
    "torchx.runner": "torchx_sync.runner",
    "torchx.schedulers.local_scheduler": "torchx_sync.local_scheduler",
    "torchx.schedulers.docker_scheduler": "torchx_sync.docker_scheduler",
    "torchx.schedulers": "torchx_sync.schedulers",
}


# ---------------------------------------------------------------- getting the source
def installed_torchx(python: str) -> Path:
    """The directory of the ``torchx`` package ``python`` imports; its version is checked."""
    out = subprocess.run(
        [python, "-c", "import torchx, sys; print(torchx.__file__); print(torchx.__version__)"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    if out[1] != VERSION:
        sys.exit(f"{python} has TorchX {out[1]}, not {VERSION}")
    return Path(out[0]).parent


def source_tree(args: argparse.Namespace, tmp: Path) -> Path:
    """A TorchX source tree (``.../torchx``) with the tests."""
    if args.source:
        return Path(args.source).resolve() / "torchx"
    if not args.mirror:
        sys.exit(
            "no TorchX source: give --source (a checkout of pytorch/torchx at v0.7.0) or"
            f" --mirror (a `git clone --mirror` of it), or set {MIRROR_VARIABLE}"
        )
    dest = tmp / "source"
    dest.mkdir()
    archive = subprocess.run(
        ["git", "--git-dir", args.mirror, "archive", f"v{VERSION}", "torchx"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "x", "-C", str(dest)], input=archive, check=True)
    return dest / "torchx"


def check_same_library(source: Path, installed: Path) -> None:
    """Every library file of the source equals the installed one (tests aside)."""
    different = []
    for path in installed.rglob("*.py"):
        rel = path.relative_to(installed)
        if "__pycache__" in rel.parts:
            continue
        if not filecmp.cmp(path, source / rel, shallow=False):
            different.append(str(rel))
    if different:
        sys.exit(f"the TorchX source differs from the installed {VERSION}: {different[:5]}")


# ---------------------------------------------------------------- preparing both sides
def _guard_torch(fixtures: Path) -> None:
    text = fixtures.read_text()
    block = re.search(r"^from torch\.distributed.*?\n(?=\n)", text, re.M | re.S)
    if block:
        body = "".join(f"    {line}\n" for line in block.group(0).splitlines())
        text = text.replace(block.group(0), f"try:\n{body}except ImportError:\n    pass\n")
    fixtures.write_text(text)


def _local_image(path: Path) -> None:
    path.write_text(path.read_text().replace('image="busybox"', f'image="{DOCKER_TEST_IMAGE}"'))


def prepare_torchx_side(source: Path, root: Path) -> None:
    """TorchX's tree as it is, with the two changes made on both sides."""
    shutil.copytree(source, root / "torchx", ignore=shutil.ignore_patterns("__pycache__"))
    _guard_torch(root / "torchx/test/fixtures.py")
    _local_image(root / "torchx/schedulers/test/docker_scheduler_test.py")


#: ``torchx.<name>``, but not a URL's ``torchx.pytorch.org`` nor ``torchx.apps`` (TorchX's
#: apps, which the components run in TorchX's image, have no asynctorchx counterpart)
_IDENT = r"(?<![\w/.:-])torchx(?=\.[A-Za-z_])(?!\.pytorch\.org|\.apps\b)"


#: TorchX tests patch these module attributes; asynctorchx has no patch points there
#: (those modules only re-export), so the patch goes where our code looks the name up.
PATCH_TARGETS = {
    "asynctorchx.runner.api.log_event": "asynctorchx.runner._runner.log_event",
    "asynctorchx.runner.api.get_configured_trackers": (
        "asynctorchx.runner._runner.get_configured_trackers"
    ),
    "asynctorchx.schedulers.local_scheduler.make_unique": (
        "asynctorchx.schedulers.local._scheduler.make_unique"
    ),
    "asynctorchx.schedulers.docker_scheduler.make_unique": (
        "asynctorchx.schedulers.docker._request.make_unique"
    ),
}


#: the asynctorchx package measured (set by main: --package-path or the installed one)
OURS: list[Path] = []


def _util_module(match: re.Match[str]) -> str:
    """``torchx.util.<name>``: ours where asynctorchx has it, else TorchX's copy."""
    name = match.group(1)
    if any((root / "util" / f"{name}.py").exists() for root in OURS):
        return f"asynctorchx.util.{name}"
    return f"txtests.util.{name}"


def rewrite(text: str) -> str:
    """TorchX's imports (and dotted names in strings) rewritten for asynctorchx."""
    # TorchX's test infrastructure: its copy next to the tests
    text = re.sub(_IDENT + r"((?:\.\w+)*?\.test)\b", r"txtests\1", text)
    text = re.sub(_IDENT + r"\.util\.(\w+)", _util_module, text)
    # the schedulers and the runner: the synchronous face
    for theirs, ours in SYNC_MODULES.items():
        text = re.sub(
            rf"^(\s*)from {re.escape(theirs)} import", rf"\1from {ours} import", text, flags=re.M
        )
    text = re.sub(r"^(\s*)import torchx$", r"\1import asynctorchx", text, flags=re.M)
    text = re.sub(r"^(\s*)from torchx import", r"\1from asynctorchx import", text, flags=re.M)
    text = re.sub(r"^(\s*)import torchx\.", r"\1import asynctorchx.", text, flags=re.M)
    text = re.sub(_IDENT, "asynctorchx", text)
    for name, target in PATCH_TARGETS.items():
        text = text.replace(f'"{name}"', f'"{target}"')
    return text


def tolerant_imports(text: str) -> str:
    """Module-level ``from asynctorchx... import a, b`` made tolerant of a missing name.

    A TorchX test file imports many names at its top; a name asynctorchx lacks (often a
    private one) must fail the tests that use it, not every test of the file. Each such
    import becomes ``a, b = torchx_sync.names(module, ["a", "b"])``: a missing name (or
    module) is a placeholder that raises ``ImportError`` when used.
    """
    lines = text.splitlines(keepends=True)
    for node in reversed(ast.parse(text).body):
        if not (
            isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith(("asynctorchx", "torchx_sync"))
        ):
            continue
        targets = ", ".join(a.asname or a.name for a in node.names)
        wanted = [a.name for a in node.names]
        call = f"({targets},) = __import__('torchx_sync').names({node.module!r}, {wanted!r})\n"
        end = node.end_lineno or node.lineno
        lines[node.lineno - 1 : end] = [call]
    return "".join(lines)


def prepare_our_side(torchx_side: Path, root: Path) -> None:
    """The tests and TorchX's test infrastructure under ``txtests``, rewritten."""
    pkg = root / "txtests"
    for rel in INFRA:
        shutil.copytree(torchx_side / rel, pkg / rel, ignore=shutil.ignore_patterns("__pycache__"))
    for path in pkg.rglob("*"):
        if path.is_dir():
            (path / "__init__.py").touch()
    (pkg / "__init__.py").touch()
    for path in pkg.rglob("*.py"):
        path.write_text(tolerant_imports(rewrite(path.read_text())))


# ---------------------------------------------------------------- running and comparing
def test_dependencies(python: str, dest: Path) -> Path:
    """A dir of links to the third-party packages TorchX's tests import (fsspec, docker, ...).

    They come from TorchX's venv, put at the end of our side's ``sys.path``: TorchX's
    ``torchx`` package and every distribution's metadata (entry points) are left out.
    """
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    dest.mkdir()
    skip = ("torchx", "pip", "setuptools", "pkg_resources", "_distutils_hack", "__pycache__")
    for entry in Path(site).iterdir():
        if entry.name.startswith(skip) or entry.suffix in (".dist-info", ".pth"):
            continue
        (dest / entry.name).symlink_to(entry)
    return dest


def run_pytest(
    python: str, cwd: Path, files: list[str], pythonpath: list[str], tail: list[str], prefix: str
) -> dict[str, tuple[str, str]]:
    """Run each test file in a pytest process of its own; the outcomes of all of them.

    One process per file, as each TorchX test module stands alone: process-wide state
    one file leaves (e.g. asyncio's child watcher) does not decide another's results.
    ``tail`` (and this venv's pytest) go at the end of ``sys.path``.
    """
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(pythonpath), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"
    )
    env.pop("TORCHXCONFIG", None)
    tail = tail + [p for p in sys.path if p.endswith("site-packages")]
    cmd = [python, str(HERE / "_launch.py"), *tail, "--"]
    cmd += ["-q", "-p", "pytest_timeout", "-p", "no:cacheprovider"]
    cmd += ["-o", "addopts=", "--timeout", "120", "--rootdir", str(cwd)]
    results: dict[str, tuple[str, str]] = {}
    for index, test_file in enumerate(files):
        xml = cwd / f"results-{index}.xml"
        with (cwd / f"results-{index}.log").open("w") as log:  # pytest's own report
            subprocess.run(
                [*cmd, f"--junitxml={xml}", test_file],
                cwd=cwd,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                check=False,
            )
        results.update(outcomes(xml, prefix))
    return results


def outcomes(xml: Path, prefix: str) -> dict[str, tuple[str, str]]:
    """``file::Class::test`` -> (passed | failed | skipped, first line of the message).

    A file that could not be imported is recorded as ``file`` -> ("failed", the error).
    """
    result: dict[str, tuple[str, str]] = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        module, name = case.get("classname", ""), case.get("name", "")
        if not module:  # a collection error: name is the module
            error = case.find("error")
            text = (error.text or "") if error is not None else ""
            last = [line for line in text.splitlines() if line.startswith("E ")][-1:]
            path = name.replace(".", "/").removeprefix(prefix) + ".py"
            result[path] = (
                "failed",
                "cannot import the file: " + (last[0][1:].strip() if last else ""),
            )
            continue
        parts = module.split(".")
        key = "/".join(parts[:-1]).removeprefix(prefix) + ".py::" + parts[-1] + "::" + name
        state, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                lines = (child.get("message") or "").splitlines()
                state, message = "failed", lines[0] if lines else ""
                break
            if child.tag == "skipped":
                state, message = "skipped", child.get("message") or ""
        if result.get(key, ("passed",))[0] != "failed":
            result[key] = (state, message)
    return result


def main() -> None:
    """Prepare both sides, run them, print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", help="a TorchX 0.7.0 source checkout (the dir holding torchx/)")
    parser.add_argument(
        "--mirror",
        default=os.environ.get(MIRROR_VARIABLE, ""),
        help=f"git dir of pytorch/torchx (default: ${MIRROR_VARIABLE})",
    )
    parser.add_argument("--torchx-python", default=DEFAULT_TORCHX_PYTHON)
    parser.add_argument("--side", choices=["both", "ours", "torchx"], default="both")
    parser.add_argument(
        "--package-path",
        default="",
        help="a dir holding another asynctorchx/ to measure (e.g. a `git archive` of a branch)",
    )
    parser.add_argument("-k", dest="only", default="", help="only the test files containing this")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir and print it")
    parser.add_argument("-v", action="store_true", help="list every test, not only failures")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="asynctorchx-compat-"))
    try:
        installed = installed_torchx(args.torchx_python)
        source = source_tree(args, tmp)
        check_same_library(source, installed)
        if args.package_path:
            OURS.append(Path(args.package_path).resolve() / "asynctorchx")
        else:
            spec = importlib.util.find_spec("asynctorchx")
            if spec is not None and spec.submodule_search_locations:
                OURS.extend(Path(p) for p in spec.submodule_search_locations)
        files = [f for f in APPLICABLE_FILES if args.only in f]
        theirs_root, ours_root = tmp / "torchx_side", tmp / "ours_side"
        prepare_torchx_side(source, theirs_root)
        prepare_our_side(theirs_root / "torchx", ours_root)
        theirs: dict[str, tuple[str, str]] = {}
        ours: dict[str, tuple[str, str]] = {}
        if args.side in ("both", "torchx"):
            theirs = run_pytest(
                args.torchx_python,
                theirs_root,
                [f"torchx/{f}" for f in files],
                [str(theirs_root)],
                [],
                "torchx/",
            )
        if args.side in ("both", "ours"):
            ours = run_pytest(
                sys.executable,
                ours_root,
                [f"txtests/{f}" for f in files],
                [p for p in (args.package_path, str(ours_root), str(HERE)) if p],
                [str(test_dependencies(args.torchx_python, tmp / "deps"))],
                "txtests/",
            )
        report(theirs, ours, verbose=args.v)
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def report(
    theirs: dict[str, tuple[str, str]], ours: dict[str, tuple[str, str]], verbose: bool
) -> None:
    """The per-test table and the figures.

    Applicable: every test collected on TorchX's side that it does not skip (a skip there
    means the test needs what this machine lacks, such as torch).
    """

    def outcome(side: dict[str, tuple[str, str]], name: str) -> tuple[str, str]:
        return side.get(name) or side.get(name.split("::")[0]) or ("-", "not run")

    names = sorted(n for n in set(theirs) | set(ours) if "::" in n)
    applicable = [n for n in names if outcome(theirs, n)[0] != "skipped"]
    for name in names:
        t, o = outcome(theirs, name), outcome(ours, name)
        if verbose or o[0] != "passed" or t[0] != "passed":
            note = o[1] if o[0] != "passed" else t[1]
            print(f"{t[0]:>7} {o[0]:>7}  {name}  {note[:200]}")
    print("\n(columns: TorchX 0.7.0, asynctorchx)")
    print(f"applicable tests: {len(applicable)}")
    for label, side in (("TorchX 0.7.0", theirs), ("asynctorchx", ours)):
        if side:
            passed = sum(1 for n in applicable if outcome(side, n)[0] == "passed")
            print(f"{label} passes: {passed}/{len(applicable)}")


if __name__ == "__main__":
    main()
