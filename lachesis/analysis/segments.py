"""Context-segment recovery from a per-request trace (§3.2–3.5, Appendix B).

:func:`recover` walks each agent's requests, finds where every token of its context dies, groups the
tokens into segments and measures each one's T_norm (Eq. 1, on the reference clock of
:mod:`lachesis.traces.clock`) and ρR/W (Eq. 3).  :func:`prepare` is the one way from a corpus workload, a
trace path or a Trace to the trace, its clock and its segments.  Semantics, the provider-cache
assumption and the output contract: docs/design.md §3.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from lachesis.config import ReferenceClock
from lachesis.traces import corpus, workloads
from lachesis.traces.clock import clock_for, overlap_s, schedule, wait_intervals
from lachesis.traces.schema import SUBAGENT_ROLES, TraceError, cache_tolerance
from lachesis.traces.trace import Trace, read_trace

PHASES = ("turn_prefill", "turn_body", "agent")
SEGMENT_COLUMNS = ("segment_id", "session_id", "agent_id", "role", "seg_class", "phase", "boundary",
                   "write_turn", "tokens_written", "first_request", "last_request", "closing_request",
                   "t_first_write_s", "t_last_read_s", "t_norm_s", "t_boundary_s", "read_tokens", "rho_rw",
                   "wait_s")


@dataclass
class Segments:
    """Recovered context segments of a trace (docs/design.md §3 contract)."""

    segments: pd.DataFrame
    writes: pd.DataFrame
    reads: pd.DataFrame
    schedule: pd.DataFrame
    #: requests whose matched prefix opens positions beyond the agent's own context (declared external
    #: prefix; docs/design.md §2).  ``declared`` is True on every row of a validated trace (kept for callers).
    external: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        {"request_id": pd.Series(dtype=object), "tokens": pd.Series(dtype="int64"),
         "declared": pd.Series(dtype=bool)}))


def _walk(agent_start: list[int], agent_end: list[int], mp: list[int], inp: list[int], out: list[int],
          tol: list[int] | None = None) -> tuple[tuple[np.ndarray, ...], list[tuple[int, int]]]:
    """Interval walk per agent (positions in agent-sorted order): the dead pieces, and the external
    prefixes opened, as (position, tokens).

    ``tol[g]``: request g's cache tolerance (docs/design.md §3, *Provider caches*).  When g's matched
    prefix falls short of its previous request's input by at most ``tol[g]`` tokens and g's input still
    holds the whole previous context, the tokens above the matched prefix are rematerialized by g inside
    the same segment: their pieces die (last read by the previous request) with whatever later kills the
    position just below the matched prefix (the *anchor*), not at g.
    """
    walk = _Walk(mp, inp, out, tol)
    for b, e in zip(agent_start, agent_end):
        walk.agent(b, e)
    as_arr = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731
    return tuple(as_arr(x) for x in walk.pieces), walk.gaps


class _Walk:
    """The interval walk's state: each agent's live context as intervals ``[start, end, writer (-1:
    external prefix), is_output, pieces following its top]``, and the dead pieces found so far as
    columns (writer, is_output, start, end, death, last reader)."""

    def __init__(self, mp: list[int], inp: list[int], out: list[int], tol: list[int] | None) -> None:
        self.mp, self.inp, self.out, self.tol = mp, inp, out, tol
        self.pieces: tuple[list[int], ...] = ([], [], [], [], [], [])
        self.gaps: list[tuple[int, int]] = []

    def dead(self, iv: list, lo: int, hi: int, death: int, reader: int) -> int | None:
        """Record the piece ``[lo, hi)`` of interval ``iv`` as dead; its index, or None for an external prefix."""
        if iv[2] < 0:
            return None
        for col, v in zip(self.pieces, (iv[2], iv[3], lo, hi, death, reader)):
            col.append(v)
        return len(self.pieces[4]) - 1

    def agent(self, b: int, e: int) -> None:
        """Walk one agent's requests ``b..e-1``; at its end everything left dies, last read by its last request."""
        live: list[list] = []
        for g in range(b, e):
            self.request(live, b, g)
        death = self.pieces[4]
        for iv in live:
            for k in iv[4]:
                death[k] = -1
            self.dead(iv, iv[0], iv[1], -1, e - 1)

    def request(self, live: list[list], b: int, g: int) -> None:
        """Request g arrives: tokens at positions >= its matched prefix die (g closes them, unless they
        are rematerialized inside the provider-cache tolerance), then it writes its input and output."""
        m, inp, tol = self.mp[g], self.inp, self.tol
        live_end = live[-1][1] if live else 0
        if m > live_end:  # a declared external prefix: present, written by no request of this agent
            self.gaps.append((g, m - live_end))
            live.append([live_end, m, -1, 0, []])
        soft = (tol is not None and tol[g] > 0 and g > b and m < live_end
                and m >= inp[g - 1] - tol[g] and inp[g] >= live_end)
        carried: list[int] = []
        while live and live[-1][1] > m:
            iv = live[-1]
            k = self.dead(iv, max(iv[0], m), iv[1], g, g - 1)
            carried += iv[4] + ([k] if k is not None else [])
            iv[4] = []
            if iv[0] < m:
                iv[1] = m
                break
            live.pop()
        if carried and soft and live and live[-1][2] >= 0:  # the anchor decides when they die
            live[-1][4] += carried
        else:
            for k in carried:
                self.pieces[4][k] = g
        if inp[g] > m:
            live.append([m, inp[g], g, 0, []])
        if self.out[g] > 0:
            live.append([inp[g], inp[g] + self.out[g], g, 1, []])


