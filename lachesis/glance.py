"""Results at a glance: the summary table of ``docs/results.md``, built from the comparison tables in ``figures/``.

Every row reads the ``*_compare.csv`` (or summary JSON) a notebook wrote and spans the statistics it
names, so the results page never carries a hand-typed number: ``lachesis reproduce`` writes the table to
``figures/results_at_a_glance.md`` and a test checks that ``docs/results.md``'s copy matches
the figures.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from lachesis.evaluation.tables import statistic
from lachesis.io import write_text
from lachesis.plotting import parse_range

GLANCE_FILE = "results_at_a_glance.md"


@dataclass(frozen=True)
class Row:
    """One line of the table: the statistics of ``source`` (a compare table's stem) whose name matches
    ``pattern`` (a regular expression, searched), spanned over every match; or, with ``stat``, the one
    statistic of the evaluation's tables of that key (:data:`lachesis.evaluation.tables.STATISTICS`; an unknown
    key fails here, a label absent from ``source`` as :class:`MissingStatistic`).

    ``kind``: ``span`` (our range over the matches, and the seed interval where the table has one),
    ``rel_error`` (the largest |ours / paper − 1| over the matches) or ``kyung`` (the validation summary)."""

    label: str
    source: str
    pattern: str = ""
    kind: str = "span"
    unit: str = ""
    percent: bool = False
    stat: str = ""

    def __post_init__(self) -> None:
        if self.stat:
            statistic(self.stat)


ROWS: tuple[Row, ...] = (
    Row("Table 3: requests per workload, largest deviation", "table3_corpus_compare", r": requests$", "rel_error"),
    Row("Table 3: tokens written per workload, largest deviation", "table3_corpus_compare", r": tokens written$",
        "rel_error"),
    Row("stripped/laden median T_norm (Fig. 4)", "fig04_temporal_compare", r"^\w+: stripped/laden median T_norm$",
        unit="×"),
    Row("laden share of a turn's writes (Fig. 4)", "fig04_temporal_compare", r"^\w+: laden share of turn writes$"),
    Row("lead/worker median T_norm (Fig. 5)", "fig05_structural_compare", r": lead/worker median T_norm$", unit="×"),
    Row("lead waiting share (Fig. 5)", "fig05_structural_compare", r": lead waiting share$"),
    Row("worker T_norm p90/p10 (Fig. 6)", "fig06_worker_heterogeneity_compare", r": worker T_norm p90/p10$", unit="×"),
    Row("spawn-time ranker, out-of-fold Kendall τ (Fig. 7)", "fig07_spawn_prediction_compare",
        r"^ridge: Kendall τ \(out of fold\)$"),
    Row("multi-agent Lachesis/HBM-first, tight, 1/7–4/4 (Fig. 9)", "fig09_fig10_compare",
        stat="multi.gain.tight", unit="×"),
    Row("multi-agent Lachesis/HBM-first, loose, 1/7–4/4 (Fig. 9)", "fig09_fig10_compare",
        stat="multi.gain.loose", unit="×"),
    Row("multi-agent Lachesis device-years, tight, 1/7–4/4 (Fig. 9)", "fig09_fig10_compare",
        stat="multi.lachesis_years.tight"),
    Row("multi-agent HBM-first device-years, tight, 1/7–4/4 (Fig. 9)", "fig09_fig10_compare",
        stat="multi.hbm_first_years.tight"),
    Row("H3 daisy chain 8/8*, tight (Fig. 9)", "fig09_fig10_compare", stat="multi.daisy_gain.tight", unit="×"),
    Row("w/o predictive path / HBM-first, 1/7–4/4 (Fig. 9, §5.4)", "fig09_fig10_compare",
        stat="multi.deterministic_gain", unit="×"),
    Row("HBM share of write bytes, Lachesis (Fig. 10)", "fig09_fig10_compare", stat="multi.hbm_share.lachesis",
        percent=True),
    Row("HBM share of write bytes, HBM-first (Fig. 10)", "fig09_fig10_compare",
        stat="multi.hbm_share.hbm_first", percent=True),
    Row("single-agent Lachesis/HBM-first, 1/7–4/4 (Fig. 11)", "fig11_fig12_compare",
        stat="single.gain", unit="×"),
    Row("BFCLv4 Lachesis lifetime loss, 4/4 vs 1/7 (§5.5)", "fig11_fig12_compare", stat="single.bfcl_loss",
        percent=True),
    Row("Lachesis / HBM-first with reclaim (vLLM-style pool), multi-agent tight", "fig09_fig10_compare",
        stat="multi.beyond.lachesis/hbm_first_reclaim", unit="×"),
    Row("Lachesis / HBM-first with reclaim, single-agent", "fig11_fig12_compare",
        stat="single.beyond.lachesis/hbm_first_reclaim", unit="×"),
    Row("Lachesis / ρR/W selection (Kyung et al.'s criterion), multi-agent tight", "fig09_fig10_compare",
        stat="multi.beyond.lachesis/rho_threshold", unit="×"),
    Row("Lachesis / ρR/W selection, single-agent", "fig11_fig12_compare", stat="single.beyond.lachesis/rho_threshold",
        unit="×"),
    Row("clairvoyant oracle / HBM-first, multi-agent tight", "fig09_fig10_compare",
        stat="multi.beyond.oracle/hbm_first", unit="×"),
    Row("clairvoyant oracle / HBM-first, single-agent", "fig11_fig12_compare",
        stat="single.beyond.oracle/hbm_first", unit="×"),
    Row("Lachesis's share of the oracle's gain over HBM-first, multi-agent tight", "fig09_fig10_compare",
        stat="multi.beyond.lachesis_share_of_oracle_gain"),
    Row("Lachesis's share of the oracle's gain over HBM-first, single-agent", "fig11_fig12_compare",
        stat="single.beyond.lachesis_share_of_oracle_gain"),
    Row("offline bound / HBM-first, multi-agent tight (the first seed)", "fig09_fig10_compare",
        stat="multi.beyond.bound/hbm_first", unit="×"),
    Row("offline bound / HBM-first, single-agent (the first seed)", "fig11_fig12_compare",
        stat="single.beyond.bound/hbm_first", unit="×"),
    Row("Lachesis's share of the offline bound's gain, multi-agent tight (the first seed)",
        "fig09_fig10_compare",
        stat="multi.beyond.lachesis_share_of_bound_gain"),
    Row("Lachesis's share of the offline bound's gain, single-agent (the first seed)",
        "fig11_fig12_compare",
        stat="single.beyond.lachesis_share_of_bound_gain"),
    Row("the oracle's share of the offline bound's gain, multi-agent tight (the first seed)",
        "fig09_fig10_compare",
        stat="multi.beyond.oracle_share_of_bound_gain"),
    Row("the oracle's share of the offline bound's gain, single-agent (the first seed)",
        "fig11_fig12_compare",
        stat="single.beyond.oracle_share_of_bound_gain"),
    Row("HBM share of write bytes, offline bound, multi-agent tight (the first seed)",
        "fig09_fig10_compare",
        stat="multi.beyond.hbm_share.bound", percent=True),
    Row("HBM share of write bytes, offline bound, single-agent (the first seed)", "fig11_fig12_compare",
        stat="single.beyond.hbm_share.bound", percent=True),
    Row("HBF model vs Kyung et al. Fig. 4 (lifetime; TPOT)", "kyung_validation_summary", kind="kyung"),
)


def _span(values: list[tuple[float, float] | None]) -> tuple[float, float] | None:
    got = [v for v in values if v is not None]
    return (min(v[0] for v in got), max(v[1] for v in got)) if got else None


def _low(cell: str, where: Path) -> float:
    """A range cell's lower end; a MissingStatistic naming ``where`` when the cell holds no number."""
    r = parse_range(cell)
    if r is None:
        raise MissingStatistic(f"{where}: no number in {cell!r}")
    return r[0]


