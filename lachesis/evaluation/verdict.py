"""Will Lachesis help on this trace?  The Figs. 9/11 protocol (§5.2–§5.5) on any trace that meets the contract
(``lachesis evaluate TRACE_DIR``): HBM-first's load searched for the SLO, every policy at that load, HBF lifetime,
Lachesis ÷ HBM-first, the HBM share of KV writes and the operating point (HBM ÷ live short-lived KV); one table
and one figure.  What a real trace lacks is filled by the named assumptions of :mod:`lachesis.traces.gaps` (knobs of
kind ``trace``), each moved one at a time by :func:`assumption_sensitivity`; a trace the protocol cannot read is
refused in one line.  docs/design.md §7, "Evaluating a trace".
"""

from __future__ import annotations

import os
import re
import textwrap
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from lachesis import io
from lachesis.analysis import ranker, segments
from lachesis.config import Endurance
from lachesis.evaluation import grid, knobs, plancache, sweep, tables
from lachesis.evaluation.grid import LOAD_POLICY, POLICY_NAMES
from lachesis.node import capacity
from lachesis.traces import gaps
from lachesis.traces.trace import Trace, read_trace
from lachesis.traces.workloads import WORKLOADS

#: ASSUMPTION (knob ``sessions``; ``None`` = this): the sessions drawn from a trace, at least as many as it holds
#: and as many as the synthetic corpus's workloads hold at paper scale (383 to 623 sessions, Table 3), so a
#: trace's copies replay as many distinct session draws as the corpus's workloads do.
SESSIONS_DRAWN = 512
#: the table's columns, in order (one row per cell, seed and policy; ``bound`` is the offline bound)
COLUMNS = ("trace", "kind", "model", "slo", "memory", "seed", "policy", "policy_name", "n_sessions", "group_ranks",
           "slo_met", "lifetime_years", "over_hbm_first", "beats_warranty", "hbm_share", "hbm_over_live_short",
           "sessions_in_trace", "sessions_drawn", "think_time", "reasoning_per_output", "ranker")


@dataclass
class Verdict:
    """What :func:`evaluate` found: the table (:data:`COLUMNS`), the grid's rows, the statements about the
    trace (its kind, the assumptions taken, the degenerate results) and where the files went."""

    table: pd.DataFrame
    rows: pd.DataFrame
    notes: list[str]
    kind: str = "multi"  # the protocol it ran: Fig. 9's (multi) or Fig. 11's (single)
    paths: list[Path] = field(default_factory=list)
    seconds: float = float("nan")
    #: what ran, as the figure's panels say it (:func:`caption`), and the figure's models and SLOs
    caption: str = ""
    figure_axes: tuple[list[str], list[str]] = field(default_factory=lambda: ([], []))

    def summary(self) -> pd.DataFrame:
        """Lachesis ÷ HBM-first and both lifetimes per cell (median over seeds)."""
        t = self.table
        piv = t[t.policy.isin(["hbm_first", "lachesis"])].pivot_table(
            index=["model", "slo", "memory"], columns="policy", values="lifetime_years", aggfunc="median",
            dropna=False).reindex(columns=["hbm_first", "lachesis"])
        piv["lachesis/hbm_first"] = piv["lachesis"] / piv["hbm_first"]
        op = t[t.policy == LOAD_POLICY].groupby(["model", "slo", "memory"])[["n_sessions",
                                                                             "hbm_over_live_short"]].median()
        return piv.join(op).reset_index()

    def lines(self) -> list[str]:
        """What a command prints: the notes, then one line per cell (without a Lachesis run, its lifetime and
        ratio are said to be missing, not printed as NaN)."""
        out = list(self.notes)
        ran = list(dict.fromkeys(self.rows["policy"])) if "policy" in self.rows else []
        if "lachesis" not in ran:
            out.append(f"no Lachesis run (policies: {', '.join(ran)}): no Lachesis/HBM-first ratio")
        from lachesis.plotting import slo_outcomes

        outcomes = slo_outcomes(self.table, ["model", "slo", "memory", "policy"])  # the figures' own rule
        for r in self.summary().dropna(subset=["hbm_first"]).to_dict("records"):
            cell = (r["model"], r["slo"], r["memory"])
            hf_miss, la_miss = (_miss_words(outcomes, (*cell, p)) for p in ("hbm_first", "lachesis"))
            hf = hf_miss or f"HBM-first {r['hbm_first']:.3g} y"
            la = la_miss or (
                f"Lachesis {r['lachesis']:.3g} y" + ("" if hf_miss else
                                                     f", Lachesis/HBM-first {r['lachesis/hbm_first']:.3g}x")
                if np.isfinite(r["lachesis"]) else
                "Lachesis not run" if "lachesis" not in ran else "Lachesis: no lifetime")
            out.append(f"{r['model']} {r['slo']} {r['memory']}: N = {r['n_sessions']:g} sessions/GPU, {hf}, {la}, "
                       f"HBM / live short-lived KV {r['hbm_over_live_short']:.3g}")
        return out


