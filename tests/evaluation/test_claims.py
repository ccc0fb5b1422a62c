"""The claim ledger's rules on a hand-made grid: a range reproduced, close and off; a trend broken at one seed; runs
that miss the SLO left out and counted; a scope all misses or absent is not evaluable; the ledger written and read
back; the committed grids read without error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from lachesis.evaluation import claims as C
from lachesis.evaluation.claims import Claim, Part, PerCell, Trend

ROOT = Path(__file__).resolve().parents[2]
M = ("m",)
TIGHT = Part(("multi_agent",), ("tight",), ("1/7", "2/6", "3/5", "4/4"), M)
GAIN = PerCell(("lachesis", "hbm_first"), C.ratio("lachesis", "hbm_first"), "Lachesis/HBM-first")


def _grid(lachesis: dict[tuple[str, int], float], hbm_first: float = 2.0,
          missed: frozenset[tuple[str, str, int]] = frozenset(), slo: str = "tight") -> pd.DataFrame:
    """One model, one SLO: Lachesis's lifetime per (memory, seed), HBM-first's ``hbm_first`` everywhere; ``missed``:
    the (policy, memory, seed) runs that miss the SLO."""
    rows = []
    for (mem, seed), life in lachesis.items():
        for pol, years in (("lachesis", life), ("hbm_first", hbm_first)):
            rows.append(dict(workload="multi_agent", model="m", slo=slo, memory=mem, policy=pol, seed=seed,
                             slo_met=(pol, mem, seed) not in missed, lifetime_years=years, bytes_hbm=1.0,
                             bytes_hbf=9.0, hbf_write_rate=1e9 / years, n_sessions=10))
    return C.read_rows([pd.DataFrame(rows)])


def _ratios(by_mem: dict[str, float], seeds=(0, 1, 2), jitter: float = 0.0) -> dict[tuple[str, int], float]:
    """Lachesis lifetimes giving these ratios over HBM-first's 2 y, each seed off by ``jitter`` × (seed − 1)."""
    return {(m, s): 2.0 * (r + jitter * (s - 1)) for m, r in by_mem.items() for s in seeds}


def _row(c: Claim, rows: pd.DataFrame) -> dict:
    return C.evaluate(c, rows)


def test_a_range_is_reproduced_close_or_off_by_its_worst_end() -> None:
    rows = _grid(_ratios({"1/7": 1.55, "2/6": 2.0, "3/5": 2.5, "4/4": 2.9}, jitter=0.05))
    c = Claim("t", "§5.3", "q", (TIGHT,), (1.5, 2.95), GAIN, "×")
    r = _row(c, rows)
    assert r["verdict"] == "reproduced" and r["ours"] == "1.55–2.9×" and r["seeds"] == "1.5–2.95×"
    assert r["cells"] == r["cells_read"] == 4 and r["values_read"] == 12 and r["misses"] == 0 and not r["reason"]
    assert r["error_lo"] == pytest.approx(1.55 / 1.5 - 1) and r["error_hi"] == pytest.approx(2.9 / 2.95 - 1)
    close = _row(Claim("t", "§5.3", "q", (TIGHT,), (1.5, 2.95), GAIN, "×"),
                 _grid(_ratios({"1/7": 1.3, "4/4": 2.9}) | _ratios({"2/6": 2.0, "3/5": 2.5})))
    assert close["verdict"] == "close" and close["reason"].startswith("low end −13%, high end −2%")
    off = _row(Claim("t", "§5.3", "q", (TIGHT,), (1.5, 2.95), GAIN, "×"),
               _grid(_ratios({"1/7": 1.0, "2/6": 1.2, "3/5": 1.3, "4/4": 1.4})))
    assert off["verdict"] == "off"
    assert "lowest at multi-agent m tight 1/7, highest at multi-agent m tight 4/4" in off["reason"]


@pytest.mark.parametrize("ours, verdict", [((1.35, 3.3), "reproduced"), ((1.34, 3.3), "close"),
                                           ((1.5, 3.74), "close"), ((1.5, 3.8), "off"), ((1.12, 3.0), "off")])
def test_the_verdict_bands_are_ten_and_twenty_five_percent_of_the_papers_end(ours, verdict) -> None:
    assert C.range_verdict(ours, (1.5, 3.0))[0] == verdict


