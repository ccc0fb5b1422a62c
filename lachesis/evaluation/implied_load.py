"""The operating point the paper's own numbers imply (§5.2–§5.5), a check and never an input.

§5.2's metric gives HBF's write rate per GPU from a stated lifetime (stacks × 512 GB × 100,000 P/E ÷ (1.02 ×
rate), :func:`lachesis.node.endurance.hbf_lifetime_years`); an HBM share of the write bytes gives the total KV
write rate; our corpus's KV written per session turns that into sessions finished per second, and Little's law,
with our sessions' span, into sessions per GPU.  Which cell a stated endpoint belongs to is not always written:
each such reading is a named assumption (:data:`ASSUMPTIONS`) carried by the row that uses it.  Beside it, our
own load and live short-lived KV, and that KV per session by segment class (:func:`live_kv_by_class`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from lachesis import paper
from lachesis.config import MODELS, memory_config
from lachesis.evaluation.grid import CELL, LOAD_POLICY, MODEL_NAMES
from lachesis.kv import SEG_CLASSES, SHORT_LIVED_CLASSES
from lachesis.node.endurance import hbf_lifetime_years
from lachesis.node.plan import Plan

#: Every reading the table makes where the text leaves it open, by key.
ASSUMPTIONS: dict[str, str] = {
    "A1": "HBM-first's 4.8 y, the top of §5.3's 1/7–4/4 range, is at 1/7 and the tight SLO: HBM-first falls with each "
          "slot at the tight SLO and a looser SLO admits more sessions (§5.3).",
    "A2": "Lachesis's 9.3 y and the tight gain's 2.95× are both at 4/4 and the tight SLO: Lachesis rises with each "
          "slot at the tight SLO (§5.3), its gain with it; HBM-first there is 9.3 ÷ 2.95.",
    "A3": "The tight gain's 1.50× is at 1/7, where HBM-first is A1's 4.8 y: Lachesis there is 4.8 × 1.50.",
    "A4": "HBM-first's 1.9 y, the bottom of §5.3's range, is at 4/4 and the loose SLO: the fewest flash stacks and the "
          "most sessions.",
    "A5": "Fig. 9's off-scale 8/8* bars at the tight SLO read as Lachesis 43.6 y (Maverick), 54.3 y (Qwen3) "
          "(lachesis.paper.DAISY_YEARS_TIGHT); HBM-first there is each ÷ 10.06–10.09 (§5.3).",
    "A6": "BFCLv4's HBM-first at 4/4 is §5.5's 2.1 y floor: HBM-first outlasts the warranty on none of BFCLv4's "
          "configurations, and 4/4 has the fewest flash stacks.",
    "A7": "τ³-bench's HBM-first at 1/7 is §5.5's 6.4 y top: only τ³-bench outlasts the warranty under HBM-first, and "
          "1/7 has the most flash stacks.",
    "A8": "The text does not say which model an endpoint of a range belongs to: the row is set against each of ours.",
    "A9": "The HBM share is Fig. 10's (Llama-4-Maverick, loose): 1–7% under HBM-first, 19–51% under Lachesis, carried "
          "to the other model, the tight SLO and the single-agent traces; the implied load spans both ends.",
    "A10": "A session's KV written is its requests' written tokens in the replay plan × the model's KV bytes per "
           "token: the same sessions as ours (the corpus at this scale and the grid's seeds).",
    "A11": "Little's law: sessions per GPU = sessions finished per second × a session's mean span.  The paper does not "
           "state its span; ours is used, measured on our run (our sessions per GPU × KV per session ÷ our total KV "
           "write rate), so the implied load is ours × the paper's total write rate ÷ ours.  The span at a nominal "
           "50 ms TPOT (the replay plan's unit of time) is shown beside it, with our own load read the same way.",
}


@dataclass(frozen=True)
class PaperPoint:
    """One cell where the paper gives (or its numbers give) a lifetime: ``years`` a (lo, hi) range when it is
    derived through a range, ``hbm_share`` the (lo, hi) share of write bytes HBM takes there, ``models`` the models
    it is set against, ``assumptions`` the keys of :data:`ASSUMPTIONS` it rests on."""

    label: str
    workload: str
    slo: str
    memory: str
    policy: str
    years: tuple[float, float]
    hbm_share: tuple[float, float]
    models: tuple[str, ...]
    assumptions: tuple[str, ...]


def paper_points() -> list[PaperPoint]:
    """The cells the paper's numbers pin, from :mod:`lachesis.paper`."""
    hf_share, l_share = paper.HBM_WRITE_SHARE_HBM_FIRST, paper.HBM_WRITE_SHARE_LACHESIS
    hf_top, hf_floor = paper.MULTI_HBM_FIRST_YEARS_1_TO_4[1], paper.MULTI_HBM_FIRST_YEARS_1_TO_4[0]
    l_top = paper.MULTI_LACHESIS_YEARS_1_TO_4[1]
    g_lo, g_hi = paper.MULTI_GAIN_TIGHT
    both, spread = MODEL_NAMES, ("A8", "A9")
    pts = [
        PaperPoint("multi, tight, 1/7, HBM-first", "multi_agent", "tight", "1/7", "hbm_first", (hf_top, hf_top),
                   hf_share, both, ("A1", *spread)),
        PaperPoint("multi, tight, 1/7, Lachesis", "multi_agent", "tight", "1/7", "lachesis",
                   (hf_top * g_lo, hf_top * g_lo), l_share, both, ("A1", "A3", *spread)),
        PaperPoint("multi, tight, 4/4, HBM-first", "multi_agent", "tight", "4/4", "hbm_first",
                   (l_top / g_hi, l_top / g_hi), hf_share, both, ("A2", *spread)),
        PaperPoint("multi, tight, 4/4, Lachesis", "multi_agent", "tight", "4/4", "lachesis", (l_top, l_top), l_share,
                   both, ("A2", *spread)),
        PaperPoint("multi, loose, 4/4, HBM-first", "multi_agent", "loose", "4/4", "hbm_first", (hf_floor, hf_floor),
                   hf_share, both, ("A4", *spread)),
        PaperPoint("BFCLv4, 4/4, HBM-first", "bfcl", "tight", "4/4", "hbm_first",
                   (paper.SINGLE_HBM_FIRST_YEARS_1_TO_4[0],) * 2, hf_share, both, ("A6", *spread)),
        PaperPoint("τ³-bench, 1/7, HBM-first", "tau3", "tight", "1/7", "hbm_first",
                   (paper.SINGLE_HBM_FIRST_YEARS_1_TO_4[1],) * 2, hf_share, both, ("A7", *spread)),
    ]
    d_lo, d_hi = paper.DAISY_GAIN_TIGHT
    for model, years in paper.DAISY_YEARS_TIGHT["lachesis"].items():
        pts += [PaperPoint("multi, tight, 8/8*, HBM-first", "multi_agent", "tight", "8/8*", "hbm_first",
                           (years / d_hi, years / d_lo), hf_share, (model,), ("A5", "A9")),
                PaperPoint("multi, tight, 8/8*, Lachesis", "multi_agent", "tight", "8/8*", "lachesis", (years, years),
                           l_share, (model,), ("A5", "A9"))]
    return pts