def _miss_words(outcomes: dict[tuple, Any], key: tuple[str, str, str, str]) -> str | None:
    """A policy (``key``: model, SLO, configuration, policy) that misses the SLO at a seed, said as a miss (never
    given a lifetime at the SLO); None where it meets it at every seed (``outcomes``: plotting.slo_outcomes)."""
    o = outcomes.get(key)
    return f"{POLICY_NAMES[key[-1]]} misses the SLO at {o.misses} of {o.seeds} seeds" if o and o.misses else None


def _kind(trace: Trace) -> str:
    """``multi`` when a session has a lead (the Fig. 9 protocol), else ``single`` (Fig. 11)."""
    return "multi" if (trace.requests["role"] == "lead").any() else "single"


def read(trace_dir: str | os.PathLike) -> Trace:
    """The trace at ``trace_dir``, refused in one line when it cannot be evaluated at all."""
    p = Path(trace_dir)
    if not p.exists():
        raise FileNotFoundError(f"trace {str(p)!r}: no such file or folder")
    if source := arrival_source(p):
        raise ValueError(f"trace {str(p)!r}: {source}'s tables (lachesis adapt {source}) are an arrival trace: request "
                         "arrival times and lengths, without the agent structure this protocol replays (sessions, "
                         "their agents and turns, the context segments a request reuses: docs/design.md §2); "
                         "evaluate a source with sessions (tau2, claude_code, who_and_when, chatdev)")
    tr = read_trace(p)
    if not len(tr.requests):
        raise ValueError(f"trace {str(p)!r}: no requests")
    if int(tr.requests["output_tokens"].sum()) == 0:
        raise ValueError(f"trace {str(p)!r}: no output tokens in any request: nothing to decode, no load to search")
    return tr


def arrival_source(p: Path) -> str | None:
    """The adapter whose arrival-only tables (no sessions: :mod:`lachesis.traces.adapters.mooncake`,
    :mod:`~lachesis.traces.adapters.azure`) the folder ``p`` holds as ``lachesis adapt`` wrote them, else None."""
    from lachesis.traces.adapters import ADAPTER_MODULES, adapter_module

    if not p.is_dir() or any((p / f"requests{ext}").exists() for ext in (".parquet", ".jsonl", ".jsonl.gz")):
        return None
    for name in ADAPTER_MODULES:
        table = getattr(adapter_module(name), "TABLE_NAME", None)  # a source of tables, not of a trace
        if table and any((p / f"{table}{ext}").exists() for ext in (".parquet", ".jsonl")):
            return name
    return None


def assumptions(trace: Trace, sessions: int | None = None, think_time: str = "auto",
                reasoning_per_output: float = 0.0) -> tuple[dict[str, Any], list[str]]:
    """The trace knobs (:mod:`lachesis.traces.gaps`) an evaluation of ``trace`` runs with, and one sentence per
    assumption taken or degenerate result; a one-line ValueError naming the trace for a knob it cannot take."""
    src, r = trace.source, trace.requests
    n_sess = int(r["session_id"].nunique())
    notes = [f"{src}: {n_sess} sessions, {len(r)} requests, {_kind(trace)}-agent"]
    if think_time not in ("auto", "trace", "reference"):
        raise ValueError(f"think_time: expected auto, trace or reference, got {think_time!r}")
    if think_time == "trace" and not gaps.has_times(trace):
        raise ValueError(f"trace {src!r} records no t_start/t_end: think_time=trace needs them (use reference)")
    timed = think_time == "trace" or (think_time == "auto" and gaps.has_times(trace))
    notes.append("tool and user delays: the trace's own timestamps where recorded, else the reference clock" if timed
                 else "tool and user delays: the reference clock (§3.2)"
                 + ("" if gaps.has_times(trace) else "; the trace records no times"))
    drawn = max(n_sess, SESSIONS_DRAWN) if sessions is None else int(sessions)
    if drawn < 0:
        raise ValueError(f"sessions: expected a whole number >= 0, got {sessions!r}")
    notes.append(f"sessions: {drawn} drawn with replacement (seeded by the seed)" if drawn
                 else "sessions: the trace's own, cycled by the closed loop")
    if reasoning_per_output:
        notes.append(f"reasoning: {reasoning_per_output:g} tokens per output token added where a single agent "
                     "records none, stripped at the turn end")
    elif _kind(trace) == "single" and int(r["reasoning_tokens"].sum()) == 0:
        notes.append("reasoning: none recorded and none added: the turn's context is what the trace's prefixes keep")
    k = ranker.sessions_with_workers(trace)
    if _kind(trace) == "multi" and not gaps.has_workers(trace):
        notes.append("no workers: the predictive path ranks nothing, so Lachesis is w/o predictive path "
                     "(the multi-agent policies degenerate; deterministic is not run)")
    elif gaps.has_workers(trace) and k < ranker.FOLDS:
        notes.append(f"ranker: {k} sessions with workers < {ranker.FOLDS} folds: no out-of-fold fit, workers "
                     "admitted unranked in the order they open (degenerate)")
    o = {"sessions": float(drawn), "think_time": "trace" if timed else "reference",
         "reasoning_per_output": float(reasoning_per_output)}
    return {k_: v for k_, v in o.items() if v != knobs.KNOBS[k_].default}, notes


