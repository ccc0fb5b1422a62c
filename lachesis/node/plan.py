"""The replay plan: a trace and its recovered segments flattened into the integer arrays the
decode-node simulator replays (per-request costs, writes, reads and closes; the agents' spawn
structure), built once per trace.  The assumptions it reads the trace by are in docs/design.md §5
("Decode node") and §3 (segment boundaries).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd

from lachesis.analysis.segments import Segments
from lachesis.kv import SEG_CLASSES
from lachesis.traces.trace import Trace

#: the TPOT (s) at which a session's span is the unit of simulated time (:attr:`Plan.mean_session_s`)
NOMINAL_TPOT_S = 0.05


def _csr(keys: np.ndarray, n: int, *cols: np.ndarray) -> tuple[np.ndarray, ...]:
    """Group rows by integer key into CSR (ptr, sorted columns...)."""
    order = np.argsort(keys, kind="stable")
    counts = np.bincount(keys, minlength=n)
    ptr = np.concatenate([[0], np.cumsum(counts)])
    return (ptr,) + tuple(c[order] for c in cols)


class RequestReads(NamedTuple):
    """What one request's decode reads: the segments, their tokens (float64 for the step's dot product and
    as ints), and the total (exact: whole numbers)."""

    segments: list[int]
    tokens: np.ndarray
    total: float
    tokens_int: list[int]


class RequestStep(NamedTuple):
    """One request as the event loop reads it, in that order: the user's think time, the segments that
    close at its arrival, its writes (segment, tokens), its reads, its output tokens, the segments that
    close at its end, and its tool and observation times (s)."""

    t_user: float
    close_arrival: list[int]
    writes: list[tuple[int, int]]
    reads: RequestReads | None
    out: int
    close_end: list[int]
    t_tools: float
    t_obs: float


@dataclass(frozen=True)
class PlanLists:
    """A plan as Python objects for the event loop: one :class:`RequestStep` per request, and each
    segment's class, role and ranker key."""

    requests: list[RequestStep]
    seg_class: list[str]
    seg_role: list[str]
    seg_key: list[float]


class SegmentColumns(NamedTuple):
    """A plan's per-segment columns as the native node memory reads them: each segment's class as its index in
    :data:`lachesis.kv.SEG_CLASSES` (int32), ranker key, final tokens and decode-stage reads."""

    seg_class: np.ndarray
    seg_key: np.ndarray
    seg_tokens: np.ndarray
    seg_reads: np.ndarray


def segment_columns(seg_class: np.ndarray, seg_key: np.ndarray, seg_tokens: np.ndarray,
                    seg_reads: np.ndarray) -> SegmentColumns:
    """:class:`SegmentColumns` of per-segment columns (classes by name; an unknown one is a ValueError naming it)."""
    codes = pd.Index(SEG_CLASSES).get_indexer(pd.Index(seg_class, dtype=object))
    if (codes < 0).any():
        bad = seg_class[int(np.flatnonzero(codes < 0)[0])]
        raise ValueError(f"plan: unknown seg_class {bad!r}; expected one of {sorted(SEG_CLASSES)}")
    return SegmentColumns(codes.astype(np.int32), np.array(seg_key, dtype=np.float64),
                          np.array(seg_tokens, dtype=np.int64), np.array(seg_reads, dtype=np.int64))


class RequestArrays(NamedTuple):
    """A plan's requests as the native event loop reads them: per request its costs and CSR rows (the plan's
    own), the read tokens as floats and their exact sum, and the agent tree flattened: per agent (numbered
    breadth first from the roots, in session order) its requests, per request the agents it spawns, per session
    its root agents."""

    t_user: np.ndarray
    t_tools: np.ndarray
    t_obs: np.ndarray
    out: np.ndarray
    w_ptr: np.ndarray
    w_seg: np.ndarray
    w_tok: np.ndarray
    r_ptr: np.ndarray
    r_seg: np.ndarray
    r_tok: np.ndarray
    r_tok_f: np.ndarray
    r_sum: np.ndarray
    ca_ptr: np.ndarray
    ca_seg: np.ndarray
    ce_ptr: np.ndarray
    ce_seg: np.ndarray
    kid_ptr: np.ndarray
    kid_agent: np.ndarray
    agent_ptr: np.ndarray
    agent_req: np.ndarray
    root_ptr: np.ndarray
    root_agent: np.ndarray