def hbf_write_rate(memory: str, years: float) -> float:
    """The HBF KV write rate per GPU (B/s) at which §5.2's metric gives ``years`` on ``memory``."""
    return float(hbf_lifetime_years(memory_config(memory), 1.0)) / years


# ------------------------------------------------------------------------------------------------
# Our sessions: KV written and span
# ------------------------------------------------------------------------------------------------


def session_requests(plan: Plan, session: str) -> list[int]:
    """Every request of one session: its root agents' and, recursively, their sub-agents'."""
    out: list[int] = []
    stack = list(plan.roots[session])
    while stack:
        a = stack.pop()
        out += [int(q) for q in a.requests]
        stack += [c for kids in a.children.values() for c in kids]
    return out


def plan_sessions(plan: Plan) -> dict[str, float]:
    """A plan's sessions (A10, A11): mean KV tokens written per session and mean span at the nominal TPOT (s)."""
    cs = np.concatenate([[0], np.cumsum(plan.w_tok, dtype=float)])
    per_req = cs[plan.w_ptr[1:]] - cs[plan.w_ptr[:-1]]
    tokens = [float(per_req[session_requests(plan, s)].sum()) for s in plan.sessions]
    return dict(sessions=len(plan.sessions), kv_tokens_per_session=float(np.mean(tokens)),
                span_nominal_s=plan.mean_session_s)


