"""Parameters bounded to physical ranges: knob values past their limit, tolerances that are not
positive, refused in one line naming the parameter; the largest allowed values still run to the end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from lachesis.evaluation.knobs import KNOBS
from lachesis.node import kyung

TESTS = Path(__file__).resolve().parent


@pytest.mark.parametrize("name,value", [
    ("tool_latency_scale", 1e6), ("tool_latency_scale", 101.0), ("tool_latency_scale", 1e-300),
    ("user_delay_median_s", 1e7), ("user_delay_sigma", 10.0), ("load", 1e3),
    ("pe_cycles", 1e12), ("write_amplification", 1e9), ("hbf_write_bw_scale", 1e-300), ("hbf_write_bw_scale", 1e6),
])
def test_knob_values_past_their_physical_limit_are_refused(name, value) -> None:
    with pytest.raises(ValueError, match=f"knob '{name}'.*outside") as e:
        KNOBS[name].check(value)
    assert "\n" not in str(e.value)


def test_every_numeric_knob_has_a_finite_range_holding_its_study_values() -> None:
    for k in KNOBS.values():
        if k.categorical:
            continue
        lo, hi, _ = k.allowed
        assert hi < float("inf"), k.name
        for v in (k.default, *k.values):
            assert k.check(v) == v, (k.name, v)


_RUN = """
import json, math, sys
sys.path.insert(0, {tests!r})
from lachesis.evaluation import grid, sweep
from sens_fixtures import CI, SCALE
out = {{}}
for o in {cases!r}:
    p = grid.Point("multi_agent", "1/7", "Llama-4-Maverick", "tight", "lachesis", SCALE, 0, overrides=o)
    r = sweep.run_at_load(p, 4, CI)
    out[json.dumps(o)] = [k for k in ("p99_tpot_s", "hbf_write_rate", "lifetime_years") if not math.isfinite(r[k])]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_extreme_allowed_values_run_to_the_end_with_finite_results() -> None:
    """Each clock knob at its upper limit (together), the write bandwidth at both limits: ``simulate`` ends
    (a subprocess with a deadline, so a hang fails the test instead of stalling it) and reports numbers."""
    hi = {k: KNOBS[k].allowed[1] for k in ("tool_latency_scale", "user_delay_median_s", "user_delay_sigma")}
    cases = [hi, {"hbf_write_bw_scale": KNOBS["hbf_write_bw_scale"].allowed[0]},
             {"hbf_write_bw_scale": KNOBS["hbf_write_bw_scale"].allowed[1]}]
    r = subprocess.run([sys.executable, "-c", _RUN.format(tests=str(TESTS), cases=cases)], capture_output=True,
                       text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {json.dumps(c): [] for c in cases}


@pytest.mark.parametrize("tol", [-0.5, 0.0, float("nan"), float("inf"), "0.15", True])
def test_kyung_tolerance_must_be_finite_and_positive(tol) -> None:
    grid = pd.DataFrame({"life_err": [0.1, -0.3], "tpot_err": [0.05, 0.2]})
    with pytest.raises(ValueError, match="tolerance: expected a finite number > 0") as e:
        kyung.kyung_summary(grid, tol)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="tolerance"):
        kyung.kyung_sensitivity(pd.DataFrame(), tol)  # refused before any grid is computed


def test_kyung_tolerance_valid_still_counts() -> None:
    grid = pd.DataFrame({"life_err": [0.1, -0.3], "tpot_err": [0.05, 0.2]})
    assert kyung.kyung_summary(grid, 0.15)["within_tol"] == 1


@pytest.mark.slow
def test_an_extreme_write_bandwidth_that_admits_no_load_says_why(tmp_path) -> None:
    """At 0.01x the HBF write bandwidth the tight SLO admits no load: N* = 0, the gains are NaN, and the row
    says why instead of a bare NaN; the spread skips it rather than reporting an infinite move."""
    from sens_fixtures import CI, SCALE

    from lachesis.evaluation import grid, sensitivity

    pts = [grid.Point("multi_agent", "1/7", "Llama-4-Maverick", "tight", pol, SCALE, 0)
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
                           simulated=True, slo_margin=2.0, **{"lachesis/hbm_first": math.nan, "years_lachesis": math.nan}),
                      dict(base, knob="hbf_write_bw_scale", value="3", n_sessions=10, all_meet_slo=True,
                           simulated=True, slo_margin=0.4, **{"lachesis/hbm_first": 1.4, "years_lachesis": 8.0})])
    text = sensitivity.sentences(g)[0]
    assert "nan" not in text.lower(), text
    assert "no gain at 0.01 (a lifetime there is not finite: the SLO admits no load)" in text


@pytest.mark.parametrize("spec, words", [
    ("lachesis:size_estimate=held,size_estimate=spawn", "given twice"),
    ("hbm_first:size_estimate=held", "HBMFirst has no knob 'size_estimate'"),
    ("deterministic:quantile=0.5", "has no knob 'quantile'"),
])
def test_a_policy_spec_names_a_repeated_or_foreign_knob(spec, words):
    """A knob given twice is refused (not last-wins), and a knob the policy lacks is refused for that reason."""
    from lachesis.memory.policies import get_policy

    with pytest.raises(ValueError, match=words):
        get_policy(spec)


@pytest.mark.parametrize("hbm, hbf", [(2.9, 3), (2, 3.7), (True, 3)])
def test_block_counts_must_be_whole(hbm, hbf):
    """TieredAllocator(2.9, 3.7) is refused, not truncated to 2 and 3 blocks."""
    from lachesis.memory.free_lists import TieredAllocator

    with pytest.raises(ValueError, match="whole number of blocks"):
        TieredAllocator(hbm, hbf)


@pytest.mark.parametrize("bt", [0, -16, 1.5, True, "16"])
def test_block_tokens_is_refused_when_the_deployment_is_built(bt):
    """``block_tokens=0`` is one ValueError naming the field where the configuration is made, not a
    ZeroDivisionError in the simulator's block arithmetic."""
    from dataclasses import replace

    from lachesis.config import DEFAULT, Deployment

    with pytest.raises(ValueError) as e:
        Deployment(block_tokens=bt)
    assert "deployment: block_tokens must be an integer >= 1" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError, match="block_tokens"):
        replace(DEFAULT.deployment, block_tokens=bt)
