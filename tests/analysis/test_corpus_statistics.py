"""The corpus against every workload statistic the paper publishes (docs/design.md §7): one fast check per
statistic family at a small scale, and the comparison rows of Figs. 4–6 at the paper's scale.

The solved statistics are checked against what they are solved to (the per-turn medians, the structural
medians at their ranges' centres); the others against the paper's ranges, each known miss named with its
measured cause.
"""

from __future__ import annotations

import math
from statistics import median

import numpy as np
import pandas as pd
import pytest

from lachesis import paper
from lachesis.analysis import characterize as C
from lachesis.analysis.ranker import worker_lifetimes
from lachesis.kv import STRUCTURAL_CLASSES, TEMPORAL_CLASSES
from lachesis.traces import corpus, workloads

STRUCTURAL_TARGETS = {  # statistic column -> (summary over benchmarks, its solved target)
    "lead_over_worker": (median, math.sqrt(math.prod(paper.LEAD_OVER_WORKER_MEDIAN_TNORM))),
    "lead_over_reviewer": (median, math.sqrt(math.prod(paper.LEAD_OVER_REVIEWER_MEDIAN_TNORM))),
    "lead_waiting_share": (median, sum(paper.LEAD_WAITING_SHARE) / 2),
    "kendall_tau_tnorm_vs_writes": (max, paper.WORKER_TNORM_VS_TOKENS_KENDALL[1]),
}