def corpus_sessions(workloads: Sequence[str], scale: float, seeds: Sequence[int]) -> pd.DataFrame:
    """:func:`plan_sessions` of the corpus per workload and seed (the sessions the grid replayed at ``scale``)."""
    from lachesis.analysis import segments
    from lachesis.node.plan import build_plan

    recs = []
    for w in workloads:
        for s in seeds:
            prep = segments.prepare(w, scale, int(s))
            recs.append(dict(workload=w, seed=int(s), **plan_sessions(build_plan(prep.trace, prep.segments))))
    return pd.DataFrame(recs, columns=["workload", "seed", "sessions", "kv_tokens_per_session", "span_nominal_s"])


# ------------------------------------------------------------------------------------------------
# The implied load beside ours
# ------------------------------------------------------------------------------------------------


def _band(x: Sequence[float]) -> tuple[float, float]:
    return float(np.min(x)), float(np.max(x))


def implied_loads(rows: pd.DataFrame, sessions: pd.DataFrame, points: Sequence[PaperPoint] | None = None
                  ) -> pd.DataFrame:
    """One row per paper point and model the grids ran: the paper's lifetime, HBF and total write rates, and the
    sessions per GPU and live short-lived KV per GPU they imply (lo–hi over the point's ranges), beside ours
    (medians over seeds; ``slo_met``: at how many seeds ours meets the SLO).  ``rows``: grid rows; ``sessions``:
    :func:`corpus_sessions` for their workloads and seeds.  Rates in GB/s, KV in GB."""
    recs = []
    for pt in paper_points() if points is None else points:
        for model in pt.models:
            mine = rows[rows["workload"].eq(pt.workload) & rows["model"].eq(model) & rows["slo"].eq(pt.slo)
                        & rows["memory"].eq(pt.memory) & rows["policy"].eq(pt.policy)]
            mine = mine.merge(sessions, on=["workload", "seed"], how="inner")
            if not len(mine):
                continue
            bpt = float(MODELS[model].kv_bytes_per_token)
            k = mine["kv_tokens_per_session"].to_numpy(float) * bpt
            h = (mine["bytes_hbm"] / (mine["bytes_hbm"] + mine["bytes_hbf"])).to_numpy(float)
            total = mine["hbf_write_rate"].to_numpy(float) / (1 - h)
            n = mine["n_sessions"].to_numpy(float)
            span = n * k / total  # A11: our span, by Little's law on our run
            nominal = mine["span_nominal_s"].to_numpy(float)
            r_hbf = [hbf_write_rate(pt.memory, y) for y in pt.years]
            r_tot = [r / (1 - s) for r in r_hbf for s in pt.hbm_share]
            n_imp = np.array([[r * span_i / k_i for r in r_tot] for span_i, k_i in zip(span, k)])
            n_nom = np.array([[r * t / k_i for r in r_tot] for t, k_i in zip(nominal, k)])
            per_session = mine["live_short_kv_bytes"].to_numpy(float) / n
            lo, hi = np.median(n_imp.min(axis=1)), np.median(n_imp.max(axis=1))
            recs.append(dict(
                point=pt.label, workload=pt.workload, model=model, slo=pt.slo, memory=pt.memory, policy=pt.policy,
                assumptions=",".join(pt.assumptions), seeds=len(mine),
                slo_met=f"{int(mine['slo_met'].astype(bool).sum())} of {len(mine)}",
                paper_years_lo=pt.years[0], paper_years_hi=pt.years[1],
                paper_hbm_share_lo=pt.hbm_share[0], paper_hbm_share_hi=pt.hbm_share[1],
                paper_hbf_write_GBps_lo=min(r_hbf) / 1e9, paper_hbf_write_GBps_hi=max(r_hbf) / 1e9,
                ours_years=float(np.median(mine["lifetime_years"])), ours_hbm_share=float(np.median(h)),
                ours_hbf_write_GBps=float(np.median(mine["hbf_write_rate"])) / 1e9,
                kv_per_session_GB=float(np.median(k)) / 1e9, span_effective_s=float(np.median(span)),
                span_nominal_s=float(np.median(nominal)),
                ours_sessions_per_gpu=float(np.median(n)), implied_sessions_per_gpu_lo=float(lo),
                implied_sessions_per_gpu_hi=float(hi),
                implied_over_ours_lo=float(np.median(n_imp.min(axis=1) / n)),
                implied_over_ours_hi=float(np.median(n_imp.max(axis=1) / n)),
                implied_sessions_nominal_lo=float(np.median(n_nom.min(axis=1))),
                implied_sessions_nominal_hi=float(np.median(n_nom.max(axis=1))),
                ours_sessions_nominal=float(np.median(total * nominal / k)),
                live_short_per_session_GB=float(np.median(per_session)) / 1e9,
                ours_live_short_per_gpu_GB=float(np.median(mine["live_short_kv_bytes"])) / 1e9,
                implied_live_short_per_gpu_GB_lo=float(np.median(per_session * n_imp.min(axis=1))) / 1e9,
                implied_live_short_per_gpu_GB_hi=float(np.median(per_session * n_imp.max(axis=1))) / 1e9,
                ours_hbm_over_live_short=float(np.median(mine["hbm_over_live_short"])),
                implied_hbm_over_live_short_lo=float(np.median(mine["hbm_over_live_short"] * n / n_imp.max(axis=1))),
                implied_hbm_over_live_short_hi=float(np.median(mine["hbm_over_live_short"] * n / n_imp.min(axis=1))),
            ))
    return pd.DataFrame(recs)


