"""The explorer reads a selection from the sweep cache without simulating, and names what is missing with a
command that computes it (an empty cache ends in one line); a knob that changes the node is refused."""

from __future__ import annotations

import itertools
import shlex
import shutil
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
from fixture_paths import REPO
from sens_fixtures import KNOBS, SCALE, tiny_study

from lachesis import cli
from lachesis.evaluation import explorer, grid, plancache, sweep
from lachesis.evaluation.explorer.figure_files import _setting
from lachesis.node import simulator as S

#: the tiny study's cells: one GPU, each cell at its own N* (sens_fixtures.tiny_study)
SEL = explorer.Selection("multi_agent", "Llama-4-Maverick", "tight", "1/7", "lachesis", SCALE, 0, "ci", load="per_cell",
                         node="one_gpu")
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


# ------------------------------------------------------------------------------------------------
# The committed paper-scale results (figures/): what a fresh clone shows without simulating
# ------------------------------------------------------------------------------------------------

ROOT = REPO
PAPER_FRACTIONS = (0.1, 0.2, 0.3, 0.45, 0.6, 0.8)


@pytest.fixture
def nothing_runs(monkeypatch):
    """Anything that would simulate or search a load fails the test."""
    def boom(*a, **k):
        raise AssertionError("the explorer simulated")

    for name in ("simulate", "simulate_windows"):
        monkeypatch.setattr(S, name, boom)
    for name in ("build_plan", "_plan"):
        monkeypatch.setattr(plancache, name, boom)
    for name in ("run_grid", "load_curve", "evaluate_point", "run_at_load"):
        monkeypatch.setattr(sweep, name, boom)
    monkeypatch.setattr(explorer, "compute", boom)


def test_a_fresh_clone_answers_a_paper_scale_selection_from_the_committed_grids(tmp_path, nothing_runs) -> None:
    sel, cache, store = explorer.start("figures", ROOT / "figures", tmp_path, 0.05, [0], "ci", workload="multi_agent",
                                       model="Llama-4-Maverick", slo="tight", memory="4/4", policy="lachesis")
    assert (sel.scale, sel.search, sel.seeds) == (1.0, "paper", (0, 1, 2))  # as figures/ENVIRONMENT.json records
    # the study's knobs the committed figures were made with (a knob added since appears once they are regenerated)
    studied = set(pd.read_csv(ROOT / "figures" / "sensitivity_gains.csv")["knob"])
    knobs = [k for k in explorer.STUDY if k in studied]  # the node's own knobs are chosen by node, not studied here
    assert len(knobs) >= 10
    v = explorer.view(sel, tmp_path / "no_cache", PAPER_FRACTIONS, knobs, store)  # a fresh clone: no sweep cache
    assert v.missing == {}
    assert v.sources["grid"].startswith("figures/fig09_grid.csv, figures/fig11_grid.csv (group_ranks 8")
    assert {k: v.sources[k] for k in ("load", "sensitivity")} == {
        "load": "figures/gain_vs_load_runs.csv", "sensitivity": "figures/sensitivity_gains.csv"}
    committed = pd.read_csv(ROOT / "figures" / "fig09_grid.csv")
    rows = committed[committed["workload"].eq("multi_agent") & committed["model"].eq("Llama-4-Maverick")
                     & committed["slo"].eq("tight") & committed["memory"].eq("4/4")]
    s = explorer.summary(v).set_index("policy")
    assert list(s.index) == list(grid.MULTI_POLICIES) and s["seeds"].eq(3).all()
    for pol, d in rows.groupby("policy"):  # the paper-scale numbers themselves, medians over the three seeds
        assert s.loc[pol, "lifetime_years"] == pytest.approx(d["lifetime_years"].median())
        assert s.loc[pol, "slo_met_seeds"] == d["slo_met"].sum()
    assert s["n_sessions"].nunique() == 1
    shown = explorer.table(v)
    assert "Lachesis ◀" in shown["policy"].tolist() and "w/o predictive path" in shown["policy"].tolist()
    assert "ρR/W selection" in shown["policy"].tolist() and "rho_threshold" not in shown.to_string()
    curve = pd.read_csv(ROOT / "figures" / "gain_vs_load_runs.csv")  # at fractions of the cell's own N*
    own = int(curve[curve["model"].eq("Llama-4-Maverick") & curve["memory"].eq("4/4")]["n_star"].iloc[0])
    assert sorted(explorer.curve_table(v)["n_sessions"]) == sorted(
        {grid.load_at(f, own) for f in (*PAPER_FRACTIONS, 1.0)})
    assert "paper" in set(explorer.sensitivity_table(v)["knob"])
    fig = explorer.figure(v)
    assert fig.get_figwidth() * fig.dpi == explorer.FIGURE_WIDTH_PX


