"""The documentation's samples run as written, and its commands exist.

Every fenced ``python`` block of ``docs/`` and ``README.md`` runs as a script in a fresh
interpreter (a temporary working directory, 120 s at most) and must exit 0. A block
that needs a part of the machine says so in an HTML comment on the line before it:

    <!-- docs-test: docker -->      the Docker engine and test image (``docker`` marker)
    <!-- docs-test: slurm -->       the local Slurm cluster (``slurm_cluster`` fixture)
    <!-- docs-test: kubernetes -->  a cluster with Volcano named by ``ASYNCTORCHX_KUBECONFIG``
    <!-- docs-test: web -->         the web extra (Starlette, sse-starlette), as tests/examples

and is skipped without it, or fails when CI requires the part, as the other tests of
that part do. Every ``asynctorchx ...`` command of a ``sh`` block is parsed by the CLI's
own parser (so a subcommand or flag that does not exist fails), the scripts the blocks
run exist, and the extras they install are declared. The run options tables of the
scheduler pages, generated at build time by ``docs/_hooks/runopts.py``, are checked
against each scheduler's ``runopts``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import pytest

from asynctorchx.cli.main import build_parser
from asynctorchx.schedulers import get_scheduler_factories

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
PAGES = sorted([REPO / "README.md", *(p for p in DOCS.rglob("*.md") if "_hooks" not in p.parts)])
#: the parts a block may say it needs (see the module docstring)
PARTS = ("docker", "slurm", "kubernetes", "web")
_MARKER = re.compile(r"<!-- docs-test: (?P<part>\S+) -->")
_FENCE = re.compile(r"^```(?P<lang>\S*)\s*$")


class Block(NamedTuple):
    """One fenced block: where it is, its language, the part it needs, its text."""

    page: Path
    line: int
    lang: str
    part: str | None
    code: str

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def fenced_blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, with the ``docs-test`` part named just before it."""
    blocks: list[Block] = []
    lines = page.read_text().splitlines()
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        before = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        marker = _MARKER.fullmatch(before.strip())
        code = "\n".join(lines[index + 1 : end]) + "\n"
        part = marker.group("part") if marker else None
        blocks.append(Block(page, index + 1, fence.group("lang"), part, code))
        index = end + 1
    return blocks


ALL_BLOCKS = [block for page in PAGES for block in fenced_blocks(page)]
PYTHON = [block for block in ALL_BLOCKS if block.lang == "python"]
SHELL = [block for block in ALL_BLOCKS if block.lang in ("sh", "bash", "shell", "console")]


def _param(block: Block) -> object:
    marks = [pytest.mark.docker] if block.part == "docker" else []
    return pytest.param(block, id=block.name, marks=marks)


def test_the_docs_have_samples_and_every_marker_names_a_known_part() -> None:
    assert len(PYTHON) >= 10, [block.name for block in PYTHON]
    unknown = [(block.name, block.part) for block in ALL_BLOCKS if block.part not in (None, *PARTS)]
    assert unknown == [], f"docs-test parts are {PARTS}"
    unmarked = [b.name for b in ALL_BLOCKS if b.part is not None and b.lang != "python"]
    assert unmarked == [], "a docs-test comment must stand just before a python block"


