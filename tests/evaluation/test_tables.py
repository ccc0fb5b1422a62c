"""What the Figs. 9–12 notebooks print, computed in :mod:`lachesis.evaluation.tables`: the run line, the SLO misses,
the composition means, the bound's HBM share, the checked numbers and the sentences beside the paper's."""

from __future__ import annotations

import pandas as pd
import pytest

from lachesis.evaluation import gains, tables
from tests.grid_rows import grid


def test_ratio_columns_keep_the_tables_order_and_only_what_ran():
    r = tables.ratio_table(grid())
    cols = tables.ratio_columns(r)
    assert cols == [c for c in cols if c in r] and "lachesis/hbm_first" in cols
    assert "deterministic/hbm_first" not in cols  # w/o predictive path did not run
    assert cols.index(tables.ORACLE_SHARE) < cols.index(tables.BOUND_SHARES["lachesis"])


def test_replicas_and_the_run_line():
    df = grid()
    rep, margin = tables.replicas(df)
    assert set(rep["seed"]) == {1} and len(rep) == 6
    assert margin.tolist() == pytest.approx([0.06 / 0.06] * 6)  # p99 TPOT 0.06 s against the tight SLO's 0.06 s
    line = tables.run_line(df, 2)
    # Lachesis (a compared placement) misses at 4/4 seed 0 and at 1/7 seed 1; the oracle is not compared
    assert line == ("12 runs over 2 seed(s); HBF write traffic settled in 50% of them; 2 of 8 runs of the compared "
                    "placements and 0 of 4 runs of the others miss the SLO at their load (drawn as misses)")
    one = df[df["seed"].eq(0)]
    assert "1 of 4 runs of the compared placements" in tables.run_line(one, 1)


def test_missed_slo_counts_a_miss_at_any_seed():
    m = tables.missed_slo(grid()).set_index(["memory", "policy"])
    assert not m.loc[("4/4", "lachesis"), "all_met"] and m.loc[("4/4", "lachesis"), "seeds_missed"] == 1
    assert not m.loc[("1/7", "lachesis"), "all_met"]  # it misses at seed 1 alone: still not a lifetime at the SLO
    assert m.loc[("1/7", "hbm_first"), "all_met"] and m.loc[("1/7", "hbm_first"), "seeds"] == 2


def test_composition_means_and_the_bound_share():
    df = grid()
    means = tables.composition_means(tables.write_composition(df)).set_index(
        ["memory", "policy", "seg_class", "tier"])["pct"]
    assert means[("1/7", "lachesis", "lead", "hbm")] == pytest.approx(35.0)  # 40 % and 30 % over the two seeds
    assert means[("4/4", "oracle", "worker", "hbf")] == pytest.approx(30.0)
    b = tables.bound_share_pct(df, model="m")
    assert b.loc[("multi_agent", "4/4")].tolist() == pytest.approx([80.0, 80.0, 80.0])
    assert tables.bound_share_pct(df, model="other").empty


def _cmp(df: pd.DataFrame) -> pd.DataFrame:
    return tables.compare_intervals(tables.single_agent_stats(df), note="test")


def test_check_numbers_and_say():
    df = grid()
    cmp = _cmp(df)
    nums = tables.check_numbers(df, cmp, ["single.gain", "single.bfcl_loss"])
    assert (nums["runs"], nums["cells"], nums["N*"]) == (12, 2, (8.0, 8.0))
    # per seed: 1.5, 1.25 at 1/7 and 4, 3 at 4/4; medians 1.375 and 3.5
    assert nums["gain Lachesis/HBM-first, 1/7–4/4"] == "1.375–3.5 [1.25–4]"
    assert nums["BFCLv4 Lachesis loss 4/4 vs 1/7"] == "absent"  # the grid ran no BFCLv4
    s = tables.say(cmp, "single.gain", "gain")
    assert s.startswith("gain: 1.375–3.5 (seeds 1.25–4; paper ") and "medians" in s and "interval" in s
    assert tables.say(cmp, "single.beyond.bound/hbm_first") == (
        "offline bound / HBM-first, 1/7–4/4: 3–8 (seeds 3–8)")  # not in the paper: no judgement
    assert tables.say(cmp, "single.bfcl_loss") == ""


def test_a_statistic_is_looked_up_by_its_key_and_an_unknown_key_fails():
    df = grid()
    cmp = _cmp(df)
    for bad in (lambda: tables.say(cmp, "gain Lachesis/HBM-first, 1/7–4/4"),
                lambda: tables.check_numbers(df, cmp, ["single.no_such"])):
        with pytest.raises(KeyError, match=r"no statistic .*; known: multi\.gain\.tight, "):
            bad()
    # the comparison table is indexed by key and prints the labels alone: a label's wording is the table's
    assert cmp.loc["single.gain", "statistic"] == tables.STATISTICS["single.gain"].label
    assert "key" not in cmp.columns and len(set(tables.STATISTICS)) == len(tables.STATISTICS)
    labels = [s.label for s in tables.STATISTICS.values()]
    assert len(set(labels)) == len(labels)