def _fmt(r: tuple[float, float] | None, row: Row) -> str:
    """A range to three significant digits (more where three would print two different ends alike)."""
    if r is None:
        return "—"
    scale, unit = (100.0, "%") if row.percent else (1.0, row.unit)
    lo, hi = scale * r[0], scale * r[1]
    for digits in (3, 4, 5):
        a, b = f"{lo:.{digits}g}", f"{hi:.{digits}g}"
        if a != b or lo == hi:
            break
    a, b = a.replace("-", "−"), b.replace("-", "−")
    joint = " to " if b.startswith("−") or a.startswith("−") else "–"
    return (a if a == b else f"{a}{joint}{b}") + unit


class MissingStatistic(LookupError):
    """A row's source file or statistic is not in the figures folder."""


def _read(path: Path) -> pd.DataFrame:
    """A comparison table as text cells (ranges stay ``lo–hi`` strings for :func:`parse_range`)."""
    if not path.exists():
        raise MissingStatistic(f"{path}: not found (the notebook that writes it has not run)")
    return pd.read_csv(path, dtype={"ours": str, "paper": str, "interval": str})


def _matches(figures: Path, row: Row, read: Callable[[Path], pd.DataFrame]) -> pd.DataFrame:
    path = figures / f"{row.source}.csv"
    table = read(path)
    if row.stat:
        label = statistic(row.stat).label
        hit = table[table["statistic"].astype(str).eq(label)]
        if hit.empty:
            raise MissingStatistic(f"{path}: no statistic {label!r} ({row.stat})")
        return hit
    hit = table[table["statistic"].astype(str).str.contains(row.pattern, regex=True)]
    if hit.empty:
        raise MissingStatistic(f"{path}: no statistic matches {row.pattern!r}")
    return hit


