"""Every plotted bar is at a load its SLO admits, at every seed (§5.2; docs/design.md §5, "Load"): checked on the
committed grids the figures are drawn from, so a regenerated figure that breaks the rule fails here."""

from __future__ import annotations

import pandas as pd
import pytest

from lachesis.evaluation import grid, tables
from lachesis.paths import repo_path

GRIDS = ("fig09_grid.csv", "fig11_grid.csv")


@pytest.fixture(scope="module", params=GRIDS)
def rows(request) -> pd.DataFrame:
    return pd.read_csv(repo_path("figures") / request.param)


def test_every_row_of_a_compared_placement_meets_the_slo_at_every_seed(rows):
    compared = pd.Series([p in grid.compared_policies(w) for w, p in zip(rows["workload"], rows["policy"])],
                         index=rows.index)
    bad = rows[compared & ~rows["slo_met"].astype(bool)]
    assert bad.empty, f"compared placements over their SLO at their load:\n{bad[grid.CELL + ['policy', 'seed']]}"


def test_one_load_per_deployment_held_at_every_configuration_and_seed(rows):
    held = rows[rows["load"].eq("per_deployment")]
    assert not held.empty and held["load_sizing"].eq("compared").all()
    per = held.groupby(["workload", "model", "slo"])["n_sessions"].nunique()
    assert per.eq(1).all(), per[per.ne(1)]
    assert held["load_binding"].notna().all()


def test_a_miss_is_drawn_as_a_miss_and_carries_its_own_load(rows):
    """What misses (a placement beyond the paper) is not a bar: the figures read the same table of misses."""
    misses = tables.slo_misses(rows)
    drawn_as_bars = tables.missed_slo(rows)
    met = drawn_as_bars[drawn_as_bars["all_met"].astype(bool)]
    assert met.merge(misses, on=grid.CELL + ["policy"]).empty
    beyond = misses[~misses["policy"].map(grid.is_clairvoyant)]  # a searched placement: its own N* beside the miss
    assert beyond.empty or ("own_n_star" in beyond and beyond["own_n_star"].notna().all()), beyond