@pytest.mark.parametrize("block", [_param(block) for block in PYTHON])
def test_python_sample_runs(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if block.part == "slurm":
        request.getfixturevalue("slurm_cluster")
    if block.part == "kubernetes" and (
        not os.environ.get("ASYNCTORCHX_KUBECONFIG")
        or os.environ.get("ASYNCTORCHX_KUBE_BARE") == "1"  # a bare API server runs no pod
    ):
        pytest.skip("needs a cluster with Volcano: set ASYNCTORCHX_KUBECONFIG (docs/kubernetes.md)")
    web = ("starlette", "sse_starlette", "httpx")
    missing = [m for m in web if importlib.util.find_spec(m) is None]
    if block.part == "web" and missing:
        reason = f"the web extra is not installed (no {missing[0]}): pip install -e '.[web]'"
        if os.environ.get("ASYNCTORCHX_REQUIRE_WEB") == "1":
            pytest.fail(f"ASYNCTORCHX_REQUIRE_WEB=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    done = subprocess.run(
        [sys.executable, "-c", block.code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{block.name} failed:\n{done.stdout}\n{done.stderr}"


@pytest.fixture(scope="session")
def slurm_cluster() -> object:
    """The Slurm cluster of the Slurm tests (skips, or fails under CI, without one)."""
    from tests.schedulers.slurm.conftest import _probe

    cluster, reason = _probe()
    if cluster is None:
        if os.environ.get("ASYNCTORCHX_REQUIRE_SLURM") == "1":
            pytest.fail(f"ASYNCTORCHX_REQUIRE_SLURM=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return cluster


# ---------------------------------------------------------------------- shell commands


def shell_commands(block: Block) -> list[list[str]]:
    """The commands of a shell block: continuation lines joined, ``&&`` chains split,
    comments dropped, a leading ``$`` prompt removed."""
    text = block.code.replace("\\\n", " ")
    commands: list[list[str]] = []
    for line in text.splitlines():
        words = shlex.split(line.strip().removeprefix("$ "), comments=True)
        command: list[str] = []
        for word in [*words, "&&"]:
            if word in ("&&", "||", ";", "|"):
                if command:
                    commands.append(command)
                command = []
            else:
                command.append(word)
    return commands


def _cli_error(argv: list[str]) -> str | None:
    """Parse ``argv`` with the CLI's parser; return argparse's complaint, or ``None``."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            build_parser().parse_args(argv)
    except SystemExit:
        return stderr.getvalue() or "argparse exited"
    return None


def test_the_docs_show_shell_commands() -> None:
    cli = [cmd for b in SHELL for cmd in shell_commands(b) if cmd[0].endswith("asynctorchx")]
    assert len(cli) >= 5


@pytest.mark.parametrize("block", SHELL, ids=[block.name for block in SHELL])
def test_shell_commands_name_what_exists(block: Block) -> None:
    pyproject = (REPO / "pyproject.toml").read_text()
    extras = set(
        re.findall(
            r"^([A-Za-z0-9_-]+) = \[",
            pyproject.split("[project.optional-dependencies]")[1].split("\n[")[0],
            flags=re.M,
        )
    )
    problems = []
    for command in shell_commands(block):
        program = Path(command[0]).name
        if program == "asynctorchx":
            error = _cli_error(command[1:])
            if error is not None:
                problems.append(f"{shlex.join(command)}: {error.strip()}")
        elif program == "bash" and len(command) > 1 and command[1].startswith("scripts/"):
            if not (REPO / command[1]).is_file():
                problems.append(f"{shlex.join(command)}: no {command[1]}")
        elif program == "pip" and "-e" in command:
            target = command[command.index("-e") + 1]
            extra = re.fullmatch(r"\.\[(?P<extra>[^\]]+)\]", target)
            if extra is not None and extra.group("extra") not in extras:
                problems.append(f"{shlex.join(command)}: no extra {extra.group('extra')!r}")
    assert problems == []


def test_a_command_that_does_not_exist_is_caught() -> None:
    assert _cli_error(["run", "-s", "local_cwd", "utils.echo"]) is None
    assert _cli_error(["runopts", "local_cwd"]) is None
    assert _cli_error(["statuz", "local_cwd://torchx/x"]) is not None
    assert _cli_error(["log", "--follow", "local_cwd://torchx/x/echo/0"]) is not None


# ---------------------------------------------------------------------- generated pages


def _load_hook(name: str) -> ModuleType:
    """Import ``docs/_hooks/{name}.py`` (needs the ``docs`` extra)."""
    pytest.importorskip(
        "mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'"
    )
    spec = importlib.util.spec_from_file_location(
        f"docs_hook_{name}", DOCS / "_hooks" / f"{name}.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("scheduler", list(get_scheduler_factories()))
def test_each_scheduler_page_shows_its_generated_run_options(scheduler: str) -> None:
    runopts_hook = _load_hook("runopts")
    page = (DOCS / "schedulers" / f"{scheduler}.md").read_text()
    assert f"<!-- runopts {scheduler} -->" in page
    table = runopts_hook.run_options_table(scheduler)
    for key, opt in runopts_hook.scheduler_run_opts(scheduler):
        assert f"| `{key}` |" in table
        assert ("| yes |" if opt.is_required else "| no |") in table.split(f"`{key}`")[1]
    rendered = runopts_hook.on_page_markdown(page, None, None, None)
    assert "<!-- runopts" not in rendered
    assert table in rendered


def test_a_page_naming_an_unknown_scheduler_fails_the_build() -> None:
    runopts_hook = _load_hook("runopts")
    from mkdocs.exceptions import PluginError

    with pytest.raises(PluginError, match="no scheduler 'local_cwdd'"):
        runopts_hook.on_page_markdown("<!-- runopts local_cwdd -->\n", None, None, None)


def test_sphinx_roles_render_as_code() -> None:
    roles = _load_hook("sphinx_roles")
    text = "See :class:`Runner`, :meth:`~asynctorchx.runner.Runner.wait` and ``x``."
    assert roles.replace_roles(text) == "See `Runner`, `wait` and ``x``."


def test_the_benchmarks_page_charts_each_headline_row_of_the_committed_run() -> None:
    charts_hook = _load_hook("bench_charts")
    run = charts_hook.load_run(REPO / charts_hook.RESULTS)
    drawn = charts_hook.charts(run)
    assert [chart.headline for chart in drawn] == list(charts_hook.HEADLINES)
    for chart in drawn:
        ours = dict(chart.medians)["asynctorchx"]
        assert ours is not None, chart.headline
        assert chart.svg.lstrip().startswith("<?xml")
        for label, _ in chart.medians:
            assert f"{label}<" in chart.svg or f"{label} " in chart.svg, (label, chart.headline)
    page = (DOCS / "benchmarks.md").read_text()
    assert charts_hook.MARKER in page
    section = charts_hook.section(run, drawn, "")
    for chart in drawn:
        assert f"]({charts_hook.IMAGE_DIR}/{chart.headline.slug}.svg)" in section
    assert len({chart.headline.slug for chart in drawn}) == len(drawn)


def test_the_benchmarks_page_names_the_commit_a_run_measured() -> None:
    charts_hook = _load_hook("bench_charts")
    run = {"machine": {"time_utc": "2026-12-02T06:17:23Z", "cores": 2, "commit": "15d8ed0"}}
    assert "(2026-12-02T06:17:23Z; commit `15d8ed0`; 2 cores," in charts_hook.section(run, [], "")
    del run["machine"]["commit"]  # a run from before the harness recorded it
    assert "(2026-12-02T06:17:23Z; 2 cores," in charts_hook.section(run, [], "")


def test_the_charts_are_the_same_bytes_every_build_and_carry_no_date() -> None:
    charts_hook = _load_hook("bench_charts")
    run = charts_hook.load_run(REPO / charts_hook.RESULTS)
    first = [chart.svg for chart in charts_hook.charts(run)[:2]]
    assert first == [chart.svg for chart in charts_hook.charts(run)[:2]]
    assert all("<dc:date>" not in svg for svg in first)


def test_a_side_that_did_not_run_is_named_and_a_missing_row_fails_the_build() -> None:
    charts_hook = _load_hook("bench_charts")
    from mkdocs.exceptions import PluginError

    headline = charts_hook.HEADLINES[0]
    rows = [
        {"bench": headline.bench, "case": headline.case, "metric": headline.metric, **side}
        for side in (
            {"side": "ours", "median": 1.0},
            {"side": "torchx", "skipped": "no TorchX venv"},
            {"side": headline.floor, "median": 0.5},
        )
    ]
    values = charts_hook.medians({"rows": rows}, headline)
    assert values == (("asynctorchx", 1.0), ("TorchX 0.7.0", None), (headline.floor_label, 0.5))
    assert "not run" in charts_hook.draw(headline, values)
    with pytest.raises(PluginError, match="no row"):
        charts_hook.medians({"rows": rows}, charts_hook.HEADLINES[1])