def test_the_explorer_shows_the_figure_before_its_tables_in_the_figures_words(tmp_path, nothing_runs,
                                                                              monkeypatch) -> None:
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **k: shown.extend(objs))
    store = explorer.committed(ROOT / "figures")
    sel = explorer.Selection("bfcl", "Qwen3-235B-A22B", "tight", "1/7", "rho_threshold", 1.0, (0, 1, 2), "paper")
    v = explorer.show(sel, tmp_path, (), (), tmp_path / "out", store)
    assert v is not None and not v.missing
    kinds = [type(o).__name__ for o in shown]
    assert kinds[:2] == ["Markdown", "Image"] and shown[1].width == explorer.FIGURE_WIDTH_PX
    assert "BFCLv4 (single-agent)" in shown[0].data and "ρR/W selection" in shown[0].data
    text = " ".join(getattr(o, "data", "") or "" for o in shown[2:])
    assert "rho_threshold" not in text and "hbm_first" not in text and "ρR/W selection ◀" in text
    assert "Read without simulating" in text


@pytest.mark.slow
def test_every_selection_the_committed_grids_hold_answers_without_simulating(tmp_path, nothing_runs) -> None:
    store = explorer.committed(ROOT / "figures")
    held = pd.concat([df for _, df in store.grid])
    cells = set(zip(held["workload"], held["model"], held["slo"], held["memory"], held["policy"]))
    answered = 0
    for combo in itertools.product(*explorer.choices().values()):
        sel = explorer.Selection(*combo, 1.0, (0, 1, 2), "paper")
        v = explorer.view(sel, tmp_path, (), (), store)
        holds = combo in cells and all((*combo[:4], p) in cells for p in grid.grid_policies(sel.workload))
        assert ("grid" not in v.missing) == holds, combo
        answered += holds
    assert answered == len(cells)  # every cell and policy the grids hold: 540/3 + 300/3 of them


def test_a_selection_the_figures_lack_offers_to_simulate_it(tmp_path, nothing_runs) -> None:
    store = explorer.committed(ROOT / "figures")
    start = explorer.Selection("tau3", "Llama-4-Maverick", "tight", "1/7", "lachesis", 1.0, (0, 1, 2), "paper")
    runs = []
    box = explorer.widget(start, lambda s: explorer.view(s, tmp_path, (), (), store),
                          run=lambda s, parts: runs.append((s, parts)))
    box.redraw()
    assert box.offer is None  # the committed grid holds it: nothing to offer
    slo = next(d for row in box.children[:2] for d in row.children if d.description == "slo")
    assert dict(slo.options)["tight (p99 TPOT 60 ms)"] == "tight"
    slo.value = "loose"  # the single-agent grid ran the tight SLO only
    assert box.offer is not None and "missing" in box.offer.description
    box.offer.click()
    assert runs == [(replace(start, slo="loose"), ["grid"])]


def test_committed_rows_with_more_columns_are_read_and_their_setting_named(tmp_path, nothing_runs) -> None:
    """A newer grid (the node, the load rule) carries more columns; the explorer keeps reading it."""
    figs = tmp_path / "figures"
    figs.mkdir()
    shutil.copy(ROOT / "figures" / "ENVIRONMENT.json", figs)
    g = pd.read_csv(ROOT / "figures" / "fig09_grid.csv")
    g.assign(group_ranks=8, load_rule="per_deployment", kv_tail_bytes=1.0).to_csv(figs / "fig09_grid.csv", index=False)
    store = explorer.committed(figs)
    sel = explorer.Selection("multi_agent", "Qwen3-235B-A22B", "loose", "2/6", "oracle", 1.0, (0, 1, 2), "paper")
    v = explorer.view(sel, tmp_path / "no_cache", (), (), store)
    assert not v.missing and "(group_ranks 8, load_rule per_deployment" in v.sources["grid"]
    assert "meets the SLO there at" in explorer.headline(v)
    (figs / "fig09_grid.csv").write_text("model,memory\nx,1/7\n")
    with pytest.raises(ValueError, match=r"fig09_grid.csv: no column 'workload'"):
        explorer.committed(figs)


