"""Figure-output helpers: the ours-vs-paper comparison and atomic outputs."""

import importlib
import json
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from lachesis.plotting import (
    compare_table,
    ecdf,
    save_figure,
    save_markdown,
    save_numbers,
)


def test_compare_table_ranges_and_points() -> None:
    t = compare_table([
        ("inside", 5.0, (4.0, 6.1)),        # point inside the range
        ("below", 3.0, (4.0, 6.1)),         # point outside
        ("range inside", (4.5, 6.0), (4.0, 6.1)),
        ("range overlaps", (3.2, 6.9), (4.0, 6.1)),
        ("range disjoint", (7.0, 9.0), (4.0, 6.1)),
        ("point vs point", 0.505, 0.53),    # within 10% of 0.53 (0.477..0.583)
        ("point vs point far", 0.40, 0.53),
        ("text", "n/a", "—"),
    ])
    assert t["in_paper_range"].tolist() == ["yes", "no", "yes", "partly", "no", "yes", "no", ""]
    assert t.loc[3, "ours"] == "3.2–6.9" and t.loc[3, "paper"] == "4–6.1"


def test_outputs_are_written(tmp_path) -> None:
    fig, ax = plt.subplots()
    ax.plot(*ecdf([3, 1, 2]))
    paths = save_figure(fig, tmp_path, "f")
    assert [p.suffix for p in paths] == [".png", ".pdf"] and all(p.stat().st_size > 0 for p in paths)
    p = save_numbers({"a": 1.5, "b": [1, 2]}, tmp_path, "n")
    assert json.loads(p.read_text()) == {"a": 1.5, "b": [1, 2]}
    df = pd.DataFrame({"x": [1.0, 2.5]})
    assert pd.read_csv(save_numbers(df, tmp_path, "t"))["x"].tolist() == [1.0, 2.5]
    assert "| x |" in save_markdown(df, tmp_path, "t").read_text()
    assert not list(tmp_path.glob(".*tmp"))  # no temporary file left behind


def test_figures_are_byte_reproducible(tmp_path) -> None:
    def draw(d):
        fig, ax = plt.subplots()
        ax.plot([1, 2, 3], [3, 1, 2])
        paths = save_figure(fig, d, "f")
        plt.close(fig)
        return [p.read_bytes() for p in paths]

    first = draw(tmp_path / "a")
    time.sleep(1.1)  # a PDF creation date (1 s resolution) would now differ
    assert first == draw(tmp_path / "b")


def test_key_numbers_rounds_to_three_significant_digits() -> None:
    from lachesis.plotting import key_numbers, span

    text = key_numbers({"tau": 0.505198, "range": span([13.84, 3.912, float("nan")]), "n": 42, "who": "ridge"})
    assert text == "tau: 0.505\nrange: 3.91–13.8\nn: 42\nwho: ridge"
    assert span([float("nan")])[0] != span([float("nan")])[0]  # no finite value: NaN


def test_tidy_log_axes_drops_minor_labels() -> None:
    from matplotlib.ticker import NullFormatter

    from lachesis.plotting import tidy_log_axes

    fig, ax = plt.subplots()
    ax.set_xscale("log")
    tidy_log_axes(fig)
    assert isinstance(ax.xaxis.get_minor_formatter(), NullFormatter)
    plt.close(fig)


def test_real_traces_figure_draws_the_report(trace_fixtures) -> None:
    from lachesis.analysis import report
    from lachesis.plotting import real_traces_figure

    out = report.build("tau2-qwen3.5-justinchiu,claude_code_subagents,mooncake_fast25", data=trace_fixtures)
    fig = real_traces_figure(out)
    assert len(fig.axes) == 4 and fig.axes[0].get_xscale() == "log"
    assert any(line.get_label().startswith("τ²-bench, Qwen3.5") for line in fig.axes[0].get_lines())
    plt.close(fig)