def _ranker_text(trace: Trace) -> str:
    k = ranker.sessions_with_workers(trace)
    if not gaps.has_workers(trace):
        return "no workers"
    return f"out-of-fold, {k} sessions" if k >= ranker.FOLDS else f"unranked: {k} sessions with workers"


def points(trace_dir: str | os.PathLike, trace: Trace, models: Sequence[str], slos: Sequence[str],
           configs: Sequence[str], node: str, seeds: Sequence[int], policies: Sequence[str] | None,
           overrides: dict[str, Any], name: str) -> list[grid.Point]:
    """The grid points of one evaluation: the Fig. 9 grid's on a multi-agent trace, Fig. 11's on a single-agent
    one (deterministic left out without workers: it is Lachesis there), every point on the trace folder."""
    kind = _kind(trace)
    if policies is None:
        policies = grid.MULTI_POLICIES if kind == "multi" else grid.SINGLE_POLICIES
        if kind == "multi" and not gaps.has_workers(trace):
            policies = [p for p in policies if p != "deterministic"]
    if LOAD_POLICY not in policies:
        raise ValueError(f"policies must include {LOAD_POLICY} (it sets the load and every ratio), "
                         f"got {list(policies)}")
    ov = knobs.node(node, **overrides)
    pts = grid.multi_agent_grid(1.0, list(seeds), configs=configs, models=models, slos=slos, policies=policies,
                                workloads=("x",), no_reviewer_policies=None, overrides=ov)
    return [replace(p, workload=name, trace=str(trace_dir)) for p in pts]


def check_reach(trace: Trace, loads: pd.DataFrame, drawn: int) -> None:
    """Refuse a load the trace cannot reach: without drawing (``sessions=0``) the node's concurrent sessions,
    N × G (``loads``: rows with ``n_sessions`` and ``group_ranks``), must not exceed the trace's sessions, or
    one session would run beside itself."""
    if drawn or not len(loads):
        return
    n_sess = int(trace.requests["session_id"].nunique())
    slots = (loads["n_sessions"] * loads["group_ranks"]).max()
    if slots > n_sess:
        raise ValueError(f"trace {trace.source!r} too small to reach the load: {int(slots)} concurrent sessions "
                         f"(N × GPUs) but {n_sess} sessions; draw sessions with replacement (sessions > 0)")


def table(df: pd.DataFrame, trace: Trace, overrides: dict[str, Any], kind: str) -> pd.DataFrame:
    """One row per cell, seed and policy (the offline bound as ``bound``): :data:`COLUMNS`."""
    cell = grid.CELL + ["seed"]
    keys = cell + ["policy"]
    life = df[keys + ["lifetime_years"]]
    if "bound_lifetime_years" in df:  # the bound is read on the load policy's run
        b = df[df.policy.eq(LOAD_POLICY) & df["bound_lifetime_years"].notna()]
        life = pd.concat([life, b[cell].assign(policy=tables.BOUND, lifetime_years=b["bound_lifetime_years"])],
                         ignore_index=True)
    base = life[life.policy == LOAD_POLICY][cell + ["lifetime_years"]].rename(columns={"lifetime_years": "_base"})
    long = life.merge(base, on=cell, how="left")
    long["over_hbm_first"] = long["lifetime_years"] / long.pop("_base")
    hs = tables.hbm_share(df)
    extra = df[keys + [c for c in ("n_sessions", "group_ranks", "slo_met") if c in df]]
    op = df[df.policy == LOAD_POLICY][cell + ["hbm_over_live_short"]]
    out = long.merge(hs, on=keys, how="left").merge(extra, on=keys, how="left").merge(op, on=cell, how="left")
    b = out.policy == tables.BOUND
    at = out[out.policy == LOAD_POLICY].set_index(cell)
    for c in ("n_sessions", "group_ranks"):
        if c in out:
            out.loc[b, c] = at[c].reindex(pd.MultiIndex.from_frame(out.loc[b, cell])).to_numpy()
    out["beats_warranty"] = out["lifetime_years"] >= Endurance().warranty_years  # §5.2
    out["policy_name"] = out["policy"].map(lambda p: POLICY_NAMES.get(p, "offline bound" if p == tables.BOUND else p))
    out = out.rename(columns={"workload": "trace"})
    out["kind"] = kind
    out["sessions_in_trace"] = int(trace.requests["session_id"].nunique())
    out["sessions_drawn"] = int(overrides.get("sessions", 0))
    out["think_time"] = overrides.get("think_time", knobs.KNOBS["think_time"].default)
    out["reasoning_per_output"] = float(overrides.get("reasoning_per_output", 0.0))
    out["ranker"] = _ranker_text(trace)
    order = {p: i for i, p in enumerate(grid.MULTI_POLICIES + (tables.BOUND,))}
    out = out.assign(_o=out.policy.map(order)).sort_values(["model", "slo", "memory", "seed", "_o"], kind="stable")
    return out[[c for c in COLUMNS if c in out]].reset_index(drop=True)