def test_a_selection_runs_on_its_node_and_reads_rows_made_there(tmp_path):
    """A selection's points carry its node's knobs; a committed setting holds it only at the same node and load
    rule (figures made before the rule had its name read as per_cell)."""
    from lachesis.evaluation import knobs

    paper = explorer.Selection(node="paper")
    assert all(p.overrides == knobs.node("paper") for p in paper.points())
    assert all(p.overrides == () for p in replace(paper, node="one_gpu").points())
    with pytest.raises(ValueError, match="node must be one of"):
        explorer.Selection(node="tpu")
    env = {"params_file": {"contents": {"common": {"scale": 1.0, "node": "paper"},
                                        "notebooks": {"fig09_fig10_multi_agent": {"search": "paper", "seeds": "0,1"}}}}}
    st = _setting(env, "fig09_fig10_multi_agent")
    assert (st.node, st.load) == ("paper", "per_deployment") and st.holds(replace(paper, seeds=(0, 1)))
    assert not st.holds(replace(paper, node="one_gpu")) and not st.holds(replace(paper, load="per_cell"))
    env["params_file"]["contents"]["notebooks"]["fig09_fig10_multi_agent"]["load"] = "baseline"
    assert _setting(env, "fig09_fig10_multi_agent").load == "per_cell"


# -- an empty cache, a missing policy, a knob that changes the node: one clear line -------------------


def test_an_empty_cache_ends_with_a_clear_message(tmp_path) -> None:
    sel = explorer.Selection()
    v = explorer.view(sel, tmp_path, [0.25], ["load"])
    with pytest.raises(ValueError) as e:
        explorer.require_cell(v, sel, tmp_path)
    msg = str(e.value)
    assert "\n" not in msg and "holds nothing for this cell" in msg and str(tmp_path) in msg
    assert "lachesis explore --cache-dir" in msg and "--parts grid" in msg


def test_a_cache_without_the_selected_policy_says_which_it_has(tmp_path) -> None:
    sel = explorer.Selection(policy="lachesis")
    v = explorer.View(sel, pd.DataFrame({"policy": ["hbm_first"], "seed": [0]}), pd.DataFrame(), pd.DataFrame(),
                      pd.DataFrame())
    with pytest.raises(ValueError, match=r"holds no lachesis row \(only hbm_first\)"):
        explorer.require_cell(v, sel, tmp_path)


def test_an_unreadable_cache_and_a_full_cell(tmp_path) -> None:
    sel = explorer.Selection()
    with pytest.raises(ValueError, match="could not be read"):
        explorer.require_cell(None, sel, tmp_path)
    v = explorer.View(sel, pd.DataFrame({"policy": [sel.policy], "seed": [0]}), pd.DataFrame(), pd.DataFrame(),
                      pd.DataFrame())
    assert explorer.require_cell(v, sel, tmp_path) is v