@dataclass
class AgentPlan:
    """One agent's requests and the sub-agents each of them spawns."""

    agent_id: str
    role: str
    requests: np.ndarray  # global request indices in reference-clock order
    requests_list: list[int] = field(default_factory=list)
    children: dict[int, list["AgentPlan"]] = field(default_factory=dict)  # request idx -> spawned


@dataclass
class Plan:
    """Integer-indexed replay plan of a trace: per-request costs, writes, reads, closes."""

    n_req: int
    out_tokens: np.ndarray
    t_tools: np.ndarray
    t_obs: np.ndarray
    t_user: np.ndarray
    w_ptr: np.ndarray
    w_seg: np.ndarray
    w_tok: np.ndarray
    r_ptr: np.ndarray
    r_seg: np.ndarray
    r_tok: np.ndarray
    ca_ptr: np.ndarray  # closes at arrival
    ca_seg: np.ndarray
    ce_ptr: np.ndarray  # closes at end of request
    ce_seg: np.ndarray
    seg_ids: np.ndarray  # segment index -> its id in the segment table
    seg_class: np.ndarray
    seg_role: np.ndarray
    seg_tokens: np.ndarray
    seg_reads: np.ndarray  # decode-stage reads per segment (Eq. 3, tokens), from segment recovery
    seg_key: np.ndarray  # ranker key (workers), NaN otherwise
    sessions: list[str]
    roots: dict[str, list[AgentPlan]]
    fingerprint: str  # the trace's (the simulator's random streams derive from it)
    laden_close: str = "last_read"  # see build_plan
    _mean_span: float | None = None
    _lists: PlanLists | None = None
    _spans: dict | None = None
    _segment_columns: SegmentColumns | None = field(default=None, repr=False)
    _request_arrays: RequestArrays | None = field(default=None, repr=False)

    def segment_columns(self) -> SegmentColumns:
        """The per-segment columns the native node memory reads (built once; read-only)."""
        if self._segment_columns is None:
            self._segment_columns = _frozen(segment_columns(self.seg_class, self.seg_key, self.seg_tokens,
                                                            self.seg_reads))
        return self._segment_columns

    def request_arrays(self) -> RequestArrays:
        """The requests and the agent tree as the native event loop reads them (built once; read-only)."""
        if self._request_arrays is None:
            self._request_arrays = _frozen(self._flatten())
        return self._request_arrays

    def _flatten(self) -> RequestArrays:
        agents: list[AgentPlan] = []
        index: dict[int, int] = {}

        def number(a: AgentPlan) -> int:
            if id(a) not in index:
                index[id(a)] = len(agents)
                agents.append(a)
            return index[id(a)]

        root_ptr, root_agent = [0], []
        for s in self.sessions:
            root_agent += [number(a) for a in self.roots[s]]
            root_ptr.append(len(root_agent))
        kids_of: dict[int, list[int]] = {}
        k = 0
        while k < len(agents):  # every agent reachable from a root, numbered breadth first
            for q, kids in agents[k].children.items():
                kids_of[int(q)] = [number(c) for c in kids]
            k += 1
        agent_ptr, agent_req = [0], []
        for a in agents:
            agent_req += [int(q) for q in a.requests_list]
            agent_ptr.append(len(agent_req))
        kid_ptr, kid_agent = [0], []
        for q in range(self.n_req):
            kid_agent += kids_of.get(q, [])
            kid_ptr.append(len(kid_agent))
        r_int = self.r_tok.astype(np.int64)
        cum = np.concatenate([[0], np.cumsum(r_int)])
        r_sum = (cum[self.r_ptr[1:]] - cum[self.r_ptr[:-1]]).astype(float)  # exact: whole tokens, then one rounding
        i64, i32, f64 = np.int64, np.int32, np.float64
        return RequestArrays(
            t_user=self.t_user.astype(f64), t_tools=self.t_tools.astype(f64), t_obs=self.t_obs.astype(f64),
            out=self.out_tokens.astype(i64), w_ptr=self.w_ptr.astype(i64), w_seg=self.w_seg.astype(i32),
            w_tok=self.w_tok.astype(i64), r_ptr=self.r_ptr.astype(i64), r_seg=self.r_seg.astype(i32), r_tok=r_int,
            r_tok_f=self.r_tok.astype(f64), r_sum=r_sum, ca_ptr=self.ca_ptr.astype(i64),
            ca_seg=self.ca_seg.astype(i32), ce_ptr=self.ce_ptr.astype(i64), ce_seg=self.ce_seg.astype(i32),
            kid_ptr=np.array(kid_ptr, i64), kid_agent=np.array(kid_agent, i32), agent_ptr=np.array(agent_ptr, i64),
            agent_req=np.array(agent_req, i32), root_ptr=np.array(root_ptr, i64), root_agent=np.array(root_agent, i32))

    def lists(self) -> PlanLists:
        """Per-request Python records for the event loop (numpy scalar indexing is slow per event)."""
        if self._lists is None:
            def split(ptr, col):  # per request, the CSR rows of one column as a Python list
                p, c = ptr.tolist(), col.tolist()
                return [c[p[q]:p[q + 1]] for q in range(self.n_req)]

            r_tok = self.r_tok.astype(float)
            r_seg, r_int, r_ptr = split(self.r_ptr, self.r_seg), split(self.r_ptr, self.r_tok), self.r_ptr.tolist()

            def rd(q: int) -> RequestReads | None:
                a, b = r_ptr[q], r_ptr[q + 1]
                return RequestReads(r_seg[q], r_tok[a:b], float(sum(r_int[q])), r_int[q]) if b > a else None

            writes = [list(zip(s, t)) for s, t in zip(split(self.w_ptr, self.w_seg), split(self.w_ptr, self.w_tok))]
            self._lists = PlanLists(
                requests=list(map(RequestStep, self.t_user.tolist(), split(self.ca_ptr, self.ca_seg), writes,
                                  [rd(q) for q in range(self.n_req)], self.out_tokens.tolist(),
                                  split(self.ce_ptr, self.ce_seg), self.t_tools.tolist(), self.t_obs.tolist())),
                seg_class=[str(x) for x in self.seg_class], seg_role=[str(x) for x in self.seg_role],
                seg_key=[float(x) for x in self.seg_key])
        return self._lists

    def session_span_s(self, session: str, tpot_s: float) -> float:
        """Critical-path duration of one session when every token takes ``tpot_s`` (same delays).  Sub-agents
        before their parents on an explicit stack, so a nesting of any depth has no recursion limit."""
        span: dict[int, float] = {}
        stack = [(a, False) for a in self.roots[session]]
        while stack:
            a, kids_done = stack.pop()
            if not kids_done:
                stack.append((a, True))
                stack += [(c, False) for kids in a.children.values() for c in kids]
                continue
            t = 0.0
            for q in a.requests:
                q = int(q)
                kids = max((span[id(c)] for c in a.children.get(q, [])), default=0.0)
                t += self.t_user[q] + self.out_tokens[q] * tpot_s + max(self.t_tools[q], kids) + self.t_obs[q]
            span[id(a)] = t
        return max(span[id(a)] for a in self.roots[session])

    def session_spans(self, tpot_s: float) -> np.ndarray:
        """:meth:`session_span_s` of every session in ``sessions`` order (cached per TPOT; read-only)."""
        if self._spans is None:
            self._spans = {}
        if tpot_s not in self._spans:
            a = np.array([self.session_span_s(x, tpot_s) for x in self.sessions])
            a.flags.writeable = False
            self._spans[tpot_s] = a
        return self._spans[tpot_s]

    @property
    def mean_session_s(self) -> float:
        """The simulator's unit of simulated time: mean session span at a nominal 50 ms TPOT.

        ASSUMPTION: warm-up and measurement windows are counted in this unit (a session's span at
        a TPOT between the two SLOs), not on the 0.2 s reference clock whose decode time would
        inflate multi-agent sessions several-fold.
        """
        if self._mean_span is None:
            self._mean_span = float(np.mean(self.session_spans(NOMINAL_TPOT_S)))
        return self._mean_span


