"""Figures and their files: the drawing helpers the notebooks share, and writing what they show.

Every figure is written as PNG + PDF beside the numbers it shows (CSV or JSON), atomically, into
an output folder the notebook takes as a parameter (``figures/`` at paper scale, ``build/`` when
run small).  Paper values sit beside ours via :func:`compare_table`; :func:`key_numbers` prints
the few numbers a notebook's output check compares.  Drawing lives here, never in the model or
adapter modules (the real-trace report's figure: :func:`real_traces_figure`).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.lines import Line2D
from matplotlib.ticker import NullFormatter
from matplotlib.transforms import Bbox
from numpy.typing import ArrayLike

from lachesis.io import atomic_write, write_json, write_text
from lachesis.kv import STRUCTURAL_CLASSES, TEMPORAL_CLASSES
from lachesis.registry import POLICY_BY_NAME, POLICY_REGISTRY

WARRANTY_STYLE: dict[str, Any] = dict(color="0.3", linestyle="--", linewidth=1.0)


def out_path(out_dir: str | os.PathLike, name: str) -> Path:
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    return d / name


#: The grid a saved figure's crop snaps outward to, in inches (half a point).
CROP_GRID_IN = 1 / 144


def crop_box(fig: plt.Figure) -> Bbox:
    """The figure's tight box with matplotlib's padding, snapped outward to :data:`CROP_GRID_IN`, from one draw.
    matplotlib's own ``bbox_inches="tight"`` is measured again by the PDF backend at each save, and its last bits
    vary between runs: a legend's coordinate then flips in its sixth printed decimal and the PDF's bytes change."""
    fig.draw_without_rendering()  # the layout engine's positions, as a save would draw them
    bb = fig.get_tightbbox().padded(plt.rcParams["savefig.pad_inches"])
    q = CROP_GRID_IN
    return Bbox.from_extents(math.floor(bb.x0 / q) * q, math.floor(bb.y0 / q) * q,
                             math.ceil(bb.x1 / q) * q, math.ceil(bb.y1 / q) * q)


def save_figure(fig: plt.Figure, out_dir: str | os.PathLike, stem: str) -> list[Path]:
    """Write ``<stem>.png`` and ``<stem>.pdf`` atomically, both cropped to :func:`crop_box`; return the paths."""
    paths = []
    box = crop_box(fig)
    for ext in ("png", "pdf"):
        p = out_path(out_dir, f"{stem}.{ext}")
        # no creation date in the PDF, so the same numbers give the same bytes
        meta = {"CreationDate": None} if ext == "pdf" else {}

        def save(t: Path, ext: str = ext, meta: dict[str, Any] = meta) -> None:
            fig.savefig(t, format=ext, dpi=150, bbox_inches=box, metadata=meta)

        atomic_write(p, save)
        paths.append(p)
    return paths


#: Significant digits of every number :func:`save_numbers` writes.  Two machines of one kind (another BLAS
#: build, another core count) differ in the last bits of a float; written in full (17 digits) that changes a
#: committed file.  Twelve digits keep every difference the model makes and drop the ones summation order does.
DIGITS = 12


def stable_numbers(obj: Any, digits: int = DIGITS) -> Any:
    """``obj`` with every float rounded to ``digits`` significant digits: a DataFrame's float columns (and
    floats in its object columns), a mapping's or a sequence's values, recursively.  Integers, text and
    non-finite values are unchanged.  The one place the package's written numbers get their precision."""
    def num(v: Any) -> Any:
        if isinstance(v, (float, np.floating)) and not isinstance(v, bool):
            return float(f"{float(v):.{digits}g}") if np.isfinite(v) else float(v)
        return v

    if isinstance(obj, pd.DataFrame):
        out = obj.copy()
        for c in out.columns:
            col = out[c]
            if pd.api.types.is_float_dtype(col):
                out[c] = col.map(num)
            elif col.dtype == object:
                out[c] = col.map(num)
        return out
    if isinstance(obj, Mapping):
        return {k: stable_numbers(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(stable_numbers(v, digits) for v in obj)
    if isinstance(obj, np.ndarray):
        return stable_numbers(obj.tolist(), digits)
    return num(obj)


def save_numbers(obj: pd.DataFrame | Mapping[str, Any], out_dir: str | os.PathLike, stem: str) -> Path:
    """Write the numbers behind a figure: a DataFrame as CSV, a mapping as JSON (atomically), every float at
    :data:`DIGITS` significant digits (:func:`stable_numbers`), so a regeneration elsewhere leaves git clean."""
    if isinstance(obj, pd.DataFrame):
        p = out_path(out_dir, f"{stem}.csv")
        df = stable_numbers(obj)
        atomic_write(p, lambda t: df.to_csv(t, index=False, float_format=f"%.{DIGITS}g"))
    else:
        p = write_json(out_path(out_dir, f"{stem}.json"), stable_numbers(obj), indent=2, sort_keys=True)
    return p


def save_markdown(df: pd.DataFrame, out_dir: str | Path, stem: str, floatfmt: str = ".3g") -> Path:
    """Write a table as GitHub markdown (``<stem>.md``)."""
    return write_text(out_path(out_dir, f"{stem}.md"), _to_markdown(df, floatfmt))


def _to_markdown(df: pd.DataFrame, floatfmt: str) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, (float, np.floating)):
            return "" if np.isnan(v) else format(float(v), floatfmt)
        return str(v)

    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(fmt(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def _in_range(ours: Any, paper: Any) -> Any:
    """Whether ours agrees with the paper: "yes" / "partly" / "no" (ranges overlap partly), "" if not comparable."""
    def span(v: Any) -> tuple[float, float] | None:
        if isinstance(v, tuple) and len(v) == 2:
            return float(v[0]), float(v[1])
        if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
            return float(v), float(v)
        return None

    o, p = span(ours), span(paper)
    if o is None or p is None or np.isnan(o[0]) or np.isnan(o[1]):
        return ""
    if p[0] == p[1] and not isinstance(paper, tuple):  # a point value: within 10%
        tol = 0.1 * abs(p[0])
        p = (p[0] - tol, p[1] + tol)
    if p[0] <= o[0] and o[1] <= p[1]:
        return "yes"
    if o[1] < p[0] or o[0] > p[1]:
        return "no"
    return "partly"


def format_range(v: Any) -> str:
    """A comparison table's cell: a ``(lo, hi)`` range as ``lo–hi``, a number as itself (``:g``), text as is."""
    if isinstance(v, tuple) and len(v) == 2:
        return f"{v[0]:g}–{v[1]:g}"
    return f"{v:g}" if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) else str(v)


_RANGE = re.compile(r"^\s*(-?[\d.]+(?:e[-+]?\d+)?)\s*[–-]\s*(-?[\d.]+(?:e[-+]?\d+)?)\s*$")


def parse_range(v: Any) -> tuple[float, float] | None:
    """The inverse of :func:`format_range` for numbers: a cell read back from a comparison table's CSV as
    ``(lo, hi)`` (a number as a range of one value); None for text, blanks and non-finite values."""
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        return (float(v), float(v)) if np.isfinite(v) else None
    s = str(v).strip()
    if m := _RANGE.match(s):
        return float(m.group(1)), float(m.group(2))
    try:
        x = float(s)
    except ValueError:
        return None
    return (x, x) if np.isfinite(x) else None


def compare_table(rows: list[tuple[str, Any, Any]], note: str = "") -> pd.DataFrame:
    """``[(statistic, ours, paper), ...]`` -> a DataFrame with columns statistic/ours/paper/in_paper_range/note.

    ``ours`` and ``paper`` may each be a number, a ``(lo, hi)`` range, or a string.  ``in_paper_range`` is
    "yes" when ours lies inside the paper's range (a point value: within 10%), "partly" when the two
    ranges overlap, "no" when they are disjoint, and empty when they are not comparable.
    """
    out = [{"statistic": stat, "ours": format_range(ours) if isinstance(ours, tuple) else ours,
            "paper": format_range(paper),
            "in_paper_range": _in_range(ours, paper), "note": note} for stat, ours, paper in rows]
    return pd.DataFrame(out)


def span(values: ArrayLike) -> tuple[float, float]:
    """(min, max) of the finite values: the range a figure's statistic spans over its groups."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return (float(v.min()), float(v.max())) if len(v) else (float("nan"), float("nan"))


def key_numbers(values: Mapping[str, Any], digits: int = 3) -> str:
    """One ``name: value`` line per entry, numbers to ``digits`` significant digits and ranges as
    ``lo–hi``: what a notebook's output check prints, coarse enough that another BLAS prints the same."""
    def fmt(v: Any) -> str:
        if isinstance(v, tuple) and len(v) == 2:
            return f"{fmt(v[0])}–{fmt(v[1])}"
        if isinstance(v, (bool, np.bool_, str)):
            return str(v)
        if isinstance(v, (int, np.integer)):
            return str(int(v))
        if isinstance(v, (float, np.floating)):
            return f"{float(v):.{digits}g}"
        raise TypeError(f"key_numbers: {v!r} is not a number, a (lo, hi) range or text")
    return "\n".join(f"{k}: {fmt(v)}" for k, v in values.items())


def ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted values and their cumulative fractions (count-weighted CDF)."""
    v = np.sort(np.asarray(values, dtype=float))
    return v, np.arange(1, len(v) + 1) / max(len(v), 1)


def warranty_line(ax: plt.Axes, years: float = 5.0) -> None:
    """The dashed five-year warranty line of Figs. 9 and 11."""
    ax.axhline(years, **WARRANTY_STYLE)


BOUND_STYLE: dict[str, Any] = dict(color="#d62728", linewidth=1.6)
BOUND_LABEL = "offline bound (beyond the paper)"
#: An infinite lifetime (the bound where HBM could take every byte; a policy that wrote no KV to HBF): ∞.
UNBOUNDED_STYLE: dict[str, Any] = dict(marker="$\\infty$", color=BOUND_STYLE["color"], ms=11)


def bound_marks(ax: plt.Axes, x: ArrayLike, y: ArrayLike, lo: ArrayLike | None = None, hi: ArrayLike | None = None,
                width: float = 0.8) -> Line2D:
    """The offline bound (:mod:`lachesis.evaluation.bound`) per group: a line across each group's ``width`` at ``y``
    (its median over seeds) over a light band from ``lo`` to ``hi`` (min–max); a value that is not finite
    (HBM could take every byte: no HBF wear) is an arrow at the top of the axes.  Returns the legend key."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(y)
    ax.hlines(y[ok], x[ok] - width / 2, x[ok] + width / 2, zorder=4, **BOUND_STYLE)
    if lo is not None and hi is not None:
        lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
        band = ok & np.isfinite(lo) & np.isfinite(hi)
        bars = ax.bar(x[band], hi[band] - lo[band], width, bottom=lo[band], color=BOUND_STYLE["color"], alpha=0.15,
                      linewidth=0, zorder=3)
        for b in bars:  # a bar's bottom is a sticky edge: a zero-height band at the top would stop the axis there
            b.sticky_edges.y.clear()
    inf = np.isinf(y)
    if inf.any():  # inside the top of the axes, above the data (a margin): a mark no policy uses (unbounded_key)
        ax.margins(y=0.15)
        ax.plot(x[inf], np.full(inf.sum(), 0.95), ls="", transform=ax.get_xaxis_transform(), zorder=4,
                **UNBOUNDED_STYLE)
    return Line2D([], [], label=BOUND_LABEL, **BOUND_STYLE)


def unbounded_key(policy: bool = False) -> Line2D:
    """The legend entry of an infinite lifetime: the bound's (:func:`bound_marks`) or, with ``policy``, a policy's
    that wrote no KV to HBF (drawn in its colour)."""
    if policy:
        return Line2D([], [], ls="", label="a policy wrote no KV to HBF: unbounded lifetime (its colour)",
                      **dict(UNBOUNDED_STYLE, color="0.3", ms=9))
    return Line2D([], [], ls="", label="offline bound: unbounded (HBM takes every byte)", **UNBOUNDED_STYLE)


def tidy_log_axes(fig: plt.Figure) -> None:
    """Label only the decades on log axes (minor labels overlap in small panels)."""
    for ax in fig.axes:
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())


#: The public traces' names in words (their dataset ids are :mod:`lachesis.traces.datasets`' registry keys).
SOURCE_NAMES = {"azure_llm_2023": "Azure LLM inference 2023", "chatdev_warehouse": "ChatDev warehouse",
                "claude_code_more": "Claude Code sessions", "claude_code_subagents": "Claude Code with subagents",
                "mooncake_fast25": "Mooncake (FAST '25)", "tau2-qwen3.5-justinchiu": "τ²-bench, Qwen3.5",
                "tau2-xai-grok-blakeelias": "τ²-bench, Grok", "who_and_when": "Who&When"}


def source_name(name: str) -> str:
    """A public source (its registry id, ``lachesis/data/registry.tsv``) or a corpus workload in words: a figure's
    panel title, never the id."""
    if name in SOURCE_NAMES:
        return SOURCE_NAMES[name]
    if name in WORKLOAD_LABEL:
        return f"corpus: {WORKLOAD_LABEL[name]}"
    return name.replace("_", " ")


def source_label(group: str, groups: Iterable[str] = ()) -> str:
    """A real-trace group id (``dataset:part``) in words: the source's name, then its part where another of
    ``groups`` shares the source."""
    ds, _, part = str(group).partition(":")
    name = SOURCE_NAMES.get(ds, ds.replace("_", " "))
    shared = sum(str(g).partition(":")[0] == ds for g in groups) > 1
    return f"{name} · {part.replace('_', ' ')}" if part and shared else name


def real_traces_figure(out: Mapping[str, Any]) -> plt.Figure:
    """The real-trace report (:func:`lachesis.analysis.report.build`) in four panels: temporal T_norm
    CDFs, structural T_norm CDFs, worker lifetimes, Mooncake block lifetimes."""
    fig, axes = plt.subplots(2, 2, figsize=(16, 9))
    seg = out["segments"]
    panels = [(axes[0, 0], TEMPORAL_CLASSES, "(a) temporal axis: T_norm per segment"),
              (axes[0, 1], STRUCTURAL_CLASSES, "(b) structural axis: T_norm per segment")]
    styles = {"reasoning_laden": "-", "reasoning_stripped": "--", "lead": "--", "worker": "-", "reviewer": ":"}
    for ax, classes, title in panels:
        s = seg[seg["seg_class"].isin(classes)] if len(seg) else seg
        groups = sorted(s["group"].unique()) if len(s) else []
        colors = dict(zip(groups, plt.cm.tab10(np.linspace(0, 1, max(len(groups), 1)))))
        for (g, c), part in s.groupby(["group", "seg_class"], sort=True):
            v = part["t_norm_s"].to_numpy(float)
            v = v[v > 0]
            if len(v) < 3:
                continue
            x, y = ecdf(v)
            ax.step(x, y, where="post", ls=styles[c], color=colors[g],
                    label=f"{source_label(g, groups)} · {CLASS_STYLE[c]['label']} (n={len(v)})")
        ax.set_xscale("log")
        ax.set_xlabel("T_norm (reference seconds, log)")
        ax.set_ylabel("fraction of segments")
        ax.set_title(title, loc="left")
        if groups:  # beside the panel, off the curves
            ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax = axes[1, 0]
    w = out.get("workers")
    if w is not None and len(w):
        groups = sorted(w["group"].unique())
        data = [w.loc[w["group"] == g, "t_norm_s"].clip(lower=1e-2).to_numpy(float) for g in groups]
        ax.boxplot(data, orientation="horizontal", whis=(10, 90), showfliers=False)
        ax.set_yticks(range(1, len(groups) + 1),
                      [f"{source_label(g, groups)} (n={len(d)})" for g, d in zip(groups, data)],
                      fontsize=7)
        ax.set_xscale("log")
    ax.set_xlabel("worker lifetime T_norm (s, log); whiskers p10–p90")
    ax.set_title("(c) inter-worker axis: worker lifetimes", loc="left")
    ax = axes[1, 1]
    mb = out.get("mooncake_blocks")
    if mb is not None and len(mb):
        reused = mb[mb["uses"] >= 2]
        x, y = ecdf(reused["lifetime_s"].clip(lower=1.0).to_numpy(float))
        ax.step(x, y, where="post", label=f"reused blocks (n={len(reused)})")
        ax.set_xscale("log")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_xlabel("block lifetime, first to last use (trace seconds, log)")
    ax.set_ylabel("fraction of blocks")
    ax.set_title("(d) Mooncake 512-token prefix blocks", loc="left")
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------------------------
# One look for every figure: policy colours and markers, the marks' legend keys, words for code names
# ------------------------------------------------------------------------------------------------

#: Every placement's name in words, colour and marker, the same in every figure (bars use the colour; the
#: baselines beyond the paper are drawn as markers): the policies' from their registry, and the offline bound's.
POLICY_STYLE: dict[str, dict[str, str]] = {
    **{e.name: dict(label=e.label, color=e.color, marker=e.marker) for e in POLICY_REGISTRY},
    "bound": dict(label=BOUND_LABEL, color=BOUND_STYLE["color"], marker="_"),
}
#: A lifetime ratio's words and colour: its numerator policy's colour.
RATIO_STYLE: dict[str, dict[str, str]] = {
    "lachesis/hbm_first": dict(label="Lachesis / HBM-first", color=POLICY_STYLE["lachesis"]["color"]),
    "deterministic/hbm_first": dict(label="w/o predictive path / HBM-first",
                                    color=POLICY_STYLE["deterministic"]["color"]),
}
#: Segment classes in words and one colour each (Figs. 4–6, 10, 12).
CLASS_STYLE: dict[str, dict[str, str]] = {
    "lead": dict(label="lead", color="#1b9e77"), "worker": dict(label="worker", color="#d95f02"),
    "reviewer": dict(label="reviewer", color="#7570b3"),
    "reasoning_laden": dict(label="reasoning-laden", color="#e7298a"),
    "reasoning_stripped": dict(label="reasoning-stripped", color="#66a61e"),
}
#: The x axis of the Figs. 9–12 panels.
MEMORY_AXIS = "GPU memory (HBM stacks / HBF stacks)"
LIFETIME_AXIS = "HBF lifetime (device-years)"
MISSED_SLO_HATCH = "xxxx"
#: A miss's box (:func:`miss_mark`), as a fraction of the axes' height.
MISS_HEIGHT = 0.07


def _style(p: str) -> dict[str, str]:
    """A mark's words, colour and marker: a registered policy's entry (read now), else :data:`POLICY_STYLE`'s."""
    e = POLICY_BY_NAME.get(p)
    return dict(label=e.label, color=e.color, marker=e.marker) if e is not None else POLICY_STYLE.get(p, {})


def policy_label(p: str) -> str:
    return _style(p).get("label", p.replace("_", " "))


def policy_color(p: str) -> str:
    return _style(p).get("color", "0.5")


def policy_marker(p: str) -> str:
    return _style(p).get("marker", "o")


def policy_key(p: str, bar: bool = True) -> Artist:
    """A policy's legend entry: a filled box (a bar) or its marker."""
    from matplotlib.patches import Patch

    if bar:
        return Patch(color=policy_color(p), label=policy_label(p))
    m = policy_marker(p)
    return Line2D([], [], ls="", marker=m, color=policy_color(p), ms=10 if m == "*" else 6, label=policy_label(p))


def warranty_key(years: float = 5.0) -> Line2D:
    """The legend entry of :func:`warranty_line`."""
    return Line2D([], [], label=f"{years:g}-year warranty", **WARRANTY_STYLE)


@dataclass(frozen=True)
class SloOutcome:
    """Whether one cell's policy is drawn as a lifetime: its rows (one per seed, at the deployment's load) and
    how many of them miss the SLO there; the policy's own N* (sessions per GPU) as ``(lo, hi)`` over the rows
    that carry it, None where none does."""

    seeds: int
    misses: int
    own_n_star: tuple[float, float] | None = None

    @property
    def met(self) -> bool:
        """Every seed meets the SLO at the load: the only case a lifetime is drawn (every lifetime a figure shows is
        at a load its SLO admits)."""
        return self.seeds > 0 and self.misses == 0

    def text(self) -> str:
        """What a figure writes beside a miss: ``miss 2/3 · N* = 41`` (the N* when known)."""
        out = f"miss {self.misses}/{self.seeds}"
        if self.own_n_star is not None:
            lo, hi = self.own_n_star
            out += f" · N* = {lo:.0f}" + (f"–{hi:.0f}" if f"{hi:.0f}" != f"{lo:.0f}" else "")
        return out


def _met(v: Any) -> bool:
    """One row's ``slo_met`` as read from a frame or a CSV: True only when it says so (a blank is not a pass)."""
    if isinstance(v, str):
        return v.strip().lower() in ("true", "1")
    return bool(v) if v is not None and not (isinstance(v, float) and np.isnan(v)) else False


def slo_outcome(rows: pd.DataFrame) -> SloOutcome:
    """The :class:`SloOutcome` of one cell's policy from its grid rows (``slo_met`` per seed; ``own_n_star``, the
    policy's own N* where it misses, when the rows carry it): the one rule every figure draws a bar or a miss by."""
    if "slo_met" not in rows:
        raise ValueError("grid rows without an 'slo_met' column: a figure cannot tell a lifetime at the SLO from a "
                         "miss")
    met = [_met(v) for v in rows["slo_met"]]
    own = None
    if "own_n_star" in rows:
        n = pd.to_numeric(rows["own_n_star"], errors="coerce").to_numpy(float)
        n = n[np.isfinite(n)]
        own = (float(n.min()), float(n.max())) if len(n) else None
    return SloOutcome(seeds=len(met), misses=len(met) - sum(met), own_n_star=own)


def slo_outcomes(df: pd.DataFrame, by: Sequence[str]) -> dict[tuple, SloOutcome]:
    """:func:`slo_outcome` per group of ``by`` (e.g. the cell's columns and ``policy``), keyed by the group's
    values as a tuple."""
    return {(k if isinstance(k, tuple) else (k,)): slo_outcome(g) for k, g in df.groupby(list(by), sort=False)}


def missed_slo_key() -> Artist:
    """The legend entry of a miss (:func:`miss_mark`)."""
    from matplotlib.patches import Patch

    return Patch(fill=False, edgecolor="0.25", hatch=MISSED_SLO_HATCH, lw=1.0,
                 label="misses the SLO at the deployment's load (seeds that miss; its own N*)")


def miss_mark(ax: plt.Axes, x: float, width: float, outcome: SloOutcome, color: str, fontsize: float = 7.0) -> None:
    """A policy that misses the SLO where its lifetime would be: no bar or marker, an empty hatched box at the
    axis floor (its colour, readable in grayscale by its hatch) and, above it, ``outcome.text()`` upright."""
    from matplotlib.patches import Rectangle

    floor = ax.get_xaxis_transform()  # x in data, y in axes fractions: the same height on any scale
    ax.add_patch(Rectangle((x - width / 2, 0.0), width, MISS_HEIGHT, transform=floor, fill=False, edgecolor=color,
                           hatch=MISSED_SLO_HATCH, lw=1.0, zorder=4, clip_on=False))
    ax.text(x, MISS_HEIGHT + 0.015, outcome.text(), transform=floor, rotation=90, ha="center", va="bottom",
            fontsize=fontsize, color="0.1", zorder=4.5,  # over the bands and lines behind it, on a white ground
            bbox=dict(boxstyle="square,pad=0.08", facecolor="white", edgecolor="none", alpha=0.85))


def whisker_key(what: str = "min–max over seeds") -> Line2D:
    return Line2D([], [], color="0.2", lw=0.8, marker="|", ms=6, label=f"whisker: {what}")


NSTAR_STYLE: dict[str, Any] = dict(color="0.3", linestyle=":", linewidth=1.0)


def nstar_key() -> Line2D:
    """Legend entry of the vertical N* line (HBM-first's sessions per GPU at the SLO)."""
    return Line2D([], [], label="N* (HBM-first's load at the SLO)", **NSTAR_STYLE)


def paper_band(ax: plt.Axes, lo: float, hi: float, color: str, x: tuple[float, float] | None = None,
               label: str = "", zorder: float = 0.4) -> Artist:
    """The paper's range ``lo``–``hi`` as a light band (over ``x`` = (x0, x1), else the whole axes) edged by
    dashed lines, or one dashed line when the paper gives one value; behind the data unless ``zorder`` says
    otherwise.  Returns its legend entry."""
    from matplotlib.patches import Patch

    kw: dict[str, Any] = dict(color=color, linestyle="--", linewidth=0.9, alpha=0.9, zorder=zorder + 0.1)
    if hi > 1.01 * lo:
        if x is None:
            ax.axhspan(lo, hi, color=color, alpha=0.13, lw=0, zorder=zorder)
            ax.axhline(lo, **kw)
            ax.axhline(hi, **kw)
        else:
            ax.fill_between(x, lo, hi, color=color, alpha=0.13, lw=0, zorder=zorder)
            ax.hlines([lo, hi], *x, **kw)
        return Patch(facecolor=color, alpha=0.3, edgecolor=color, linestyle="--", label=label
                     or f"paper: {lo:g}–{hi:g}")
    if x is None:
        ax.axhline(lo, **kw)
    else:
        ax.hlines(lo, *x, **kw)
    return Line2D([], [], label=label or f"paper: {lo:g}", **kw)


def paper_whiskers(ax: plt.Axes, x: ArrayLike, lo: float, hi: float, color: str = "k", label: str = "") -> Artist:
    """The paper's range ``lo``–``hi`` as a capped whisker at each of ``x`` (beside the bars it compares with, so it
    recolours none of them); one value is a short bar.  Returns its legend entry."""
    x = np.asarray(x, dtype=float)
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    ax.errorbar(x, np.full(len(x), mid), yerr=half, fmt="none", ecolor=color, elinewidth=1.4, capsize=3, capthick=1.4,
                zorder=5)
    return Line2D([], [], color=color, lw=1.4, marker="_", ms=7, mew=1.4, label=label or f"paper: {lo:g}–{hi:g}")


def miss_overlay(ax: plt.Axes, x: float, width: float, top: float, outcome: SloOutcome, fontsize: float = 6.5) -> None:
    """A write-composition bar whose run misses the SLO at the deployment's load: already drawn faded, now crossed
    out up to ``top``, with ``outcome.text()`` upright in it."""
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((x - width / 2, 0.0), width, top, fill=False, edgecolor="0.35", hatch="xx", lw=0.8,
                           zorder=4))
    ax.text(x, top / 2, outcome.text(), rotation=90, ha="center", va="center", fontsize=fontsize, color="0.1",
            zorder=4.5, bbox=dict(boxstyle="square,pad=0.1", facecolor="white", edgecolor="none", alpha=0.9))