def live_kv_by_class(rows: pd.DataFrame, policy: str = LOAD_POLICY) -> pd.DataFrame:
    """Our live KV per session by segment class (GB, medians over seeds of the ``live_kv_<class>_bytes`` ÷ sessions
    per GPU) and each short-lived class's share of the short-lived total, per cell, on ``policy``'s runs (the load
    policy's, as the load curve reads its operating point); ``slo_met``: at how many seeds that run meets the SLO."""
    classes = [c for c in SEG_CLASSES if f"live_kv_{c}_bytes" in rows]
    recs = []
    for key, d in rows[rows["policy"].eq(policy)].groupby(CELL, sort=False):
        have = [c for c in classes if d[f"live_kv_{c}_bytes"].notna().any()]
        if not have:
            continue
        per = {c: d[f"live_kv_{c}_bytes"].astype(float) / d["n_sessions"].astype(float) for c in have}
        short = sum((per[c] for c in have if c in SHORT_LIVED_CLASSES), pd.Series(0.0, index=d.index))
        rec = dict(zip(CELL, key), sessions_per_gpu=float(d["n_sessions"].median()),
                   slo_met=f"{int(d['slo_met'].astype(bool).sum())} of {len(d)}",
                   **{f"{c}_GB_per_session": float(per[c].median()) / 1e9 for c in have},
                   short_lived_GB_per_session=float(short.median()) / 1e9,
                   short_lived_GB_per_gpu=float(d["live_short_kv_bytes"].median()) / 1e9)
        for c in have:
            if c in SHORT_LIVED_CLASSES:
                rec[f"{c}_share_of_short"] = float((per[c] / short).median())
        recs.append(rec)
    return pd.DataFrame(recs)


def assumptions_table() -> pd.DataFrame:
    """:data:`ASSUMPTIONS` as a two-column table."""
    return pd.DataFrame([dict(assumption=k, reading=v) for k, v in ASSUMPTIONS.items()])
