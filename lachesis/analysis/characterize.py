"""Per-figure characterization statistics of §3.3–§3.5 (Figs. 4–7, Table 3), as functions.

The notebooks call these and only plot and save; the primitive statistics come from
:mod:`lachesis.analysis.stats`.  Every function takes the segments table of :func:`lachesis.analysis.segments.recover`
and a ``group`` column naming the benchmark or domain of a segment.  Definitions and assumptions
(Fig. 7(b)'s selection shares, the lead waiting share, Fig. 4(b)'s turn writes): docs/design.md §6.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from lachesis import paper
from lachesis.analysis import stats
from lachesis.analysis.segments import prepare, recover
from lachesis.kv import STRUCTURAL_CLASSES, TEMPORAL_CLASSES
from lachesis.paper import TABLE3  # benchmark display order only
from lachesis.plotting import compare_table
from lachesis.traces.trace import Trace

#: Fig. 7(b) x axis: fraction of the workers selected (k / n).
K_FRACTIONS = tuple(np.round(np.arange(0.05, 0.501, 0.05), 2))


# ------------------------------------------------------------------------------------------------
# Shared
# ------------------------------------------------------------------------------------------------


def label_groups(segments: pd.DataFrame, requests: pd.DataFrame | None = None,
                 by: str = "benchmark") -> pd.DataFrame:
    """Add a ``group`` column: the segment's benchmark, refined by its domain when a benchmark
    spans several domains that its name does not already spell (e.g. a ``tau3`` benchmark with
    four domains -> ``tau3_airline`` ...)."""
    seg = segments.copy()
    if by in seg.columns:
        g = seg[by].astype(str)
    elif requests is not None and by in requests.columns:
        g = seg["agent_id"].map(requests.drop_duplicates("agent_id").set_index("agent_id")[by]).astype(str)
    else:
        g = pd.Series("all", index=seg.index)
    if requests is not None and "domain" in requests.columns:
        dom = requests.drop_duplicates("agent_id").set_index("agent_id")["domain"]
        d = seg["agent_id"].map(dom).fillna("").astype(str)
        n_dom = d.groupby(g).transform("nunique")  # refine only benchmarks that span several domains
        refine = (n_dom > 1) & (d != "") & ~pd.Series([dd in gg for gg, dd in zip(g, d)], index=seg.index)
        g = g.where(~refine, g + "_" + d)
    seg["group"] = g.to_numpy()
    return seg


def load_segments(workloads: Sequence[str], trace: str = "", scale: float = 0.1,
                  seed: int = 0) -> tuple[Trace, pd.DataFrame]:
    """A trace and its recovered, group-labelled segment table (see :func:`load_recovered`)."""
    tr, seg, _ = load_recovered(workloads, trace, scale, seed)
    return tr, seg


def load_recovered(workloads: Sequence[str], trace: str = "", scale: float = 0.1,
                   seed: int = 0) -> tuple[Trace, pd.DataFrame, pd.DataFrame]:
    """A trace, its recovered group-labelled segment table and its reference-clock schedule.

    ``trace`` empty: the embedded synthetic corpus, ``workloads`` generated at ``scale``/``seed``
    and concatenated; else the trace at that path (``workloads`` ignored).  Segments are recovered
    by :func:`lachesis.analysis.segments.prepare` (the trace's reference clock) with the same seed.
    """
    p = prepare(Path(trace) if trace else list(workloads), scale, seed)
    return p.trace, label_groups(p.segments.segments, p.trace.requests), p.segments.schedule


def _group_order(groups: Iterable[str]) -> list[str]:
    """Groups in the paper's benchmark order (Table 3), unknown ones after, alphabetically."""
    known = list(TABLE3)
    return sorted(set(map(str, groups)), key=lambda g: (known.index(g) if g in known else len(known), g))


def _require(seg: pd.DataFrame, classes: Sequence[str], what: str) -> None:
    """Fail clearly when a trace has none of the segment classes a figure needs."""
    have = set(seg["seg_class"].unique())
    if not have.intersection(classes):
        raise ValueError(f"{what} needs segments of class {list(classes)}; this trace has only {sorted(have)}")


def _by_group(seg: pd.DataFrame) -> Iterable[tuple[str, pd.DataFrame]]:
    parts = {str(k): v for k, v in seg.groupby("group", sort=False)}
    return ((g, parts[g]) for g in _group_order(parts))


def _t(seg: pd.DataFrame, cls: str) -> np.ndarray:
    return seg.loc[seg["seg_class"] == cls, "t_norm_s"].to_numpy(dtype=float)


# ------------------------------------------------------------------------------------------------
# Fig. 4 — temporal axis
# ------------------------------------------------------------------------------------------------


def turn_writes(seg: pd.DataFrame) -> pd.DataFrame:
    """KV tokens each turn writes into each temporal class (one row per group/session/agent/turn/class).

    A turn's reasoning-stripped segment is the one its turn end materializes (§4: "At the boundary, the
    harness discards that segment and materializes the reasoning-stripped context segment that carries
    into the next turn"; Takeaway 1: the stripped segment "replaces" the turn's laden one).  The next
    turn's first request writes it, so a stripped segment recovered at a write turn belongs to the agent's
    turn before it; the one written in an agent's first turn is the session's opening context (first user
    message, any unshared prompt), no turn's stripped segment, and the last turn, which has no turn end,
    has none (docs/design.md §6)."""
    s = seg[seg["seg_class"].isin(TEMPORAL_CLASSES)]
    turns = s[["agent_id", "write_turn"]].drop_duplicates().sort_values(["agent_id", "write_turn"])
    turns["before"] = turns.groupby("agent_id")["write_turn"].shift(1)
    s = s[["group", "session_id", "agent_id", "write_turn", "seg_class", "tokens_written"]].merge(
        turns, on=["agent_id", "write_turn"], how="left")
    s["write_turn"] = s["write_turn"].where(s["seg_class"] != "reasoning_stripped", s["before"])
    s = s.dropna(subset=["write_turn"]).astype({"write_turn": "int64"})
    return (s.groupby(["group", "session_id", "agent_id", "write_turn", "seg_class"], sort=True)["tokens_written"]
            .sum().reset_index())


def temporal_table(seg: pd.DataFrame) -> pd.DataFrame:
    """Fig. 4 per group: median T_norm of both classes, their ratio, separability, laden share of
    turn writes, and the median/mean tokens a turn writes into each class.

    Diagnostic beside the separability: the same statistic without the reasoning-stripped segment carried
    into an agent's last turn (materialized at the turn end before it, it closes at the session end, so it
    lives as long as the last turn's laden segment: a tie), and the share of such segments."""
    _require(seg, TEMPORAL_CLASSES, "Fig. 4 (single-agent)")
    tw = turn_writes(seg)
    rows = []
    for g, s in _by_group(seg[seg["seg_class"].isin(TEMPORAL_CLASSES)]):
        laden, stripped = _t(s, "reasoning_laden"), _t(s, "reasoning_stripped")
        last = s.groupby("agent_id")["write_turn"].transform("max")
        not_last = s.loc[(s["seg_class"] == "reasoning_stripped") & (s["write_turn"] < last), "t_norm_s"]
        w = tw[tw["group"] == g]
        wl = w.loc[w["seg_class"] == "reasoning_laden", "tokens_written"]
        ws = w.loc[w["seg_class"] == "reasoning_stripped", "tokens_written"]
        rows.append(dict(
            group=g, n_sessions=s["session_id"].nunique(), n_laden=len(laden), n_stripped=len(stripped),
            n_stripped_not_last=len(not_last), n_turns=len(w.drop_duplicates(["session_id", "agent_id", "write_turn"])),
            n_turns_laden=len(wl), n_turns_stripped=len(ws),
            median_tnorm_laden_s=float(np.median(laden)) if len(laden) else np.nan,
            median_tnorm_stripped_s=float(np.median(stripped)) if len(stripped) else np.nan,
            median_ratio_stripped_over_laden=stats.median_ratio(stripped, laden),
            separability=stats.separability(stripped, laden),
            separability_excl_last_turn=stats.separability(not_last, laden) if len(not_last) else np.nan,
            stripped_share_last_turn=1.0 - len(not_last) / len(stripped) if len(stripped) else np.nan,
            laden_share_of_turn_writes=stats.laden_share(s),
            turns_per_session_mean=float((s.groupby("agent_id")["write_turn"].max() + 1).mean()),
            turn_tokens_laden_median=float(wl.median()), turn_tokens_laden_mean=float(wl.mean()),
            turn_tokens_stripped_median=float(ws.median()), turn_tokens_stripped_mean=float(ws.mean()),
        ))
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------------
# Fig. 5 — structural axis
# ------------------------------------------------------------------------------------------------


def lead_waiting_share(seg: pd.DataFrame) -> float:
    """Pooled share of lead-segment lifetime spent waiting on sub-agents (docs/design.md §6)."""
    lead = seg[seg["seg_class"] == "lead"]
    tot = float(lead["t_norm_s"].sum())
    return float(lead["wait_s"].fillna(0).sum()) / tot if tot > 0 else np.nan


def structural_table(seg: pd.DataFrame) -> pd.DataFrame:
    """Fig. 5 per group: median T_norm per role, lead/worker and lead/reviewer median ratios and
    separabilities, the lead's waiting share, and the lead–worker ρR/W CDF overlap."""
    _require(seg, ("lead", "worker"), "Fig. 5 (multi-agent)")
    rows = []
    for g, s in _by_group(seg[seg["seg_class"].isin(STRUCTURAL_CLASSES)]):
        lead, worker, rev = _t(s, "lead"), _t(s, "worker"), _t(s, "reviewer")
        rl = s.loc[s["seg_class"] == "lead", "rho_rw"].to_numpy(dtype=float)
        rw = s.loc[s["seg_class"] == "worker", "rho_rw"].to_numpy(dtype=float)
        has_rev = len(rev) > 0
        rows.append(dict(
            group=g, n_sessions=s["session_id"].nunique(), n_lead=len(lead), n_worker=len(worker), n_reviewer=len(rev),
            median_tnorm_lead_s=_median(lead), median_tnorm_worker_s=_median(worker),
            median_tnorm_reviewer_s=_median(rev),
            lead_over_worker=stats.median_ratio(lead, worker),
            lead_over_reviewer=stats.median_ratio(lead, rev) if has_rev else np.nan,
            separability_lead_worker=stats.separability(lead, worker),
            separability_lead_reviewer=stats.separability(lead, rev) if has_rev else np.nan,
            lead_waiting_share=lead_waiting_share(s),
            rho_overlap_lead_worker=stats.cdf_overlap(rl[np.isfinite(rl)], rw[np.isfinite(rw)]),
        ))
    return pd.DataFrame(rows)


def _median(x: np.ndarray) -> float:
    return float(np.median(x)) if len(x) else np.nan


# ------------------------------------------------------------------------------------------------
# Fig. 6 — worker heterogeneity
# ------------------------------------------------------------------------------------------------


def worker_heterogeneity_table(workers: pd.DataFrame, schedule: pd.DataFrame | None = None) -> pd.DataFrame:
    """Fig. 6 per group, from one row per worker (``t_norm_s``, ``tokens_written``, ``group``, ``session_id``):
    p90/p10 of lifetime and of write volume, and their Kendall τ.  With the reference-clock ``schedule``,
    also the median share of a worker's T_norm per Eq. 1 term (:func:`lifetime_composition`)."""
    table = _heterogeneity(workers)
    if schedule is None:
        return table
    comp = lifetime_composition(schedule, workers)
    shares = comp.groupby("group")[["decode_share", "obs_share", "tools_share"]].median().add_suffix("_median")
    return table.merge(shares, left_on="group", right_index=True, how="left")


def _heterogeneity(workers: pd.DataFrame) -> pd.DataFrame:
    rows = []
    parts = {str(k): v for k, v in workers.groupby("group", sort=False)}
    for g, w in ((g, parts[g]) for g in _group_order(parts)):
        t, v = w["t_norm_s"].to_numpy(float), w["tokens_written"].to_numpy(float)
        rows.append(dict(group=str(g), n_workers=len(w), n_sessions=w["session_id"].nunique(),
                         tnorm_p10_s=float(np.percentile(t, 10)), tnorm_p90_s=float(np.percentile(t, 90)),
                         tnorm_p90_over_p10=stats.p90_over_p10(t),
                         writes_p90_over_p10=stats.p90_over_p10(v),
                         kendall_tau_tnorm_vs_writes=stats.kendall_tau(t, v)))
    return pd.DataFrame(rows)


def lifetime_composition(schedule: pd.DataFrame, workers: pd.DataFrame) -> pd.DataFrame:
    """Per worker, the share of its T_norm (Eq. 1) spent decoding, in observation prefills and in
    tool calls, from the reference-clock schedule (one row per worker, with ``group``).

    Eq. 1 splits a worker's lifetime into G_dec·TPOT_ref + N_obs·TTFT_ref + Λ_tool (+ Λ_user, which a
    worker never waits on); tool latency adds lifetime but no written tokens (§3.5), so its share
    says how loosely lifetime and write volume can be tied."""
    sc = schedule[schedule["agent_id"].isin(workers["agent_id"])]
    parts = pd.DataFrame({"decode_s": sc["t_decode_end_s"] - sc["t_start_s"], "obs_s": sc["t_obs_s"],
                          "tools_s": sc["t_tools_s"], "agent_id": sc["agent_id"]}).groupby("agent_id").sum()
    w = workers.set_index("agent_id")[["group", "t_norm_s"]].join(parts)
    t = w["t_norm_s"].where(w["t_norm_s"] > 0)
    out = pd.DataFrame({"group": w["group"], "decode_share": w["decode_s"] / t, "obs_share": w["obs_s"] / t,
                        "tools_share": w["tools_s"] / t})
    return out.reset_index()


# ------------------------------------------------------------------------------------------------
# Fig. 7 — spawn-time prediction
# ------------------------------------------------------------------------------------------------


def _order(x: np.ndarray) -> np.ndarray:
    """0-based rank of each element (stable: ties keep row order)."""
    r = np.empty(len(x), dtype=np.int64)
    r[np.argsort(np.asarray(x, float), kind="stable")] = np.arange(len(x))
    return r


def predicted_quartile(pred: np.ndarray) -> np.ndarray:
    """Quartile of each worker's predicted rank: 1 (shortest-predicted) … 4 (longest)."""
    n = len(pred)
    return (_order(pred) * 4 // max(n, 1) + 1).astype(np.int64)


def quartile_table(oof: pd.DataFrame, pred_col: str = "pred") -> pd.DataFrame:
    """Fig. 7(a): per predicted quartile, count and p10/median/p90 of true T_norm."""
    q = predicted_quartile(oof[pred_col].to_numpy())
    t = oof["t_norm_s"].to_numpy(float)
    rows = []
    for k in range(1, 5):
        x = t[q == k]
        rows.append(dict(quartile=f"Q{k}", n=len(x), tnorm_p10_s=float(np.percentile(x, 10)) if len(x) else np.nan,
                         tnorm_median_s=_median(x),
                         tnorm_p90_s=float(np.percentile(x, 90)) if len(x) else np.nan))
    return pd.DataFrame(rows)


def selection_shares(pred: np.ndarray, truth: np.ndarray, k: int) -> dict[str, float]:
    """Fig. 7(b) at one k: shares of the k shortest-predicted workers, and the random expectation."""
    pred, truth = np.asarray(pred, float), np.asarray(truth, float)
    n = len(truth)
    if not 1 <= k <= n:
        raise ValueError(f"selection_shares: k must be in 1..{n}, got {k}")
    rp, rt = _order(pred), _order(truth)
    sel = rp < k
    s_k = float(np.sum(sel & (rt < k))) / k
    s_2k = float(np.sum(sel & (rt < 2 * k))) / k
    s_long = float(np.sum(sel & (rt >= n - k))) / k
    return dict(k=k, n=n, k_fraction=k / n,
                share_k_shortest=s_k, share_2k_shortest=s_2k, share_k_longest=s_long,
                avoided_k_longest=1.0 - s_long,
                random_k_shortest=k / n, random_2k_shortest=min(2 * k, n) / n,
                random_k_longest=k / n, random_avoided_k_longest=1.0 - k / n)


def selection_curve(pred: np.ndarray, truth: np.ndarray,
                    fractions: Iterable[float] = K_FRACTIONS) -> pd.DataFrame:
    """Fig. 7(b) over k: :func:`selection_shares` at k = round(fraction × n) (at least 1)."""
    n = len(truth)
    rows = [selection_shares(pred, truth, max(1, int(round(f * n)))) | {"target_fraction": float(f)}
            for f in fractions]
    return pd.DataFrame(rows)


def prediction_summary(oof: pd.DataFrame, pred_col: str = "pred") -> dict[str, float]:
    """Fig. 7 headline numbers: pooled Kendall τ and the k = n/10 shares."""
    p, t = oof[pred_col].to_numpy(float), oof["t_norm_s"].to_numpy(float)
    at10 = selection_shares(p, t, max(1, int(round(0.1 * len(t)))))
    return dict(kendall_tau=stats.kendall_tau(p, t), n_workers=len(t), k_at_10pct=at10["k"],
                n_sessions=oof["session_id"].nunique() if "session_id" in oof else len(t),
                share_k_shortest_at_10pct=at10["share_k_shortest"],
                share_k_longest_at_10pct=at10["share_k_longest"],
                share_2k_shortest_at_10pct=at10["share_2k_shortest"])


def tau_by_group(oof: pd.DataFrame, pred_cols: Iterable[str] = ("pred",), by: str = "benchmark") -> pd.DataFrame:
    """Kendall τ of out-of-fold predictions within each benchmark (one predictor, scored per benchmark)."""
    parts = {str(k): v for k, v in oof.groupby(by, sort=False)}
    rows = []
    for g in _group_order(parts):
        w = parts[g]
        rows.append({by: g, "n_workers": len(w)} | {f"tau_{c}": stats.kendall_tau(w[c], w["t_norm_s"])
                                                     for c in pred_cols})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------------
# Ours beside the paper's, with the sample each statistic was computed on
# ------------------------------------------------------------------------------------------------

#: One comparison row: statistic, ours, the paper's, n (units it was computed on), unit, sessions.
Row = tuple[str, object, object, int, str, int]


def comparison(rows: Sequence[Row], note: str = "") -> pd.DataFrame:
    """:func:`lachesis.plotting.compare_table` plus ``n``, ``unit``, ``sessions`` and ``small_sample``
    (:func:`lachesis.analysis.stats.small_sample`: why the row's sample is too small to judge, else empty).
    For a two-sample statistic ``n`` is the smaller sample."""
    cmp = compare_table([r[:3] for r in rows], note=note)
    at = cmp.columns.get_loc("in_paper_range") + 1
    for i, (col, vals) in enumerate((("n", [int(r[3]) for r in rows]), ("unit", [r[4] for r in rows]),
                                     ("sessions", [int(r[5]) for r in rows]),
                                     ("small_sample", [stats.small_sample(int(r[3]), int(r[5])) for r in rows]))):
        cmp.insert(at + i, col, pd.Series(vals, dtype=object if col in ("unit", "small_sample") else "int64"))
    return cmp


def temporal_comparison(table: pd.DataFrame) -> pd.DataFrame:
    """Fig. 4 statistics of :func:`temporal_table` beside §3.3's, with their samples."""
    rows: list[Row] = []
    for r in table.itertuples():
        pair, ns = min(r.n_laden, r.n_stripped), r.n_sessions
        rows += [(f"{r.group}: stripped/laden median T_norm", r.median_ratio_stripped_over_laden,
                  paper.STRIPPED_OVER_LADEN_MEDIAN_TNORM, pair, "segments", ns),
                 (f"{r.group}: separability", r.separability, paper.TEMPORAL_SEPARABILITY, pair, "segments", ns),
                 (f"{r.group}: (diagnostic) separability w/o the stripped segment carried into the last turn",
                  r.separability_excl_last_turn,
                  paper.TEMPORAL_SEPARABILITY, min(r.n_laden, r.n_stripped_not_last), "segments", ns),
                 (f"{r.group}: laden share of turn writes", r.laden_share_of_turn_writes,
                  paper.LADEN_SHARE_OF_TURN_WRITES, r.n_turns, "turns", ns)]
        ref = paper.FIG4B_TURN_TOKENS.get(r.group)
        if ref:
            for cls, short, n in (("reasoning_laden", "laden", r.n_turns_laden),
                                  ("reasoning_stripped", "stripped", r.n_turns_stripped)):
                rows.append((f"{r.group}: {short} tokens/turn median (corpus input)",
                             getattr(r, f"turn_tokens_{short}_median"),
                             ref[cls][0], n, "turns", ns))
            for cls, short, n in (("reasoning_laden", "laden", r.n_turns_laden),
                                  ("reasoning_stripped", "stripped", r.n_turns_stripped)):
                rows.append((f"{r.group}: {short} tokens/turn mean (corpus input)",
                             getattr(r, f"turn_tokens_{short}_mean"), ref[cls][1], n, "turns", ns))
    return comparison(rows)


def structural_comparison(table: pd.DataFrame) -> pd.DataFrame:
    """Fig. 5 statistics of :func:`structural_table` beside §3.4's, with their samples."""
    rows: list[Row] = []
    for r in table.itertuples():
        lw, lr, ns = min(r.n_lead, r.n_worker), min(r.n_lead, r.n_reviewer), r.n_sessions
        rows += [(f"{r.group}: lead/worker median T_norm", r.lead_over_worker, paper.LEAD_OVER_WORKER_MEDIAN_TNORM,
                  lw, "segments", ns),
                 (f"{r.group}: lead/reviewer median T_norm", r.lead_over_reviewer,
                  paper.LEAD_OVER_REVIEWER_MEDIAN_TNORM, lr, "segments", ns),
                 (f"{r.group}: separability lead vs worker", r.separability_lead_worker,
                  paper.STRUCTURAL_SEPARABILITY, lw, "segments", ns),
                 (f"{r.group}: separability lead vs reviewer", r.separability_lead_reviewer,
                  paper.STRUCTURAL_SEPARABILITY, lr, "segments", ns),
                 (f"{r.group}: lead waiting share", r.lead_waiting_share, paper.LEAD_WAITING_SHARE, r.n_lead,
                  "segments", ns),
                 (f"{r.group}: lead–worker ρR/W overlap (1−KS)", r.rho_overlap_lead_worker,
                  paper.LEAD_WORKER_RHO_OVERLAP, lw, "segments", ns)]
    return comparison(rows)


def heterogeneity_comparison(table: pd.DataFrame) -> pd.DataFrame:
    """Fig. 6 statistics of :func:`worker_heterogeneity_table` beside §3.5's, with their samples."""
    rows: list[Row] = []
    for r in table.itertuples():
        rows += [(f"{r.group}: worker T_norm p90/p10", r.tnorm_p90_over_p10, paper.WORKER_TNORM_P90_OVER_P10,
                  r.n_workers, "workers", r.n_sessions),
                 (f"{r.group}: worker writes p90/p10", r.writes_p90_over_p10, paper.WORKER_WRITES_P90_OVER_P10,
                  r.n_workers, "workers", r.n_sessions),
                 (f"{r.group}: Kendall τ (T_norm, writes)", r.kendall_tau_tnorm_vs_writes,
                  paper.WORKER_TNORM_VS_TOKENS_KENDALL, r.n_workers, "workers", r.n_sessions)]
    return comparison(rows)


def prediction_comparison(summary: pd.DataFrame) -> pd.DataFrame:
    """Fig. 7 headline numbers (one :func:`prediction_summary` row per model, indexed by model name)
    beside §3.5's; the paper reports the ridge ranker only.  The k = n/10 shares are over k workers."""
    rows: list[Row] = []
    for m, s in summary.iterrows():
        ref = (lambda v: v) if m == "ridge" else (lambda v: "— (not in paper)")
        n, k, ns = int(s["n_workers"]), int(s["k_at_10pct"]), int(s["n_sessions"])
        rows += [(f"{m}: Kendall τ (out of fold)", s["kendall_tau"], ref(paper.RANKER_KENDALL_TAU), n, "workers", ns),
                 (f"{m}: k=10% share of k shortest", s["share_k_shortest_at_10pct"],
                  ref(paper.FIG7B_AT_K10["share_of_k_shortest"]), k, "workers (k)", ns),
                 (f"{m}: k=10% share of k longest", s["share_k_longest_at_10pct"],
                  ref(paper.FIG7B_AT_K10["share_of_k_longest"]), k, "workers (k)", ns)]
    return comparison(rows)


def table3_comparison(tab: pd.DataFrame, scale: float) -> pd.DataFrame:
    """Table 3 counts of :func:`lachesis.traces.corpus.table3` beside scale × the paper's, each on the
    workload's sessions."""
    rows: list[Row] = []
    for _, r in tab.iterrows():
        for k, lab in (("requests", "requests"), ("tokens_processed", "tokens processed"),
                       ("tokens_written", "tokens written")):
            if not np.isnan(r[f"{k}_paper_x_scale"]):
                rows.append((f"{r['label']}: {lab}", int(r[f"{k}_ours"]), float(r[f"{k}_paper_x_scale"]),
                             int(r["sessions_ours"]), "sessions", int(r["sessions_ours"])))
    return comparison(rows, note=f"paper value × scale {scale:g}")


def table3_display(tab: pd.DataFrame, scale: float) -> pd.DataFrame:
    """Table 3 as printed beside the paper's: per workload "ours / scale × paper (relative error)" for
    sessions, requests, tokens processed and tokens written (``tab``: :func:`lachesis.traces.corpus.table3`)."""
    def show(row: pd.Series, key: str) -> str:
        ours, ref, err = row[f"{key}_ours"], row[f"{key}_paper_x_scale"], row[f"{key}_rel_err"]
        if np.isnan(ref):
            return f"{ours:,.0f} (—)"
        ref_s = f"{ref:,.0f}" if ref >= 100 else f"{ref:.1f}"
        return f"{ours:,.0f} / {ref_s} ({err:+.1%})"

    keys = ("sessions", "requests", "tokens_processed", "tokens_written")
    md = pd.DataFrame({"regime": tab["regime"], "workload": tab["label"]}
                      | {k: [show(r, k) for _, r in tab.iterrows()] for k in keys})
    md.columns = ["regime", "workload", f"sessions (ours / {scale:g}×paper)", "requests", "tokens processed",
                  "tokens written"]
    return md


def table3_summary(tab: pd.DataFrame) -> dict[str, object]:
    """How close :func:`lachesis.traces.corpus.table3` comes: sessions, workloads whose session count is scale ×
    the paper's exactly, and the largest relative error over requests and tokens (and where)."""
    errs = tab[[c for c in tab.columns if c.endswith("_rel_err") and not c.startswith("sessions")]].abs()
    return dict(sessions=int(tab["sessions_ours"].sum()), workloads=len(tab),
                exact_sessions=int((tab["sessions_ours"] == tab["sessions_paper_x_scale"]).sum()),
                worst_rel_err=float(errs.max().max()), worst_at=str(tab.loc[errs.max(axis=1).idxmax(), "label"]))


def fig4b_check(traces: Mapping[str, Trace], seed: int = 0) -> pd.DataFrame:
    """Fig. 4(b)'s per-turn medians and means are inputs of the corpus: the KV tokens a turn writes into each
    temporal class (:func:`turn_writes`), from the segments recovered out of each single-agent trace, beside
    the paper's."""
    rows = []
    for w, tr in traces.items():
        tw = turn_writes(recover(tr, seed=seed).segments.assign(group=w))
        for cls in TEMPORAL_CLASSES:
            x = tw.loc[tw["seg_class"] == cls, "tokens_written"]
            for stat, ours, ref in zip(("median", "mean"), (x.median(), x.mean()), paper.FIG4B_TURN_TOKENS[w][cls]):
                rows.append((f"{w}: {stat} {cls} tokens per turn", round(float(ours)), float(ref)))
    return compare_table(rows, note="Fig. 4(b) (an input of the corpus)")


def outside_paper_range(cmp: pd.DataFrame) -> str:
    """A few lines naming the statistics outside (or partly outside) the paper's range, each with its
    sample, and how many rows rest on a small sample."""
    out = cmp[cmp["in_paper_range"].isin(["no", "partly"])]
    small = int((cmp["small_sample"] != "").sum())
    head = (f"{len(out)} of {len(cmp)} statistics fall outside the paper's range; {small} of {len(cmp)} rest on "
            f"fewer than {stats.MIN_UNITS} units or sessions (column small_sample):")
    if not len(out):
        return head + "\n(none outside)"
    return head + "\n" + out[["statistic", "ours", "paper", "n", "sessions", "small_sample"]].to_string(index=False)