def figure(df: pd.DataFrame, models: Sequence[str], slos: Sequence[str], name: str, setting: str = ""):
    """HBF lifetime per memory configuration and policy, one panel per model and SLO (median over seeds,
    min–max whiskers, the five-year warranty line, the offline bound), each panel's title naming what ran
    (``setting``: :func:`caption`) and how many of its runs miss the SLO."""
    from lachesis.evaluation import plots
    from lachesis.evaluation.plots import Panel

    r = tables.ratio_table(df)
    missed = tables.missed_slo(df)

    def title(m: str, s: str) -> str:
        d = missed[missed.model.eq(m) & missed.slo.eq(s)]
        miss = int((~d["all_met"].astype(bool)).sum())
        said = f"{setting}; SLO missed by {miss} of {len(d)} policy runs" + (" (drawn as misses)" if miss else "")
        return "\n".join([f"{name}: {m}, {s} SLO", *textwrap.wrap(said, 64)])  # the panel's width at 9 pt

    layout = [[Panel(dict(model=m, slo=s, workload=name), title(m, s)) for s in slos] for m in models]
    return plots.lifetime_figure(df, r, layout, bars=grid.PAPER_MULTI_POLICIES, paper_years=[])


def caption(node: str, search: str, drawn: int, seeds: Sequence[int], n_sessions: int) -> str:
    """What an evaluation ran, for its figure: the decode node, the search windows, the sessions, the seeds."""
    p = capacity.SEARCH_PRESETS[search]
    g = knobs.NODES[node].get("group_ranks", 1)
    where = f"node {node} ({g} GPU{'s' if g > 1 else ''}{' in lockstep' if g > 1 else ''})"
    windows = f"{search} windows (lifetime {p.warmup:g} + {p.measure:g} mean sessions)"
    sess = f"{drawn} sessions drawn" if drawn else f"the trace's {n_sessions} sessions"
    return f"{where}, {windows}, {sess}, seed{'s' if len(seeds) > 1 else ''} {','.join(map(str, seeds))}"


def evaluate(trace_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None, *,
             models: Sequence[str] | str = grid.MODEL_NAMES, slos: Sequence[str] | str | None = None,
             configs: Sequence[str] | str = grid.CONFIG_LABELS, node: str = "paper", load: str = "per_deployment",
             seeds: Sequence[int] | int = (0,), policies: Sequence[str] | str | None = None,
             sessions: int | None = None, think_time: str = "auto", reasoning_per_output: float = 0.0,
             search: str = "paper", cache_dir: str | os.PathLike | None = None, n_jobs: int | None = None,
             progress: bool = True, name: str | None = None) -> Verdict:
    """The Figs. 9/11 protocol on the trace at ``trace_dir``: HBM-first's N* searched per model and SLO
    (``load``: :class:`lachesis.evaluation.grid.LoadRule`), every policy at that load on ``node``
    (:data:`lachesis.evaluation.knobs.NODES`)
    for each memory configuration, over ``seeds``; with ``out_dir``, ``<name>.csv`` (:data:`COLUMNS`) and
    ``<name>.png``/``.pdf`` written as one set (:func:`lachesis.io.replace_files`), one run at a time per name
    and folder (:func:`lachesis.io.exclusive`).  ``slos`` None: both on a multi-agent trace, tight on a
    single-agent one (the paper's Figs. 9 and 11).  ``models``, ``slos``, ``configs``, ``policies``: lists or
    comma-separated text, a repeat run once.  ``name``: the files' stem and the rows' trace name (default: the
    trace's, :func:`lachesis.evaluation.grid.trace_name`).  ``sessions``, ``think_time`` and
    ``reasoning_per_output`` are the trace's named assumptions (:func:`assumptions`)."""
    t0 = time.perf_counter()
    name = run_name(trace_dir, name)
    lists = {k: _names(k, v) for k, v in dict(models=models, slos=slos, configs=configs, policies=policies).items()
             if v is not None}
    _check_assumptions(sessions, reasoning_per_output)
    if search not in capacity.SEARCH_PRESETS:
        raise ValueError(f"search: unknown {search!r}; expected one of {list(capacity.SEARCH_PRESETS)}")
    with _writing(out_dir, name, ".csv/.png/.pdf"):
        v = _evaluate(trace_dir, name, lists, node, load, seeds, sessions, think_time, reasoning_per_output, search,
                      cache_dir, n_jobs, progress)
        if out_dir is not None:
            v.paths = io.replace_files(out_dir, lambda tmp: _write(v, tmp, name))
    v.seconds = time.perf_counter() - t0
    return v


