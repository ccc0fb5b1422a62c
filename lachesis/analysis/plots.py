"""The characterization's figures (Figs. 4–7, §3.3–§3.5): each drawn from the tables
:mod:`lachesis.analysis.characterize` makes, the paper's published values beside ours, titled by its figure number.
The notebooks call one function per figure; the numbers are computed there, never here."""

from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from lachesis import paper
from lachesis.analysis.characterize import predicted_quartile
from lachesis.plotting import CLASS_STYLE, ecdf, tidy_log_axes


def _name(group: str) -> str:
    """A workload or benchmark group in the paper's words (Table 3's label)."""
    return str(paper.TABLE3.get(group, {}).get("label", group))


def temporal_figure(seg: pd.DataFrame, table: pd.DataFrame, turn_writes: pd.DataFrame) -> plt.Figure:
    """Fig. 4: per domain of ``table`` (:func:`~lachesis.analysis.characterize.temporal_table`), (a) the T_norm CDFs of
    the reasoning-laden and -stripped segments of ``seg``, (b) the KV tokens a turn writes into each
    (``turn_writes``: :func:`~lachesis.analysis.characterize.turn_writes`) beside the paper's Fig. 4(b) median and
    mean."""
    groups = list(table["group"])
    colors = {k: CLASS_STYLE[k]["color"] for k in ("reasoning_laden", "reasoning_stripped")}
    fig, axes = plt.subplots(2, len(groups), figsize=(3.0 * len(groups), 5.6), squeeze=False)
    for j, g in enumerate(groups):
        s = seg[seg["group"] == g]
        ax = axes[0, j]
        for cls, col in colors.items():
            x, y = ecdf(s.loc[s["seg_class"] == cls, "t_norm_s"].clip(lower=1e-2))
            ax.step(x, y, where="post", color=col, label=CLASS_STYLE[cls]["label"])
        ax.set_xscale("log")
        ax.set_title(_name(g), fontsize=9)
        ax.set_xlabel("T_norm (reference s, log)")
        ax.grid(alpha=0.3)
        ax = axes[1, j]
        w = turn_writes[turn_writes["group"] == g]
        data = [w.loc[w["seg_class"] == cls, "tokens_written"].to_numpy() for cls in colors]
        ax.boxplot(data, showfliers=False, showmeans=True, widths=0.6)
        for k, cls in enumerate(colors, start=1):  # the paper's Fig. 4(b) median and mean beside our box
            if g in paper.FIG4B_TURN_TOKENS:
                med, mean = paper.FIG4B_TURN_TOKENS[g][cls]
                ax.plot([k + 0.38], [med], "k_", ms=12, mew=2)
                ax.plot([k + 0.38], [mean], "^", color="k", mfc="white", ms=6)
        ax.set_xticks([1, 2], ["reasoning-\nladen", "reasoning-\nstripped"])
        ax.set_yscale("log")
        ax.set_xlabel("KV tokens a turn writes")
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("CDF of segments")
    axes[1, 0].set_ylabel("tokens (log)")
    axes[0, 0].legend(fontsize=8)
    axes[1, -1].legend(handles=[Line2D([], [], color="tab:orange", label="ours: median (box: IQR, whiskers 1.5 IQR)"),
                                Line2D([], [], ls="", marker="^", color="tab:green", label="ours: mean"),
                                Line2D([], [], ls="", marker="_", color="k", ms=12, mew=2, label="paper: median"),
                                Line2D([], [], ls="", marker="^", color="k", mfc="white", label="paper: mean")],
                       fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle("Fig. 4 — temporal axis: (a) T_norm CDFs per segment class, (b) KV tokens a turn writes per class, "
                 "ours beside the paper's Fig. 4(b)")
    tidy_log_axes(fig)
    fig.tight_layout()
    return fig


def structural_figure(seg: pd.DataFrame, table: pd.DataFrame) -> plt.Figure:
    """Fig. 5: per benchmark of ``table`` (:func:`~lachesis.analysis.characterize.structural_table`), the (a) T_norm
    and (b) ρR/W CDFs of the lead, worker and reviewer segments of ``seg``; the title sets our lead/worker median
    T_norm ratio beside the paper's."""
    groups = list(table["group"])
    colors = {k: CLASS_STYLE[k]["color"] for k in ("lead", "worker", "reviewer")}
    fig, axes = plt.subplots(2, len(groups), figsize=(3.0 * len(groups), 5.6), squeeze=False)
    for j, g in enumerate(groups):
        s = seg[seg["group"] == g]
        for i, col_name in enumerate(["t_norm_s", "rho_rw"]):
            ax = axes[i, j]
            for cls, col in colors.items():
                v = s.loc[s["seg_class"] == cls, col_name].dropna()
                v = v[v > 0]
                if len(v):
                    x, y = ecdf(v)
                    ax.step(x, y, where="post", color=col, label=CLASS_STYLE[cls]["label"])
            ax.set_xscale("log")
            ax.grid(alpha=0.3)
            ax.set_xlabel("T_norm (reference s, log)" if i == 0 else "ρR/W, KV reads per written token (log)")
        axes[0, j].set_title(_name(g), fontsize=9)
    axes[0, 0].set_ylabel("CDF of segments")
    axes[1, 0].set_ylabel("CDF of segments")
    axes[0, 0].legend(fontsize=8)
    lo, hi = paper.LEAD_OVER_WORKER_MEDIAN_TNORM
    fig.suptitle(f"Fig. 5 — structural axis: (a) T_norm, (b) ρR/W by role; lead/worker median T_norm: ours "
                 f"{table['lead_over_worker'].min():.1f}–{table['lead_over_worker'].max():.1f}×, paper {lo:g}–{hi:g}×")
    tidy_log_axes(fig)
    fig.tight_layout()
    return fig


def worker_heterogeneity_figure(workers: pd.DataFrame, table: pd.DataFrame) -> plt.Figure:
    """Fig. 6: (a) worker T_norm per benchmark of ``table``
    (:func:`~lachesis.analysis.characterize.worker_heterogeneity_table`) with its p10–p90 and our p90/p10 (the
    paper's range in the title), (b) each worker's T_norm against the KV tokens it writes with our Kendall τ beside
    the paper's (``workers``: :func:`~lachesis.analysis.ranker.worker_lifetimes`)."""
    groups = list(table["group"])
    fig = plt.figure(figsize=(3.0 * len(groups), 6.4))
    gs = fig.add_gridspec(2, len(groups))
    ax = fig.add_subplot(gs[0, :])
    data = [workers.loc[workers["group"] == g, "t_norm_s"].to_numpy() for g in groups]
    ax.violinplot([np.log10(np.maximum(d, 1e-2)) for d in data], showextrema=False)
    for i, r in enumerate(table.itertuples(), start=1):
        ax.vlines(i, np.log10(r.tnorm_p10_s), np.log10(r.tnorm_p90_s), color="k", lw=2)
        ax.text(i + 0.08, np.log10(r.tnorm_p90_s), f"p90/p10 = {r.tnorm_p90_over_p10:.1f}×", fontsize=8, va="bottom")
    lo, hi = paper.WORKER_TNORM_P90_OVER_P10
    ax.set_xticks(range(1, len(groups) + 1), [_name(g) for g in groups])
    ax.set_ylabel("worker T_norm (reference s, log10)")
    ax.grid(alpha=0.3)
    ax.set_title(f"(a) worker lifetime per benchmark (violin: distribution; bar: p10–p90); paper p90/p10: "
                 f"{lo:g}–{hi:g}×", fontsize=10)
    tlo, thi = paper.WORKER_TNORM_VS_TOKENS_KENDALL
    for j, r in enumerate(table.itertuples()):
        ax = fig.add_subplot(gs[1, j])
        w = workers[workers["group"] == r.group]
        ax.scatter(w["tokens_written"], w["t_norm_s"], s=6, alpha=0.5)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.set_title(f"(b) {_name(r.group)}\nKendall τ = {r.kendall_tau_tnorm_vs_writes:.2f} (paper {tlo:g}–{thi:g})",
                     fontsize=9)
        ax.set_xlabel("KV tokens written (log)")
        if j == 0:
            ax.set_ylabel("T_norm (reference s, log)")
    fig.suptitle("Fig. 6 — worker heterogeneity: (a) lifetime spread, (b) lifetime vs KV tokens written")
    tidy_log_axes(fig)
    fig.tight_layout()
    return fig


#: Fig. 7(b)'s selection shares: curve column -> (words, colour), and the column of a random selection's share.
SELECTION_SHARES = {"share_k_shortest": ("of k shortest", "tab:blue"),
                    "share_2k_shortest": ("of 2k shortest", "tab:purple"),
                    "avoided_k_longest": ("avoids k longest", "tab:red")}
RANDOM_SHARES = {"share_k_shortest": "random_k_shortest", "share_2k_shortest": "random_2k_shortest",
                 "avoided_k_longest": "random_avoided_k_longest"}


def spawn_prediction_figure(oof: pd.DataFrame, curves: pd.DataFrame, tau: Mapping[str, float]) -> plt.Figure:
    """Fig. 7: (a) worker T_norm CDFs by the ridge ranker's predicted quartile, out of fold (``oof``:
    :attr:`~lachesis.analysis.ranker.RankerComparison.oof`; ``tau``: each model's out-of-fold Kendall τ), beside the
    paper's τ; (b) what the k shortest-predicted workers select, ridge and boosted trees against a random selection
    (``curves``: :func:`~lachesis.analysis.characterize.selection_curve` per model), the paper's k = n/10 points
    starred."""
    fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(11, 4.6))
    q = predicted_quartile(oof["ridge"].to_numpy())
    for k, col in zip(range(1, 5), ["tab:green", "tab:olive", "tab:orange", "tab:red"]):
        x, y = ecdf(oof["t_norm_s"].to_numpy()[q == k].clip(1e-2))
        ax_a.step(x, y, where="post", color=col, label=f"Q{k}")
    ax_a.set_xscale("log")
    ax_a.set_xlabel("worker T_norm (reference s, log)")
    ax_a.set_ylabel("CDF of workers")
    ax_a.set_title(f"(a) by predicted quartile (ridge, out of fold), Kendall τ = {tau['ridge']:.2f} "
                   f"(paper {paper.RANKER_KENDALL_TAU:g})", fontsize=10)
    ax_a.legend(fontsize=8, title="predicted quartile", title_fontsize=8)
    ax_a.grid(alpha=0.3)
    for key, (lab, col) in SELECTION_SHARES.items():
        for m, ls in (("ridge", "-"), ("boosted", ":")):
            c = curves[curves["model"] == m]
            ax_b.plot(c["k_fraction"], c[key], ls, color=col, marker="o" if m == "ridge" else None, ms=3,
                      label=f"{lab} ({m})")
        c = curves[curves["model"] == "ridge"]
        ax_b.plot(c["k_fraction"], c[RANDOM_SHARES[key]], "--", color=col, alpha=0.4, lw=1, label=f"{lab} (random)")
    ax_b.plot([0.1], [paper.FIG7B_AT_K10["share_of_k_shortest"]], "*", color=SELECTION_SHARES["share_k_shortest"][1],
              ms=12, mec="k", label="paper, k = n/10: of k shortest")
    ax_b.plot([0.1], [1.0 - paper.FIG7B_AT_K10["share_of_k_longest"]], "*",
              color=SELECTION_SHARES["avoided_k_longest"][1], ms=12, mec="k", label="paper, k = n/10: avoids k longest")
    ax_b.set_xlabel("k / workers (fraction selected)")
    ax_b.set_ylabel("share of the selection")
    ax_b.set_ylim(0, 1.05)
    ax_b.set_title("(b) k shortest-predicted vs random (dashed)", fontsize=10)
    ax_b.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)
    ax_b.grid(alpha=0.3)
    fig.suptitle("Fig. 7 — spawn-time prediction: (a) worker lifetimes by predicted quartile, (b) what the k "
                 "shortest-predicted workers select")
    tidy_log_axes(fig)
    fig.tight_layout()
    return fig