def test_a_number_is_a_range_of_one_value() -> None:
    assert C.range_verdict((2.3, 2.7), 2.53)[0] == "reproduced"
    assert C.range_verdict((2.3, 3.2), 2.53)[0] == "off"


def test_a_run_that_misses_the_slo_is_left_out_and_counted() -> None:
    lach = _ratios({"1/7": 1.5, "4/4": 3.0})
    lach[("4/4", 2)] = 2.0 * 9.0  # a wild seed, but it misses the SLO
    missed = frozenset({("lachesis", "4/4", 2), ("hbm_first", "1/7", 0)})
    r = _row(Claim("t", "§5.3", "q", (Part(("multi_agent",), ("tight",), ("1/7", "4/4"), M),), (1.5, 3.0), GAIN, "×"),
             _grid(lach, missed=missed))
    assert r["verdict"] == "reproduced" and r["ours"] == "1.5–3×" and r["seeds"] == "1.5–3×"
    assert r["misses"] == 2 and r["values_read"] == 4  # the ratio needs both policies' runs at the SLO


def test_a_scope_whose_every_run_misses_is_not_evaluable_never_reproduced() -> None:
    lach = _ratios({"1/7": 1.5, "4/4": 2.95})
    missed = frozenset(("hbm_first", m, s) for m, s in lach)
    c = Claim("t", "§5.3", "q", (Part(("multi_agent",), ("tight",), ("1/7", "4/4"), M),), (1.5, 2.95), GAIN, "×")
    r = _row(c, _grid(lach, missed=missed))
    assert r["verdict"] == "not evaluable" and r["ours"] == ""
    assert r["reason"] == "no row of the scope meets the SLO (6 runs miss it)"
    absent = _row(Claim("t", "§5.3", "q", (Part(("multi_agent",), ("loose",), ("1/7",), M),), 1.5, GAIN, "×"),
                  _grid(lach))
    assert absent["verdict"] == "not evaluable" and absent["reason"] == "the grids hold no cell of this scope"


def _rises() -> Trend:
    return Trend(("lachesis",), C.lifetime("lachesis"), C.SERIES, C.monotone(True), "Lachesis")


def test_a_trend_broken_at_one_seed_is_close_and_names_the_seed() -> None:
    lach = {(m, s): 3.0 + i for i, m in enumerate(("1/7", "2/6", "3/5", "4/4")) for s in (0, 1, 2)}
    c = Claim("t", "§5.3", "q", (TIGHT,), None, _rises(), "y")
    assert _row(c, _grid(lach))["verdict"] == "reproduced"
    lach[("4/4", 2)] = 4.5  # below 3/5 at seed 2
    r = _row(c, _grid(lach))
    assert r["verdict"] == "close" and r["holds"] == "2 of 3 seeds" and r["ours"] == "holds at 2 of 3 seeds"
    assert r["reason"] == "breaks at seed 2: multi-agent m tight: 1/7 3 → 2/6 4 → 3/5 5 → 4/4 4.5"
    lach[("4/4", 1)] = 4.5
    assert _row(c, _grid(lach))["verdict"] == "off"


def test_a_trend_is_read_only_at_seeds_where_every_run_of_the_group_meets_the_slo() -> None:
    lach = {(m, s): 3.0 + i for i, m in enumerate(("1/7", "2/6", "3/5", "4/4")) for s in (0, 1, 2)}
    lach[("4/4", 2)] = 1.0  # breaks the trend, but misses the SLO
    r = _row(Claim("t", "§5.3", "q", (TIGHT,), None, _rises(), "y"), _grid(lach, missed={("lachesis", "4/4", 2)}))
    assert r["verdict"] == "reproduced" and r["holds"] == "2 of 2 seeds (1 not readable)" and r["misses"] == 1
    every = frozenset(("lachesis", m, s) for m, s in lach if m == "2/6")
    r = _row(Claim("t", "§5.3", "q", (TIGHT,), None, _rises(), "y"), _grid(lach, missed=every))
    assert r["verdict"] == "not evaluable" and r["cells_read"] == 0