def missed_run_key() -> Artist:
    """The legend entry of :func:`miss_overlay`."""
    from matplotlib.patches import Patch

    return Patch(facecolor="0.85", edgecolor="0.35", hatch="xx", lw=0.8,
                 label="misses the SLO at the deployment's load (faded, crossed; seeds that miss; its own N*)")


#: The evaluation's workloads in words.
WORKLOAD_LABEL = {"multi_agent": "multi-agent trace", "multi_agent_no_reviewer": "multi-agent trace w/o reviewer",
                  "tau3": "τ³-bench (single-agent)", "bfcl": "BFCLv4 (single-agent)"}


def workload_label(w: str) -> str:
    return WORKLOAD_LABEL.get(w, w.replace("_", " "))


def kyung_figure(grid: pd.DataFrame, tolerance: float) -> plt.Figure:
    """Our HBF model against Kyung et al.'s Fig. 4 (:func:`lachesis.node.kyung.kyung_grid`): lifetime and mean TPOT,
    ours against theirs within ``tolerance``, and the lifetime error per cell; drawn in the figures' one style
    (matplotlib's defaults, as every other figure: no global theme)."""
    import seaborn as sns

    ratios = [r for r in ["1:3", "1:1", "3:1", "7:1", "15:1"] if r in set(grid.ratio)]
    contexts = list(dict.fromkeys(grid.context))
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8), gridspec_kw=dict(width_ratios=[1, 1, 1.25]))
    for ax, (o, t, label, log) in zip(axes[:2], [("life_ours", "life_theirs", "HBF lifetime (years)", True),
                                               ("tpot_ours_ms", "tpot_theirs_ms", "mean TPOT (ms)", False)]):
        sns.scatterplot(data=grid, x=t, y=o, hue="ratio", hue_order=ratios, style="context", style_order=contexts,
                        s=60, ax=ax, palette="viridis")
        lo, hi = grid[[o, t]].min().min() * 0.8, grid[[o, t]].max().max() * 1.2
        xs = np.geomspace(lo, hi, 50) if log else np.linspace(lo, hi, 50)
        ax.plot(xs, xs, color="0.3", lw=1)
        ax.fill_between(xs, xs * (1 - tolerance), xs * (1 + tolerance), color="0.5", alpha=0.15,
                        label=f"±{tolerance:.0%}")
        if log:
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel(f"Kyung et al. {label}")
        ax.set_ylabel(f"ours {label}")
    axes[0].legend(fontsize=7, ncol=2, loc="upper left")
    axes[1].get_legend().remove()
    keys = ["model", "cv", "context"] if grid.model.nunique() > 1 else ["cv", "context"]
    heat = (100 * grid.pivot_table(index="ratio", columns=keys, values="life_err")).reindex(ratios)
    heat = heat.reindex(columns=sorted(heat.columns, key=lambda k: (k[:-1], contexts.index(k[-1]))))
    sns.heatmap(heat, annot=True, fmt=".0f", cmap="RdBu", center=0, vmin=-35, vmax=35, ax=axes[2],
                cbar_kws=dict(label="lifetime error, ours vs theirs (%)"))
    axes[2].set_xticklabels(["\n".join(map(str, k[:-2])) + f"CV {k[-2]}\n{k[-1]}" for k in heat.columns], rotation=0)
    axes[2].set_xlabel("")
    axes[2].set_ylabel("L_in:L_out")
    for ax, title in zip(axes, ("(a) lifetime", "(b) mean TPOT", "(c) lifetime error")):
        ax.set_title(title, loc="left")
    fig.tight_layout()
    return fig