def test_single_agent_findings_name_the_trend_and_the_loads():
    df = grid(workload="tau3", model="q")
    cmp = _cmp(df)
    summary = tables.seed_table(tables.ratio_table(df))
    lines = tables.single_agent_findings(df, cmp, summary, ["tau3"], ["q"], 2)
    assert lines[0].startswith("**What we measured** (2 seed(s), 2 cells, each at one load: 6–8 sessions per GPU). ")
    assert "HBM takes 35–60% of write bytes under Lachesis (cell medians)." in lines[0]
    assert any(x.startswith("τ³-bench, q: Lachesis's median lifetime rises from 1/7 to 4/4 (2.75 → 4.25")
               for x in lines)
    assert any(x.startswith("**Beyond the paper**: ") for x in lines)
    assert not any(x.startswith("**The load**") for x in lines)  # rows without a joint sizing name none
    df = df.assign(load_sizing="compared", load_binding="hbm_first 4/4 seed 1")
    lines = tables.single_agent_findings(df, cmp, summary, ["tau3"], ["q"], 2)
    assert any(x.startswith("**The load** is each deployment's") and "(bound by hbm_first 4/4 seed 1)" in x
               for x in lines)


def test_multi_agent_findings_read_the_tight_slo_trend():
    df = grid()
    cmp = tables.compare_intervals(tables.multi_agent_stats(df))
    summary = tables.seed_table(tables.ratio_table(df))
    lines = tables.multi_agent_findings(df, cmp, summary, ["m"], 2)
    assert ("m, tight SLO, median device-years from 1/7 to 4/4: HBM-first's falls (2.00 → 1.25), Lachesis's rises "
            "(2.75 → 4.25) (§5.3: it falls under HBM-first and rises under Lachesis).") in lines
    assert not any("clairvoyance" in x for x in lines)  # the grid carries no close-time drift


def test_differences_say_when_the_grid_is_reduced(tmp_path):
    assert tables.differences("why. ", "ci").endswith("a tiny corpus scale with short windows.")
    assert tables.differences("why. ", "paper") == "why. "
    p = tmp_path / "g.csv"
    pd.DataFrame(dict(ratio=["lachesis/hbm_first", "oracle/hbm_first"], sentence=["One.", "Other."])).to_csv(p)
    assert tables.gain_vs_load_text(p, "g.csv").endswith("notebook): One.")


def _curve(live: dict[str, float], power: float) -> pd.DataFrame:
    """A load curve whose Lachesis/HBM-first ratio is (HBM ÷ live short KV) ** power on every configuration."""
    hbm = {"1/7": 36e9, "4/4": 144e9}
    rows = []
    for mem, cap in hbm.items():
        for n in (20, 40, 80):
            short = live[mem] * n
            for pol, years in (("hbm_first", 1.0), ("lachesis", (cap / short) ** power), ("deterministic", 1.5)):
                rows.append(dict(workload="multi_agent", model="M", slo="tight", memory=mem, n_sessions=n,
                                 policy=pol, lifetime_years=years, n_star=80, slo_met=True,
                                 live_short_kv_bytes=short * (1.0 if pol == "hbm_first" else 9.0),
                                 hbm_over_live_short=cap / short if pol == "hbm_first" else 0.1))
    return pd.DataFrame(rows)


def test_load_gains_carry_the_load_policys_operating_point():
    g = gains.load_gains(_curve({"1/7": 1e9, "4/4": 5e9}, -1.0))
    row = g[(g.memory == "4/4") & (g.n_sessions == 40)].iloc[0]
    assert row["live_short_kv_bytes"] == 5e9 * 40 and row["hbm_over_live_short"] == 144e9 / (5e9 * 40)


def test_gain_collapse_names_the_axis_that_lines_the_configurations_up():
    """A ratio that is a power of HBM ÷ live short KV is explained by that axis (R² 1) across configurations whose
    short-lived KV per session differs, and less by the load."""
    c = gains.gain_collapse(gains.load_gains(_curve({"1/7": 1e9, "4/4": 8e9}, -0.7)))
    r2 = c[c.ratio == "lachesis/hbm_first"].set_index("axis")["r2"]
    assert r2[gains.GAIN_AXES["hbm_over_live_short"]] == pytest.approx(1.0)
    assert r2[gains.GAIN_AXES["n_sessions"]] < 0.9
    flat = c[c.ratio == "deterministic/hbm_first"]  # a constant ratio: nothing to explain, R² is 0 or NaN
    assert not (flat["r2"] > 0.5).any() and set(c["configs"]) == {2}