def _writing(out_dir: str | os.PathLike | None, stem: str, what: str) -> AbstractContextManager:
    """One run at a time writes ``stem``'s files in ``out_dir`` (:func:`lachesis.io.exclusive`); nothing without."""
    if out_dir is None:
        return nullcontext()
    return io.exclusive(Path(out_dir) / f".{stem}.lock", f"{Path(out_dir) / stem}{what}")


def _evaluate(trace_dir: str | os.PathLike, name: str, lists: dict[str, list[str]], node: str, load: str,
              seeds: Sequence[int] | int, sessions: int | None, think_time: str, reasoning_per_output: float,
              search: str, cache_dir: str | os.PathLike | None, n_jobs: int | None, progress: bool) -> Verdict:
    """:func:`evaluate` once its arguments are checked: the grid's rows, the table, the notes, the figure's
    caption (``Verdict.caption``); nothing written."""
    trace = read(trace_dir)
    kind = _kind(trace)
    models, configs = lists.get("models", list(grid.MODEL_NAMES)), lists.get("configs", list(grid.CONFIG_LABELS))
    slos = lists.get("slos", ["tight", "loose"] if kind == "multi" else ["tight"])
    overrides, notes = assumptions(trace, sessions, think_time, reasoning_per_output)
    seed_list = grid.seed_list("evaluate", seeds if isinstance(seeds, int) else list(seeds))
    pts = points(trace_dir, trace, models, slos, configs, node, seed_list, lists.get("policies"), overrides, name)
    plan = plancache.point_plan(pts[0], cache_dir)  # the plan once here: a refusal is one line before any run
    params, drawn = capacity.SEARCH_PRESETS[search], int(overrides.get("sessions", 0))
    # the deployment's load covers the placements the paper compares on a trace of this kind (docs/design.md §5)
    rule = replace(grid.LoadRule.of(load), policies=grid.PAPER_MULTI_POLICIES if kind == "multi"
                   else grid.PAPER_SINGLE_POLICIES).over(pts)
    if not drawn:  # the deployment's load first, so a load the trace cannot reach is refused before the grid runs
        bases = sorted({(rule.deployment if rule.joint() else rule.base_point)(p) for p in pts
                        if rule.held(p.memory)}, key=lambda b: b.label())
        searched = [sweep.deployment_load(b, rule, params, str(cache_dir) if cache_dir else None, plan) for b in bases]
        check_reach(trace, pd.DataFrame([dict(n_sessions=e["n_star"], group_ranks=b.config().deployment.group_ranks)
                                         for b, e in zip(bases, searched)]), drawn)
    df = sweep.run_grid(pts, params, cache_dir, n_jobs=n_jobs, progress=progress, load=rule)
    check_reach(trace, df.assign(group_ranks=df.get("group_ranks", 1)), drawn)
    notes += _degenerate(df)
    out = Verdict(table(df, trace, overrides, kind), df, notes, kind)
    out.caption = caption(node, search, drawn, seed_list, int(trace.requests["session_id"].nunique()))
    out.figure_axes = (models, slos)
    return out


def _degenerate(df: pd.DataFrame) -> list[str]:
    """One sentence per cell where HBM-first has no load or writes no KV in its window (no lifetime there)."""
    notes = []
    for r in df[(df.policy == LOAD_POLICY) & (df.n_sessions <= 0)].to_dict("records"):
        notes.append(f"{r['model']} {r['slo']} {r['memory']}: the SLO admits no session of this trace "
                     f"(HBM-first misses it at 1 session per GPU): no load, no lifetime")
    quiet = df[(df.policy == LOAD_POLICY) & (df.n_sessions > 0) & ~(df.get("bytes_hbm", 0)
                                                                    + df.get("bytes_hbf", 0) > 0)]
    for r in quiet.to_dict("records"):
        notes.append(f"{r['model']} {r['slo']} {r['memory']}: no KV written in the measurement window at "
                     f"{r['n_sessions']} sessions per GPU (the trace's delays outlast the window): no lifetime; "
                     f"longer windows: search=paper")
    return notes


