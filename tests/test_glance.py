"""The results table is read from the figures, never typed: rows, formats and its copy in docs/results.md."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lachesis import glance
from lachesis.glance import Row

ROOT = Path(__file__).resolve().parents[1]


def test_the_results_pages_table_is_the_one_the_committed_figures_give() -> None:
    readme = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert glance.page_table(readme) == glance.table(ROOT / "figures"), \
        "docs/results.md's results table differs from figures/: copy figures/results_at_a_glance.md into it " \
        "(python -c \"from lachesis import glance; ...with_table\")"


def _compare(tmp: Path, stem: str, rows: list[dict]) -> None:
    pd.DataFrame(rows).to_csv(tmp / f"{stem}.csv", index=False)


def test_a_span_row_ranges_over_its_matches_with_the_seed_interval(tmp_path: Path) -> None:
    _compare(tmp_path, "g", [
        dict(statistic="gain, tight, a", ours="1.2–1.5", interval="1.1–1.6", paper="1.5–2.95"),
        dict(statistic="gain, tight, b", ours=2.0, interval="1.9–2.1", paper=3),
        dict(statistic="gain, loose, a", ours=9.0, interval="9–9", paper=9),  # not matched
    ])
    row = Row("gain", "g", r"^gain, tight", unit="×")
    assert glance.cells(tmp_path, row) == ("1.2–2× [1.1–2.1×]", "1.5–3×")
    _compare(tmp_path, "one", [dict(statistic="s", ours="1.2–1.5", interval="1.2–1.5", paper="—"),
                               dict(statistic="loss", ours="0.03", interval="-0.175–0.084", paper="0.3–0.31")])
    assert glance.cells(tmp_path, Row("s", "one", "^s$")) == ("1.2–1.5", "—")  # one seed: no interval
    assert glance.cells(tmp_path, Row("l", "one", "^loss$", percent=True)) == ("3% [−17.5 to 8.4%]", "30–31%")


def test_ends_that_print_alike_get_more_digits_and_shares_print_as_percent(tmp_path: Path) -> None:
    _compare(tmp_path, "g", [dict(statistic="x", ours=0.0043, paper="10.06–10.09"),
                             dict(statistic="x", ours=0.055, paper="10.06–10.09")])
    assert glance.cells(tmp_path, Row("x", "g", "^x$", percent=True)) == ("0.43–5.5%", "1006–1009%")
    assert glance.cells(tmp_path, Row("x", "g", "^x$"))[1] == "10.06–10.09"


def test_rel_error_is_the_largest_deviation_from_the_paper(tmp_path: Path) -> None:
    _compare(tmp_path, "t", [dict(statistic="a: requests", ours=103, paper=100.0),
                             dict(statistic="b: requests", ours=90, paper=100.0),
                             dict(statistic="b: tokens", ours=10, paper=100.0)])
    assert glance.cells(tmp_path, Row("r", "t", ": requests$", "rel_error")) == ("within ±10.0% (2 workloads)", "—")


def test_the_validation_row_reads_its_summary(tmp_path: Path) -> None:
    (tmp_path / "k.json").write_text(json.dumps(dict(cells=30, within_tol=28, tol=0.15, life_err_median=-0.045,
                                                     tpot_within_tol=30, tpot_err_median=-0.04)))
    ours, _ = glance.cells(tmp_path, Row("k", "k", kind="kyung"))
    assert ours == "28/30 lifetimes within ±15%, median −4.5%; TPOT 30/30, median −4.0%"


def test_a_missing_source_or_statistic_is_named_not_invented(tmp_path: Path) -> None:
    _compare(tmp_path, "g", [dict(statistic="present", ours=1.0, paper=1.0)])
    with pytest.raises(glance.MissingStatistic, match="no statistic matches"):
        glance.cells(tmp_path, Row("r", "g", "^absent$"))
    with pytest.raises(glance.MissingStatistic, match="not found"):
        glance.cells(tmp_path, Row("r", "nope", "x"))
    text = glance.table(tmp_path)
    assert [ln for ln in text.splitlines() if ln.startswith("|")] == ["| statistic | ours | paper |", "|---|---|---|"]
    assert "Not in these figures" in text
    assert all(r.label in text for r in glance.ROWS)


def test_an_evaluation_row_reads_its_statistic_by_key(tmp_path: Path) -> None:
    _compare(tmp_path, "c", [dict(statistic="gain Lachesis/HBM-first, 1/7–4/4", ours="1.2–1.5", interval="1.1–1.6",
                                  paper="1.35–3.13")])
    assert glance.cells(tmp_path, Row("g", "c", stat="single.gain", unit="×")) == ("1.2–1.5× [1.1–1.6×]", "1.35–3.13×")
    with pytest.raises(glance.MissingStatistic, match="single.bfcl_loss"):
        glance.cells(tmp_path, Row("l", "c", stat="single.bfcl_loss"))
    with pytest.raises(KeyError, match=r"no statistic 'single.no_such'; known: "):
        Row("x", "c", stat="single.no_such")
