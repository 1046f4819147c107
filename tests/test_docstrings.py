"""Docstrings and comments under ``asynctorchx/`` are contracts, not a lab notebook.

A docstring says what a thing does, its arguments, what it raises and where its behaviour
comes from; a comment says why. Dates, load averages, measured figures and their history
belong to ``benchmarks/README.md`` (a benchmark row's current figure), which code names by
row ("benchmark 5's ``runner_log_lines`` row") without quoting it. This test reads every
comment and docstring of the package with :mod:`tokenize` (code and other strings are not
read) and fails naming ``file:line`` and the text for each of:

- a date (``2026-11-26``);
- a load average (``load average 6``, ``load ~3.7``, ``under load``);
- a count of runs or rounds (``in six runs``, ``over 5 rounds``);
- a figure presented as a measurement: compared (``5% less``, ``2 ms faster``), taken
  (``took 31 us``, ``costs ~0.1 ms``), approximated (``~50 ms``), per thing (``0.16 ms per
  write``), as a range (``4.4-5.7 s``), a percentile (``p90 0.22``), a before/after (``55 ->
  130``), at a benchmark's size (``1.5 ms at N = 1000``);
- history (``before the split``, ``previously``, ``did worse``).

A unit in a contract is not a measurement: ``timeout: seconds``, ``READ_SIZE`` "(124 KiB)",
``up to 4 MiB``, ``every 0.05 s`` pass.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "asynctorchx"

_NUM = r"\d+(?:[.,]\d+)?"
_TIME = r"(?:ns|µs|us|ms|s|sec)"
_SIZE = r"(?:B|KB|KiB|MB|MiB|GB|GiB|MB/s)"
_WORD_COUNT = r"(?:\d+|two|three|four|five|six|seven|eight|nine|ten|a dozen)"

#: name -> pattern; each names one way a measurement or its history reads in prose
PATTERNS: dict[str, re.Pattern[str]] = {
    "date": re.compile(r"\b(?:19|20)\d\d-[01]\d-[0-3]\d\b"),
    "load average": re.compile(
        r"\bload[ -]averages?\b|\bload\s*(?:of\s*)?[~≈]?\s*\d|\bunder (?:a )?(?:heavy )?load\b",
        re.I,
    ),
    "count of runs": re.compile(
        rf"\b(?:in|over|across|of|after)\s+(?:each of\s+|all\s+)?{_WORD_COUNT}\s+"
        r"(?:runs|trials|rounds|repeats)\b(?! out)",
        re.I,
    ),
    "compared figure": re.compile(
        rf"{_NUM}\s?(?:{_TIME}|{_SIZE}|%|x|\u00d7)\s+(?:faster|slower|less|more|fewer|quicker|"
        r"cheaper|better|worse|measured)\b",
        re.I,
    ),
    "taken figure": re.compile(
        r"\b(?:took|takes|cost|costs|costing|paid|pays|spent|spends|saves|saved|measured"
        rf"(?: at| as)?)\s+(?:about\s+|around\s+|roughly\s+|[~≈]\s?)?{_NUM}\s?(?:{_TIME}|%)(?!\w)",
        re.I,
    ),
    "approximate time": re.compile(rf"[~≈]\s?{_NUM}\s?(?:ns|µs|us|ms)\b"),
    # below a second the package promises no figure but a bound ("within", "every"...)
    "sub-second figure": re.compile(
        r"(?<!every )(?<!within )(?<!up to )(?<!at most )(?<!after )(?<!under )(?<![~≈])"
        rf"(?<![\d.]){_NUM}\s?(?:ns|µs|us|ms)\b"
    ),
    "share": re.compile(rf"{_NUM}\s?%\s+of\b"),
    "time per thing": re.compile(rf"{_NUM}\s?(?:ns|µs|us|ms)\s+(?:per|a|an|each)\s+\w", re.I),
    "range of figures": re.compile(rf"{_NUM}\s?-\s?{_NUM}\s?(?:{_TIME}|MB/s|%)(?![\w/])"),
    "percentile": re.compile(r"\bp(?:50|90|95|99)\s+[~≈]?\d", re.I),
    "before/after": re.compile(rf"{_NUM}\s?(?:{_TIME}|{_SIZE}|%)?\s?(?:->|→)\s?{_NUM}"),
    "figure at a benchmark size": re.compile(
        rf"{_NUM}\s?(?:{_TIME}|%)\s+(?:at|with|under)\s+(?:[NM]\s?=|load|{_NUM}\s+(?:apps|replicas|lines))"
    ),
    "history": re.compile(
        r"\b(?:before the split|previously|formerly|did (?:worse|better)|the old code|"
        r"before this (?:change|round|commit|branch))\b",
        re.I,
    ),
}

_LAYOUT = {
    tokenize.NEWLINE,
    tokenize.NL,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.COMMENT,
}


def prose(source: str) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, text)`` for each line of a comment or a docstring in ``source``.

    A docstring is a string token that is a statement of its own (a module's, class's or
    function's docstring, or an attribute's docstring after it); other strings are code.
    """
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    before: tokenize.TokenInfo | None = None
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
            continue
        if tok.type == tokenize.STRING and (before is None or before.type in _LAYOUT):
            after = next((t for t in tokens[i + 1 :] if t.type != tokenize.COMMENT), None)
            if after is None or after.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                for k, line in enumerate(tok.string.splitlines()):
                    yield tok.start[0] + k, line
        if tok.type != tokenize.NL:
            before = tok