def _write(v: Verdict, folder: Path, name: str) -> list[Path]:
    """The table and the figure of an evaluation in ``folder``: ``<name>.csv``, ``.png``, ``.pdf``."""
    from lachesis.plotting import save_figure, save_numbers

    models, slos = v.figure_axes
    return [save_numbers(v.table, folder, name), *save_figure(figure(v.rows, models, slos, name, v.caption),
                                                              folder, name)]


def run_name(trace_dir: str | os.PathLike, name: str | None = None) -> str:
    """The files' stem and the rows' trace name: ``name``, else the trace's (a folder's name whole); one that
    is not a plain file name, or that a corpus workload has, is refused in one line."""
    got = grid.trace_name(Path(trace_dir)) if name is None else name
    if not isinstance(got, str) or not re.fullmatch(r"[\w+-][\w.+-]*", got):
        raise ValueError(f"name: expected a file name of letters, digits, '.', '_', '+' or '-' (not starting with "
                         f"'.'), got {got!r}")
    if got in WORKLOADS:
        raise ValueError(f"name: {got!r} is a corpus workload's name; a run on a trace needs a name of its own")
    return got


def _names(arg: str, value: Sequence[str] | str) -> list[str]:
    """A list argument given as a sequence of names or as comma-separated text, each once (a repeat is dropped)."""
    vals = grid.split_csv(value) if isinstance(value, str) else list(value)
    if not all(isinstance(x, str) for x in vals):
        raise ValueError(f"{arg}: expected names (a list of text, or comma-separated text), got {value!r}")
    return list(dict.fromkeys(x.strip() for x in vals))


def _check_assumptions(sessions: Any, reasoning_per_output: Any) -> None:
    """``sessions`` a whole number >= 0 (or None) and ``reasoning_per_output`` a number: one line naming the
    argument otherwise (2.5, True or "512" would be read as another count)."""
    if sessions is not None and (isinstance(sessions, bool) or not isinstance(sessions, (int, np.integer))
                                 or sessions < 0):
        raise ValueError(f"sessions: expected a whole number >= 0 (or None: max(the trace's, "
                         f"{SESSIONS_DRAWN})), got {sessions!r}")
    if isinstance(reasoning_per_output, bool) or not isinstance(reasoning_per_output, (int, float, np.number)):
        raise ValueError(f"reasoning_per_output: expected a number of reasoning tokens per output token, got "
                         f"{reasoning_per_output!r}")
    knobs.KNOBS["reasoning_per_output"].check(float(reasoning_per_output))


# ------------------------------------------------------------------------------------------------
# Sensitivity rows: each named assumption moved one at a time
# ------------------------------------------------------------------------------------------------

#: the sensitivity table's columns, in order: per (knob, value) and memory configuration, the load HBM-first's
#: search set (sessions per GPU), both lifetimes and their ratio (median over seeds), whether Lachesis meets the SLO
#: at that load on every seed, and a note (the reason a row is not applicable)
SENSITIVITY_COLUMNS = ("trace", "model", "slo", "knob", "value", "memory", "n_sessions", "hbm_first_years",
                       "lachesis_years", "over_hbm_first", "slo_met", "note")
#: the trace knobs a sensitivity table moves (:mod:`lachesis.traces.gaps`), then the ranker row
SENSITIVITY_KNOBS = ("sessions", "think_time", "reasoning_per_output")
#: the ranker's row: no knob moves the fit, so the row is Lachesis without its predictive path at the default load
NO_RANKER = "none (w/o predictive path)"


def tried(knob: str, default: Any) -> tuple:
    """The values sensitivity rows move ``knob`` to from the evaluation's ``default``: a categorical knob's other
    choices; a numeric knob's values (:data:`lachesis.evaluation.knobs.KNOBS`) and its own default
    (``reasoning_per_output``
    0: nothing added; not ``sessions`` 0, which a small trace cannot reach), less ``default`` (the default row)."""
    k = knobs.KNOBS[knob]
    vals = tuple(k.allowed) if k.categorical else tuple(k.values) + ((k.default,) if knob != "sessions" else ())
    out: list = []
    for v in vals:
        v = v if k.categorical else float(v)
        if v != (default if k.categorical else float(default)) and v not in out:
            out.append(v)
    return tuple(sorted(out) if not k.categorical else out)


@dataclass
class Sensitivity:
    """What :func:`assumption_sensitivity` found: the table (:data:`SENSITIVITY_COLUMNS`, the default rows first),
    the default run's statements and where the file went."""

    table: pd.DataFrame
    notes: list[str]
    paths: list[Path] = field(default_factory=list)
    seconds: float = float("nan")


