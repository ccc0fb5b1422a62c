"""The README's numbers held to the figures: its claim-ledger block is generated from ``figures/claims.csv``, and
every number of a marked sentence comes from the ledger row or glance row its marker names, with the same scope.

A sentence is marked by an HTML comment right after it, naming its sources::

    Lachesis outlasts HBM-first by 1.46–2.77× at the tight SLO. <!-- numbers: claim multi.gain.tight -->
    ... <!-- numbers: claim multi.years.lachesis | glance multi-agent Lachesis device-years, tight, 1/7–4/4 (Fig. 9) -->

``claim ID`` is a ledger row (:mod:`lachesis.evaluation.claims`), ``glance LABEL`` a row of the results-at-a-glance
table (:mod:`lachesis.glance`), ``tally`` the ledger's verdict counts.  The rules (:func:`check`):

- every number of the sentence (from the previous sentence's end, marker or blank line to the marker) is one its
  sources print, at the sentence's precision (1.5 matches 1.455; a sign is wording: −30% matches 30%).  Not numbers:
  configurations (1/7, 8/8*), section, figure and table references, model and benchmark names, code spans; the
  warranty (5 years) and the SLO bounds (60 and 100 ms, 2 s) are allowed everywhere;
- the scope the sentence names (SLO, model, trace, configurations, per :data:`VOCABULARY`) equals each source's,
  dimension by dimension, wherever the source names that dimension: a sentence saying "tight" about a claim read
  at both SLOs fails;
- the block between :data:`START` and :data:`END` equals :func:`lachesis.evaluation.claims.summary_markdown`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from lachesis.config import SLOS, Endurance
from lachesis.evaluation import claims
from lachesis.evaluation.grid import CONFIG_LABELS

START, END = "<!-- claim-ledger: start -->", "<!-- claim-ledger: end -->"
MARK = re.compile(r"<!--\s*numbers:\s*(.*?)\s*-->", re.S)

#: Numbers allowed in any marked sentence: the warranty (§5.2) and the SLOs' bounds (ms and s).
CONSTANTS = (Endurance().warranty_years, *(1000 * s.p99_tpot_s for s in SLOS.values()),
             *(s.ttft_s for s in SLOS.values()))

#: The words that name a scope, per dimension (case-insensitive regular expressions): what a sentence is read for.
VOCABULARY: dict[str, dict[str, str]] = {
    "slo": {"tight": r"\btight\b", "loose": r"\bloose\b"},
    "model": {"Llama-4-Maverick": r"maverick", "Qwen3-235B-A22B": r"qwen3"},
    "workload": {"multi_agent_no_reviewer": r"(w/o|without|no)[ -](the )?reviewer",
                 "multi_agent": r"multi-agent", "tau3": r"τ³-bench|τ3-bench|tau3|single-agent",
                 "bfcl": r"bfclv4|bfcl|single-agent"},
}
_CONFIG = re.compile(r"(\d/\d\*?)(?:\s*[–-]\s*(\d/\d\*?))?")
#: What is removed before numbers are read: code spans, references, names with digits, configurations.
_NOT_NUMBERS = re.compile("|".join([
    r"`[^`]*`", r"§\s*\d+(?:\.\d+)*", r"\b(?:Figs?|Figures?|Tables?|Eq)\.?\s*\d+(?:\s*[–-]\s*\d+)?(?:\([a-z]\))?",
    r"\bAppendix [A-Z]\b", r"Llama-4-Maverick", r"Qwen3-235B-A22B", r"Qwen3", r"τ³", r"τ3", r"BFCLv4", r"HBM\d",
    r"\bp\d+\b", r"24×7", r"\d/\d\*?", r"\[\d+(?:,\s*\d+)*\]", r"https?://\S+"]))
_NUMBER = re.compile(r"(?<![\w.])[−-]?\d+(?:,\d{3})*(?:\.\d+)?(?![\w/])")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z*(\[“\"_`])|\n\s*\n")


@dataclass
class Source:
    """What a marker names: the numbers it prints and the scope it covers (dimension -> values; a dimension absent
    from ``dims`` is not named by the source and is not checked)."""

    name: str
    numbers: list[float] = field(default_factory=list)
    dims: dict[str, set[str]] = field(default_factory=dict)


def numbers(text: str) -> list[tuple[float, int]]:
    """The numbers of ``text`` (after :data:`_NOT_NUMBERS` is removed) with their decimals, as absolute values."""
    text = _NOT_NUMBERS.sub(" ", text)
    out = []
    for m in _NUMBER.finditer(text):
        s = m.group(0).replace("−", "-").replace(",", "").lstrip("-")
        out.append((float(s), len(s.split(".")[1]) if "." in s else 0))
    return out


def scope(text: str) -> dict[str, set[str]]:
    """The scope a text names, per dimension of :data:`VOCABULARY` and ``memory`` (configurations and their ranges
    expanded over the grid's order); a dimension the text does not name is absent."""
    out: dict[str, set[str]] = {}
    low = text.lower()
    for dim, words in VOCABULARY.items():
        hit = {v for v, rx in words.items() if re.search(rx, low)}
        if dim == "workload" and "multi_agent_no_reviewer" in hit and not re.search(r"with the reviewer", low):
            hit.discard("multi_agent")
        if hit:
            out[dim] = hit
    mems: set[str] = set()
    for m in _CONFIG.finditer(text):
        a, b = m.group(1), m.group(2)
        if a in CONFIG_LABELS and b in CONFIG_LABELS:
            i, j = CONFIG_LABELS.index(a), CONFIG_LABELS.index(b)
            mems |= set(CONFIG_LABELS[min(i, j):max(i, j) + 1])
        elif a in CONFIG_LABELS:
            mems.add(a)
    if mems:
        out["memory"] = mems
    return out


def claim_source(led: pd.DataFrame, claim_id: str) -> Source:
    """A ledger row as a source: the numbers of its printed fields and counts, its scope columns."""
    hit = led[led["id"].astype(str).eq(claim_id)]
    if hit.empty:
        raise KeyError(f"no claim {claim_id!r} in the ledger")
    r = hit.iloc[0]
    text = " ".join(str(r[c]) for c in ("paper", "ours", "seeds", "holds") if pd.notna(r[c]))
    counts = [float(r[c]) for c in ("cells", "cells_read", "values_read", "misses", "absent") if pd.notna(r[c])]
    dims = {d: set(str(r[c]).split(",")) for d, c in claims.SCOPE_COLUMNS.items() if pd.notna(r.get(c)) and str(r[c])}
    return Source(f"claim {claim_id}", [v for v, _ in numbers(text)] + counts, dims)


def glance_source(table: str, label: str) -> Source:
    """A row of the glance table (markdown) as a source: the numbers of its ours and paper cells, the scope its
    label names."""
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0] == label:
            return Source(f"glance {label}", [v for v, _ in numbers(" ".join(cells[1:]))], scope(label))
    raise KeyError(f"no glance row {label!r}")