def findings(path: Path) -> list[str]:
    """``file:line: [pattern] text`` for every line of ``path``'s prose that a pattern hits."""
    out = []
    for line, text in prose(path.read_text(encoding="utf-8")):
        for name, pattern in PATTERNS.items():
            if pattern.search(text):
                where = path.relative_to(PACKAGE.parent)
                out.append(f"{where}:{line}: [{name}] {text.strip()}")
                break
    return out


@pytest.mark.parametrize(
    ("text", "hit"),
    [
        ("#: 64 KiB, 5-9% less CPU in each of six runs on 2026-11-26", True),
        ("for ``--tail 32``, 2026-11-26 12:50 UTC, load average 6)", True),
        ("(142 against 209 ms at load ~3.7)", True),
        ("#: (copying os.environ took 31 us per replica: benchmark 3's", True),
        ("per line cost 60% of ``log_iter``'s throughput", True),
        ("a race, whose task group costs ~0.1 ms:", True),
        ("(0.16 ms per write on average on two", True),
        ("``docker logs --since`` the last line's stamp took 4.4-5.7 s against 0.02 s", True),
        ("N (1.5 ms at N = 1000, 3.2 ms at 3000)", True),
        ("the dry run from 55 to 130-150 us per replica", True),
        ("# The logger of runner/api.py before the split", True),
        ("cores, p90 0.22 ms, against 1.4 us", True),
        ("1.5 -> 3.2 ms", True),
        ("(most runs have none): 1.3 ms of benchmark 6's run", True),
        ("held ``Runner.events`` to 2% of a bare async generator", True),
        ("timeout: seconds to wait; ``None`` waits for ever.", False),
        ("#: Bytes read at a time (124 KiB).", False),
        ("a line over 4 MiB comes in pieces; Docker splits at 16 KiB", False),
        ("The tick doubles after 60 s without change, up to 10 s", False),
        ("each replica on 1 CPU and 1024 MB (TorchX's figures)", False),
        ("``memMB`` in MiB *after* a 4% memory tax", False),
        ("Guarded by benchmark 3's ``ms_per_replica`` row.", False),
        ("ns since the epoch, with 9 fraction digits (30 chars)", False),
        ("the common soft limit of 1024 runs out near a thousand replicas", False),
        ("a follow stops within 100 ms of the app's end; the poll runs every 50 ms", False),
    ],
)
def test_patterns_tell_measurements_from_contracts(text: str, hit: bool) -> None:
    assert any(p.search(text) for p in PATTERNS.values()) is hit, text


def test_prose_is_comments_and_docstrings_only() -> None:
    source = (
        '"""Module, 2026-01-01."""\n'
        "X = '2026-01-02'  # 2026-01-03\n"
        '"""X\'s docstring, 2026-01-04."""\n'
        "def f():\n"
        "    '''f, 2026-01-05.'''\n"
        "    return f'2026-01-06'\n"
        "call('2026-01-07',\n"
        "     '2026-01-08')\n"
    )
    assert [line for line, _ in prose(source)] == [1, 2, 3, 5]


def test_no_measurement_or_history_in_docstrings_or_comments() -> None:
    hits = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in findings(path)]
    assert not hits, (
        "move measured figures and their history to benchmarks/README.md (name the row), and "
        "TorchX differences to docs/coming-from-torchx.md:\n" + "\n".join(hits)
    )
