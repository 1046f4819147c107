"""Benchmark 6: ``run -s local_cwd utils.echo --msg hi`` as a whole process; wall and max RSS.

Ours: ``.venv/bin/asynctorchx run -s local_cwd utils.echo --msg hi``; TorchX:
``.venv-torchx/bin/torchx run -s local_cwd utils.echo --msg hi``; floor: ``python -c pass``.
Each trial starts the command and reaps it with ``os.wait4``: ``seconds`` is wall time,
``rss_mb`` the process's own peak RSS (MB; child replicas are not included).
Also reports ``lost`` (1 when "hi" is missing from the output), feeding benchmark 8.

Both CLIs run from compiled bytecode, as an installed package does: the orchestrator
compiles ``asynctorchx`` (``compileall``, into its ``__pycache__``) before the trials,
since an editable install under ``PYTHONDONTWRITEBYTECODE=1`` (set on the build VM) would
otherwise compile ~70 modules from source on every run (~0.16 s), while pip compiled
TorchX's when it installed it. Our CLI keeps its app records in a fresh state directory
per trial (``_harness.isolated_state_dir``): the first submit of a process prunes the
records directory, reading every record in it (a cost that grows with what other runs
left there; see the README).

``python benchmarks/bench_cli.py [--smoke] [--trials N]`` prints the table and writes
``benchmarks/results/cli.json`` (``cli-smoke.json``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import (
    OUR_PY,
    REPO,
    TORCHX_VENV,
    Unavailable,
    bench_args,
    default_skips,
    driver_main,
    is_driver,
    isolated_state_dir,
    machine,
    orchestrate,
    save,
    table,
    timed_process_rss,
)
from _sides import tmpdir

OURS_CLI = REPO / ".venv" / "bin" / "asynctorchx"
TX_CLI = TORCHX_VENV / "bin" / "torchx"


def _cli(argv: list[str]) -> dict[str, Any]:

    os.chdir(tmpdir())
    res = timed_process_rss(argv)
    if res["rc"] != 0:
        raise RuntimeError(f"{argv[0]} exited {res['rc']}: {res['stderr'].strip()[-200:]}")
    lost = 0 if "hi" in res["stdout"].split() else 1
    return {"seconds": res["wall"], "rss_mb": res["max_rss_mb"], "lost": lost}


def ours(p: dict[str, Any]) -> dict[str, Any]:
    """One trial of our CLI (``asynctorchx run ...``), whole process. ``p``: unused. Returns
    ``seconds``, ``rss_mb``, ``lost``; raises :class:`Unavailable` without the console script,
    ``RuntimeError`` on a nonzero exit.
    """
    if not OURS_CLI.exists():
        raise Unavailable(f"{OURS_CLI} missing")
    isolated_state_dir()  # inherited by the CLI's process
    return _cli([str(OURS_CLI), "run", "-s", "local_cwd", "utils.echo", "--msg", "hi"])


def torchx(p: dict[str, Any]) -> dict[str, Any]:
    """One trial of the ``torchx`` CLI (its venv), whole process. ``p``: unused. Returns
    ``seconds``, ``rss_mb``, ``lost``; ``RuntimeError`` on a nonzero exit.
    """
    return _cli([str(TX_CLI), "run", "-s", "local_cwd", "utils.echo", "--msg", "hi"])


def floor(p: dict[str, Any]) -> dict[str, Any]:
    """One trial of ``python -c pass`` (our interpreter): ``seconds`` and ``rss_mb``."""
    res = timed_process_rss([str(OUR_PY), "-c", "pass"])
    return {"seconds": res["wall"], "rss_mb": res["max_rss_mb"]}


def run(smoke: bool, trials: int) -> list[dict[str, Any]]:
    """Orchestrate benchmark 6 (our package compiled first, see the module); returns rows."""
    compile_package()
    return orchestrate(
        "6 CLI run", Path(__file__), [{}], ["seconds", "rss_mb"], trials, skip=default_skips()
    )


def compile_package() -> None:
    """Compile ``asynctorchx`` to bytecode in its ``__pycache__`` directories, as pip does."""
    import compileall

    compileall.compile_dir(str(REPO / "asynctorchx"), quiet=1)


if __name__ == "__main__":
    if is_driver():
        driver_main({"ours": ours, "floor": floor, "torchx": torchx})
    else:
        ns = bench_args(default_trials=10)
        desc = machine()
        rows = run(ns.smoke, ns.trials)
        print(table(rows))
        save("cli-smoke" if ns.smoke else "cli", rows, desc)