#: Table 3's counts the corpus figure compares: column stem, words.
TABLE3_KEYS = (("requests", "requests"), ("tokens_processed", "tokens processed"), ("tokens_written", "tokens written"))


def table3_figure(tab: pd.DataFrame, scale: float) -> plt.Figure:
    """The corpus's Table 3 against the paper's (``tab``: :func:`lachesis.traces.corpus.table3`): relative error of the
    totals against ``scale`` × the paper's and, where session counts were rounded (the two differ), per session.
    When every workload has exactly ``scale`` × the paper's sessions (paper scale) the two panels would be one
    and the same, so one panel is drawn and its title says so."""
    cols = [k + s for k, _ in TABLE3_KEYS for s in ("_rel_err", "_per_session_rel_err")]
    tot = tab[[k + "_rel_err" for k, _ in TABLE3_KEYS]].to_numpy(float)
    per = tab[[k + "_per_session_rel_err" for k, _ in TABLE3_KEYS]].to_numpy(float)
    same = bool(np.allclose(tot, per, rtol=1e-9, atol=1e-12, equal_nan=True)) and set(cols) <= set(tab)
    panels = [("_rel_err", f"total (= per session: every session count is {scale:g} × the paper's)" if same
               else f"total vs {scale:g} × paper")]
    if not same:
        panels.append(("_per_session_rel_err", "per session vs paper"))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels) + 0.5, 3.8), sharey=True, squeeze=False)
    x = np.arange(len(tab))
    for ax, (suffix, title) in zip(axes[0], panels):
        for i, (k, lab) in enumerate(TABLE3_KEYS):
            ax.bar(x + (i - 1) * 0.27, 100 * tab[k + suffix].fillna(0), width=0.27, label=lab)
        ax.axhspan(-10, 10, color="0.9", zorder=0)
        ax.axhline(0, color="0.3", lw=0.8)
        ax.set_xticks(x, tab["label"], rotation=60, ha="right", fontsize=8)
        ax.set_title(title, fontsize=10)
    axes[0][0].set_ylabel("relative error, %")
    fig.legend(*axes[0][0].get_legend_handles_labels(), fontsize=8, loc="lower center", ncol=3,
               bbox_to_anchor=(0.5, -0.04))
    fig.suptitle("Table 3 regenerated by the synthetic corpus (grey band: ±10%; processed not reported for structural)",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig
