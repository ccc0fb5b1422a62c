"""Knobs (what each override changes, and nothing else), the cache key, the cache-only readers, and the
one-at-a-time study at a fixed load (endurance knobs recomputed exactly, without a run); a value where the SLO
admits no load said in words, not a bare NaN."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, replace

import numpy as np
import pandas as pd
import pytest
from sens_fixtures import CI, SCALE, VALUES, cells, tiny_study
from sens_fixtures import KNOBS as STUDIED

from lachesis.config import HBF_STACK, ReferenceClock
from lachesis.evaluation import grid, knobs, plancache, sensitivity, store, sweep
from lachesis.evaluation.knobs import KNOBS
from lachesis.node import endurance
from lachesis.node import simulator as S
from lachesis.node.plan import Plan

P = grid.Point("tau3", "1/7", "Llama-4-Maverick", "tight", "lachesis", SCALE, 0)


def _flat(o, prefix=""):
    """A config as {dotted path: leaf value}."""
    if isinstance(o, dict):
        out = {}
        for k, v in o.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): o}


def _changed(overrides: dict) -> set[str]:
    a, b = _flat(asdict(P.config())), _flat(asdict(replace(P, overrides=overrides).config()))
    return {k for k in a if a[k] != b[k]}


# ------------------------------------------------------------------------------------------------
# Knobs and Point.overrides
# ------------------------------------------------------------------------------------------------


def test_every_knob_defaults_to_the_papers_setting() -> None:
    assert KNOBS["user_delay_median_s"].default == 120.0 == ReferenceClock().user_delay_median_s
    assert KNOBS["pe_cycles"].default == 100_000 and KNOBS["write_amplification"].default == 1.02
    assert KNOBS["read_pricing"].default == "aggregate" and KNOBS["laden_close"].default == grid.Point.laden_close
    for k in KNOBS.values():
        if k.name != "group_ranks":  # G = 1, 2, 4, 8: the one the cells' node has is their setting
            assert k.default not in k.values, f"{k.name}: the study's values move away from the paper's"
        for v in k.values:
            k.check(v)
    assert KNOBS["group_ranks"].values == (1.0, 2.0, 4.0, 8.0)
    node = knobs.node("paper")
    on_node = sensitivity.variants(["group_ranks", "lifetime_over_ranks", "load_base"], base=node)
    assert [(v.knob, v.value) for v in on_node] == [("paper", None), ("group_ranks", 1.0), ("group_ranks", 2.0),
                                                     ("group_ranks", 4.0), ("lifetime_over_ranks", "worst"),
                                                     ("load_base", "4/4")]
    assert [v.value for v in sensitivity.variants(["group_ranks"]) if v.knob == "group_ranks"] == [2.0, 4.0, 8.0]


@pytest.mark.parametrize("overrides, paths", [
    ({"hbf_write_bw_scale": 3}, {"memory.hbf.write_bw"}),
    ({"read_pricing": "per_tier"}, {"memory.read_pricing"}),
    ({"pe_cycles": 3000}, {"endurance.pe_cycles"}),
    ({"write_amplification": 3}, {"endurance.write_amplification"}),
    ({"user_delay_median_s": 600}, {"clock.user_delay_median_s"}),
    ({"user_delay_sigma": 0.5}, {"clock.user_delay_sigma"}),
    ({"tool_latency_scale": 2}, {"clock.tool_classes"}),
])
def test_an_override_changes_its_field_and_nothing_else(overrides, paths) -> None:
    assert _changed(overrides) == paths


def test_override_values_land_where_they_should() -> None:
    cfg = replace(P, overrides={"hbf_write_bw_scale": 3, "tool_latency_scale": 2, "pe_cycles": 3000}).config()
    assert cfg.memory.hbf.write_bw == 3 * HBF_STACK.write_bw
    assert cfg.memory.hbf_write_bw == 3 * P.config().memory.hbf_write_bw
    assert [t.mean_latency_s for t in cfg.clock.tool_classes] == [2 * t.mean_latency_s
                                                                  for t in ReferenceClock().tool_classes]
    assert cfg.endurance.pe_cycles == 3000 and cfg.memory.label == "1/7" and cfg.model.name == P.config().model.name


@pytest.mark.parametrize("bad, what", [
    ({"user_delay_median_s": 0}, "outside"), ({"user_delay_sigma": -1}, "outside"),
    ({"write_amplification": 0.9}, "outside"), ({"pe_cycles": float("nan")}, "finite number"),
    ({"hbf_write_bw_scale": "2"}, "finite number"), ({"read_pricing": "fast"}, "expected one of"),
    ({"load": 0.5}, "unknown knob"), ({"laden_close": "arrival"}, "unknown knob"), ({"tpot": 1}, "unknown knob"),
    ([("pe_cycles", 1), ("pe_cycles", 2)], "given twice"), ([("pe_cycles",)], "pairs"),
])
def test_bad_overrides_fail_in_one_line_naming_the_knob(bad, what) -> None:
    with pytest.raises(ValueError, match=what) as e:
        replace(P, overrides=bad)
    assert "\n" not in str(e.value)


def test_overrides_are_stored_sorted_canonical_and_hashable() -> None:
    a = replace(P, overrides={"write_amplification": 3, "pe_cycles": 3000})
    b = replace(P, overrides=[("pe_cycles", 3000.0), ("write_amplification", 3.0)])
    assert a == b and hash(a) == hash(b)
    assert a.overrides == (("pe_cycles", 3000.0), ("write_amplification", 3.0))
    assert a.cell() != P.cell() and "pe_cycles=3000" in a.label()


def test_cache_keys_differ_per_override_and_the_papers_setting_keeps_its_key() -> None:
    variants = [{}, {"pe_cycles": 3000}, {"pe_cycles": 10_000}, {"write_amplification": 3},
                {"read_pricing": "per_tier"},
                {"user_delay_median_s": 600}, {"tool_latency_scale": 2}, {"hbf_write_bw_scale": 0.5},
                {"pe_cycles": 3000, "write_amplification": 3}]
    keys = [store.point_key(replace(P, overrides=o), "fp", CI) for o in variants]
    assert len(set(keys)) == len(keys)
    # no override: the key caches written before overrides existed were filed under
    pt = {k: v for k, v in asdict(P).items() if k != "overrides"}
    blob = json.dumps(dict(point=pt, trace="fp", config=store.canonical(asdict(P.config())), params=asdict(CI),
                           load=None, code=store.CODE_VERSION), sort_keys=True, default=str)
    assert store.point_key(P, "fp", CI) == hashlib.sha256(blob.encode()).hexdigest()[:24]


# ------------------------------------------------------------------------------------------------
# Clock knobs rebuild the plan: the reference clock's draws, scaled
# ------------------------------------------------------------------------------------------------


def _plan(**o) -> Plan:
    return plancache.workload_plan("tau3", SCALE, 0, overrides=tuple(o.items()))


def test_user_delay_median_doubles_every_user_delay_and_nothing_else() -> None:
    a, b = _plan(), _plan(user_delay_median_s=240.0)
    assert (a.t_user > 0).any()
    np.testing.assert_allclose(b.t_user, 2 * a.t_user, rtol=1e-12)
    np.testing.assert_array_equal(b.t_tools, a.t_tools)
    np.testing.assert_array_equal(b.t_obs, a.t_obs)
    np.testing.assert_array_equal(b.out_tokens, a.out_tokens)
    np.testing.assert_array_equal(b.w_tok, a.w_tok)
    assert b.fingerprint == a.fingerprint  # same trace: the override enters the key through the point


def test_tool_latency_scale_multiplies_every_tool_latency_and_nothing_else() -> None:
    a, b = _plan(), _plan(tool_latency_scale=3.0)
    assert (a.t_tools > 0).any()
    np.testing.assert_allclose(b.t_tools, 3 * a.t_tools, rtol=1e-12)
    np.testing.assert_array_equal(b.t_user, a.t_user)


def test_user_delay_sigma_moves_the_spread_not_the_median() -> None:
    a, b = _plan(), _plan(user_delay_sigma=0.5)
    u, v = a.t_user[a.t_user > 0], b.t_user[b.t_user > 0]
    assert not np.allclose(u, v)
    # same normal draws z: log(d) = log(median) + sigma z, so log-distance from the median halves
    np.testing.assert_allclose(np.log(v / 120.0), 0.5 * np.log(u / 120.0), rtol=1e-9, atol=1e-12)


def test_laden_free_point_moves_a_single_agent_plan_only() -> None:
    def closes(w: str, lc: str) -> tuple:
        p = plancache.workload_plan(w, SCALE, 0, laden_close=lc)
        return p.ca_seg.tolist(), p.ce_seg.tolist()

    assert closes("tau3", "last_read") != closes("tau3", "arrival")
    assert closes("multi_agent", "last_read") == closes("multi_agent", "arrival")  # no reasoning-laden segment


# ------------------------------------------------------------------------------------------------
# Endurance knobs: a pure factor on lifetime
# ------------------------------------------------------------------------------------------------


def test_pe_cycles_and_write_amplification_scale_lifetime_exactly() -> None:
    rate = 3.7e9
    life = lambda **o: float(endurance.hbf_lifetime_years(replace(P, overrides=o).config().memory, rate,  # noqa: E731
                                                    replace(P, overrides=o).config().endurance))
    assert life(pe_cycles=50_000) == pytest.approx(life() / 2, rel=1e-15)
    assert life(write_amplification=2.04) == pytest.approx(life() / 2, rel=1e-15)
    assert life(pe_cycles=3000, write_amplification=3) == pytest.approx(life() * 0.03 * 1.02 / 3, rel=1e-15)


def test_variants_list_the_papers_setting_once_and_reject_unknown_knobs() -> None:
    vs = sensitivity.variants(["pe_cycles", "laden_close"], {"pe_cycles": (100_000, 3000)})
    assert [(v.knob, v.label()) for v in vs] == [("paper", "paper"), ("pe_cycles", "3000"), ("laden_close", "arrival")]
    with pytest.raises(ValueError, match="unknown knob 'tpot'"):
        sensitivity.variants(["tpot"])
    with pytest.raises(ValueError, match="outside"):
        sensitivity.variants(["load"], {"load": (-1,)})
    assert sensitivity.Variant("load", 0.5).load(147) == 74 and sensitivity.Variant("load", 0.001).load(147) == 1


# ------------------------------------------------------------------------------------------------
# The study at a fixed load (tiny corpus, CI preset; shared with test_explorer)
# ------------------------------------------------------------------------------------------------


def _gains() -> pd.DataFrame:
    return sensitivity.gains(tiny_study()[1])


@pytest.mark.slow
def test_the_load_is_held_fixed_except_for_the_load_knob() -> None:
    g = _gains()
    n_star = int(g["n_star"].iloc[0])
    assert n_star > 0 and g["n_star"].eq(n_star).all()
    load = g[g["knob"].eq("load")]
    assert load["n_sessions"].tolist() == [grid.load_at(0.5, n_star)]
    assert g.loc[~g["knob"].eq("load"), "n_sessions"].eq(n_star).all()
    assert g["all_meet_slo"].dtype == bool and g.loc[g["knob"].eq("paper"), "all_meet_slo"].all()


@pytest.mark.slow
def test_endurance_knobs_need_no_run_leave_gains_unchanged_and_scale_device_years() -> None:
    runs = tiny_study()[1]
    paper = runs[runs["knob"].eq("paper")].set_index("policy")
    for knob, value, factor in (("pe_cycles", "50000", 0.5), ("pe_cycles", "3000", 0.03),
                                ("write_amplification", "1.5", 1.02 / 1.5), ("write_amplification", "3", 1.02 / 3)):
        r = runs[runs["knob"].eq(knob) & runs["value"].eq(value)].set_index("policy")
        assert not r["simulated"].any()
        np.testing.assert_allclose(r["lifetime_years"], paper.loc[r.index, "lifetime_years"] * factor, rtol=1e-12)
        np.testing.assert_array_equal(r["hbf_write_rate"], paper.loc[r.index, "hbf_write_rate"])
    g = _gains()
    base = g[g["knob"].eq("paper")].iloc[0]
    for col in ("lachesis/hbm_first", "deterministic/hbm_first"):
        e = g[g["knob"].isin(["pe_cycles", "write_amplification"])][col]
        np.testing.assert_allclose(e, base[col], rtol=1e-12)
    tlc = g[g["knob"].eq("pe_cycles") & g["value"].eq("3000")].iloc[0]
    assert tlc["years_lachesis"] == pytest.approx(0.03 * base["years_lachesis"], rel=1e-12)
    assert not tlc["outlasts_warranty_lachesis"]  # TLC-class flash: 3% of the paper's device-years


@pytest.mark.slow
def test_a_knob_the_trace_does_not_use_reproduces_the_papers_runs() -> None:
    """The multi-agent trace has one user turn per session and no reasoning-laden segment."""
    runs = tiny_study()[1]
    paper = runs[runs["knob"].eq("paper")].set_index("policy")["lifetime_years"]
    for knob in ("user_delay_median_s", "laden_close"):
        r = runs[runs["knob"].eq(knob)].set_index("policy")
        assert r["simulated"].all()
        np.testing.assert_allclose(r["lifetime_years"], paper.loc[r.index], rtol=1e-12)


@pytest.mark.slow
def test_sentences_say_how_far_each_knob_moves_the_gain() -> None:
    said = sensitivity.sentences(_gains())
    assert [s.split("**")[1] for s in said] == list(STUDIED)
    text = "\n".join(said)
    assert "**pe_cycles**" in text and "unchanged" in text and "no new run" in text
    load = next(s for s in said if s.startswith("**load**"))
    assert "% away" in load or "unchanged" in load


@pytest.mark.slow
def test_the_cache_only_readers_never_simulate_or_build_a_plan(monkeypatch) -> None:
    d, runs = tiny_study()

    def boom(*a, **k):
        raise AssertionError("simulated or built a plan")

    for name in ("simulate", "simulate_windows"):
        monkeypatch.setattr(S, name, boom)
    for name in ("build_plan", "_plan"):  # a plan is built in plancache only
        monkeypatch.setattr(plancache, name, boom)
    got, lacking = sensitivity.cached(cells(), STUDIED, VALUES, CI, d)
    assert lacking == []
    pd.testing.assert_frame_equal(got[runs.columns].reset_index(drop=True), runs.reset_index(drop=True))
    # run() on a complete cache reads it, too
    pd.testing.assert_frame_equal(sensitivity.run(cells(), STUDIED, VALUES, CI, d, progress=False)[runs.columns],
                                  runs)
    grid, missing = sweep.cached_results([p for c in cells() for p in c], d, CI)
    assert missing == [] and len(grid) == 3 and grid["load"].eq("per_deployment").all()


@pytest.mark.slow
def test_the_cache_only_readers_name_what_is_missing(tmp_path, monkeypatch) -> None:
    d, _ = tiny_study()
    monkeypatch.setattr(S, "simulate_windows", lambda *a, **k: (_ for _ in ()).throw(AssertionError("simulated")))
    pts = [p for c in cells() for p in c]
    grid, missing = sweep.cached_results(pts, tmp_path, CI)
    assert grid.empty and missing == pts
    got, lacking = sensitivity.cached(cells(), STUDIED, VALUES, CI, tmp_path)
    assert got.empty and lacking == ["multi_agent Llama-4-Maverick tight 1/7: the paper's setting (N*)"]
    got, lacking = sensitivity.cached(cells(), ("tool_latency_scale",), None, CI, d)
    assert lacking == [f"multi_agent Llama-4-Maverick tight 1/7: tool_latency_scale = {v:g}"
                       for v in KNOBS["tool_latency_scale"].values]
    assert set(got["knob"]) == {"paper"}



@pytest.mark.slow
def test_at_own_load_searches_n_star_again_per_value_and_reports_the_operating_point(tmp_path) -> None:
    """The user's think time sets how many sessions fit: at 4x the median N* must rise well above 1.5x."""
    tau = sensitivity.study_cells(SCALE, 0, multi=dict(workload="multi_agent", configs=()),
                                  single=dict(workload="tau3", configs=("4/4",)))
    df = sensitivity.at_own_load(tau, "user_delay_median_s", [60.0, 240.0], CI, tmp_path, n_jobs=1, progress=False)
    assert list(df["value"]) == [60.0, 240.0] and set(df["knob"]) == {"user_delay_median_s"}
    n = df.set_index("value")["n_star"]
    assert n[240.0] > 1.5 * n[60.0] > 0
    for c in ("lachesis/hbm_first", "live_short_kv_gb", "kv_read_per_step_gb", "hbm_over_live_short"):
        assert np.isfinite(df[c]).all() and (df[c] > 0).all(), c
    s = sensitivity.spread(df)
    assert s.loc[0, "n_star moves %"] == pytest.approx((n[240.0] / n[60.0] - 1) * 100)
    with pytest.raises(ValueError, match="load"):
        sensitivity.at_own_load(tau, "load", [0.5], CI, tmp_path, n_jobs=1, progress=False)
    with pytest.raises(ValueError, match="pe_cycles"):
        sensitivity.at_own_load(tau, "pe_cycles", [3000.0], CI, tmp_path, n_jobs=1, progress=False)


# -- a value that admits no load: said, not a bare NaN ------------------------------------------------


@pytest.mark.slow
def test_an_extreme_write_bandwidth_that_admits_no_load_says_why(tmp_path) -> None:
    """At 0.01x the HBF write bandwidth, with landings that stall an aged node, the tight SLO admits no load:
    N* = 0, the gains are NaN, and the row says why instead of a bare NaN; the spread skips it rather than
    reporting an infinite move."""
    from sens_fixtures import CI, SCALE

    from lachesis.evaluation import grid, sensitivity

    pts = [grid.Point("multi_agent", "1/7", "Llama-4-Maverick", "tight", pol, SCALE, 0,
                      overrides={"landing": "stall", "node_start": "aged"})
           for pol in ("hbm_first", "deterministic", "lachesis")]
    df = sensitivity.at_own_load([pts], "hbf_write_bw_scale", [0.01, 1.0], CI, tmp_path, n_jobs=1, progress=False)
    r = df.set_index("value")
    assert r.loc[0.01, "n_star"] == 0 and pd.isna(r.loc[0.01, "lachesis/hbm_first"])
    why = r.loc[0.01, "why_undefined"]
    assert "N* = 0: the tight SLO admits no load at hbf_write_bw_scale = 0.01" in why and "lachesis/hbm_first" in why
    assert r.loc[1.0, "why_undefined"] == "" and r.loc[1.0, "n_star"] > 0
    s = sensitivity.spread(df)
    assert (s.filter(like="moves %") == 0).all().all()  # one value with a load: nothing moves, nothing infinite