def _frozen(t):
    """A tuple of arrays, each made read-only (a plan's derived forms are shared by every run of it)."""
    for a in t:
        a.flags.writeable = False
    return t


def trace_row_hashes(trace: Trace) -> list[bytes]:
    """pandas' per-row hashes of a trace's requests and (if any) spawns, as text: what its digests hash."""
    tables = [trace.requests] + ([trace.spawns] if trace.spawns is not None and len(trace.spawns) else [])
    return [pd.util.hash_pandas_object(t.astype(str), index=False).to_numpy().tobytes() for t in tables]


def trace_fingerprint(trace: Trace) -> str:
    """Stable hash of a trace's requests and spawns (for the sweep cache)."""
    h = 0
    for b in trace_row_hashes(trace):
        h = zlib.crc32(b, h)
    return f"{h:08x}-{len(trace.requests)}"


LADEN_CLOSES = ("last_read", "arrival")


def build_plan(trace: Trace, segments: Segments, keys: pd.Series | None = None, laden_close: str = "last_read") -> Plan:
    """Flatten a trace and its recovered segments into the arrays the simulator replays.

    ``laden_close``: when a reasoning-laden segment's turn-end boundary is reported to the allocator.
    "last_read" (default): at the end of its last reader, the turn's final response, which is the
    turn end as the harness knows it when it returns the answer.  Eq. 1 ends a segment's lifetime at
    its last read; §4: the free "fires at a context boundary, not after the inactivity that a recency
    policy waits for"; §5.5: HBM holds "every reasoning-laden context segment the deployment has live
    at one time".  ASSUMPTION (sensitivity knob) "arrival": at its ``closing_request``'s arrival,
    i.e. after the next user message's delay (the segment table's literal boundary, DESIGN §3).
    """
    if laden_close not in LADEN_CLOSES:
        raise ValueError(f"laden_close must be one of {LADEN_CLOSES}, got {laden_close!r}")
    if not len(trace.requests):  # no session to replay: no session length sizes a window, no load to search
        raise ValueError(f"build_plan: trace {trace.source!r} has no requests: nothing to replay")
    r = _scheduled_requests(trace, segments)
    rid = {x: i for i, x in enumerate(r["request_id"])}
    n = len(r)
    sg = segments.segments.reset_index(drop=True)
    sid = {x: i for i, x in enumerate(sg["segment_id"])}
    w, rd = segments.writes, segments.reads
    w_ptr, w_seg, w_tok = _csr(_index(w["request_id"], rid, "writes.request_id"), n,
                               _index(w["segment_id"], sid, "writes.segment_id"), w["tokens"].to_numpy(np.int64))
    r_ptr, r_seg, r_tok = _csr(_index(rd["request_id"], rid, "reads.request_id"), n,
                               _index(rd["segment_id"], sid, "reads.segment_id"), rd["tokens"].to_numpy(np.int64))
    ca_ptr, ca_seg, ce_ptr, ce_seg = _closes(sg, rid, n, laden_close)
    keys = keys if keys is not None else pd.Series(dtype=float)
    seg_key = sg["agent_id"].map(keys).to_numpy(float) if len(keys) else np.full(len(sg), np.nan)
    roots = _agent_roots(trace, r, rid)

    return Plan(
        n_req=n, out_tokens=r["output_tokens"].to_numpy(np.int64),
        t_tools=r["t_tools_s"].to_numpy(float), t_obs=r["t_obs_s"].to_numpy(float),
        t_user=r["t_user_s"].to_numpy(float),
        w_ptr=w_ptr, w_seg=w_seg, w_tok=w_tok, r_ptr=r_ptr, r_seg=r_seg, r_tok=r_tok,
        ca_ptr=ca_ptr, ca_seg=ca_seg, ce_ptr=ce_ptr, ce_seg=ce_seg,
        seg_ids=sg["segment_id"].to_numpy(object), seg_class=sg["seg_class"].to_numpy(object),
        seg_role=sg["role"].to_numpy(object) if "role" in sg else sg["seg_class"].to_numpy(object),
        seg_tokens=sg["tokens_written"].to_numpy(np.int64),
        seg_reads=np.rint(sg["read_tokens"].to_numpy(float)).astype(np.int64),
        seg_key=seg_key, sessions=[str(s) for s in roots], roots=roots,
        fingerprint=trace_fingerprint(trace), laden_close=laden_close,
    )