def cells(figures: str | Path, row: Row, read: Callable[[Path], pd.DataFrame] = _read) -> tuple[str, str]:
    """(ours, paper) as the table prints them, read from ``figures`` (``read``: how a comparison table is
    loaded; :func:`table` reads each once)."""
    figures = Path(figures)
    if row.kind == "kyung":
        path = figures / f"{row.source}.json"
        if not path.exists():
            raise MissingStatistic(f"{path}: not found (the notebook that writes it has not run)")
        s = json.loads(path.read_text(encoding="utf-8"))
        pct = lambda x: f"{100 * x:+.1f}%".replace("-", "−")  # noqa: E731
        return (f"{int(s['within_tol'])}/{int(s['cells'])} lifetimes within ±{100 * s['tol']:.0f}%, median "
                f"{pct(s['life_err_median'])}; TPOT {int(s['tpot_within_tol'])}/{int(s['cells'])}, median "
                f"{pct(s['tpot_err_median'])}"), "— (their Fig. 4 is the reference)"
    hit = _matches(figures, row, read)
    if row.kind == "rel_error":
        ours_v, paper_v = (np.array([_low(v, figures / f"{row.source}.csv") for v in hit[c]])
                           for c in ("ours", "paper"))
        return f"within ±{100 * np.max(np.abs(ours_v / paper_v - 1)):.1f}% ({len(hit)} workloads)", "—"
    ours = _fmt(_span([parse_range(v) for v in hit["ours"]]), row)
    if "interval" in hit:
        interval = _fmt(_span([parse_range(v) for v in hit["interval"]]), row)
        if interval not in ("—", ours):  # one seed (the bound's): no interval to show
            ours += f" [{interval}]"
    return ours, _fmt(_span([parse_range(v) for v in hit["paper"]]), row)


def table(figures: str | Path) -> str:
    """The markdown table of :data:`ROWS` read from ``figures`` (rows whose source is absent are left out
    and named in a closing note)."""
    lines = ["| statistic | ours | paper |", "|---|---|---|"]
    missing = []
    read = lru_cache(maxsize=None)(_read)
    for row in ROWS:
        try:
            ours, paper = cells(figures, row, read)
        except MissingStatistic:
            missing.append(f"{row.label} (`{row.source}`)")
            continue
        lines.append(f"| {row.label} | {ours} | {paper} |")
    text = "\n".join(lines) + "\n"
    if missing:
        text += "\nNot in these figures (the notebook that writes the row has not run since it was added): " + \
            "; ".join(missing) + "\n"
    return text


def write(figures: str | Path) -> Path:
    """Write :func:`table` to ``figures/results_at_a_glance.md``."""
    return write_text(Path(figures) / GLANCE_FILE, table(figures))


START, END = "<!-- results-at-a-glance: start -->", "<!-- results-at-a-glance: end -->"


def page_table(page_text: str) -> str:
    """The table between a page's glance markers (what :func:`table` must equal)."""
    if START not in page_text or END not in page_text:
        raise ValueError(f"no {START!r} … {END!r} block in the page")
    return page_text.split(START, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def with_table(page_text: str, figures: str | Path) -> str:
    """The page's text with its glance block replaced by :func:`table` of ``figures``."""
    head, rest = page_text.split(START, 1)
    return f"{head}{START}\n{table(figures)}{END}{rest.split(END, 1)[1]}"
