"""The three characterization axes (§3.3–§3.5) measured on the real public traces, for
``notebooks/real_traces.ipynb``: each source through its adapter, its segments, and the statistics of
Figs. 4–6 beside the paper's with their sample sizes.  Groups, the tool-class assumption and where the
data is read from: docs/design.md §7 (the real-trace report).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lachesis import paper
from lachesis.analysis import characterize, ranker
from lachesis.analysis.segments import prepare
from lachesis.analysis.stats import kendall_tau
from lachesis.io import write_json
from lachesis.kv import TEMPORAL_CLASSES
from lachesis.plotting import compare_table
from lachesis.traces import datasets
from lachesis.traces.adapters import AdapterResult, read
from lachesis.traces.schema import SUBAGENT_ROLES

#: ASSUMPTION: a median, a percentile ratio or a rank correlation from fewer than 20 independent units
#: (sessions; workers for per-worker statistics; blocks) is too noisy to place inside or outside a
#: published range: below it, a comparison row is flagged and left out of the summary's verdict.
MIN_UNITS = 20

TRACE_SOURCES = ("tau2-xai-grok-blakeelias", "tau2-qwen3.5-justinchiu", "claude_code_subagents",
                 "claude_code_more", "who_and_when", "chatdev_warehouse")
TABLE_SOURCES = ("mooncake_fast25", "azure_llm_2023")
ALL_SOURCES = TRACE_SOURCES + TABLE_SOURCES


def sources(source: str) -> tuple[str, ...]:
    """``"all"`` or one name (or a comma-separated list) → dataset names."""
    if source in ("", "all"):
        return ALL_SOURCES
    names = tuple(s.strip() for s in source.split(",") if s.strip())
    bad = [n for n in names if n not in ALL_SOURCES]
    if bad:
        raise ValueError(f"unknown source(s) {bad}; choose from {ALL_SOURCES} or 'all'")
    return names


def segments_of(res: AdapterResult, seed: int = 0) -> tuple[pd.DataFrame, int, int]:
    """Group-labelled segments of one adapter's trace; plus the count of undeclared external prefixes."""
    if res.trace is None:
        raise ValueError(f"{res.dataset}: a table of statistics, not a trace: no segments")
    req = res.trace.requests
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reported below as numbers instead
        seg = prepare(res.trace, seed=seed).segments
    labels = req.drop(columns=["domain"]) if res.dataset == "chatdev_warehouse" and "domain" in req else req
    s = characterize.label_groups(seg.segments, labels)
    s["group"] = res.dataset + ":" + s["group"].astype(str)
    ext = seg.external
    return s, int((~ext["declared"]).sum()) if len(ext) else 0, int(ext.loc[~ext["declared"], "tokens"].sum()) \
        if len(ext) else 0


def workers_of(seg: pd.DataFrame) -> pd.DataFrame:
    """One row per worker: lifetime (first write → last read, reference clock) and tokens written."""
    w = seg[seg["seg_class"] == "worker"]
    g = w.groupby(["group", "session_id", "agent_id"], sort=True)
    out = g.agg(t0=("t_first_write_s", "min"), t1=("t_last_read_s", "max"),
                tokens_written=("tokens_written", "sum")).reset_index()
    out["t_norm_s"] = out["t1"] - out["t0"]
    return out


def spawn_ranking(res: AdapterResult, seg: pd.DataFrame, seed: int = 0) -> dict[str, Any]:
    """How well this source's spawn records rank its worker lifetimes (§3.5): the paper's ridge ranker
    fitted on this source alone, 5-fold CV grouped by session, out-of-fold Kendall τ and the k = n/10
    selection shares.  Sources with fewer than five sessions with workers get the reason instead."""
    row: dict[str, Any] = dict(source=res.dataset)
    if res.trace is None or not len(res.trace.spawns) or not (seg["seg_class"] == "worker").any():
        return row | dict(note="no worker spawn records")
    try:
        oof = ranker.cross_validate(res.trace, seg, n_splits=5, seed=seed)
    except ValueError as e:  # fewer than five sessions with workers
        return row | dict(note=str(e))
    p, t = oof["pred"].to_numpy(float), oof["t_norm_s"].to_numpy(float)
    k = max(1, int(round(len(t) / 10)))
    sh = characterize.selection_shares(p, t, k)
    return row | dict(n_workers=len(oof), n_sessions=oof["session_id"].nunique(), kendall_tau=kendall_tau(p, t),
                      k=k, share_k_shortest=sh["share_k_shortest"], share_k_longest=sh["share_k_longest"],
                      random_share=sh["random_k_shortest"], note="")