def _scheduled_requests(trace: Trace, segments: Segments) -> pd.DataFrame:
    """The trace's requests joined with their reference-clock schedule, in (session, start) order."""
    req = trace.requests
    sched = segments.schedule.set_index("request_id")
    missing = set(req["request_id"]) - set(sched.index)
    if missing:
        raise ValueError(f"segments.schedule: field 'request_id': no schedule row for requests {sorted(missing)[:5]}")
    r = req.set_index("request_id").join(sched[["t_start_s", "t_tools_s", "t_obs_s", "t_user_s"]])
    r = r.reset_index()
    return r.sort_values(["session_id", "t_start_s"], kind="stable").reset_index(drop=True)


def _index(series: pd.Series, table: dict, what: str) -> np.ndarray:
    """Each id of ``series`` as its integer index in ``table``; a ValueError naming ``what`` for an unknown id."""
    out = series.map(table)
    if out.isna().any():
        bad = series[out.isna()].iloc[0]
        raise ValueError(f"segments: field {what!r}: unknown id {bad!r}")
    return out.to_numpy(np.int64)


def _closes(sg: pd.DataFrame, rid: dict, n: int, laden_close: str) -> tuple[np.ndarray, ...]:
    """Segment closes per request, as CSR (ptr, segments): at its arrival, then at its end (``build_plan``)."""
    closing = sg["closing_request"]
    has_close = closing.notna() & closing.map(lambda x: x in rid)
    if laden_close == "last_read":
        has_close &= ~sg["seg_class"].eq("reasoning_laden")
    ca_req = _index(closing[has_close], rid, "segments.closing_request")
    ca_ptr, ca_seg = _csr(ca_req, n, np.flatnonzero(has_close.to_numpy()))
    ce_mask = ~has_close.to_numpy()
    ce_req = _index(sg.loc[ce_mask, "last_request"], rid, "segments.last_request")
    ce_ptr, ce_seg = _csr(ce_req, n, np.flatnonzero(ce_mask))
    return ca_ptr, ca_seg, ce_ptr, ce_seg


