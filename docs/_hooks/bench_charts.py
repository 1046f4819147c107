"""An mkdocs hook: the benchmarks' headline rows as charts, drawn from the committed JSON.

``benchmarks/results/all.json`` is the last full run's output (``benchmarks/run.sh``; its
shape is ``_harness.write_json``'s: ``machine``, ``rows``, an optional ``description``).
For each row of :data:`HEADLINES` the build draws one SVG bar chart (asynctorchx, TorchX
0.7.0 and the floor: each side's median) with matplotlib's Agg-based SVG backend and adds
it to the site as ``images/benchmarks/<slug>.svg``; the images are made at build time and
never committed. A page says ``<!-- benchmark-charts -->`` on a line of its own and the
build replaces that line with the charts, each with its figures as text.

The build fails when the JSON is missing or a headline row is not in it (a renamed
benchmark must not silently drop its chart). A side with no median (not run on that
machine) is drawn as absent and named "not run". The SVGs are byte-identical from one
build to the next: no date, a fixed id salt, text kept as text.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, NamedTuple

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

#: ``<!-- benchmark-charts -->`` alone on a line.
MARKER = "<!-- benchmark-charts -->"
#: Where the committed run is, from the repository root.
RESULTS = Path("benchmarks") / "results" / "all.json"
#: Where the charts go in the site (under ``docs_dir``'s URL space).
IMAGE_DIR = "images/benchmarks"


class Headline(NamedTuple):
    """One charted row: the run's ``bench``, ``case`` and ``metric``, and how to show it.

    ``floor`` names the side drawn as the floor (benchmark 3 judges against the capturing
    floor, benchmark 5 against the async generator), ``floor_label`` what it is.
    """

    bench: str
    case: str
    metric: str
    title: str
    unit: str
    floor_label: str
    floor: str = "floor"
    #: multiply the metric's value by this to show it in ``unit``
    scale: float = 1.0
    higher_is_better: bool = False

    @property
    def slug(self) -> str:
        """The chart's file name: the bench number and case, in safe characters."""
        text = f"{self.bench.split()[0]}-{self.case}-{self.metric}"
        return "".join(c if c.isalnum() else "-" for c in text).strip("-")


#: The rows a user touches first: waiting, following logs, starting apps, the CLI.
HEADLINES = (
    Headline(
        "1 exit->wait", "wait_interval=0.1 exits=10", "latency_ms",
        title="A local process exits: wait returns", unit="ms",
        floor_label="floor: await the anyio process",
    ),
    Headline(
        "2 line->log_iter", "k=50", "latency_ms",
        title="A replica prints a line: log_iter yields it", unit="ms",
        floor_label="floor: read the stdout pipe",
    ),
    Headline(
        "3 N replicas", "n=100", "seconds",
        title="One app of 100 replicas, run to wait", unit="ms", scale=1000.0,
        floor="floor_capture", floor_label="floor: 100 processes, output captured",
    ),
    Headline(
        "4 M apps", "m=500", "seconds",
        title="500 apps of sleep 1 from one event loop", unit="s",
        floor_label="floor: 500 anyio processes",
    ),
    Headline(
        "5 log throughput", "lines=10000000 width=100", "mb_per_s",
        title="Reading back a 1 GB log", unit="MB/s", higher_is_better=True,
        floor="async_floor", floor_label="floor: an async generator over the file",
    ),
    Headline(
        "6 CLI run", "records=0", "seconds",
        title="The CLI: run utils.echo, whole process", unit="s",
        floor_label="floor: python -c pass",
    ),
    Headline(
        "6 CLI run", "script=1", "seconds",
        title="A script's first app through get_runner()", unit="s",
        floor_label="floor: Python, anyio, one run_process",
    ),
    Headline(
        "7 local_docker", "n=8", "start_s",
        title="Docker: 8 replicas, submit to all running", unit="s",
        floor_label="floor: 8 parallel docker run -d",
    ),
    Headline(
        "9 slurm end->wait", "case=end exits=10 tick=0.5", "latency_ms",
        title="Slurm: a job ends, wait returns (0.5 s poll)", unit="ms",
        floor_label="floor: squeue every tick",
    ),
    Headline(
        "10 kubernetes event->wait", "case=event samples=20 tick=1.0", "latency_ms",
        title="Kubernetes: the job completes, wait returns", unit="ms",
        floor_label="floor: a raw watch=true client",
    ),
)  # fmt: skip

#: (side, label, colour) in the order drawn, top to bottom; the floor's label is per row.
SIDES = (("ours", "asynctorchx", "#1f6feb"), ("torchx", "TorchX 0.7.0", "#8c8c8c"))
FLOOR_COLOUR = "#c9c9c9"


class Chart(NamedTuple):
    """A drawn headline: its row, each side's median in the row's unit (``None``: not run)."""

    headline: Headline
    medians: tuple[tuple[str, float | None], ...]
    svg: str


def load_run(path: Path) -> dict[str, Any]:
    """Read the committed run's JSON.

    Raises:
        PluginError: the file is missing or is not a run's JSON (no ``rows`` list).
    """
    try:
        run: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PluginError(
            f"{path}: {exc}; commit the last full run's JSON (bash benchmarks/run.sh)"
        ) from exc
    if not isinstance(run.get("rows"), list):
        raise PluginError(f"{path}: no 'rows' list, not benchmarks/run_all.py's JSON")
    return run