def test_a_count_reads_the_runs_at_the_slo_and_is_unread_where_a_miss_could_change_it() -> None:
    scope = (Part(("multi_agent",), ("tight",), ("1/7", "2/6", "3/5", "4/4"), M),)
    below_one = Trend(("lachesis",), C.lifetime("lachesis"), (), C.count_below(5.0, 1), "L", partial=True)
    c = Claim("t", "§5.5", "every configuration but one", scope, None, below_one, "y")
    lach = {(m, s): y for m, y in zip(("1/7", "2/6", "3/5", "4/4"), (4.0, 6.0, 7.0, 8.0)) for s in (0, 1)}
    assert _row(c, _grid(lach))["verdict"] == "reproduced"
    r = _row(c, _grid(lach, missed={("lachesis", "3/5", 1)}))  # seed 1: one below, a miss could be a second
    assert r["verdict"] == "reproduced" and r["holds"] == "1 of 1 seeds (1 not readable)"
    lach[("2/6", 0)] = 4.5
    r = _row(c, _grid(lach, missed={("lachesis", "3/5", 0)}))  # seed 0: two below already
    assert r["verdict"] == "off" and r["holds"] == "1 of 2 seeds"  # seed 1 has no miss now: one below, read
    assert r["reason"].startswith("breaks at seed 0: 2 below (multi-agent m tight 1/7, multi-agent m tight 2/6)")
    all_missed = frozenset(("lachesis", m, s) for m, s in lach)
    assert _row(c, _grid(lach, missed=all_missed))["verdict"] == "not evaluable"


def test_only_one_cell_reaches_the_warranty() -> None:
    scope = (Part(("multi_agent",), ("tight",), ("1/7", "8/8*"), M),)
    t = Trend(("hbm_first",), C.lifetime("hbm_first"), (), C.only(("m", "8/8*"), 5.0), "HBM-first", partial=True)
    c = Claim("t", "§5.3", "only on 8/8*", scope, None, t, "y")
    lach = {(m, s): 9.0 for m in ("1/7", "8/8*") for s in (0, 1)}
    rows = _grid(lach)
    rows.loc[rows["memory"].eq("8/8*") & rows["policy"].eq("hbm_first"), "lifetime_years"] = 5.4
    assert _row(c, rows)["verdict"] == "reproduced"
    rows.loc[rows["memory"].eq("1/7") & rows["policy"].eq("hbm_first") & rows["seed"].eq(1), "lifetime_years"] = 5.1
    r = _row(c, rows)
    assert r["verdict"] == "off" and r["holds"] == "1 of 2 seeds"  # half the seeds is not more than half
    assert r["reason"] == "breaks at seed 1: also at multi-agent m tight 1/7"


def test_the_claims_are_declared_once_each_with_a_quote_a_section_and_a_paper_value() -> None:
    ids = [c.id for c in C.CLAIMS]
    assert len(ids) == len(set(ids)) and len(ids) >= 40
    for c in C.CLAIMS:
        assert c.quote and c.section and c.scope, c.id
        assert (c.paper is None) == (c.kind == "trend"), c.id
        assert c.unit in C.UNIT_SUFFIX or c.unit in ("", "sessions"), c.id
    with pytest.raises(KeyError, match="no claim 'nope'; known: abstract.gain"):
        C.claim("nope")


def test_the_committed_grids_give_a_verdict_for_every_claim_and_the_ledger_reads_back(tmp_path) -> None:
    """Whatever the committed numbers are: every claim evaluates, the verdicts sum, the CSV reads back the same."""
    rows = C.read_rows([ROOT / "figures" / "fig09_grid.csv", ROOT / "figures" / "fig11_grid.csv"],
                       ROOT / "figures" / "fig10_write_composition.csv")
    led = C.ledger(rows, causes={})
    assert list(led["id"]) == [c.id for c in C.CLAIMS] and set(led["verdict"]) <= set(C.VERDICTS)
    assert int(C.tally(led).loc["all"].sum()) == len(led)
    assert (led.loc[led["verdict"].isin(["close", "off"]), "reason"] != "").all()
    C.write(led, tmp_path)
    back = C.read_ledger(tmp_path / "claims.csv")
    assert C.summary_markdown(back) == C.summary_markdown(led)
    assert (tmp_path / "claims.md").read_text(encoding="utf-8").startswith("# Claim ledger\n\n**Claim ledger**")