def test_a_range_written_to_a_comparison_table_reads_back() -> None:
    from lachesis.plotting import format_range, parse_range

    assert format_range((1.25, 3.5)) == "1.25–3.5" and parse_range(format_range((1.25, 3.5))) == (1.25, 3.5)
    assert parse_range(format_range(-0.175)) == (-0.175, -0.175) and parse_range("-0.175–0.084") == (-0.175, 0.084)
    assert parse_range("— (not in the paper)") is None and parse_range(float("nan")) is None


# ------------------------------------------------------------------------------------------------
# The grid notebooks' figures (lachesis.evaluation.plots)
# ------------------------------------------------------------------------------------------------

def _evalplots_grid():
    from tests.grid_rows import grid

    return pd.concat([grid(), grid(workload="multi_agent_no_reviewer")], ignore_index=True)


def test_rows_by_workload_splits_each_workload_into_rows():
    from lachesis.evaluation.plots import Panel, rows_by_workload

    ps = [Panel(dict(workload=w), f"{w}{i}") for w, n in (("a", 4), ("b", 2)) for i in range(n)]
    rows = rows_by_workload(ps, 3)
    assert [[q.title for q in r] for r in rows] == [["a0", "a1", "a2"], ["a3"], ["b0", "b1"]]


def _bars(ax):
    """The filled bars of a lifetime axis (not the miss boxes, not the bound's band)."""
    from matplotlib.patches import Rectangle

    return [p for p in ax.patches if isinstance(p, Rectangle) and p.get_fill() and p.get_alpha() is None]


def _miss_boxes(ax):
    from lachesis.plotting import MISSED_SLO_HATCH

    return [p for p in ax.patches if not p.get_fill() and p.get_hatch() == MISSED_SLO_HATCH]