def medians(run: dict[str, Any], headline: Headline) -> tuple[tuple[str, float | None], ...]:
    """Each side's median (asynctorchx, TorchX, the floor) in the headline's unit.

    Raises:
        PluginError: the run has no row of the headline's bench, case and metric.
    """
    found = {
        row["side"]: row.get("median")
        for row in run["rows"]
        if (row.get("bench"), row.get("case"), row.get("metric"))
        == (headline.bench, headline.case, headline.metric)
    }
    if not found:
        raise PluginError(
            f"{RESULTS}: no row {headline.bench!r} {headline.case!r} {headline.metric!r}:"
            " rename the headline in docs/_hooks/bench_charts.py with its benchmark"
        )
    labels = [(side, label) for side, label, _ in SIDES] + [(headline.floor, headline.floor_label)]
    return tuple(
        (label, None if found.get(side) is None else float(found[side]) * headline.scale)
        for side, label in labels
    )


def _figure(value: float) -> str:
    """A median as the README writes it: three significant figures, no exponent."""
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


def draw(headline: Headline, values: tuple[tuple[str, float | None], ...]) -> str:
    """The headline's bar chart as SVG text: one horizontal bar per side, its median at the
    bar's end; a logarithmic axis when the medians differ by more than 20x."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    colours = [colour for _, _, colour in SIDES] + [FLOOR_COLOUR]
    shown = [value for _, value in values if value is not None] or [1.0]  # none ran
    with plt.rc_context({"svg.hashsalt": "asynctorchx", "svg.fonttype": "none", "font.size": 10}):
        fig, ax = plt.subplots(figsize=(6.4, 1.9))
        positions = list(range(len(values)))[::-1]
        ax.barh(positions, [value or 0.0 for _, value in values], color=colours, height=0.62)
        ax.set_yticks(positions, [label for label, _ in values])
        if max(shown) / min(shown) > 20:
            ax.set_xscale("log")
        left = min(shown) / 2 if ax.get_xscale() == "log" else 0.0
        ax.set_xlim(left, max(shown) * (4 if ax.get_xscale() == "log" else 1.3))
        for pos, (_, value) in zip(positions, values, strict=True):
            text = "not run" if value is None else f"{_figure(value)} {headline.unit}"
            ax.text(value or left, pos, f"  {text}", va="center")
        better = "higher is better" if headline.higher_is_better else "lower is better"
        ax.set_xlabel(f"median, {headline.unit} ({better})")
        ax.set_title(headline.title, loc="left", fontsize=11)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        fig.tight_layout()
        out = io.StringIO()
        fig.savefig(out, format="svg", metadata={"Date": None})
        plt.close(fig)
    return out.getvalue()


def charts(run: dict[str, Any]) -> list[Chart]:
    """Every headline of :data:`HEADLINES` drawn from ``run``.

    Raises:
        PluginError: as :func:`medians`.
    """
    out = []
    for headline in HEADLINES:
        values = medians(run, headline)
        out.append(Chart(headline, values, draw(headline, values)))
    return out


def section(run: dict[str, Any], drawn: list[Chart], page_dir: str) -> str:
    """The Markdown that replaces :data:`MARKER`: where the figures come from, then each
    chart with its figures as text. ``page_dir`` is the page's directory in the docs."""
    machine = run.get("machine", {})
    when = machine.get("time_utc") or "time not recorded"
    code = f"commit `{machine['commit']}`; " if machine.get("commit") else ""
    lines = [
        f"Drawn from `{RESULTS}` ({when}; {code}{machine.get('cores', '?')} cores,"
        f" Python {machine.get('python', '?')}).",
        "",
    ]
    if run.get("description"):
        lines += ['!!! note "About this run"', f"    {run['description']}", ""]
    depth = len(Path(page_dir).parts)
    for chart in drawn:
        headline = chart.headline
        src = "../" * depth + f"{IMAGE_DIR}/{headline.slug}.svg"
        figures = "; ".join(
            f"{label} {'not run' if value is None else _figure(value) + ' ' + headline.unit}"
            for label, value in chart.medians
        )
        lines += [
            f"![{headline.title}]({src})",
            "",
            f"Benchmark `{headline.bench}`, `{headline.case}`, `{headline.metric}`: {figures}.",
            "",
        ]
    return "\n".join(lines)


_drawn: list[Chart] = []
_run: dict[str, Any] = {}


def on_files(files: Files, config: Any) -> Files:
    """Draw the charts and add them to the site's files.

    Raises:
        PluginError: as :func:`load_run` and :func:`medians`.
    """
    repo = Path(config["config_file_path"]).resolve().parent
    run = load_run(repo / RESULTS)
    _run.clear()
    _run.update(run)
    _drawn[:] = charts(run)
    for chart in _drawn:
        uri = f"{IMAGE_DIR}/{chart.headline.slug}.svg"
        files.append(File.generated(config, uri, content=chart.svg))
    return files


def on_page_markdown(markdown: str, page: Page, config: Any, files: Files) -> str:
    """Replace a :data:`MARKER` line with the charts drawn by :func:`on_files`."""
    del config, files
    if MARKER not in markdown:
        return markdown
    page_dir = str(Path(page.file.src_uri).parent)
    return markdown.replace(MARKER, section(_run, _drawn, "" if page_dir == "." else page_dir))