def _shown(value: Any) -> str:
    """A knob's value as a table shows it (a number at %g)."""
    return f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def _sensitivity_rows(v: Verdict, knob: str, value: Any, configs: Sequence[str], policy: str = "lachesis",
                      note: str = "") -> list[dict[str, Any]]:
    """One row per memory configuration from an evaluation's table: ``policy`` against HBM-first."""
    t = v.table
    rows = []
    for mem in configs:
        c = t[t.memory == mem]
        hf, la = c[c.policy == LOAD_POLICY], c[c.policy == policy]
        rows.append(dict(knob=knob, value=_shown(value), memory=mem,
                         n_sessions=float(hf.n_sessions.median()) if len(hf) else float("nan"),
                         hbm_first_years=float(hf.lifetime_years.median()) if len(hf) else float("nan"),
                         lachesis_years=float(la.lifetime_years.median()) if len(la) else float("nan"),
                         over_hbm_first=float(la.over_hbm_first.median()) if len(la) else float("nan"),
                         slo_met=bool(la.slo_met.astype(bool).all()) if len(la) and "slo_met" in la else False,
                         note=note))
    return rows


def assumption_sensitivity(trace_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None, *,
                           model: str = grid.MODEL_NAMES[0], slo: str = "tight",
                           configs: Sequence[str] = ("1/7", "4/4"), node: str = "paper",
                           load: str = "per_deployment", seeds: Sequence[int] = (0,), sessions: int | None = None,
                           think_time: str = "auto", reasoning_per_output: float = 0.0, search: str = "paper",
                           values: dict[str, Sequence] | None = None, cache_dir: str | os.PathLike | None = None,
                           n_jobs: int | None = None, progress: bool = True, name: str | None = None) -> Sensitivity:
    """The trace's named assumptions moved one at a time: :func:`evaluate` (HBM-first and Lachesis; the same
    cache) at the defaults ``sessions``/``think_time``/``reasoning_per_output``, then once per value of each
    knob of :data:`SENSITIVITY_KNOBS` (:func:`tried`, or ``values[knob]``) with the others at their defaults,
    each at its own HBM-first load; then the ranker's row (Lachesis without its predictive path at the default
    load).  A value the trace cannot take or that changes nothing (:func:`lachesis.traces.gaps.not_applicable`) is a row
    with its reason and no numbers.  With ``out_dir``, ``<name>_sensitivity.csv`` written atomically."""
    t0 = time.perf_counter()
    name = run_name(trace_dir, name)
    with _writing(out_dir, f"{name}_sensitivity", ".csv"):
        out = _sensitivity(trace_dir, name, model, slo, configs, values, dict(
            node=node, load=load, seeds=seeds, search=search, cache_dir=cache_dir, n_jobs=n_jobs, progress=progress),
            sessions, think_time, reasoning_per_output)
        if out_dir is not None:
            from lachesis.plotting import save_numbers

            out.paths = [save_numbers(out.table, out_dir, f"{name}_sensitivity")]
    out.seconds = time.perf_counter() - t0
    return out


def _sensitivity(trace_dir: str | os.PathLike, name: str, model: str, slo: str, configs: Sequence[str],
                 values: dict[str, Sequence] | None, run_args: dict[str, Any], sessions: int | None,
                 think_time: str, reasoning_per_output: float) -> Sensitivity:
    """:func:`assumption_sensitivity`'s rows (``run_args``: what every :func:`evaluate` of it shares)."""
    trace = read(trace_dir)
    configs = _names("configs", configs)
    default, notes = assumptions(trace, sessions, think_time, reasoning_per_output)
    base = {k: default.get(k, knobs.KNOBS[k].default) for k in SENSITIVITY_KNOBS}
    ranked = _kind(trace) == "multi" and gaps.has_workers(trace)
    kw: dict[str, Any] = dict(models=[model], slos=[slo], configs=configs, name=name, **run_args)

    def run(setting: dict[str, Any], policies: Sequence[str]) -> Verdict:
        return evaluate(trace_dir, sessions=int(setting["sessions"]), think_time=str(setting["think_time"]),
                        reasoning_per_output=float(setting["reasoning_per_output"]), policies=list(policies), **kw)

    pol = [LOAD_POLICY, "lachesis"]
    v0 = run(base, pol[:1] + ["deterministic"] + pol[1:] if ranked else pol)
    rows = _sensitivity_rows(v0, "default", "; ".join(f"{k}={_shown(base[k])}" for k in base), configs)
    for knob in SENSITIVITY_KNOBS:
        for value in (values or {}).get(knob, tried(knob, base[knob])):
            why = gaps.not_applicable(trace, knob, value)
            if why:
                rows += [dict(knob=knob, value=_shown(value), memory=m, slo_met=None, note=f"not applicable: {why}")
                         for m in configs]
                continue
            rows += _sensitivity_rows(run({**base, knob: value}, pol), knob, value, configs)
    if ranked:
        k = ranker.sessions_with_workers(trace)
        rows += _sensitivity_rows(v0, "ranker", NO_RANKER, configs, policy="deterministic",
                                  note="" if k >= ranker.FOLDS else
                                  f"the default already admits workers unranked ({k} sessions with workers "
                                  f"< {ranker.FOLDS} folds)")
    else:
        why = "single-agent: no workers to rank" if _kind(trace) == "single" else \
            "no workers: Lachesis is already w/o predictive path"
        rows += [dict(knob="ranker", value=NO_RANKER, memory=m, slo_met=None, note=f"not applicable: {why}")
                 for m in configs]
    tab = pd.DataFrame(rows).assign(trace=name, model=model, slo=slo)
    return Sensitivity(tab.reindex(columns=list(SENSITIVITY_COLUMNS)), notes)