def test_lifetime_figure_draws_medians_whiskers_misses_and_the_paper():
    from lachesis.evaluation import tables
    from lachesis.evaluation.plots import Panel, lifetime_figure

    df = _evalplots_grid()
    r = tables.ratio_table(df)
    layout = [[Panel(dict(workload=w), w, paper=w == "multi_agent")
               for w in ("multi_agent", "multi_agent_no_reviewer")]]
    fig = lifetime_figure(df, r, layout, bars=("hbm_first", "deterministic", "lachesis"), paper_years=[
        ("lachesis", (3.3, 9.3)), ("deterministic", (1.0, 2.0))], title="Fig. 9 — t")
    ax = fig.axes[0]
    # HBM-first meets the SLO at both seeds: its medians; Lachesis misses at one seed of each cell: no bar at all
    assert sorted(round(b.get_height(), 3) for b in _bars(ax)) == [1.25, 2.0]
    assert len(_miss_boxes(ax)) == 2
    assert sorted(t.get_text() for t in ax.texts) == ["miss 1/2", "miss 1/2"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1/7", "4/4"]
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[:3] == ["HBM-first", "Lachesis", "oracle (clairvoyant)"]
    assert "paper: Lachesis, 3.3–9.3 (1/7–4/4)" in labels
    assert any(x.startswith("misses the SLO at the deployment's load") for x in labels)
    assert not any("w/o predictive path" in x for x in labels)  # neither a bar nor a band for what did not run
    assert ax.get_ylabel() and ax.get_xlabel() and not fig.axes[1].get_ylabel()
    assert fig._suptitle.get_text() == "Fig. 9 — t"
    plt.close(fig)


def test_slo_outcome_meets_only_when_every_seed_meets():
    from lachesis.plotting import slo_outcome, slo_outcomes

    ok = slo_outcome(pd.DataFrame(dict(slo_met=[True, True, True])))
    assert ok.met and ok.misses == 0 and ok.text() == "miss 0/3"
    one = slo_outcome(pd.DataFrame(dict(slo_met=[True, False, True], own_n_star=[float("nan"), 41.0, float("nan")])))
    assert not one.met and (one.misses, one.seeds) == (1, 3) and one.text() == "miss 1/3 · N* = 41"
    two = slo_outcome(pd.DataFrame(dict(slo_met=[False, False], own_n_star=[38.0, 41.0])))
    assert two.text() == "miss 2/2 · N* = 38–41"
    # as read back from a CSV: text, and a blank is not a pass
    assert slo_outcome(pd.DataFrame(dict(slo_met=["True", "True"]))).met
    assert not slo_outcome(pd.DataFrame(dict(slo_met=["True", float("nan")]))).met
    assert slo_outcome(pd.DataFrame(dict(slo_met=[True], own_n_star=[float("nan")]))).own_n_star is None
    with pytest.raises(ValueError, match="slo_met"):
        slo_outcome(pd.DataFrame(dict(lifetime_years=[1.0])))
    df = _evalplots_grid()
    out = slo_outcomes(df[df.workload.eq("multi_agent")], ["memory", "policy"])
    assert out[("1/7", "hbm_first")].met and not out[("1/7", "lachesis")].met and not out[("4/4", "lachesis")].met


def test_a_miss_group_draws_no_bar_and_the_daisy_chain_has_its_own_axis():
    """8/8* lasts an order of magnitude longer: on a shared axis it flattens 1/7–4/4; on its own it does not."""
    from lachesis.evaluation import tables
    from lachesis.evaluation.plots import Panel, lifetime_figure

    df = _evalplots_grid()
    df = df[df.workload.eq("multi_agent")]
    daisy = df[df.memory.eq("4/4")].assign(memory="8/8*", lifetime_years=lambda d: 50 * d.lifetime_years,
                                          bound_lifetime_years=lambda d: d.bound_lifetime_years * 40)
    df = pd.concat([df, daisy], ignore_index=True)
    fig = lifetime_figure(df, tables.ratio_table(df), [[Panel(dict(workload="multi_agent"), "m")]],
                          bars=("hbm_first", "lachesis"), paper_years=[])
    fig.canvas.draw()
    main, own = fig.axes[:2]
    assert [t.get_text() for t in main.get_xticklabels()] == ["1/7", "4/4"]
    assert [t.get_text() for t in own.get_xticklabels()] == ["8/8*"]
    assert main.get_ylim()[1] < 10 < 300 < own.get_ylim()[1]  # 1/7–4/4 not flattened by 8/8*'s bound (320 y)
    heights = sorted(round(b.get_height(), 2) for b in _bars(own))
    assert heights == [62.5]  # HBM-first's median; Lachesis missed at a seed: a miss, not a bar
    assert len(_miss_boxes(own)) == 1
    plt.close(fig)


def _drawn_markers(fig) -> set:
    """Every marker symbol drawn in the figure's axes (errorbar caps excluded)."""
    caps = {id(c) for ax in fig.axes for cont in ax.containers for part in cont if isinstance(part, tuple)
            for c in part}
    return {str(ln.get_marker()) for ax in fig.axes for ln in ax.get_lines()
            if id(ln) not in caps and ln.get_marker() not in (None, "", "None", " ") and len(ln.get_xdata())}


def _legends(fig):
    from matplotlib.patches import Patch

    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    handles = [h for lg in legends for h in lg.legend_handles]
    texts = {t.get_text() for lg in legends for t in lg.get_texts()}
    markers = {str(h.get_marker()) for h in handles if isinstance(h, Line2D)}
    hatches = {h.get_hatch() for h in handles if isinstance(h, Patch)}
    return texts, markers, hatches


def _labelled(fig) -> set:
    artists = [a for ax in fig.axes for a in (*ax.get_lines(), *ax.patches, *ax.collections, *ax.containers)]
    return {a.get_label() for a in artists if a.get_label() and not a.get_label().startswith("_")}


def assert_every_mark_in_a_legend(fig) -> None:
    """Every labelled artist's label, every marker symbol and every hatch drawn is in one of the figure's legends."""
    texts, markers, hatches = _legends(fig)
    assert _labelled(fig) <= texts, _labelled(fig) - texts
    assert _drawn_markers(fig) <= markers, _drawn_markers(fig) - markers
    drawn_hatches = {p.get_hatch() for ax in fig.axes for p in ax.patches if p.get_hatch()}
    assert drawn_hatches <= hatches, drawn_hatches - hatches


Line2D = __import__("matplotlib.lines", fromlist=["Line2D"]).Line2D


def test_every_marker_of_the_lifetime_figure_is_in_its_legend_the_unbounded_bound_too():
    from lachesis.evaluation import tables
    from lachesis.evaluation.plots import Panel, lifetime_figure
    from lachesis.plotting import UNBOUNDED_STYLE

    df = _evalplots_grid()
    df.loc[df.memory.eq("4/4") & df.bound_lifetime_years.notna(), "bound_lifetime_years"] = float("inf")
    df.loc[df.memory.eq("1/7") & df.policy.eq("oracle"), "lifetime_years"] = float("inf")  # no HBF writes
    fig = lifetime_figure(df, tables.ratio_table(df), [[Panel(dict(workload=w), w, paper=True) for w in
                                                        ("multi_agent", "multi_agent_no_reviewer")]],
                          bars=("hbm_first", "lachesis"), paper_years=[("lachesis", (3.3, 9.3))])
    assert UNBOUNDED_STYLE["marker"] in _drawn_markers(fig)
    assert "^" not in {str(ln.get_marker()) for ln in fig.axes[0].get_lines() if ln.get_color() == "#d62728"}
    assert_every_mark_in_a_legend(fig)
    texts, _, _ = _legends(fig)
    assert "offline bound: unbounded (HBM takes every byte)" in texts
    assert any("unbounded lifetime" in t for t in texts)
    plt.close(fig)


def test_composition_figure_stacks_each_run_to_its_whole_and_marks_the_bound():
    from lachesis.evaluation import tables
    from lachesis.evaluation.plots import Panel, composition_figure
    from lachesis.plotting import BOUND_LABEL

    df = _evalplots_grid()
    comp = tables.write_composition(df)
    layout = [[Panel(dict(workload="multi_agent", model="m"), "L", policy="lachesis", paper_range=(0.3, 0.5)),
               Panel(dict(workload="multi_agent", model="m"), "H", policy="hbm_first")]]
    fig = composition_figure(df, comp, layout, classes=["lead", "worker"], n_cols=3, figsize=(9, 3))
    ax = fig.axes[0]
    tops = {}
    for p in ax.patches:
        if p.get_width() > 0:
            x = round(p.get_x() + p.get_width() / 2)
            tops[x] = max(tops.get(x, 0), p.get_y() + p.get_height())
    assert tops == {0: pytest.approx(100.0), 1: pytest.approx(100.0)}  # each run's bytes in full
    assert not fig.axes[2].axison  # an empty slot
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[0] == "lead (HBM)" and BOUND_LABEL in labels
    assert "paper: HBM share of write bytes, 30–50% over 1/7–4/4 (§5.3)" in labels
    # the paper's share is a whisker beside each bar, never a band over it (it would recolour the bars)
    assert not [c for c in ax.collections if type(c).__name__ == "FillBetweenPolyCollection"]
    whiskers = [seg for c in ax.collections for seg in c.get_segments() if len(seg) == 2 and seg[0][0] == seg[1][0]]
    assert sorted((round(s[0][0], 2), round(s[0][1]), round(s[1][1])) for s in whiskers) == [(0.47, 30, 50),
                                                                                            (1.47, 30, 50)]
    # Lachesis misses the SLO at a seed of each cell: its stacks are faded and crossed out, the miss written in them
    assert sorted(t.get_text() for t in ax.texts) == ["miss 1/2", "miss 1/2"]
    assert_every_mark_in_a_legend(fig)
    plt.close(fig)


def test_composition_figure_names_its_model_and_slo():
    """Figs. 10 and 12 are saved as images alone: the image says which model and SLO it shows."""
    from lachesis.evaluation import tables
    from lachesis.evaluation.plots import Panel, composition_figure

    df = _evalplots_grid()
    comp = tables.write_composition(df)
    model, slo = comp.model.iloc[0], comp.slo.iloc[0]
    c = comp[(comp.model == model) & (comp.slo == slo)]
    layout = [[Panel(dict(workload="multi_agent", model=model, slo=slo), "L", policy="lachesis")]]
    fig = composition_figure(df, c, layout, classes=["lead", "worker"], n_cols=1, figsize=(4, 3))
    title = fig._suptitle.get_text()
    assert model in title and f"{slo} SLO" in title
    plt.close(fig)


def test_the_bound_lies_inside_the_axes_with_headroom():
    """A bound above every bar, with a zero-height min–max band (every seed the same), is not on the top frame."""
    from lachesis.plotting import bound_marks

    fig, axes = plt.subplots(1, 2, sharey=True)
    for ax in axes:
        ax.bar([0, 1], [2.0, 3.0], 0.3)
        bound_marks(ax, [0, 1], [4.0, 6.0], lo=[3.5, 6.0], hi=[4.5, 6.0])
    fig.canvas.draw()
    for ax in axes:
        top = ax.get_ylim()[1]
        ys = [seg[0][1] for c in ax.collections for seg in c.get_segments()]
        assert ys and max(ys) == 6.0 and all(y < top for y in ys)
        assert top > 6.0 + 0.02 * (top - ax.get_ylim()[0])  # headroom, not the frame
    plt.close(fig)


def _gains():
    rows = []
    for m in ("A", "B"):
        for c in ("1/7", "4/4"):
            for n, g in ((2, 1.3), (4, 2.2), (8, 3.1), (16, 4.4)):
                rows.append(dict(model=m, memory=c, n_sessions=n, n_star=8, all_meet_slo=n <= 8,
                                 hbm_over_live_short=40.0 / n, **{"lachesis/hbm_first": g,
                                                                  "deterministic/hbm_first": 1.1}))
    return pd.DataFrame(rows)


def test_gain_figures_label_log_ticks_as_plain_multiples():
    """Ratio axes read ``2×``, ``10×``, never matplotlib's ``2×10⁰``."""
    import re

    from lachesis.evaluation.plots import gain_capacity_figure, gain_load_figure

    found = pd.DataFrame([dict(model="A", memory="1/7", ratio="lachesis/hbm_first", paper_lo=2.0, paper_hi=3.0)])
    for fig in (gain_load_figure(_gains(), found, ["A", "B"]), gain_capacity_figure(_gains(), ["A", "B"])):
        fig.canvas.draw()
        labels = []
        for ax in fig.axes:
            for axis in (ax.yaxis, ax.xaxis) if ax.get_xscale() == "log" else (ax.yaxis,):
                labels += [t.get_text() for t in axis.get_ticklabels(which="both") if t.get_text()]
        assert labels and all(re.fullmatch(r"\d+(\.\d+)?×", t) for t in labels), labels
        # between 1× and 10× the axis is read at labelled ticks, not only at the decades
        y = [t.get_text() for t in fig.axes[0].yaxis.get_ticklabels() if t.get_text()]
        assert {"1×", "2×", "3×"} <= set(y), y
        assert_every_mark_in_a_legend(fig)
        plt.close(fig)


def test_sensitivity_chart_labels_in_words_never_overlap():
    """Values close on the axis ("mean_floor"/"spawn") get their own spots; every label comes from the name table."""
    from lachesis.evaluation.knobs import KNOBS, VALUE_WORDS
    from lachesis.evaluation.plots import sensitivity_figure

    rows = [dict(knob="paper", value="paper", r=2.0, y=8.0)]
    rows += [dict(knob="size_estimate", value=v, r=r, y=8.0 * r / 2) for v,
             r in (("mean_floor", 2.01), ("spawn", 2.03))]
    rows += [dict(knob="pe_cycles", value=f"{v:g}", r=r, y=y) for v, r, y in ((3000, 2.0, 0.3), (10000, 2.0, 0.8))]
    rows += [dict(knob="laden_close", value="arrival", r=2.02, y=8.1)]
    g = pd.DataFrame([dict(workload="multi_agent", model="m", slo="tight", memory="1/7", n_sessions=10,
                           all_meet_slo=True, knob=r["knob"], value=r["value"], **{"lachesis/hbm_first": r["r"],
                                                                                   "years_lachesis": r["y"]})
                      for r in rows])
    fig = sensitivity_figure(g, ["workload", "model", "slo", "memory"], 5.0)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        texts = [t for t in ax.texts if t.get_text()]
        words = " ".join(t.get_text() for t in texts)
        assert all(VALUE_WORDS[v] in words for v in ("mean_floor", "spawn", "arrival"))
        assert "_" not in words
        boxes = [t.get_window_extent(renderer) for t in texts]
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
        assert not any("_" in t.get_text() for t in ax.get_yticklabels())
    assert set(KNOBS) <= set(importlib.import_module("lachesis.evaluation.knobs").KNOB_WORDS)
    plt.close(fig)


def test_real_traces_legends_name_sources_in_words_beside_the_curves(trace_fixtures) -> None:
    from lachesis.analysis import report
    from lachesis.plotting import SOURCE_NAMES, real_traces_figure

    out = report.build("tau2-qwen3.5-justinchiu,claude_code_subagents,mooncake_fast25", data=trace_fixtures)
    fig = real_traces_figure(out)
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert legends
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is None:
            continue
        texts = [t.get_text() for t in leg.get_texts()]
        assert not any("_" in t or "tau2-" in t for t in texts), texts  # no dataset id, no class code name
        assert not leg.get_window_extent(r).overlaps(ax.get_window_extent(r))  # outside the data area
    assert any(SOURCE_NAMES["claude_code_subagents"] in t.get_text() for ax in fig.axes if ax.get_legend()
               for t in ax.get_legend().get_texts())
    plt.close(fig)


def test_table3_figure_draws_one_panel_when_total_and_per_session_are_one():
    """At paper scale every session count is the paper's, so the per-session errors are the totals' (two
    identical panels); rounded session counts make them differ, and then both are drawn."""
    from lachesis.plotting import TABLE3_KEYS, table3_figure

    err = {k + "_rel_err": [0.02, -0.05] for k, _ in TABLE3_KEYS}
    same = pd.DataFrame(dict(label=["a", "b"], **err, **{k.replace("_rel_err", "_per_session_rel_err"): v
                                                         for k, v in err.items()}))
    fig = table3_figure(same, 1.0)
    assert len(fig.axes) == 1 and "= per session" in fig.axes[0].get_title()
    plt.close(fig)
    differ = same.assign(requests_per_session_rel_err=[0.01, -0.02])
    fig = table3_figure(differ, 0.05)
    assert [ax.get_title() for ax in fig.axes] == ["total vs 0.05 × paper", "per session vs paper"]
    plt.close(fig)


def test_sensitivity_labels_of_touching_dots_are_merged_never_overprinted():
    """The committed chart printed "2" over "per tier" and "2" beside "4" (read "24"): values whose dots touch
    share one label ("1, 2, 4"), and a label stays in its own row."""
    from lachesis.evaluation.plots import sensitivity_figure

    rows = [dict(knob="paper", value="paper", r=2.76, y=9.8)]
    rows += [dict(knob="kv_read_pricing", value="per_tier", r=2.75, y=9.6)]
    rows += [dict(knob="group_ranks", value=v, r=r, y=y) for v, r, y in (("1", 2.72, 9.7), ("2", 2.74, 9.9),
                                                                          ("4", 2.70, 9.5))]
    rows += [dict(knob="hbf_write_bw_scale", value=v, r=r, y=y) for v, r, y in (("0.5", 2.77, 9.9), ("3", 2.765, 9.7))]
    rows += [dict(knob="pe_cycles", value=v, r=r, y=y) for v, r, y in (("3000", 1.3, 0.3), ("30000", 3.1, 30.0))]
    g = pd.DataFrame([dict(workload="tau3", model="m", slo="tight", memory="4/4", n_sessions=10, all_meet_slo=True,
                           knob=r["knob"], value=r["value"], **{"lachesis/hbm_first": r["r"], "years_lachesis": r["y"]})
                      for r in rows])
    fig = sensitivity_figure(g, ["workload", "model", "slo", "memory"], 5.0)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        texts = [t for t in ax.texts if t.get_text()]
        assert "1, 2, 4" in [t.get_text() for t in texts] and "0.5, 3" in [t.get_text() for t in texts]
        boxes = [t.get_window_extent(renderer) for t in texts]
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
        frame = ax.get_window_extent(renderer)
        assert all(frame.x0 <= b.x0 and b.x1 <= frame.x1 for b in boxes)  # none cut at the panel's edge
    plt.close(fig)


def test_every_public_source_has_a_name_in_words():
    from lachesis.plotting import SOURCE_NAMES, source_name
    from lachesis.traces import datasets

    for name in datasets.names():
        assert name in SOURCE_NAMES and "_" not in source_name(name), name
    assert source_name("multi_agent") == "corpus: multi-agent trace"


def test_panels_in_rows_make_a_grid():
    from lachesis.evaluation.plots import Panel, in_rows

    ps = [Panel(dict(workload=str(i)), str(i)) for i in range(5)]
    assert [[q.title for q in r] for r in in_rows(ps, 2)] == [["0", "1"], ["2", "3"], ["4"]]


def test_the_explorer_bars_draw_a_miss_as_a_miss_with_its_own_nstar():
    """The explorer's HBM-first bar was a lifetime though it missed the SLO: now no bar, the miss and its N*."""
    from lachesis.evaluation.plots import policy_bars

    rows = pd.DataFrame(dict(policy=["hbm_first"] * 3 + ["lachesis"] * 3, seed=[0, 1, 2] * 2,
                             slo_met=[True, False, False, True, True, True]))
    summary = pd.DataFrame(dict(policy=["hbm_first", "lachesis"], lifetime_years=[3.2, 9.6],
                                lifetime_years_min=[3.1, 8.7], lifetime_years_max=[3.4, 9.7],
                                own_n_star=[41.0, float("nan")]))
    fig, ax = plt.subplots()
    keys = policy_bars(ax, summary, rows, ["HBM-first", "Lachesis"], selected="lachesis")
    assert [round(b.get_height(), 2) for b in _bars(ax)] == [9.6]
    assert [t.get_text() for t in ax.texts] == ["miss 2/3 · N* = 41"] and len(_miss_boxes(ax)) == 1
    assert [k.get_label().split(" (")[0] for k in keys] == ["misses the SLO at the deployment's load"]
    outlined = [p for p in ax.patches if not p.get_fill() and not p.get_hatch()]
    assert [round(p.get_height(), 2) for p in outlined] == [9.6]  # the selected policy
    plt.close(fig)


# ------------------------------------------------------------------------------------------------
# The characterization's figures (lachesis.analysis.plots): drawn by the package, the paper beside ours
# ------------------------------------------------------------------------------------------------

def _segments(classes, groups, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame([dict(group=g, seg_class=c, t_norm_s=float(t), rho_rw=float(r), tokens_written=int(w))
                         for g in groups for k, c in enumerate(classes)
                         for t, r, w in zip(rng.lognormal(4 + k, 1, 40), rng.lognormal(6, 1, 40),
                                            rng.lognormal(6 + k, 1, 40))])


def test_the_characterization_figures_are_titled_and_set_the_paper_beside_ours():
    from lachesis import paper
    from lachesis.analysis import plots as P

    groups = ["tau3_airline", "bfcl_base"]
    seg = _segments(["reasoning_laden", "reasoning_stripped"], groups)
    fig = P.temporal_figure(seg, pd.DataFrame(dict(group=groups)), seg[["group", "seg_class", "tokens_written"]])
    assert fig._suptitle.get_text().startswith("Fig. 4")
    med = paper.FIG4B_TURN_TOKENS["tau3_airline"]["reasoning_laden"][0]
    assert any(list(ln.get_ydata()) == [med] for ln in fig.axes[len(groups)].get_lines())  # the paper's median
    assert_every_mark_in_a_legend(fig)
    plt.close(fig)

    bench = ["appworld", "webarena"]
    seg = _segments(["lead", "worker", "reviewer"], bench)
    fig = P.structural_figure(seg, pd.DataFrame(dict(group=bench, lead_over_worker=[4.2, 5.0])))
    assert fig._suptitle.get_text().startswith("Fig. 5") and "paper 4–6.1×" in fig._suptitle.get_text()
    assert_every_mark_in_a_legend(fig)
    plt.close(fig)

    w = _segments(["worker"], bench)
    table = pd.DataFrame(dict(group=bench, tnorm_p10_s=[30.0, 40.0], tnorm_p90_s=[300.0, 500.0],
                              tnorm_p90_over_p10=[10.0, 12.5], kendall_tau_tnorm_vs_writes=[0.6, 0.7]))
    fig = P.worker_heterogeneity_figure(w, table)
    assert fig._suptitle.get_text().startswith("Fig. 6")
    assert "paper 0.51–0.72" in fig.axes[1].get_title() and "p90/p10 = 10.0×" in [t.get_text() for t in
                                                                                   fig.axes[0].texts]
    plt.close(fig)

    rng = np.random.default_rng(1)
    oof = pd.DataFrame(dict(ridge=rng.normal(size=80), t_norm_s=rng.lognormal(5, 1, 80)))
    k = np.linspace(0.05, 0.5, 10)
    curves = pd.concat([pd.DataFrame(dict(model=m, k_fraction=k, **{c: k for c in (
        "share_k_shortest", "share_2k_shortest", "avoided_k_longest", "random_k_shortest", "random_2k_shortest",
        "random_avoided_k_longest")})) for m in ("ridge", "boosted")])
    fig = P.spawn_prediction_figure(oof, curves, {"ridge": 0.5, "boosted": 0.4})
    assert fig._suptitle.get_text().startswith("Fig. 7") and "(paper 0.53)" in fig.axes[0].get_title()
    assert_every_mark_in_a_legend(fig)
    plt.close(fig)


def test_a_figure_without_misses_keys_none_and_an_empty_panel_says_why():
    from lachesis.evaluation import tables
    from lachesis.evaluation.plots import Panel, lifetime_figure

    df = _evalplots_grid().assign(slo_met=True)
    quiet = df[df.workload.eq("multi_agent_no_reviewer")].index
    df.loc[quiet, ["lifetime_years", "bytes_hbm", "bytes_hbf"]] = [float("nan"), 0.0, 0.0]  # wrote nothing
    df.loc[quiet, "bound_lifetime_years"] = float("nan")
    fig = lifetime_figure(df, tables.ratio_table(df), [[Panel(dict(workload=w), w) for w in
                                                        ("multi_agent", "multi_agent_no_reviewer")]],
                          bars=("hbm_first", "lachesis"), paper_years=[])
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert not any(x.startswith("misses the SLO") for x in labels)
    assert [t.get_text().split("\n")[0] for t in fig.axes[1].texts] == ["no lifetime measured"]
    plt.close(fig)


def test_a_saved_figure_is_cropped_once_to_a_box_on_the_half_point_grid(tmp_path) -> None:
    """The crop is measured once and snapped outward to half a point, so the PNG and the PDF share it and a
    re-measure's last bits (the PDF backend's own tight box) cannot move a coordinate."""
    import matplotlib.pyplot as plt

    from lachesis import plotting

    fig, ax = plt.subplots(figsize=(4, 3), layout="constrained")
    ax.bar(["a", "b"], [1.0, 2.0], label="bars")
    fig.legend(loc="outside lower center")
    box = plotting.crop_box(fig)
    steps = np.array(box.extents) / plotting.CROP_GRID_IN
    assert np.allclose(steps, np.round(steps), atol=1e-9)
    tight = fig.get_tightbbox().padded(plt.rcParams["savefig.pad_inches"])
    assert box.x0 <= tight.x0 and box.y0 <= tight.y0 and box.x1 >= tight.x1 and box.y1 >= tight.y1
    assert box.width - tight.width < 2 * plotting.CROP_GRID_IN + 1e-9
    first = [p.read_bytes() for p in plotting.save_figure(fig, tmp_path / "a", "f")]
    again = [p.read_bytes() for p in plotting.save_figure(fig, tmp_path / "b", "f")]
    assert first == again
    plt.close(fig)