def tally_source(led: pd.DataFrame) -> Source:
    n = led["verdict"].value_counts()
    return Source("tally", [float(len(led)), *(float(n.get(v, 0)) for v in claims.VERDICTS)])


def ledger_block(readme_text: str) -> str:
    """The README's text between :data:`START` and :data:`END`."""
    if START not in readme_text or END not in readme_text:
        raise ValueError(f"README: no {START!r} … {END!r} block")
    return readme_text.split(START, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def with_ledger_block(readme_text: str, led: pd.DataFrame) -> str:
    """The README text with its ledger block replaced by the ledger's summary."""
    head, rest = readme_text.split(START, 1)
    return f"{head}{START}\n{claims.summary_markdown(led)}{END}{rest.split(END, 1)[1]}"


def marked_sentences(readme_text: str) -> list[tuple[int, str, str]]:
    """(line, sentence, marker body) per marker: the sentence runs from the previous sentence end, marker or blank
    line to the marker."""
    out = []
    last = 0
    for m in MARK.finditer(readme_text):
        before = readme_text[last:m.start()]
        parts = _SENTENCE_END.split(MARK.sub(" ", before).rstrip())
        sentence = parts[-1].strip() if parts else ""
        out.append((readme_text.count("\n", 0, m.start()) + 1, sentence, m.group(1)))
        last = m.end()
    return out


def _sources(body: str, led: pd.DataFrame, table: str) -> list[Source]:
    out = []
    for spec in (s.strip() for s in body.split("|")):
        kind, _, name = spec.partition(" ")
        if kind == "claim":
            out.append(claim_source(led, name.strip()))
        elif kind == "glance":
            out.append(glance_source(table, name.strip()))
        elif kind == "tally" and not name.strip():
            out.append(tally_source(led))
        else:
            raise KeyError(f"unknown source {spec!r} (expected 'claim ID', 'glance LABEL' or 'tally')")
    return out


def _matches(x: float, decimals: int, values: list[float]) -> bool:
    tol = 0.5 * 10.0 ** -decimals + 1e-9
    return any(abs(x - abs(v)) <= tol for v in values)


def check(readme_text: str, led: pd.DataFrame, glance_table: str) -> list[str]:
    """Every problem with the README's numbers, one line each (none: the README agrees with the figures)."""
    problems = []
    if START in readme_text or END in readme_text:
        try:
            if ledger_block(readme_text) != claims.summary_markdown(led):
                problems.append("the claim-ledger block differs from figures/claims.csv "
                                "(readme_numbers.with_ledger_block writes it)")
        except ValueError as e:
            problems.append(str(e))
    for line, sentence, body in marked_sentences(readme_text):
        where = f"README line {line}"
        try:
            sources = _sources(body, led, glance_table)
        except KeyError as e:
            problems.append(f"{where}: {e.args[0]}")
            continue
        found = numbers(sentence)
        if not found:
            problems.append(f"{where}: the marked sentence holds no number ({sentence[:60]!r})")
        allowed = [v for s in sources for v in s.numbers] + list(CONSTANTS)
        for x, d in found:
            if not _matches(x, d, allowed):
                problems.append(f"{where}: {x:g} is not among the numbers of {', '.join(s.name for s in sources)}")
        named = scope(sentence)
        for s in sources:
            for dim, vals in named.items():
                if dim in s.dims and vals != s.dims[dim]:
                    problems.append(f"{where}: the sentence's {dim} ({', '.join(sorted(vals))}) is not the scope of "
                                    f"{s.name} ({', '.join(sorted(s.dims[dim]))})")
    return problems


def check_files(readme: str | Path, figures: str | Path) -> list[str]:
    """:func:`check` on a README file against ``figures/claims.csv`` and the glance table of ``figures``."""
    from lachesis import glance

    return check(Path(readme).read_text(encoding="utf-8"), claims.read_ledger(Path(figures) / "claims.csv"),
                 glance.table(figures))


RESULTS_PAGE = Path("docs") / "results.md"


def sync(root: str | Path) -> list[str]:
    """Rewrite the README's claim-ledger block and ``docs/results.md``'s glance table from ``root/figures`` (after a
    reproduce), then :func:`check_files`: the README's marked sentences the new figures no longer print."""
    from lachesis import glance
    from lachesis.io import write_text

    root = Path(root)
    readme, page, figures = root / "README.md", root / RESULTS_PAGE, root / "figures"
    write_text(readme, with_ledger_block(readme.read_text(encoding="utf-8"),
                                         claims.read_ledger(figures / "claims.csv")))
    write_text(page, glance.with_table(page.read_text(encoding="utf-8"), figures))
    return check_files(readme, figures)


if __name__ == "__main__":
    import sys

    from lachesis.paths import repo_root

    problems = sync(repo_root())
    print("\n".join(problems) or "README.md and docs/results.md: their generated blocks match figures/")
    sys.exit(1 if problems else 0)
