"""The explorer reads a selection from the sweep cache without simulating, and names what is missing with a
command that computes it."""

from __future__ import annotations

import shlex
from dataclasses import replace
from functools import lru_cache

import numpy as np
import pytest

from lachesis import cli, explorer, grid, plancache
from lachesis import simulator as S
from sens_fixtures import KNOBS, SCALE, tiny_study

SEL = explorer.Selection("multi_agent", "Llama-4-Maverick", "tight", "1/7", "lachesis", SCALE, 0, "ci")
SEEDS = replace(SEL, seeds=(0, 1))


@lru_cache(maxsize=1)
def explored():
    """The tiny study's cache with the explorer's grid cell computed at seeds 0 and 1 (every grid policy)."""
    d, _ = tiny_study()
    explorer.compute(SEEDS, d, ["grid"], n_jobs=1, progress=False)
    return d


@pytest.fixture
def no_simulation(monkeypatch):
    explored()  # the shared cache is built before the simulator is taken away
    def boom(*a, **k):
        raise AssertionError("the explorer simulated or built a plan")

    for name in ("simulate", "simulate_windows"):
        monkeypatch.setattr(S, name, boom)
    for name in ("build_plan", "_plan"):  # a plan is built in plancache only
        monkeypatch.setattr(plancache, name, boom)


@pytest.mark.slow
def test_a_cached_selection_is_shown_without_simulating(no_simulation) -> None:
    d = explored()
    v = explorer.view(SEL, d, fractions=(0.5,), knobs=KNOBS)
    # the study ran a subset of the registry's values (sens_fixtures.VALUES): the others are named, not run
    assert v.missing == {"sensitivity": ["multi_agent Llama-4-Maverick tight 1/7: load = 1.5",
                                         "multi_agent Llama-4-Maverick tight 1/7: user_delay_median_s = 30"]}
    s = explorer.summary(v)
    assert s["policy"].tolist() == list(grid.MULTI_POLICIES)
    assert s["selected"].tolist() == [p == "lachesis" for p in grid.MULTI_POLICIES]
    assert s.loc[s["policy"].eq("hbm_first"), "over_hbm_first"].iloc[0] == 1.0
    assert s["n_star"].nunique() == 1 and s["own_n_star"].notna().iloc[0]  # HBM-first's N* is the cell's load
    assert s["seeds"].eq(1).all()
    c = explorer.composition(v)
    assert set(c["policy"]) == set(grid.MULTI_POLICIES)
    assert c.groupby("policy")[["hbm", "hbf"]].sum().sum(axis=1).tolist() == pytest.approx(
        [100.0] * len(grid.MULTI_POLICIES))
    assert sorted(explorer.curve_table(v)["n_sessions"]) == sorted({int(s["n_star"].iloc[0]),
                                                                  round(0.5 * int(s["n_star"].iloc[0]))})
    assert set(explorer.sensitivity_table(v)["knob"]) == {"paper", *KNOBS}
    head = explorer.headline(v)
    assert "device-years" in head and "Lachesis" in head
    assert all(grid.POLICY_NAMES[p] in head for p in grid.MULTI_POLICIES)  # its gain over every other policy
    assert "--parts sensitivity" in explorer.missing_text(v, d)
    assert "nothing is missing" in explorer.missing_text(explorer.View(SEL, v.grid, v.own, v.curve, v.sensitivity), d)


@pytest.mark.slow
def test_seeds_show_as_the_median_and_its_range(no_simulation) -> None:
    d = explored()
    v = explorer.view(SEEDS, d)
    assert "grid" not in v.missing and sorted(set(v.grid["seed"])) == [0, 1]
    # the second seed ran every policy at the first seed's load, as the grid does
    assert v.grid.groupby("policy")["n_sessions"].nunique().eq(1).all() and v.grid["load_seed"].eq(0).all()
    assert len(v.grid) == 2 * len(grid.MULTI_POLICIES)
    s = explorer.summary(v).set_index("policy")
    assert s["seeds"].eq(2).all()
    years = v.grid.pivot_table(index="seed", columns="policy", values="lifetime_years")
    for pol in grid.MULTI_POLICIES:
        assert s.loc[pol, "lifetime_years"] == pytest.approx(years[pol].median())
        assert (s.loc[pol, "lifetime_years_min"], s.loc[pol, "lifetime_years_max"]) == (years[pol].min(),
                                                                                       years[pol].max())
        gain = years["lachesis"] / years[pol]  # a ratio per seed first, then its median and range
        assert s.loc[pol, "selected_over"] == pytest.approx(gain.median())
        assert s.loc[pol, "selected_over_min"] == pytest.approx(gain.min())
    assert np.isclose(s.loc["hbm_first", "over_hbm_first"], 1.0)
    assert "median over seeds 0, 1" in explorer.headline(v)


@pytest.mark.slow
def test_a_missing_selection_is_listed_with_the_command_that_computes_it(no_simulation, monkeypatch, capsys) -> None:
    d = explored()
    sel = explorer.Selection("multi_agent", "Llama-4-Maverick", "loose", "4/4", "lachesis", SCALE, (0, 2), "ci")
    v = explorer.view(sel, d, fractions=(0.25,), knobs=("pe_cycles",))
    assert set(v.missing) == {"grid", "load", "sensitivity"} and v.grid.empty
    assert len(v.missing["grid"]) == 2 * len(grid.MULTI_POLICIES)  # every grid policy at both seeds
    text = explorer.missing_text(v, d, (0.25,), ("pe_cycles",))
    cmd = text.split("```")[1].strip()
    args = shlex.split(cmd)
    assert args[1:4] == ["-m", "lachesis", "explore"]  # args[0]: this interpreter
    seen = {}
    monkeypatch.setattr(explorer, "compute", lambda *a, **k: seen.update(args=a))
    assert cli.main(args[3:]) == 0
    got_sel, cache, parts, fractions, knobs = seen["args"]
    assert got_sel == sel and str(cache) == str(d.resolve()) and parts == ["grid", "load", "sensitivity"]
    assert fractions == [0.25] and knobs == ["pe_cycles"]
    assert "not in the cache" in capsys.readouterr().out


def test_bad_selections_fail_in_one_line(tmp_path, capsys) -> None:
    with pytest.raises(ValueError, match="search must be one of"):
        explorer.Selection(search="fast")
    with pytest.raises(ValueError, match="slo must be one of"):
        explorer.Selection(slo="medium")
    with pytest.raises(ValueError, match="memory must be one of"):
        explorer.Selection(memory="5/3")
    for bad, what in ((["--parts", "grid,plots"], "unknown part 'plots'"), (["--seeds", "0,x"], "--seeds"),
                      (["--workload", "chat"], "workload must be one of"), (["--knobs", "nope"], "unknown knob"),
                      (["--policy", "lru"], "unknown policy")):
        assert cli.main(["explore", "--cache-dir", str(tmp_path), *bad]) == 2
        err = capsys.readouterr().err
        assert what in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow
def test_the_widget_redraws_the_picked_selection(no_simulation) -> None:
    shown = []
    box = explorer.widget(SEL, shown.append)
    assert shown == []  # nothing rendered until a dropdown changes
    drops = [c for row in box.children[:2] for c in row.children]
    assert [d.description for d in drops] == list(explorer.choices())
    next(d for d in drops if d.description == "memory").value = "4/4"
    assert shown == [explorer.Selection(**{**SEL.__dict__, "memory": "4/4"})]