def recover(trace: Trace, clock: ReferenceClock | None = None, seed: int = 0,
            cache_tolerance_tokens: int | None = None) -> Segments:
    """Recover every context segment of ``trace`` with its T_norm (Eq. 1) and ρR/W (Eq. 3).

    ``clock``: the reference clock (default: :func:`lachesis.traces.clock.clock_for` the trace, which maps its
    tool names to tool classes); ``seed``: seeds the per-session tool/user draws;
    ``cache_tolerance_tokens``: the provider-cache tolerance of every request (docs/design.md §3,
    *Provider caches*); None (default) = the trace's own ``cache_tolerance_tokens`` column, 0 where it has none.
    """
    clock = clock or clock_for(trace)
    sched = schedule(trace, clock, seed)
    ba = _ByAgent.of(trace.requests)
    pieces, gaps = _dead_pieces(ba, _tolerances(ba, cache_tolerance_tokens))
    read_tokens = _read_tokens(ba, pieces)
    segs, seg_ids = _segment_table(trace, ba, pieces, sched, read_tokens)
    writes, reads = _writes_and_reads(ba, pieces, seg_ids)
    return Segments(segs, writes, reads, sched, _external(trace, ba, gaps))


@dataclass(frozen=True)
class _ByAgent:
    """The trace's columns in agent-sorted order (position g -> trace row ``order[g]``): each agent's
    requests a contiguous run ``[start, end)``, in the trace's order."""

    req: pd.DataFrame
    order: np.ndarray
    acode: np.ndarray  # the agent of each position
    start: np.ndarray
    end: np.ndarray

    @classmethod
    def of(cls, req: pd.DataFrame) -> _ByAgent:
        n = len(req)
        codes, _ = pd.factorize(req["agent_id"], sort=False)
        order = np.argsort(codes, kind="stable")
        acode = codes[order]
        bounds = np.flatnonzero(np.r_[True, acode[1:] != acode[:-1]]) if n else np.zeros(0, dtype=np.int64)
        return cls(req, order, acode, bounds, np.r_[bounds[1:], n].astype(np.int64))

    def __len__(self) -> int:
        return len(self.req)

    def col(self, c: str) -> np.ndarray:
        return self.req[c].to_numpy()[self.order]

    def ints(self, c: str) -> np.ndarray:
        return self.col(c).astype(np.int64)


def _tolerances(ba: _ByAgent, cache_tolerance_tokens: int | None) -> np.ndarray:
    """Each request's provider-cache tolerance: the argument for all, else the trace's column, else 0."""
    n = len(ba)
    if cache_tolerance_tokens is not None:
        return np.full(n, cache_tolerance(cache_tolerance_tokens), dtype=np.int64)
    if "cache_tolerance_tokens" in ba.req.columns:
        return ba.ints("cache_tolerance_tokens")
    return np.zeros(n, dtype=np.int64)


