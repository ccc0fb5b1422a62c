"""Figure-output helpers: the ours-vs-paper comparison and atomic outputs."""

import importlib
import json
import time

import matplotlib.pyplot as plt
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


def test_lifetime_figure_draws_medians_whiskers_misses_and_the_paper():
    from matplotlib.patches import Rectangle

    from lachesis.evaluation import tables
    from lachesis.evaluation.plots import Panel, lifetime_figure
    from lachesis.plotting import MISSED_SLO_HATCH

    df = _evalplots_grid()
    r = tables.ratio_table(df)
    layout = [[Panel(dict(workload=w), w, paper=w == "multi_agent")
               for w in ("multi_agent", "multi_agent_no_reviewer")]]
    fig = lifetime_figure(df, r, layout, bars=("hbm_first", "deterministic", "lachesis"), paper_years=[
        ("lachesis", (3.3, 9.3)), ("deterministic", (1.0, 2.0))])
    ax = fig.axes[0]
    bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_width() < 0.5]
    # HBM-first's and Lachesis's bars (w/o predictive path did not run): medians over the two seeds
    assert sorted(round(b.get_height(), 3) for b in bars) == [1.25, 2.0, 2.75, 4.25]
    hatched = [b for b in bars if b.get_hatch() == MISSED_SLO_HATCH]
    assert [round(b.get_height(), 3) for b in hatched] == [2.75, 4.25]  # Lachesis misses at 1/7 (seed 1), 4/4 (seed 0)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1/7", "4/4"]
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[:3] == ["HBM-first", "Lachesis", "oracle (clairvoyant)"]
    assert "paper: Lachesis, 3.3–9.3 (1/7–4/4)" in labels
    assert not any("w/o predictive path" in x for x in labels)  # neither a bar nor a band for what did not run
    assert ax.get_ylabel() and ax.get_xlabel() and not fig.axes[1].get_ylabel()
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
    # beside the first row, though its slot is empty
    labels = [t.get_text() for t in fig.axes[2].get_legend().get_texts()]
    assert labels[0] == "lead (HBM)" and BOUND_LABEL in labels and "paper: HBM share of write bytes (§5.3)" in labels
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
        words = {t.get_text() for t in texts}
        assert {VALUE_WORDS["mean_floor"], VALUE_WORDS["spawn"], VALUE_WORDS["arrival"]} <= words
        assert not any("_" in w for w in words)
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
