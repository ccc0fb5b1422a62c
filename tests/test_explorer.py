"""The explorer reads a selection from the sweep cache without simulating, and names what is missing with a
command that computes it."""

from __future__ import annotations

import shlex

import pytest

from lachesis import explorer, sweep
from lachesis import simulator as S
from sens_fixtures import KNOBS, SCALE, tiny_study

SEL = explorer.Selection("multi_agent", "Llama-4-Maverick", "tight", "1/7", "lachesis", SCALE, 0, "ci")


@pytest.fixture
def no_simulation(monkeypatch):
    tiny_study()  # the shared cache is built before the simulator is taken away
    def boom(*a, **k):
        raise AssertionError("the explorer simulated or built a plan")

    for name in ("simulate", "simulate_windows", "build_plan", "rank_keys"):
        monkeypatch.setattr(S, name, boom)
    monkeypatch.setattr(sweep, "_plan", boom)


def test_a_cached_selection_is_shown_without_simulating(no_simulation) -> None:
    d, _ = tiny_study()
    v = explorer.view(SEL, d, fractions=(0.5,), knobs=KNOBS)
    # the study ran a subset of the registry's values (sens_fixtures.VALUES): the others are named, not run
    assert v.missing == {"sensitivity": ["multi_agent Llama-4-Maverick tight 1/7: load = 1.5",
                                         "multi_agent Llama-4-Maverick tight 1/7: user_delay_median_s = 30"]}
    s = explorer.summary(v)
    assert s["policy"].tolist() == list(sweep.MULTI_POLICIES) and s["selected"].tolist() == [False, False, True]
    assert s.loc[s["policy"].eq("hbm_first"), "over_hbm_first"].iloc[0] == 1.0
    assert s["n_star"].nunique() == 1 and s["own_n_star"].notna().iloc[0]  # HBM-first's N* is the cell's load
    c = explorer.composition(v)
    assert set(c["policy"]) == set(sweep.MULTI_POLICIES)
    assert c.groupby("policy")[["hbm", "hbf"]].sum().sum(axis=1).tolist() == pytest.approx([100.0] * 3)
    assert sorted(explorer.curve_table(v)["n_sessions"]) == sorted({int(s["n_star"].iloc[0]),
                                                                  round(0.5 * int(s["n_star"].iloc[0]))})
    assert set(explorer.sensitivity_table(v)["knob"]) == {"paper", *KNOBS}
    assert "device-years" in explorer.headline(v) and "Lachesis" in explorer.headline(v)
    assert "--parts sensitivity" in explorer.missing_text(v, d)
    assert "nothing is missing" in explorer.missing_text(explorer.View(SEL, v.grid, v.own, v.curve, v.sensitivity), d)


def test_a_missing_selection_is_listed_with_the_command_that_computes_it(no_simulation, monkeypatch) -> None:
    d, _ = tiny_study()
    sel = explorer.Selection("multi_agent", "Llama-4-Maverick", "loose", "4/4", "lachesis", SCALE, 0, "ci")
    v = explorer.view(sel, d, fractions=(0.25,), knobs=("pe_cycles",))
    assert set(v.missing) == {"grid", "load", "sensitivity"} and v.grid.empty
    assert len(v.missing["grid"]) == 3
    text = explorer.missing_text(v, d, (0.25,), ("pe_cycles",))
    cmd = text.split("```")[1].strip()
    args = shlex.split(cmd)
    assert args[1:3] == ["-m", "lachesis.explorer"]  # args[0]: this interpreter
    seen = {}
    monkeypatch.setattr(explorer, "compute", lambda *a, **k: seen.update(args=a))
    assert explorer.main(args[3:]) == 0
    got_sel, cache, parts, fractions, knobs, _ = seen["args"]
    assert got_sel == sel and str(cache) == str(d.resolve()) and parts == ["grid", "load", "sensitivity"]
    assert fractions == [0.25] and knobs == ["pe_cycles"]


def test_bad_selections_fail_in_one_line() -> None:
    with pytest.raises(ValueError, match="search must be one of"):
        explorer.Selection(search="fast")
    with pytest.raises(ValueError, match="slo must be one of"):
        explorer.Selection(slo="medium")
    assert explorer.main(["--cache-dir", "x", "--parts", "grid,plots"]) == 2


def test_the_widget_redraws_the_picked_selection(no_simulation) -> None:
    shown = []
    box = explorer.widget(SEL, shown.append)
    assert shown == []  # nothing rendered until a dropdown changes
    drops = [c for row in box.children[:2] for c in row.children]
    assert [d.description for d in drops] == list(explorer.choices())
    next(d for d in drops if d.description == "memory").value = "4/4"
    assert shown == [explorer.Selection(**{**SEL.__dict__, "memory": "4/4"})]
