"""Figure-output helpers: the ours-vs-paper comparison and atomic outputs."""

import json
import time

import matplotlib.pyplot as plt
import pandas as pd

from lachesis.plotting import compare_table, ecdf, save_figure, save_markdown, save_numbers


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
    from lachesis.adapters import report
    from lachesis.plotting import real_traces_figure

    out = report.build("tau2-qwen3.5-justinchiu,claude_code_subagents,mooncake_fast25", data=trace_fixtures)
    fig = real_traces_figure(out)
    assert len(fig.axes) == 4 and fig.axes[0].get_xscale() == "log"
    assert any(line.get_label().startswith("tau2-qwen3.5-justinchiu") for line in fig.axes[0].get_lines())
    plt.close(fig)


def test_a_range_written_to_a_comparison_table_reads_back() -> None:
    from lachesis.plotting import format_range, parse_range

    assert format_range((1.25, 3.5)) == "1.25–3.5" and parse_range(format_range((1.25, 3.5))) == (1.25, 3.5)
    assert parse_range(format_range(-0.175)) == (-0.175, -0.175) and parse_range("-0.175–0.084") == (-0.175, 0.084)
    assert parse_range("— (not in the paper)") is None and parse_range(float("nan")) is None
