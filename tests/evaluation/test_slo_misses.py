"""A policy that misses the SLO at its load at any seed is shown as a miss, never hidden: in the figure's data with
its p99 TPOT and the bound, counted, and in the load rules' table."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from grid_rows import grid  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from lachesis.evaluation import tables  # noqa: E402
from lachesis.evaluation.plots import Panel, lifetime_figure  # noqa: E402
from lachesis.plotting import MISSED_SLO_HATCH  # noqa: E402


def test_a_missed_slo_is_in_the_figures_data_and_drawn_as_a_miss():
    df = grid()  # Lachesis misses the SLO at 4/4 at the seed that sized the load (seed 0), p99 TPOT 0.03 s
    df.loc[df["memory"].eq("4/4") & df["policy"].eq("lachesis") & df["seed"].eq(0), "slo_p99_tpot_s"] = 0.071
    data = tables.missed_slo(df)
    row = data[data["memory"].eq("4/4") & data["policy"].eq("lachesis")].iloc[0]
    assert not row["all_met"] and row["slo_p99_tpot_s"] == 0.071 and row["slo_tpot_bound_s"] == 0.060
    assert data["all_met"].sum() == len(data) - 2  # every other (cell, policy) is there too, met
    misses = tables.slo_misses(df).set_index(["memory", "policy"])
    assert sorted(misses.index) == [("1/7", "lachesis"), ("4/4", "lachesis")]  # a miss at any seed is a miss
    assert misses.loc[("4/4", "lachesis"), "slo_p99_tpot_s"] == 0.071
    assert misses.loc[("4/4", "lachesis"), "slo_tpot_bound_s"] == 0.060
    assert misses.loc[("4/4", "lachesis"), "n_sessions"] == 6  # the load it missed at
    assert misses["seeds_missed"].tolist() == [1, 1] and misses["seeds"].tolist() == [2, 2]
    # the lifetime figure draws it as a miss, never a lifetime: Lachesis misses at one seed of each cell (seed 1 at
    # 1/7, seed 0 at 4/4), so it has no bar at all, an empty hatched box and "miss 1/2" in each
    fig = lifetime_figure(df, tables.ratio_table(df), [[Panel(dict(workload="multi_agent"), "m")]],
                          bars=("hbm_first", "lachesis"), paper_years=[])
    ax = fig.axes[0]
    bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_fill() and p.get_alpha() is None]
    assert sorted(round(b.get_height(), 3) for b in bars) == [1.25, 2.0]  # HBM-first's medians only
    boxes = [p for p in ax.patches if not p.get_fill() and p.get_hatch() == MISSED_SLO_HATCH]
    assert len(boxes) == 2 and sorted(t.get_text() for t in ax.texts) == ["miss 1/2", "miss 1/2"]
    plt.close(fig)
    # the load rules' table counts them (the first seed's: seed 0 misses at 4/4)
    t = tables.load_rule_table({"per_deployment": df})
    assert t["SLO misses"].tolist() == [1] and t["lachesis 1/7→4/4 %"].iloc[0] > 0