@dataclass(frozen=True)
class _Pieces:
    """Dead pieces of context (positions ``[start, end)`` of one writer, input or output part) with the
    request that closed them (-1: the agent's end), their last reader and the segment they belong to."""

    writer: np.ndarray
    is_output: np.ndarray
    start: np.ndarray
    end: np.ndarray
    death: np.ndarray
    reader: np.ndarray
    phase: np.ndarray  # index into PHASES
    seg: np.ndarray
    nseg: int

    @property
    def tokens(self) -> np.ndarray:
        return self.end - self.start


def _dead_pieces(ba: _ByAgent, tol_g: np.ndarray) -> tuple[_Pieces, list[tuple[int, int]]]:
    """The interval walk's dead pieces grouped into segments by (agent, death, write turn, phase), and
    the external prefixes opened."""
    n = len(ba)
    mp, inp, out, turn = (ba.ints(c) for c in ("matched_prefix_tokens", "input_tokens", "output_tokens", "turn"))
    role = ba.col("role")
    acode = ba.acode
    first_of_turn = np.ones(n, dtype=bool)
    if n:
        first_of_turn[1:] = (acode[1:] != acode[:-1]) | (turn[1:] != turn[:-1])
    (pw, po, ps, pe, pd_, pr), gaps = _walk(ba.start.tolist(), ba.end.tolist(), mp.tolist(), inp.tolist(),
                                            out.tolist(), tol_g.tolist())
    # a sub-agent has no turns: every token it writes dies at its own end (its return), whatever
    # later request of it stopped reading the token (that request still bounds the token's reads)
    pd_ = np.where(np.isin(role[pw], SUBAGENT_ROLES), -1, pd_)
    single = role[pw] == "single"
    phase = np.where(single, np.where((po == 0) & first_of_turn[pw], 0, 1), 2)
    death_sort = np.where(pd_ >= 0, pd_, n)
    pieces = pd.DataFrame({"a": acode[pw], "d": death_sort, "t": turn[pw], "p": phase})
    seg_of = pieces.groupby(["a", "d", "t", "p"], sort=True).ngroup().to_numpy()
    nseg = int(seg_of.max()) + 1 if len(seg_of) else 0
    return _Pieces(pw, po, ps, pe, pd_, pr, phase, seg_of, nseg), gaps


def _read_runs(p: _Pieces) -> tuple[np.ndarray, np.ndarray]:
    """Each piece's first reader and number of readers: a piece is present in the inputs of a
    contiguous run of its agent's requests (an input piece from its writer, an output piece from the next)."""
    first_reader = p.writer + p.is_output
    return first_reader, np.maximum(p.reader - first_reader + 1, 0)


