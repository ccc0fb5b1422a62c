"""Knobs bounded to physical ranges (lachesis.evaluation.knobs): a value past its limit refused in one line naming
the knob; the largest allowed values still run to the end."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from fixture_paths import TESTS

from lachesis.evaluation.knobs import KNOBS


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
    # a zero HBF write rate gives an infinite lifetime (lachesis.node.endurance), the one non-finite number allowed
    out[json.dumps(o)] = [k for k in ("p99_tpot_s", "hbf_write_rate", "lifetime_years") if not math.isfinite(r[k])
                          and not (k == "lifetime_years" and r[k] == math.inf and r["hbf_write_rate"] == 0)]
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