def mooncake_lifetimes(table: pd.DataFrame) -> pd.DataFrame:
    """Block-lifetime statistics of the Mooncake block table (reused blocks = used by ≥ 2 requests)."""
    reused = table[table["uses"] >= 2]
    lt = reused["lifetime_s"].to_numpy(float)
    rows = [("blocks", len(table)), ("reused_blocks", len(reused)), ("reused_share", len(reused) / max(len(table), 1)),
            ("uses_mean", float(table["uses"].mean())), ("uses_max", int(table["uses"].max())),
            ("lifetime_reused_p10_s", float(np.percentile(lt, 10))), ("lifetime_reused_median_s", float(np.median(lt))),
            ("lifetime_reused_p90_s", float(np.percentile(lt, 90))),
            ("lifetime_reused_p90_over_p10", float(np.percentile(lt, 90) / max(np.percentile(lt, 10), 1e-9)))]
    return pd.DataFrame(rows, columns=["statistic", "value"])


def where(name: str, data: str | os.PathLike[str] | None = None) -> Path | None:
    """The folder of a source: ``<data>/<name>`` when ``data`` is given (None if absent), else the
    verified registered copy (:func:`lachesis.traces.datasets.locate`)."""
    if data:
        p = Path(data) / name
        return p if p.exists() else None
    return datasets.locate(name)


def missing_table(names: list[str]) -> pd.DataFrame:
    """The sources that could not be read, each with the command that makes it available."""
    return pd.DataFrame({"source": names, "how_to_get": [datasets.fetch_hint(n) for n in names]},
                        columns=["source", "how_to_get"])


#: The columns of ``out["sources"]`` (present even when no source could be read).
SOURCE_COLUMNS = ("source", "files", "duplicates", "duplicate_sessions", "skipped", "failed", "notes", "sessions",
                  "requests", "agents",
                  "spawns", "segments", "undeclared_external_prefix_requests", "undeclared_external_prefix_tokens")


def _relative(path: str, base: Path) -> str:
    """``path`` relative to ``base`` (a source's folder) when it lies under it, else as given."""
    try:
        return Path(path).relative_to(base).as_posix()
    except ValueError:
        return path


def build(source: str = "all", data: str | os.PathLike[str] | None = None, seed: int = 0) -> dict[str, Any]:
    """All tables of the real-traces report (docs/design.md §7); unavailable sources are listed in
    ``out["missing"]`` and skipped."""
    info, segs, ranking, out, missing = [], [], [], {}, []
    for name in sources(source):
        root = where(name, data)
        if root is None:
            missing.append(name)
            continue
        res = read(name, root)
        base = root if root.is_dir() else root.parent

        def here(files: str, base: Path = base) -> str:  # file names relative to the source's folder, wherever it is
            return ", ".join(_relative(f, base) for f in files.split(", "))

        row: dict[str, Any] = dict(source=name, files=res.files, duplicates=res.duplicates,
                                   duplicate_sessions="; ".join(f"{here(f)} repeats {here(of)}"
                                                                for f, of in res.duplicate_sessions),
                                   skipped="; ".join(f"{k}: {v}" for k, v in res.skipped.items()),
                                   failed="; ".join(f"{here(str(f))}: {why}" for f, why in res.failed),
                                   notes="; ".join(res.notes))
        if res.trace is not None:
            req = res.trace.requests
            s, n_ext, tok_ext = segments_of(res, seed)
            segs.append(s)
            ranking.append(spawn_ranking(res, s, seed))
            row.update(sessions=req["session_id"].nunique(), requests=len(req), agents=req["agent_id"].nunique(),
                       spawns=len(res.trace.spawns), segments=len(s), undeclared_external_prefix_requests=n_ext,
                       undeclared_external_prefix_tokens=tok_ext)
        elif name == "mooncake_fast25":
            out["mooncake"] = mooncake_lifetimes(res.table)
            out["mooncake_blocks"] = res.table
            row.update(requests=len(res.extra["requests"]))
        else:
            out["azure"] = table = res.table
            assert table is not None  # NOTE: a source without a trace returns its table
            row.update(requests=int(table.loc[table["statistic"] == "requests", "value"].sum()))
        info.append(row)
    out["missing"] = missing_table(missing)
    out["sources"] = pd.DataFrame(info, columns=list(SOURCE_COLUMNS) if not info else None)
    seg = pd.concat(segs, ignore_index=True) if segs else pd.DataFrame(columns=["seg_class", "group", "session_id"])
    out["segments"] = seg
    out["temporal"] = characterize.temporal_table(seg) if seg["seg_class"].isin(TEMPORAL_CLASSES).any() \
        else pd.DataFrame()
    # structural statistics need both a lead and a worker in a group (ChatDev's chat chain is a
    # zero-token program, so it has no lead segment: it is reported through its workers only)
    has = seg.groupby("group")["seg_class"].agg(lambda c: {"lead", "worker"} <= set(c)) if len(seg) else pd.Series()
    both = seg[seg["group"].isin(has[has].index)]
    out["structural"] = characterize.structural_table(both) if len(both) else pd.DataFrame()
    w = workers_of(seg) if len(seg) else pd.DataFrame()
    out["workers"] = w
    big = w[w.groupby("group")["agent_id"].transform("size") >= 5] if len(w) else w
    out["inter_worker"] = (characterize.worker_heterogeneity_table(big)
                           if len(w) else pd.DataFrame())
    out["ranking"] = pd.DataFrame(ranking)
    out["compare"] = compare(out)
    return out


