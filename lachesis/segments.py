"""Context-segment recovery from a per-request trace (§3.2–3.5, Appendix B, docs/design.md §3).

``recover(trace, clock, seed)`` returns a :class:`Segments` holding the segment table, per-request
writes and reads, and the reference-clock schedule (:mod:`lachesis.clock`).  :func:`prepare` is the
one way from a corpus workload, a trace path or a Trace to the trace, the clock chosen for it and its
segments, for every consumer (figures, command line, real-trace report).
Semantics (settled):

*Writes.*  Request q of agent a writes KV for positions ``[matched_prefix(q), input(q) + output(q))``
of a's context (so a segment's ``tokens_written`` sums to :func:`lachesis.trace.tokens_written`).

*Deaths.*  Each agent's requests are walked in order keeping the live context as a list of
intervals (position ranges tagged with writer request and whether they are its input or output).
When request q arrives with matched prefix m, every live token at a position >= m dies: its last
read was a's previous request and q is the ``closing_request``.  At the agent's end (a sub-agent's
last request = its return; a single/lead agent's last request = the session's end) all remaining
tokens die, last read by the agent's last request (``closing_request`` None).  A matched prefix may
reach beyond the agent's own earlier context only by the ``shared_prefix_tokens`` the trace declares
(validated by :mod:`lachesis.trace`): those positions are an external prefix (a prefix cache shared
across agents or sessions, such as the synthetic corpus' system prompt), present in the context but
written by no request of this agent, so they belong to no segment and are not in ``tokens_written``.
Each request that opens such positions is listed in ``Segments.external`` (request_id, tokens).

*Segments.*  A context segment = the tokens of one agent with the same (write turn, write phase,
death event).  Single agent: the input part of the FIRST request of a turn (the unmatched prefill:
the rematerialized, reasoning-stripped context of the previous turn plus the new user message) is
phase ``turn_prefill`` -> class ``reasoning_stripped``; everything else the turn writes (outputs,
later rounds' observations, reasoning) is phase ``turn_body`` -> class ``reasoning_laden``.  This is
the class the harness fixes at write time (§4).  Multi-agent: class = role (lead, worker, reviewer),
one phase (``agent``).  Boundary = what closed it: a later request's matched prefix -> ``turn_end``
(single and lead agents); a sub-agent's end -> ``subagent_return``; the session's end -> ``session_end``.
A sub-agent (worker, reviewer) has no turns: the harness reports one boundary for it, its return, so
every token it writes dies there (a later request of it that stops reading a token still bounds that
token's reads, and so its ρR/W, but not its segment).  Rematerialized KV is written by a later
request and so is a new segment, except inside the provider-cache tolerance below.

*Provider caches* (ASSUMPTION, named: ``cache_tolerance_tokens``).  A hosted provider's cache read
is not exactly the previous context: it stops a few tokens short of the previous request's INPUT
(the re-serialized end of the last message) and never holds the previous OUTPUT (generated tokens
are re-prefilled by the next request).  Read exactly, that closes a segment of a few tokens at nearly
every request.  So when request g's matched prefix falls short of its previous request's input by at
most ``tol`` tokens (the request's ``cache_tolerance_tokens`` column, or :func:`recover`'s argument)
and g's input still holds the whole previous context (input + output), the tokens above the matched
prefix are rematerialized by g inside the SAME segment: their old copies are last read by the
previous request and die with the position just below the matched prefix; g's re-prefill is written
(``tokens_written`` keeps summing to the trace's writes).  A larger shortfall, or a context that
shrank, is a real discard as above.  Traces without the column (the synthetic corpus, exact
prefixes) use 0: exact matching.  The Claude Code adapter declares its default and the evidence
(:mod:`lachesis.adapters.claude_code`).

*T_norm (Eq. 1).*  ``t_decode_end(last reader) - t_start(first writer)`` on the reference clock
(:func:`lachesis.clock.schedule`); for a purely sequential session this is Eq. 1's sum of
generation, observation-prefill, tool and user-delay terms while the segment is live.

``t_boundary_s`` (extra column) is when the harness reports the boundary: the closing request's
arrival (its decode start; prefill time is not counted), or the last read for an agent's end.  For a
reasoning-laden segment it lies after the user delay before the next message, so
``t_boundary_s - t_first_write_s`` is the alternative reading "live until the boundary arrives";
T_norm follows the settled last-read definition.

*ρR/W (Eq. 3).*  Decode-stage reads only, full-context attention, KV bytes per token cancel.  For
each reader q with L = output(q): tokens of s present in q's input (``reads`` table) contribute
``tokens × L``; tokens of s written by q's own output at offset j (0-based) contribute ``L - 1 - j``
(token j's KV is present for the later decode steps of q).  V_W(s) = tokens written; ρ = reads/writes.
Because a token stays in its agent's context from its write until it dies, each token's readers are
a contiguous run of its agent's requests, so reads are prefix sums of L over that run (vectorized).

*Lead waiting share.*  ``wait_s`` = reference time, while a lead segment is live, during which the
lead has at least one outstanding sub-agent (§3.4: "this waiting period accounts for 71–88% of the
lead-agent lifetime"); NaN for other classes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from lachesis import corpus, workloads
from lachesis.clock import clock_for, overlap_s, schedule, wait_intervals
from lachesis.config import ReferenceClock
from lachesis.trace import SUBAGENT_ROLES, Trace, TraceError, read_trace

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
    #: prefix; module doc).  ``declared`` is True on every row of a validated trace (kept for callers).
    external: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        {"request_id": pd.Series(dtype=object), "tokens": pd.Series(dtype="int64"),
         "declared": pd.Series(dtype=bool)}))


def _walk(agent_start: list[int], agent_end: list[int], mp: list[int], inp: list[int], out: list[int],
          tol: list[int] | None = None) -> tuple[tuple[np.ndarray, ...], list[tuple[int, int]]]:
    """Interval walk per agent (positions in agent-sorted order): the dead pieces, and the external
    prefixes opened, as (position, tokens).

    ``tol[g]``: request g's cache tolerance (module doc, *Provider caches*).  When g's matched prefix
    falls short of its previous request's input by at most ``tol[g]`` tokens and g's input still holds
    the whole previous context, the tokens above the matched prefix are rematerialized by g inside the
    same segment: their pieces die (last read by the previous request) with whatever later kills the
    position just below the matched prefix (the *anchor*), not at g.
    """
    w_l, o_l, s_l, e_l, d_l, r_l = [], [], [], [], [], []
    gaps: list[tuple[int, int]] = []

    def dead(iv: list, lo: int, hi: int, death: int, reader: int) -> int | None:
        if iv[2] < 0:
            return None
        w_l.append(iv[2]); o_l.append(iv[3]); s_l.append(lo); e_l.append(hi)
        d_l.append(death); r_l.append(reader)
        return len(d_l) - 1

    for b, e in zip(agent_start, agent_end):
        live: list[list] = []  # [start, end, writer (-1: external prefix), is_output, pieces following its top]
        for g in range(b, e):
            m = mp[g]
            live_end = live[-1][1] if live else 0
            if m > live_end:  # a declared external prefix: present, written by no request of this agent
                gaps.append((g, m - live_end))
                live.append([live_end, m, -1, 0, []])
            soft = (tol is not None and tol[g] > 0 and g > b and m < live_end
                    and m >= inp[g - 1] - tol[g] and inp[g] >= live_end)
            carried: list[int] = []
            while live and live[-1][1] > m:  # tokens at positions >= m die; g closes them
                iv = live[-1]
                k = dead(iv, max(iv[0], m), iv[1], g, g - 1)
                carried += iv[4] + ([k] if k is not None else [])
                iv[4] = []
                if iv[0] < m:
                    iv[1] = m
                    break
                live.pop()
            if carried:
                if soft and live and live[-1][2] >= 0:  # the anchor decides when they die
                    live[-1][4] += carried
                else:
                    for k in carried:
                        d_l[k] = g
            if inp[g] > m:
                live.append([m, inp[g], g, 0, []])
            if out[g] > 0:
                live.append([inp[g], inp[g] + out[g], g, 1, []])
        for iv in live:  # the agent's end: everything left dies, last read by its last request
            for k in iv[4]:
                d_l[k] = -1
            dead(iv, iv[0], iv[1], -1, e - 1)
    as_arr = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731
    return tuple(as_arr(x) for x in (w_l, o_l, s_l, e_l, d_l, r_l)), gaps


def recover(trace: Trace, clock: ReferenceClock | None = None, seed: int = 0,
            cache_tolerance_tokens: int | None = None) -> Segments:
    """Recover every context segment of ``trace`` with its T_norm (Eq. 1) and ρR/W (Eq. 3).

    ``clock``: the reference clock (default: :func:`lachesis.clock.clock_for` the trace, which maps its
    tool names to tool classes); ``seed``: seeds the per-session tool/user draws;
    ``cache_tolerance_tokens``: the provider-cache tolerance of every request (module doc, *Provider
    caches*); None (default) = the trace's own ``cache_tolerance_tokens`` column, 0 where it has none.
    """
    clock = clock or clock_for(trace)
    req = trace.requests
    sched = schedule(trace, clock, seed)
    n = len(req)
    codes, _ = pd.factorize(req["agent_id"], sort=False)
    order = np.argsort(codes, kind="stable")  # agent-sorted position g -> trace row order[g]
    acode = codes[order]
    bounds = np.flatnonzero(np.r_[True, acode[1:] != acode[:-1]]) if n else np.zeros(0, dtype=np.int64)
    a_start, a_end = bounds, np.r_[bounds[1:], n].astype(np.int64)

    col = lambda c: req[c].to_numpy()[order]  # noqa: E731
    rid, sid, aid, role = col("request_id"), col("session_id"), col("agent_id"), col("role")
    mp, inp, out, turn = (col(c).astype(np.int64) for c in
                          ("matched_prefix_tokens", "input_tokens", "output_tokens", "turn"))
    first_of_turn = np.ones(n, dtype=bool)
    if n:
        first_of_turn[1:] = (acode[1:] != acode[:-1]) | (turn[1:] != turn[:-1])

    if cache_tolerance_tokens is not None:
        tol = _tolerance(cache_tolerance_tokens)
        tol_g = np.full(n, tol, dtype=np.int64)
    else:
        tol_g = col("cache_tolerance_tokens").astype(np.int64) if "cache_tolerance_tokens" in req.columns \
            else np.zeros(n, dtype=np.int64)
    (pw, po, ps, pe, pd_, pr), gaps = _walk(a_start.tolist(), a_end.tolist(), mp.tolist(), inp.tolist(),
                                            out.tolist(), tol_g.tolist())
    # a sub-agent has no turns: every token it writes dies at its own end (its return), whatever
    # later request of it stopped reading the token (that request still bounds the token's reads)
    pd_ = np.where(np.isin(role[pw], SUBAGENT_ROLES), -1, pd_)
    ntok = pe - ps
    single = role[pw] == "single"
    phase = np.where(single, np.where((po == 0) & first_of_turn[pw], 0, 1), 2)
    wturn = turn[pw]
    death_sort = np.where(pd_ >= 0, pd_, n)
    pieces = pd.DataFrame({"a": acode[pw], "d": death_sort, "t": wturn, "p": phase})
    seg_of = pieces.groupby(["a", "d", "t", "p"], sort=True).ngroup().to_numpy()
    nseg = int(seg_of.max()) + 1 if len(seg_of) else 0

    # Eq. 3 reads: each piece is present in the inputs of a contiguous run of its agent's requests
    first_reader = pw + po  # an input piece is read by its writer; an output piece from the next request
    n_read = np.maximum(pr - first_reader + 1, 0)
    cum_l = np.r_[0, np.cumsum(out)]
    in_reads = ntok * np.where(n_read > 0, cum_l[pr + 1] - cum_l[np.minimum(first_reader, pr + 1)], 0)
    j0 = ps - inp[pw]
    j1 = pe - 1 - inp[pw]
    own = np.where(po == 1, ntok * (out[pw] - 1) - (ntok * (j0 + j1)) // 2, 0)
    read_tokens = np.bincount(seg_of, weights=(in_reads + own).astype(float), minlength=nseg)
    written = np.bincount(seg_of, weights=ntok, minlength=nseg).astype(np.int64)

    # per-segment identity (pieces of a segment share agent, death, turn, phase)
    first_piece = np.unique(seg_of, return_index=True)[1].astype(np.int64)
    first_writer = np.full(nseg, n, dtype=np.int64)
    np.minimum.at(first_writer, seg_of, pw)
    last_reader = np.full(nseg, -1, dtype=np.int64)
    np.maximum.at(last_reader, seg_of, pr)  # pieces rematerialized inside a segment are last read earlier
    closing = pd_[first_piece]
    seg_role = role[pw[first_piece]]
    seg_phase = phase[first_piece]
    seg_class = np.where(seg_phase == 0, "reasoning_stripped",
                         np.where(seg_phase == 1, "reasoning_laden", seg_role))
    boundary = np.where(closing >= 0, "turn_end",
                        np.where(np.isin(seg_role, SUBAGENT_ROLES), "subagent_return", "session_end"))
    # segment ids: <agent_id>:s<k>, k counting the agent's segments in (death, turn, phase) order
    seg_agent = acode[pw[first_piece]]
    k_in_agent = np.arange(nseg) - np.searchsorted(seg_agent, seg_agent, side="left")
    seg_ids = np.array([f"{a}:s{k}" for a, k in zip(aid[pw[first_piece]], k_in_agent)], dtype=object)

    t_start = sched["t_start_s"].to_numpy()[order]
    t_dec = sched["t_decode_end_s"].to_numpy()[order]
    t_first = t_start[first_writer]
    t_last = t_dec[last_reader]
    wait = np.full(nseg, np.nan)
    lead = np.flatnonzero(seg_role == "lead")
    if len(lead):
        waits = wait_intervals(trace, sched)
        empty = np.zeros((0, 2))
        for i in lead:
            wait[i] = overlap_s(waits.get(aid[pw[first_piece[i]]], empty), t_first[i], t_last[i])

    segs = pd.DataFrame({
        "segment_id": seg_ids, "session_id": sid[pw[first_piece]], "agent_id": aid[pw[first_piece]],
        "role": seg_role, "seg_class": seg_class, "phase": np.asarray(PHASES, dtype=object)[seg_phase],
        "boundary": boundary, "write_turn": turn[pw[first_piece]], "tokens_written": written,
        "first_request": rid[first_writer], "last_request": rid[last_reader],
        "closing_request": pd.Series([rid[c] if c >= 0 else None for c in closing.tolist()], dtype=object),
        "t_first_write_s": t_first, "t_last_read_s": t_last, "t_norm_s": t_last - t_first,
        "t_boundary_s": np.where(closing >= 0, t_start[np.maximum(closing, 0)], t_last),
        "read_tokens": read_tokens, "rho_rw": read_tokens / np.maximum(written, 1), "wait_s": wait})
    for extra in ("model", "domain", "benchmark"):  # inserted in front: benchmark, domain, model
        if extra in req.columns:
            segs.insert(4, extra, col(extra)[pw[first_piece]])

    writes = (pd.DataFrame({"g": pw, "seg": seg_of, "tokens": ntok})
              .groupby(["g", "seg"], sort=True, as_index=False)["tokens"].sum())
    writes = pd.DataFrame({"request_id": rid[writes["g"].to_numpy()], "segment_id": seg_ids[writes["seg"].to_numpy()],
                           "tokens": writes["tokens"].to_numpy()})
    idx = np.repeat(np.arange(len(pw)), n_read)
    offs = np.arange(len(idx)) - np.repeat(np.cumsum(n_read) - n_read, n_read)
    reads = (pd.DataFrame({"g": first_reader[idx] + offs, "seg": seg_of[idx], "tokens": ntok[idx]})
             .groupby(["g", "seg"], sort=True, as_index=False)["tokens"].sum())
    reads = pd.DataFrame({"request_id": rid[reads["g"].to_numpy()], "segment_id": seg_ids[reads["seg"].to_numpy()],
                          "tokens": reads["tokens"].to_numpy()})
    gap_g = np.array([g for g, _ in gaps], dtype=np.int64)
    gap_k = np.array([k for _, k in gaps], dtype=np.int64)
    shared = col("shared_prefix_tokens").astype(np.int64) if "shared_prefix_tokens" in req.columns else np.zeros(n)
    over = gap_k > shared[gap_g] if len(gap_g) else np.zeros(0, dtype=bool)
    if over.any():  # only a Trace built without validation gets here
        g = int(gap_g[over][0])
        raise TraceError(trace.source, f"{int(order[g])} (request_id={rid[g]!r})", "matched_prefix_tokens",
                         f"matched prefix {int(mp[g])} reaches {int(gap_k[over][0])} tokens beyond agent {aid[g]!r}'s "
                         "earlier context, more than its declared shared_prefix_tokens (validate the trace)")
    external = pd.DataFrame({"request_id": rid[gap_g] if len(gap_g) else np.zeros(0, dtype=object),
                             "tokens": gap_k, "declared": np.ones(len(gap_g), dtype=bool)})
    return Segments(segs, writes, reads, sched, external)


def _tolerance(v: object) -> int:
    """A cache tolerance: a whole number of tokens >= 0 (one-line ValueError otherwise)."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= int(v) < 2 ** 31:
        raise ValueError(f"cache_tolerance_tokens: expected a whole number of tokens >= 0, got {v!r}")
    return int(v)


# ------------------------------------------------------------------------------------------------
# The one entry point: a trace, its clock, its segments
# ------------------------------------------------------------------------------------------------

#: What :func:`prepare` takes: a Trace, a trace path, a corpus workload name, or several workload names.
TraceSource = Trace | str | os.PathLike | Sequence[str]


def load_trace(source: TraceSource, scale: float = 1.0, seed: int = 0) -> Trace:
    """The trace ``source`` names: a Trace as is; a corpus workload (:data:`lachesis.workloads.WORKLOADS`)
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
    :func:`lachesis.clock.clock_for`) and recover its segments with ``seed``."""
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