def test_the_notebook_checks_the_cell_before_its_tables() -> None:
    nb = nbformat.read(REPO / "notebooks" / "explorer.ipynb", as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    shown = next(i for i, s in enumerate(code) if "explorer.show(" in s)
    assert "explorer.require_cell(v, sel, cache_dir)" in code[shown]
    assert all("explorer.summary(v)" not in s for s in code[:shown])


def test_a_knob_that_changes_the_node_is_refused_not_run_at_another_nodes_load(tmp_path, monkeypatch, capsys) -> None:
    """An explorer cell is sized at its own node's load: a group knob would run another group at that load, so it
    is refused, saying why and where it is studied; the default study leaves them out."""
    from lachesis.cli import main
    from lachesis.evaluation import sensitivity
    from lachesis.evaluation.knobs import KNOBS, STUDY

    assert "group_ranks" in STUDY and "group_ranks" not in explorer.STUDY
    assert all(KNOBS[k].acts_on != "deployment" for k in explorer.STUDY)
    monkeypatch.setattr(sensitivity, "run", lambda *a, **k: (_ for _ in ()).throw(AssertionError("simulated")))
    sel = explorer.Selection(scale=0.05, search="ci")
    for call in (lambda: explorer.compute(sel, tmp_path, ["sensitivity"], knobs=["load", "group_ranks"]),
                 lambda: explorer.view(sel, tmp_path, knobs=["group_ranks"]),
                 lambda: explorer.command(sel, tmp_path, ["sensitivity"], knobs=["group_ranks"])):
        with pytest.raises(ValueError, match="knob 'group_ranks' changes the decode node.*its own node's load") as e:
            call()
        assert "\n" not in str(e.value)
    assert main(["explore", "--cache-dir", str(tmp_path), "--scale", "0.05", "--search", "ci", "--parts",
                 "sensitivity", "--knobs", "group_ranks"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "knob 'group_ranks' changes the decode node" in err[0], err
    assert "--knobs" in explorer.command(sel, tmp_path, ["sensitivity"]) and "group_ranks" not in explorer.command(
        sel, tmp_path, ["sensitivity"])


def test_the_explorer_is_split_by_job_into_short_modules() -> None:
    """Each module of the explorer package holds one job: at most 500 lines, no function over 80."""
    import ast

    folder = Path(explorer.__file__).parent
    mods = sorted(folder.glob("*.py"))
    assert len(mods) > 1, "the explorer is one module again"
    for p in mods:
        text = p.read_text(encoding="utf-8")
        assert len(text.splitlines()) <= 500, f"{p.name}: {len(text.splitlines())} lines"
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                assert n <= 80, f"{p.name}: {node.name} is {n} lines"


# -- committed files that are damaged, a notebook setting source figures would ignore: one line each ----------


def _figures_copy(tmp_path: Path) -> Path:
    figs = tmp_path / "figures"
    figs.mkdir()
    for f in ["ENVIRONMENT.json", *explorer.GRID_FILES]:
        shutil.copy(ROOT / "figures" / f, figs)
    return figs


@pytest.mark.parametrize("damage, said", [
    (lambda g, p: g.drop(columns="lifetime_years").to_csv(p, index=False), r"no column 'lifetime_years'"),
    (lambda g, p: g.drop(columns="policy").to_csv(p, index=False), r"no column 'policy'"),
    (lambda g, p: p.write_text(p.read_text()[: len(p.read_text()) // 2]), r"line \d+ ends without a newline"),
    (lambda g, p: p.write_text(""), r"empty file \(no header line\)"),
    (lambda g, p: g.assign(seed=g["seed"].astype(object).where(g.index != 3, "x")).to_csv(p, index=False),
     r"line 5: column 'seed': expected a whole number >= 0, got 'x'"),
    (lambda g, p: g.assign(lifetime_years=g["lifetime_years"].astype(object).where(g.index != 0, "long")).to_csv(
        p, index=False), r"line 2: column 'lifetime_years': expected a number, got 'long'"),
])
def test_a_damaged_committed_grid_is_refused_naming_the_file(tmp_path, nothing_runs, damage, said) -> None:
    """A committed grid without a column the explorer reads, cut mid-line, emptied or holding a value of the wrong
    kind is refused naming the file, the line and the column, never read as a cell without load or a missing
    cache entry."""
    figs = _figures_copy(tmp_path)
    path = figs / "fig09_grid.csv"
    damage(pd.read_csv(path), path)
    with pytest.raises(ValueError, match=r"explorer: .*fig09_grid\.csv: " + said) as e:
        explorer.start("figures", figs, tmp_path, 0.05, [0], "ci", workload="multi_agent")
    assert "\n" not in str(e.value)
    (figs / "ENVIRONMENT.json").write_text('{"params_file": ')
    with pytest.raises(ValueError, match=r"ENVIRONMENT\.json: not readable JSON"):
        explorer.committed(figs)


def test_no_lifetime_at_a_load_is_not_called_no_load(tmp_path, nothing_runs) -> None:
    """A run at a positive load without a lifetime (out of memory, no decode step) is said as such: the SLO did
    admit a load there."""
    figs = _figures_copy(tmp_path)
    g = pd.read_csv(figs / "fig09_grid.csv")
    g.assign(lifetime_years=np.nan).to_csv(figs / "fig09_grid.csv", index=False)
    sel, _, store = explorer.start("figures", figs, tmp_path, 0.05, [0], "ci", workload="multi_agent",
                                   memory="4/4", policy="lachesis")
    head = explorer.headline(explorer.view(sel, tmp_path / "no_cache", (), (), store))
    cell = g[g.workload.eq(sel.workload) & g.model.eq(sel.model) & g.slo.eq(sel.slo) & g.memory.eq("4/4")]
    (load,) = cell["n_sessions"].unique()  # the deployment's one load
    assert "admits no load" not in head and f"At {load} sessions per GPU" in head and "has no lifetime" in head


def test_source_figures_refuses_a_setting_it_would_ignore_and_honours_a_cache(tmp_path, nothing_runs) -> None:
    import papermill

    declared = {k: v["default"] for k, v in papermill.inspect_notebook(
        str(REPO / "notebooks" / "explorer.ipynb")).items()}
    setting = explorer.notebook.NOTEBOOK_SETTING
    assert {k: float(declared[k]) if k == "scale" else declared[k].strip("\"'") for k in
            ("scale", "search", "node", "load")} == {k: setting[k] for k in ("scale", "search", "node", "load")}
    assert tuple(int(s) for s in grid.split_csv(declared["seeds"].strip("\"'"))) == setting["seeds"]
    assert declared["cache_dir"].strip("\"'") == explorer.notebook.NOTEBOOK_CACHE
    from lachesis.paths import repo_path

    default_cache = repo_path(explorer.notebook.NOTEBOOK_CACHE)
    for given in (dict(scale=0.1), dict(search="paper", seeds=[5]), dict(load="per_cell")):
        args = dict(scale=0.05, seeds=[0], search="ci", node="one_gpu", load="per_deployment") | given
        with pytest.raises(ValueError, match="source figures reads .* would be ignored: set source: cache"):
            explorer.start("figures", ROOT / "figures", default_cache, **args)
    sel, cache, _ = explorer.start("figures", ROOT / "figures", default_cache, 0.05, [0], "ci", node="one_gpu")
    assert (sel.scale, sel.search) == (1.0, "paper") and cache.name == "sweep_cache_paper"  # the run's own cache
    assert explorer.start("figures", ROOT / "figures", tmp_path / "mine", 1.0, [0, 1, 2], "paper")[1] == \
        tmp_path / "mine"  # a cache of one's own: read first


def test_a_knob_the_explorer_cannot_run_ends_the_notebook_naming_the_knob(tmp_path, nothing_runs) -> None:
    """Not displayed and then blamed on an unreadable cache: the notebook's parameter is the error."""
    sel, cache, store = explorer.start("figures", ROOT / "figures", tmp_path, 0.05, [0], "ci")
    with pytest.raises(ValueError, match="knob 'group_ranks' changes the decode node"):
        explorer.show(sel, cache, (), ["group_ranks"], None, store)
    with pytest.raises(ValueError, match="could not be read from the cache .* or the committed figures"):
        explorer.require_cell(None, sel, cache)


def test_a_selection_at_no_scale_and_a_file_for_a_cache_are_refused(tmp_path) -> None:
    for bad in (0, -1.0, float("nan"), float("inf"), True, "1"):
        with pytest.raises(ValueError, match="scale must be a finite number > 0"):
            explorer.Selection(scale=bad)
    f = tmp_path / "cache.json"
    f.write_text("{}")
    for call in (lambda: explorer.view(explorer.Selection(), f), lambda: explorer.compute(explorer.Selection(), f)):
        with pytest.raises(ValueError, match="cache_dir .*cache.json' is a file, not the sweep cache's folder"):
            call()


def test_a_miss_is_drawn_as_a_miss_in_both_panels(tmp_path, nothing_runs) -> None:
    """A policy over its SLO at a seed: no lifetime bar, and its write composition faded and crossed out with the
    seeds that missed, as Figs. 10 and 12 draw it; the others as they were."""
    figs = _figures_copy(tmp_path)
    g = pd.read_csv(figs / "fig09_grid.csv")
    g.loc[g.policy.eq("hbm_first") & g.seed.eq(1), "slo_met"] = False
    g.to_csv(figs / "fig09_grid.csv", index=False)
    sel, _, store = explorer.start("figures", figs, tmp_path, 0.05, [0, 1, 2], "ci", workload="multi_agent",
                                   memory="1/7", policy="lachesis")
    v = explorer.view(sel, tmp_path / "no_cache", (), (), store)
    comp = explorer.figure(v).axes[1]
    crossed = [t.get_text() for t in comp.texts]
    assert crossed == ["miss 1/3"]  # the seeds that missed (no own N* in this edited grid)
    assert "misses the SLO at the deployment's load" in " ".join(t.get_text() for t in comp.get_legend().get_texts())
    faded = {round(p.get_alpha() or 1.0, 3) for p in comp.patches[:1]}
    assert faded == {0.3}  # HBM-first is the first policy