# ------------------------------------------------------------------------------------------------
# Why a trace's gain differs from the corpus's: the axes §3 names
# ------------------------------------------------------------------------------------------------

#: the axes a trace's gain is read against (§3.3–§3.5), in words
AXES = {"short_share": "segment mix (short-lived share of KV written)",
        "t_norm_spread": "T_norm spread (long-lived ÷ short-lived median T_norm)",
        "fan_out": "fan-out (workers per spawning lead request)",
        "laden_share": "laden share (reasoning-laden share of a single agent's KV written)"}
SHORT_CLASSES = ("reasoning_laden", "worker", "reviewer")


def axes(source: str | os.PathLike | Trace, seed: int = 0) -> dict[str, float]:
    """The axes of :data:`AXES` for a trace (a path, a corpus workload or a :class:`Trace`), on its reference
    clock: the short-lived classes' share of KV tokens written, the median T_norm of the long-lived classes over
    the short-lived ones', workers per lead request that spawns, and the laden share of single agents' writes."""
    prep = segments.prepare(source, seed=seed)
    s = prep.segments.segments
    tok = s.groupby("seg_class")["tokens_written"].sum()
    short = s["seg_class"].isin(SHORT_CLASSES)
    med = lambda m: float(s.loc[m, "t_norm_s"].median()) if m.any() else float("nan")  # noqa: E731
    sp = prep.trace.spawns
    workers = sp[sp["role"] == "worker"] if sp is not None and len(sp) else sp
    fan = float(workers.groupby("spawn_request_id").size().mean()) if workers is not None and len(workers) else 0.0
    single = tok.reindex(["reasoning_laden", "reasoning_stripped"]).fillna(0)
    return {"short_share": float(tok.reindex(list(SHORT_CLASSES)).fillna(0).sum() / tok.sum()),
            "t_norm_spread": med(~short) / med(short),
            "fan_out": fan,
            "laden_share": float(single["reasoning_laden"] / single.sum()) if single.sum() else float("nan")}


def explain(name: str, gain: float, ours: dict[str, float], corpus: dict[str, float], corpus_gain: float) -> str:
    """One sentence: the trace's Lachesis ÷ HBM-first beside the corpus's, and the axis that differs most
    (the largest factor between the two, of the axes both have)."""
    ratios = {k: ours[k] / corpus[k] for k in AXES
              if np.isfinite(ours.get(k, np.nan)) and np.isfinite(corpus.get(k,
                                                                             np.nan)) and ours[k] > 0 and corpus[k] > 0}
    head = (f"{name}: Lachesis/HBM-first {gain:.3g}x against the corpus's {corpus_gain:.3g}x" if np.isfinite(gain)
            else f"{name}: no lifetime at these cells (its notes say why); the corpus's Lachesis/HBM-first is "
                 f"{corpus_gain:.3g}x")
    if not ratios:
        return head + "; no axis to compare."
    k = max(ratios, key=lambda x: abs(np.log(ratios[x])))
    return (f"{head}; the axis that differs most is {AXES[k]}: {ours[k]:.3g} against {corpus[k]:.3g} "
            f"({ratios[k]:.2g}x).")


def gain(rows: pd.DataFrame) -> float:
    """Lachesis ÷ HBM-first over a grid's rows: the median over cells and seeds (NaN where no cell has both)."""
    life = rows.pivot_table(index=grid.CELL + ["seed"], columns="policy", values="lifetime_years", aggfunc="first")
    if not {"lachesis", LOAD_POLICY} <= set(life.columns):
        return float("nan")
    return float((life["lachesis"] / life[LOAD_POLICY]).median())