def test_a_sentence_names_a_value_without_a_gain_instead_of_nan() -> None:
    import math

    from lachesis.evaluation import sensitivity

    base = dict(workload="multi_agent", model="Llama-4-Maverick", slo="tight", memory="1/7", policy="")
    g = pd.DataFrame([dict(base, knob="paper", value="paper", n_sessions=10, all_meet_slo=True, simulated=True,
                           slo_margin=0.5, **{"lachesis/hbm_first": 1.3, "years_lachesis": 7.0}),
                      dict(base, knob="hbf_write_bw_scale", value="0.01", n_sessions=0, all_meet_slo=False,
                           simulated=True, slo_margin=2.0,
                           **{"lachesis/hbm_first": math.nan, "years_lachesis": math.nan}),
                      dict(base, knob="hbf_write_bw_scale", value="3", n_sessions=10, all_meet_slo=True,
                           simulated=True, slo_margin=0.4, **{"lachesis/hbm_first": 1.4, "years_lachesis": 8.0})])
    text = sensitivity.sentences(g)[0]
    assert "nan" not in text.lower(), text
    assert "no gain at 0.01 (a lifetime there is not finite: the SLO admits no load)" in text


def test_a_knob_that_moves_the_nodes_load_is_refused_not_run_at_another_nodes_load() -> None:
    """``node_start`` changes what load the SLO admits: at a cell's held load it would compare a node at a load
    sized on another, so the study refuses it (group_node.py compares nodes at their own N*).  The group's size and
    the landing are studied at the deployment's held load, a row that misses the SLO there drawn as a miss
    (node_assumptions.py gives each landing's own N* per configuration)."""
    from lachesis.evaluation import sensitivity
    from lachesis.evaluation.knobs import KNOBS, STUDY

    assert KNOBS["node_start"].acts_on == "deployment" and "node_start" not in STUDY
    with pytest.raises(ValueError, match="knob 'node_start' changes what load the SLO admits"):
        sensitivity.variants(["node_start"])
    assert [v.knob for v in sensitivity.variants(["landing"])][1:] == ["landing"]
    assert [v.knob for v in sensitivity.variants(["group_ranks"])][1:] == ["group_ranks"] * 3