def missing_note(out: dict[str, Any]) -> str:
    """One line per source this run could not read, with the command that fetches it."""
    m = out["missing"]
    if not len(m):
        return "Every selected source was read."
    return "\n".join([f"{len(m)} source(s) not available here, skipped:"]
                     + [f"  {r.source}: {r.how_to_get}" for r in m.itertuples()])


def write_missing(out: dict[str, Any], dest: str | os.PathLike[str]) -> Path:
    """``<dest>/missing_sources.json``: the sources this run could not read and how to get each (an
    empty list when none is missing), written atomically."""
    return write_json(Path(dest) / "missing_sources.json", out["missing"].to_dict("records"), indent=1)


def compare(out: dict[str, Any]) -> pd.DataFrame:
    """Ours (per group, with its sample size) beside the paper's range; rows from fewer than
    :data:`MIN_UNITS` units are flagged."""
    rows: list[tuple[str, Any, Any, int, str]] = []
    seg = out.get("segments")
    if seg is not None and len(seg):
        sessions = seg.groupby("group")["session_id"].nunique()  # temporal: every session of the group
        sub = seg["role"].isin(SUBAGENT_ROLES)
        multi = seg[sub].groupby("group")["session_id"].nunique()  # structural: sessions with sub-agents
    else:
        sessions = multi = pd.Series(dtype=int)
    t = out.get("temporal")
    if t is not None and len(t):
        for r in t.itertuples():
            n = f" [{r.group}, n={r.n_laden}+{r.n_stripped} segments]"
            k = int(sessions.get(r.group, 0))
            rows += [("stripped/laden median T_norm" + n, r.median_ratio_stripped_over_laden,
                      paper.STRIPPED_OVER_LADEN_MEDIAN_TNORM, k, "sessions"),
                     ("temporal separability" + n, r.separability, paper.TEMPORAL_SEPARABILITY, k, "sessions"),
                     ("laden share of turn writes" + n, r.laden_share_of_turn_writes, paper.LADEN_SHARE_OF_TURN_WRITES,
                      k, "sessions")]
    s = out.get("structural")
    if s is not None and len(s):
        for r in s.itertuples():
            if r.n_lead == 0 or r.n_worker + r.n_reviewer == 0:
                continue
            n = f" [{r.group}, n={r.n_lead}/{r.n_worker}/{r.n_reviewer} segments]"
            k = int(multi.get(r.group, 0))
            if r.n_worker:
                rows += [("lead/worker median T_norm" + n, r.lead_over_worker, paper.LEAD_OVER_WORKER_MEDIAN_TNORM,
                          k, "sessions"),
                         ("lead-worker separability" + n, r.separability_lead_worker, paper.STRUCTURAL_SEPARABILITY,
                          k, "sessions"),
                         ("lead waiting share" + n, r.lead_waiting_share, paper.LEAD_WAITING_SHARE, k, "sessions")]
            if r.n_reviewer:
                rows.append(("lead/reviewer median T_norm" + n, r.lead_over_reviewer,
                             paper.LEAD_OVER_REVIEWER_MEDIAN_TNORM, k, "sessions"))
    iw = out.get("inter_worker")
    if iw is not None and len(iw):
        for r in iw.itertuples():
            n = f" [{r.group}]"
            k = int(r.n_workers)
            rows += [("worker T_norm p90/p10" + n, r.tnorm_p90_over_p10, paper.WORKER_TNORM_P90_OVER_P10, k, "workers"),
                     ("worker writes p90/p10" + n, r.writes_p90_over_p10, paper.WORKER_WRITES_P90_OVER_P10, k,
                      "workers"),
                     ("Kendall tau(T_norm, writes)" + n, r.kendall_tau_tnorm_vs_writes,
                      paper.WORKER_TNORM_VS_TOKENS_KENDALL, k, "workers")]
    rk = out.get("ranking")
    if rk is not None and "kendall_tau" in rk:
        for r in rk.dropna(subset=["kendall_tau"]).itertuples():
            n = f" [{r.source}, {int(r.n_workers)} workers]"
            k = int(r.n_sessions)  # folds are whole sessions: the independent unit of the ranking
            rows += [("spawn-record ranker Kendall tau (out of fold)" + n, r.kendall_tau, paper.RANKER_KENDALL_TAU,
                      k, "sessions"),
                     ("ranker k=n/10: share of the k shortest-lived" + n, r.share_k_shortest,
                      paper.FIG7B_AT_K10["share_of_k_shortest"], k, "sessions"),
                     ("ranker k=n/10: share of the k longest-lived" + n, r.share_k_longest,
                      paper.FIG7B_AT_K10["share_of_k_longest"], k, "sessions")]
    m = out.get("mooncake")
    if m is not None:
        v = m.set_index("statistic")["value"]
        rows.append(("Mooncake reused-block lifetime p90/p10 [mooncake_fast25]", v["lifetime_reused_p90_over_p10"],
                     "n/a (paper: no block-level trace)", int(v["reused_blocks"]), "reused blocks"))
    if not rows:
        return pd.DataFrame(columns=["statistic", "ours", "paper", "in_paper_range", "note", "n", "unit", "flag"])
    cmp = compare_table([r[:3] for r in rows])
    cmp["n"] = [r[3] for r in rows]
    cmp["unit"] = [r[4] for r in rows]
    cmp["flag"] = [f"fewer than {MIN_UNITS} {r[4]}: not judged" if r[3] < MIN_UNITS else "" for r in rows]
    return cmp