def _read_tokens(ba: _ByAgent, p: _Pieces) -> np.ndarray:
    """Eq. 3's decode-stage reads per segment: (tokens in a reader's input) × its output length, plus a
    request's later decode steps over the tokens it writes itself."""
    inp, out = ba.ints("input_tokens"), ba.ints("output_tokens")
    ntok = p.tokens
    first_reader, n_read = _read_runs(p)
    cum_l = np.r_[0, np.cumsum(out)]
    in_reads = ntok * np.where(n_read > 0, cum_l[p.reader + 1] - cum_l[np.minimum(first_reader, p.reader + 1)], 0)
    j0 = p.start - inp[p.writer]
    j1 = p.end - 1 - inp[p.writer]
    own = np.where(p.is_output == 1, ntok * (out[p.writer] - 1) - (ntok * (j0 + j1)) // 2, 0)
    return np.bincount(p.seg, weights=(in_reads + own).astype(float), minlength=p.nseg)


def _segment_table(trace: Trace, ba: _ByAgent, p: _Pieces, sched: pd.DataFrame,
                   read_tokens: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """One row per segment (docs/design.md §3 output contract), and the segment ids."""
    n, nseg, seg_of = len(ba), p.nseg, p.seg
    rid, sid, aid, role, turn = (ba.col(c) for c in ("request_id", "session_id", "agent_id", "role", "turn"))
    turn = turn.astype(np.int64)
    written = np.bincount(seg_of, weights=p.tokens, minlength=nseg).astype(np.int64)
    # per-segment identity (pieces of a segment share agent, death, turn, phase)
    first_piece = np.unique(seg_of, return_index=True)[1].astype(np.int64)
    first_writer = np.full(nseg, n, dtype=np.int64)
    np.minimum.at(first_writer, seg_of, p.writer)
    last_reader = np.full(nseg, -1, dtype=np.int64)
    np.maximum.at(last_reader, seg_of, p.reader)  # pieces rematerialized inside a segment are last read earlier
    closing = p.death[first_piece]
    head = p.writer[first_piece]  # the writer of each segment's first piece: its agent, session and turn
    seg_role = role[head]
    seg_phase = p.phase[first_piece]
    seg_class = np.where(seg_phase == 0, "reasoning_stripped",
                         np.where(seg_phase == 1, "reasoning_laden", seg_role))
    boundary = np.where(closing >= 0, "turn_end",
                        np.where(np.isin(seg_role, SUBAGENT_ROLES), "subagent_return", "session_end"))
    # segment ids: <agent_id>:s<k>, k counting the agent's segments in (death, turn, phase) order
    seg_agent = ba.acode[head]
    k_in_agent = np.arange(nseg) - np.searchsorted(seg_agent, seg_agent, side="left")
    seg_ids = np.array([f"{a}:s{k}" for a, k in zip(aid[head], k_in_agent)], dtype=object)
    t_start = sched["t_start_s"].to_numpy()[ba.order]
    t_first = t_start[first_writer]
    t_last = sched["t_decode_end_s"].to_numpy()[ba.order][last_reader]
    segs = pd.DataFrame({
        "segment_id": seg_ids, "session_id": sid[head], "agent_id": aid[head],
        "role": seg_role, "seg_class": seg_class, "phase": np.asarray(PHASES, dtype=object)[seg_phase],
        "boundary": boundary, "write_turn": turn[head], "tokens_written": written,
        "first_request": rid[first_writer], "last_request": rid[last_reader],
        "closing_request": pd.Series([rid[c] if c >= 0 else None for c in closing.tolist()], dtype=object),
        "t_first_write_s": t_first, "t_last_read_s": t_last, "t_norm_s": t_last - t_first,
        "t_boundary_s": np.where(closing >= 0, t_start[np.maximum(closing, 0)], t_last),
        "read_tokens": read_tokens, "rho_rw": read_tokens / np.maximum(written, 1),
        "wait_s": _lead_waits(trace, sched, seg_role, aid[head], t_first, t_last)})
    for extra in ("model", "domain", "benchmark"):  # inserted in front: benchmark, domain, model
        if extra in ba.req.columns:
            segs.insert(4, extra, ba.col(extra)[head])
    return segs, seg_ids


def _lead_waits(trace: Trace, sched: pd.DataFrame, seg_role: np.ndarray, seg_agent: np.ndarray,
                t_first: np.ndarray, t_last: np.ndarray) -> np.ndarray:
    """Per lead segment, the time while it is live that its lead has a sub-agent outstanding; NaN otherwise."""
    wait = np.full(len(seg_role), np.nan)
    lead = np.flatnonzero(seg_role == "lead")
    if len(lead):
        waits = wait_intervals(trace, sched)
        empty = np.zeros((0, 2))
        for i in lead:
            wait[i] = overlap_s(waits.get(seg_agent[i], empty), t_first[i], t_last[i])
    return wait


def _writes_and_reads(ba: _ByAgent, p: _Pieces, seg_ids: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The per-request tables: tokens each request writes into, and reads from, each segment."""
    rid = ba.col("request_id")
    ntok = p.tokens
    writes = (pd.DataFrame({"g": p.writer, "seg": p.seg, "tokens": ntok})
              .groupby(["g", "seg"], sort=True, as_index=False)["tokens"].sum())
    writes = pd.DataFrame({"request_id": rid[writes["g"].to_numpy()], "segment_id": seg_ids[writes["seg"].to_numpy()],
                           "tokens": writes["tokens"].to_numpy()})
    first_reader, n_read = _read_runs(p)
    idx = np.repeat(np.arange(len(p.writer)), n_read)
    offs = np.arange(len(idx)) - np.repeat(np.cumsum(n_read) - n_read, n_read)
    reads = (pd.DataFrame({"g": first_reader[idx] + offs, "seg": p.seg[idx], "tokens": ntok[idx]})
             .groupby(["g", "seg"], sort=True, as_index=False)["tokens"].sum())
    reads = pd.DataFrame({"request_id": rid[reads["g"].to_numpy()], "segment_id": seg_ids[reads["seg"].to_numpy()],
                          "tokens": reads["tokens"].to_numpy()})
    return writes, reads


def _external(trace: Trace, ba: _ByAgent, gaps: list[tuple[int, int]]) -> pd.DataFrame:
    """The requests that open declared external-prefix positions; a gap beyond the declared
    ``shared_prefix_tokens`` (only in a Trace built without validation) raises TraceError."""
    rid = ba.col("request_id")
    gap_g = np.array([g for g, _ in gaps], dtype=np.int64)
    gap_k = np.array([k for _, k in gaps], dtype=np.int64)
    shared = ba.ints("shared_prefix_tokens") if "shared_prefix_tokens" in ba.req.columns else np.zeros(len(ba))
    over = gap_k > shared[gap_g] if len(gap_g) else np.zeros(0, dtype=bool)
    if over.any():
        g = int(gap_g[over][0])
        mp, aid = ba.ints("matched_prefix_tokens"), ba.col("agent_id")
        raise TraceError(trace.source, f"{int(ba.order[g])} (request_id={rid[g]!r})", "matched_prefix_tokens",
                         f"matched prefix {int(mp[g])} reaches {int(gap_k[over][0])} tokens beyond agent {aid[g]!r}'s "
                         "earlier context, more than its declared shared_prefix_tokens (validate the trace)")
    return pd.DataFrame({"request_id": rid[gap_g] if len(gap_g) else np.zeros(0, dtype=object),
                         "tokens": gap_k, "declared": np.ones(len(gap_g), dtype=bool)})


# ------------------------------------------------------------------------------------------------
# The one entry point: a trace, its clock, its segments
# ------------------------------------------------------------------------------------------------

#: What :func:`prepare` takes: a Trace, a trace path, a corpus workload name, or several workload names.
TraceSource = Trace | str | os.PathLike | Sequence[str]


def load_trace(source: TraceSource, scale: float = 1.0, seed: int = 0) -> Trace:
    """The trace ``source`` names: a Trace as is; a corpus workload (:data:`lachesis.traces.workloads.WORKLOADS`)
    generated at ``scale``/``seed``; several workloads generated and concatenated; else a trace path."""
    if isinstance(source, Trace):
        return source
    if isinstance(source, str) and source in workloads.WORKLOADS:
        return corpus.generate(source, scale=scale, seed=seed)
    if isinstance(source, Sequence) and not isinstance(source, str):
        names = list(source)
        return Trace.concat([corpus.generate(w, scale=scale, seed=seed) for w in names], "embedded:" + "+".join(names))
    return read_trace(source)


@dataclass(frozen=True)
class Prepared:
    """A trace made ready for the figures and the simulator: itself, its reference clock, its segments."""

    trace: Trace
    clock: ReferenceClock
    seed: int
    segments: Segments


def prepare(source: TraceSource, scale: float = 1.0, seed: int = 0, clock: ReferenceClock | None = None) -> Prepared:
    """Load ``source`` (:func:`load_trace`), choose its reference clock once (``clock``, else
    :func:`lachesis.traces.clock.clock_for`) and recover its segments with ``seed``."""
    trace = load_trace(source, scale, seed)
    clock = clock or clock_for(trace)
    return Prepared(trace, clock, seed, recover(trace, clock, seed))


# ------------------------------------------------------------------------------------------------
# Summary
# ------------------------------------------------------------------------------------------------


def summarize(segments: pd.DataFrame, by: tuple[str, ...] = ("seg_class",)) -> pd.DataFrame:
    """Per-class table: segments, tokens written, median/p10/p90 T_norm, median ρR/W."""
    g = segments.groupby(list(by), sort=True)
    t = g["t_norm_s"]
    return pd.DataFrame({
        "segments": g.size(), "tokens_written": g["tokens_written"].sum(),
        "tnorm_median_s": t.median(), "tnorm_p10_s": t.quantile(0.1), "tnorm_p90_s": t.quantile(0.9),
        "rho_median": g["rho_rw"].median()}).reset_index()
