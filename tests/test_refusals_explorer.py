"""The explorer on an empty cache: it ends with one clear line naming the cell, the cache and the
command that computes it, not a KeyError from a table of no rows."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pandas as pd
import pytest

from lachesis.evaluation import explorer


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
    nb = nbformat.read(Path(__file__).resolve().parents[1] / "notebooks" / "explorer.ipynb", as_version=4)
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