def test_a_recorded_cause_is_printed_beside_the_reason_and_an_unknown_id_is_refused(tmp_path) -> None:
    rows = _grid(_ratios({"1/7": 1.0, "2/6": 1.0, "3/5": 1.0, "4/4": 1.0}))
    c = Claim("multi.gain.tight", "§5.3", "q", (TIGHT,), (1.5, 2.95), GAIN, "×")
    led = C.ledger(rows, [c], causes={"multi.gain.tight": "the load is twice the paper's"})
    assert led.loc[0, "cause"] == "the load is twice the paper's" and led.loc[0, "reason"]
    assert C.off_lines(led) == ["- `multi.gain.tight` (§5.3): paper 1.5–2.95×, ours 1×"]  # the README's short line
    assert "| the load is twice the paper's |" in C.markdown(led)  # the cause in claims.md
    f = tmp_path / "causes.yaml"
    f.write_text(yaml.safe_dump({"multi.gain.tigth": "x"}))
    with pytest.raises(ValueError, match=r"causes.yaml: 'multi.gain.tigth' is no claim id"):
        C.load_causes(f)
    f.write_text(yaml.safe_dump({"multi.gain.tight": ""}))
    with pytest.raises(ValueError, match="the cause must be one line of text"):
        C.load_causes(f)
    assert C.load_causes() == C.load_causes(ROOT / "lachesis" / "data" / C.CAUSES_FILE)


def test_a_grid_without_a_column_or_with_an_unreadable_slo_check_is_named(tmp_path) -> None:
    g = tmp_path / "g.csv"
    pd.DataFrame([dict(workload="w", model="m", slo="tight", memory="1/7", policy="p", seed=0, slo_met="maybe",
                       lifetime_years=1.0)]).to_csv(g, index=False)
    with pytest.raises(ValueError, match=r"g.csv: row 0: slo_met 'maybe' is not true/false"):
        C.read_rows([g])
    pd.DataFrame([dict(workload="w", seed=0)]).to_csv(g, index=False)
    with pytest.raises(ValueError, match=r"g.csv: missing column\(s\) model, slo, memory, policy, slo_met"):
        C.read_rows([g])


def test_the_class_bytes_come_from_the_composition_table() -> None:
    rows = _grid(_ratios({"1/7": 1.5}))
    comp = pd.DataFrame([dict(workload="multi_agent", model="m", slo="tight", memory="1/7", policy=p, seed=s,
                              seg_class="reviewer", tier=t, bytes=b)
                         for p in ("lachesis", "hbm_first") for s in (0, 1, 2)
                         for t, b in (("hbm", 3.0), ("hbf", 1.0))])
    merged = C.read_rows([rows.drop(columns="ok")], comp)
    assert np.allclose(C.to_flash("lachesis", "reviewer")(
        C.read(merged, [Part(("multi_agent",), ("tight",), ("1/7",), M)], ("lachesis",)).table), 0.25)


def test_the_ledger_runs_after_the_grids_it_reads_and_never_beside_them() -> None:
    for name in ("paper.yaml", "ci.yaml"):
        spec = yaml.safe_load((ROOT / "notebooks" / "params" / name).read_text())
        order = spec["order"]
        assert order.index("claims") > max(order.index("fig09_fig10_multi_agent"),
                                           order.index("fig11_fig12_single_agent")), name
        assert "claims" not in spec["beside"]
        grids = spec["notebooks"]["claims"]
        assert grids["fig09_grid"] == f"{spec['common']['out_dir']}/fig09_grid.csv", name


@pytest.mark.parametrize("lo, hi, unit, text", [
    (4.596, 4.596, "y", "4.6 y"), (10.061, 10.069, "×", "10.06–10.07×"), (0.242, 0.661, "%", "24.2–66.1%"),
    (-0.412, -0.349, "%", "−41.2 to −34.9%"), (1.0, 1.0, "×", "1×")])
def test_a_range_prints_three_digits_more_only_where_its_ends_would_print_alike(lo, hi, unit, text) -> None:
    assert C.fmt_range(lo, hi, unit) == text
