"""Benchmark 8: lines lost: ``run -s local_cwd utils.echo --msg hi`` R times, output checked.

R = 200 for ours, 20 for TorchX (the issue's figure; TorchX takes ~0.5 s a run), smoke: 3 each.
Each run is a whole CLI process (see ``bench_cli``); ``lost`` counts runs whose stdout and
stderr lack the line ``hi``. One trial = R runs; the metric is the count lost out of R.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import (
    REPO,
    TORCHX_VENV,
    Unavailable,
    bench_args,
    default_skips,
    driver_main,
    is_driver,
    orchestrate,
    table,
    timed_process,
)
from _sides import tmpdir


def _runs(cli: Path, r: int) -> dict[str, Any]:
    if not cli.exists():
        raise Unavailable(f"{cli} missing")
    os.chdir(tmpdir())
    lost = 0
    errors = 0
    for _ in range(r):
        res = timed_process([str(cli), "run", "-s", "local_cwd", "utils.echo", "--msg", "hi"])
        if res["rc"] != 0:
            errors += 1
        if "hi" not in (res["stdout"] + res["stderr"]).split():
            lost += 1
    if errors == r:
        raise RuntimeError(
            f"all {r} runs of {cli.name} exited nonzero: {res['stderr'].strip()[-160:]}"
        )
    return {"lost": lost, "runs": r, "note": f"{lost}/{r} lost, {errors} nonzero exits"}


def ours(p: dict[str, Any]) -> dict[str, Any]:
    """Run our CLI ``p["r_ours"]`` times: ``lost`` (runs whose output lacks ``hi``) and ``runs``."""
    return _runs(REPO / ".venv" / "bin" / "asynctorchx", int(p["r_ours"]))


def torchx(p: dict[str, Any]) -> dict[str, Any]:
    """Run the ``torchx`` CLI ``p["r_torchx"]`` times: ``lost`` and ``runs``."""
    return _runs(TORCHX_VENV / "bin" / "torchx", int(p["r_torchx"]))


def run(smoke: bool, trials: int) -> list[dict[str, Any]]:
    """Orchestrate benchmark 8 (one trial of R runs per side); returns summary rows."""
    case = {"r_ours": 3 if smoke else 200, "r_torchx": 3 if smoke else 20}
    return orchestrate(
        "8 lines lost",
        Path(__file__),
        [case],
        ["lost"],
        1,
        sides=("ours", "torchx"),
        skip=default_skips(),
    )


if __name__ == "__main__":
    if is_driver():
        driver_main({"ours": ours, "torchx": torchx})
    else:
        ns = bench_args(default_trials=1)
        print(table(run(ns.smoke, ns.trials)))