def structural_tables(scale: float, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fig. 5's and Fig. 6's tables, one row per benchmark each."""
    _, seg, sched = C.load_recovered(["multi_agent"], "", scale, seed)
    return (C.structural_table(seg[seg["seg_class"].isin(STRUCTURAL_CLASSES)]),
            C.worker_heterogeneity_table(worker_lifetimes(seg), sched))


def solved(fig5: pd.DataFrame, fig6: pd.DataFrame) -> dict[str, float]:
    """Each solved statistic's summary over the benchmarks."""
    both = pd.concat([fig5.set_index("group"), fig6.set_index("group")], axis=1)
    return {col: float(summary(both[col])) for col, (summary, _) in STRUCTURAL_TARGETS.items()}


# ------------------------------------------------------------------------------------------------
# Fast: one check per statistic family at a small scale
# ------------------------------------------------------------------------------------------------


def test_laden_share_is_fig4b_means_share() -> None:
    """§3.3's laden share of a turn's writes follows from Fig. 4(b)'s means: L̄ / (L̄ + S̄ + the opening
    context spread over the turns); every domain's lands inside 66–83%."""
    _, seg = C.load_segments(["tau3", "bfcl"], "", 0.3, 0)
    tab = C.temporal_table(seg[seg["seg_class"].isin(TEMPORAL_CLASSES)]).set_index("group")
    lo, hi = paper.LADEN_SHARE_OF_TURN_WRITES
    for w, share in tab["laden_share_of_turn_writes"].items():
        f = workloads.FIG4B_INPUT[w]
        assert lo <= share <= hi, w
        mu_l, mu_s = f["reasoning_laden"][1], f["reasoning_stripped"][1]
        assert share == pytest.approx(mu_l / (mu_l + mu_s), abs=0.06), w


def test_temporal_lifetimes_follow_the_turns() -> None:
    """The stripped/laden median T_norm ratio grows with turns per session (telecom's 11 turns highest), and the
    separability without the stripped segment carried into the last turn exceeds the separability with it."""
    _, seg = C.load_segments(["tau3", "bfcl"], "", 0.3, 0)
    tab = C.temporal_table(seg[seg["seg_class"].isin(TEMPORAL_CLASSES)]).set_index("group")
    assert tab["median_ratio_stripped_over_laden"].idxmax() == "tau3_telecom"
    assert (tab["separability_excl_last_turn"] > tab["separability"]).all()
    # the carried segment ties with the last turn's laden one: about one stripped segment in (1 + a)
    turns = pd.Series({w: 1 + workloads.derive_temporal(p).extra_turns for w, p in workloads.TEMPORAL_PRESETS.items()})
    assert tab["stripped_share_last_turn"].to_numpy() == pytest.approx(1 / turns[tab.index].to_numpy(), abs=0.06)


def test_structural_statistics_sit_at_their_solved_targets_small_scale() -> None:
    """The four solved structural statistics (scripts/solve_structural.py) land near their targets at 0.3 of
    the paper's scale (the solve itself is at scale 1: test_comparison_rows_at_paper_scale)."""
    got = solved(*structural_tables(0.3))
    for col, (_, target) in STRUCTURAL_TARGETS.items():
        assert got[col] == pytest.approx(target, rel=0.15), col


def test_worker_observation_size_is_one_factor_per_worker() -> None:
    """A worker's observations share one log-normal factor (mean 1, shape ``worker_observation_sigma``):
    observation tokens per call, divided by the tool's relative size, vary across workers with that shape."""
    p = workloads.STRUCTURAL_PRESETS["swebench_verified"]  # every tool of SWE-bench has its own relative size
    d = workloads.derive_structural(p)
    r = corpus.generate("swebench_verified", 0.5, 0).requests
    r = r[(r["role"] == "worker") & (r["n_observations"] > 0)]
    rel = {n: t["obs"] / d.obs_norm for n, t in p.text["tools"].items()}
    expected = r["tool_names"].map(lambda ns: sum(d.observation_tokens * rel[n] for n in ns))
    factor = (r["observation_tokens"] / expected).groupby(r["agent_id"]).mean()
    sigma = p.worker_observation_sigma
    assert np.log(factor).std() == pytest.approx(sigma, rel=0.2)
    assert factor.mean() == pytest.approx(1.0, rel=0.15)


# ------------------------------------------------------------------------------------------------
# Slow: every comparison row of Figs. 4–6 at the paper's scale
# ------------------------------------------------------------------------------------------------

#: Rows outside the paper's range at scale 1, seed 0, each with its measured cause (docs/design.md §7; the
#: Fig. 4–6 notebooks).  A row not listed here must be in range.
KNOWN_MISSES = {
    # the stripped/laden median T_norm ratio scales with turns per session (Table 3: ≈ 5 here); Poisson turns
    # are the dispersion Table 3's tokens processed leave room for
    "tau3_airline: stripped/laden median T_norm": "turns per session",
    "tau3_retail: stripped/laden median T_norm": "turns per session",
    "tau3_banking: stripped/laden median T_norm": "turns per session",
    "bfcl_long_context: stripped/laden median T_norm": "turns per session",
    # the stripped segment carried into the last turn ties with that turn's laden one (the diagnostic row)
    **{f"{w}: separability": "carried into the last turn" for w in workloads.TEMPORAL_WORKLOADS},
    "tau3_banking: (diagnostic) separability w/o the stripped segment carried into the last turn": "heavy tail",
    "bfcl_long_context: (diagnostic) separability w/o the stripped segment carried into the last turn": "heavy tail",
    "tau3_telecom: (diagnostic) separability w/o the stripped segment carried into the last turn": "above 0.99",
    "bfcl_base: (diagnostic) separability w/o the stripped segment carried into the last turn": "above 0.99",
    # below the stripped median the paper prints: out of any stripping harness's reach
    "bfcl_long_context: laden tokens/turn median (corpus input)": "laden ≥ stripped − user message",
    # around the solved medians, each benchmark's own waves, wave size and worker length spread it
    "deepsearchqa: lead/worker median T_norm": "most and widest waves",
    "webarena: lead waiting share": "shortest workers",
    # 1 − KS (the paper does not define its overlap): the lead's reads per written token sit near a worker's
    "deepsearchqa: lead–worker ρR/W overlap (1−KS)": "overlap measure",
    "swebench_verified: lead–worker ρR/W overlap (1−KS)": "overlap measure",
    "terminalbench: lead–worker ρR/W overlap (1−KS)": "overlap measure",
}


@pytest.mark.slow
def test_comparison_rows_at_paper_scale() -> None:
    """Scale 1, seed 0: Fig. 4(b)'s per-turn medians and means within 10% (BFCLv4 long-context's laden median
    excepted), the structural statistics at their solved targets, every other row of Figs. 4–6 in the paper's
    range but the known misses."""
    _, seg = C.load_segments(["tau3", "bfcl"], "", 1.0, 0)
    temporal = C.temporal_comparison(C.temporal_table(seg[seg["seg_class"].isin(TEMPORAL_CLASSES)]))
    fig5, fig6 = structural_tables(1.0)
    structural = pd.concat([C.structural_comparison(fig5), C.heterogeneity_comparison(fig6)], ignore_index=True)
    got = solved(fig5, fig6)
    for col, (_, target) in STRUCTURAL_TARGETS.items():
        assert got[col] == pytest.approx(target, rel=0.01), col  # the solve's equations
    rows = pd.concat([temporal, structural], ignore_index=True)
    out = set(rows.loc[rows["in_paper_range"] != "yes", "statistic"])
    assert out <= set(KNOWN_MISSES), sorted(out - set(KNOWN_MISSES))
    assert (rows["small_sample"] == "").all()