def summary_sentences(cmp: pd.DataFrame) -> str:
    """Wording computed from the comparison table, so it stays true for any source selection; rows
    flagged for a small sample are counted apart and never judged."""
    flagged = cmp["flag"].ne("") if "flag" in cmp else pd.Series(False, index=cmp.index)
    tail = (f" {int(flagged.sum())} statistic(s) come from fewer than {MIN_UNITS} units (sessions, workers or blocks) "
            "and are not judged." if flagged.any() else "")
    judged = cmp[cmp["in_paper_range"].isin(["yes", "partly", "no"]) & ~flagged]
    if not len(judged):
        return "No statistic here has both a paper range and a large enough sample to judge." + tail
    inside = judged[judged["in_paper_range"] == "yes"]
    kinds = judged["statistic"].str.replace(r" \[.*\]$", "", regex=True)
    per = judged.assign(kind=kinds,
                        inside=judged["in_paper_range"].eq("yes")).groupby("kind")["inside"].agg(["sum", "size"])
    parts = [f"{k}: {int(r['sum'])}/{int(r['size'])}" for k, r in per.iterrows()]
    return (f"{len(inside)} of {len(judged)} per-source statistics with at least {MIN_UNITS} units fall inside the "
            f"paper's range ({'; '.join(parts)})." + tail)