def _agent_roots(trace: Trace, r: pd.DataFrame, rid: dict) -> dict[str, list[AgentPlan]]:
    """Each session's root agent, its sub-agents hung under the requests that spawn them.

    Agents are the groups of (session, agent) in order of first appearance, a group's rows ascending;
    the spawn structure is the trace's validated spawn tree (trace rows -> rows of ``r``)."""
    n = len(r)
    group = r.groupby(["session_id", "agent_id"], sort=False).ngroup().to_numpy()
    n_groups = int(group.max()) + 1 if n else 0
    rows_of = np.argsort(group, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(group, minlength=n_groups))])
    agent_of, role_of = r["agent_id"].tolist(), r["role"].tolist()
    agents: dict[str, AgentPlan] = {}
    for k in range(n_groups):
        rows = rows_of[bounds[k]:bounds[k + 1]]
        first = int(rows[0])
        agents[agent_of[first]] = AgentPlan(str(agent_of[first]), str(role_of[first]), rows, rows.tolist())
    tree = trace.spawn_tree()
    trace_rid = trace.requests["request_id"].tolist()
    for p, kids in tree.children.items():
        q = rid[trace_rid[p]]
        agents[agent_of[q]].children[q] = [agents[k] for k in kids]
    return {str(s): [agents[tree.roots[s]]] for s in pd.unique(r["session_id"])}
