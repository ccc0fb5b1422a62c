"""The memory of one decode GPU as the simulator drives it: the segment table, the tiered allocator
and the placement policy behind the calls a replay makes (write, close, read fractions, snapshots,
per-window totals), and the aged start of a boundary-unaware cache.  The memory system and its
assumptions are in docs/design.md §5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lachesis.config import Config
from lachesis.kv import AllocationError, Tier
from lachesis.memory.allocator import SegmentTable
from lachesis.memory.free_lists import TieredAllocator
from lachesis.memory.policies import as_policy
from lachesis.memory.protocol import Policy
from lachesis.node import block_capacity
from lachesis.node.clairvoyance import Clock, Recorder
from lachesis.node.plan import Plan


class OutOfMemory(RuntimeError):
    """Live KV exceeded HBM + HBF (minus weights): the load is infeasible."""


class _SegmentIds(dict[int, str]):
    """Segment -> table id ("inst:segment") of one session instance, formatted on first use."""

    def __init__(self, inst: int) -> None:
        super().__init__()
        self.inst, self.session = inst, str(inst)

    def __missing__(self, s: int) -> str:
        sid = self[s] = f"{self.inst}:{s}"
        return sid


#: tokens per pseudo-segment of an aged start (its LRU granularity)
AGED_CHUNK_TOKENS = 1 << 14
#: the class of an aged start's pseudo-segments (dead context that carried past its boundary)
AGED_CLASS = "reasoning_stripped"


@dataclass(frozen=True)
class MemorySizes:
    """One GPU's memory as a replay sizes it: the KV blocks of each tier (HBM whole, HBF less the weights), the
    tokens per block and the KV bytes per token.  Decided once (:func:`memory_sizes`) for both backends."""

    hbm_blocks: int
    hbf_blocks: int
    block_tokens: int
    bytes_per_token: int

    @property
    def aged_chunks(self) -> int:
        """The pseudo-segments of an aged start: every block's tokens in chunks of :data:`AGED_CHUNK_TOKENS`."""
        return -(-(self.hbm_blocks + self.hbf_blocks) * self.block_tokens // AGED_CHUNK_TOKENS)


def memory_sizes(cfg: Config) -> MemorySizes:
    """The sizes of one GPU's memory on a node (:func:`lachesis.node.block_capacity.kv_blocks`)."""
    hbm, hbf = block_capacity.kv_blocks(cfg.memory, cfg.model, cfg.deployment)
    return MemorySizes(int(hbm), int(hbf), int(cfg.deployment.block_tokens), int(cfg.model.kv_bytes_per_token))


class Memory:
    """The segment table + tiered allocator as the simulator drives them (one per GPU).

    ``clock`` (the oracle's close times) and ``recorder`` (a run's own closes) are shared by the ranks
    of a group: session instances are numbered across the group."""

    def __init__(self, plan: Plan, cfg: Config, policy: Policy | str, clock: Clock | None = None,
                 recorder: Recorder | None = None):
        self.plan = plan
        self.policy = as_policy(policy)
        self.sizes = sizes = memory_sizes(cfg)
        self.bpt = sizes.bytes_per_token
        self.alloc = TieredAllocator(sizes.hbm_blocks, sizes.hbf_blocks)
        self.table = SegmentTable(self.alloc, self.policy, sizes.block_tokens, self.bpt)
        self._marks: dict[int, dict[str, np.ndarray]] = {}  # window -> per-class totals at its warm-up end
        lists = plan.lists()  # per-segment class/role/key as Python objects (no numpy scalars per event)
        self._cls, self._role, self._key = lists.seg_class, lists.seg_role, lists.seg_key
        self._plan_classes = set(self._cls)
        self._final = plan.seg_tokens.tolist()  # a segment's total tokens (the oracle's clairvoyant size)
        self._reads = plan.seg_reads.tolist()  # a segment's decode-stage reads (Eq. 3), reported at its boundary
        self.events: list[tuple] | None = None  # set to [] to record the allocator event stream
        self.clock, self.recorder = clock, recorder
        self._ids: dict[int, _SegmentIds] = {}  # session instance -> segment -> its id in the table
        self._live_tok: dict[str, int] = {}  # live (not yet closed) tokens per class
        self._seg_tok: dict[int, dict[int, int]] = {}  # session instance -> segment -> its live tokens
        self._base = (0, 0)  # (HBM, HBF) tokens of an aged start, not part of any window's writes
        self._base_class: dict[str, np.ndarray] = {}

    def age(self, order: np.ndarray) -> None:
        """Start as a long-running node's cache does under a boundary-unaware policy: every block holds a
        dead, cached segment, and their LRU order mixes the tiers at random (once HBM-first has turned its
        cache over, blocks of both tiers pass through one LRU queue alike): ``order``, a permutation of
        :attr:`MemorySizes.aged_chunks` drawn by the run.  These writes precede every window: they are not
        KV of the trace, so no measurement counts them."""
        table, alloc = self.table, self.alloc
        chunk = AGED_CHUNK_TOKENS
        n = self.sizes.aged_chunks
        if len(order) != n:
            raise ValueError(f"age: order must be a permutation of aged_chunks = {n}, got {len(order)} values")
        for k in range(n):
            left = alloc.free_total() * table.block_tokens
            table.add_write(f"aged:{k}", min(chunk, left), 0.0, seg_class=AGED_CLASS, session_id="aged")
        for k, last in enumerate(np.asarray(order).tolist()):
            table.close(f"aged:{k}", 0.0, last_use=-1.0 - last)
        self._base = table.tokens_written()
        self._base_class = self._by_class()

    def live_tokens(self) -> dict[str, int]:
        """Tokens of segments written and not yet closed, per class (what the deployment holds live)."""
        return self._live_tok

    def session_start(self, inst: int, session: str, t0: float) -> None:
        """Instance ``inst`` replays ``session`` from ``t0`` (its virtual start, for a fast-forwarded one)."""
        if self.clock is not None:
            self.clock.started(inst, session, t0)
        if self.recorder is not None:
            self.recorder.started(inst, session, t0)

    def _sids(self, inst: int) -> _SegmentIds:
        """The instance's segment ids ("inst:segment"), formatted once per segment rather than per call."""
        sids = self._ids.get(inst)
        if sids is None:
            sids = self._ids[inst] = _SegmentIds(inst)
        return sids

    def _write(self, sids: _SegmentIds, inst: int, s: int, tokens: int, now: float) -> None:
        sid, cls, key = sids[s], self._cls[s], self._key[s]
        seg_tok = self._seg_tok.get(inst)
        if seg_tok is None:
            seg_tok = self._seg_tok[inst] = {}
        seg_tok[s] = seg_tok.get(s, 0) + tokens
        self._live_tok[cls] = self._live_tok.get(cls, 0) + tokens
        if self.events is not None:
            self.events.append((now, "write", sid, cls, int(tokens), str(inst), key))
        try:
            self.table.add_write(sid, tokens, now, seg_class=cls, session_id=sids.session, role=self._role[s],
                                 rank_key=key, final_tokens=self._final[s],
                                 close_s=math.nan if self.clock is None else self.clock.close_s(inst, s))
        except AllocationError as exc:
            raise OutOfMemory(str(exc)) from exc

    def write_request(self, inst: int, writes: list[tuple[int, int]], now: float) -> tuple[int, int]:
        """:meth:`write` of each (segment, tokens) of one request, in order; returns the (HBM, HBF) tokens placed."""
        table = self.table
        h0, f0 = table.tokens_written()
        sids = self._sids(inst)
        for s, t in writes:
            self._write(sids, inst, s, t, now)
        h1, f1 = table.tokens_written()
        return h1 - h0, f1 - f0

    def close(self, inst: int, s: int, now: float) -> None:
        """Report segment ``s``'s boundary (frees, or caches under a boundary-unaware policy)."""
        sid = self._sids(inst)[s]
        if self.table.lookup.is_live(sid):
            # Every read of a segment happens before its boundary, so its Eq. 3 reads are reported there
            # (only closed segments' realized ρR/W inform a placement).
            self.table.add_reads(sid, self._reads[s])
            if self.events is not None:
                self.events.append((now, "read", sid, self._reads[s]))
                self.events.append((now, "close", sid))
            if self.recorder is not None:
                self.recorder.closed(inst, s, now)
            self.table.close(sid, now)
            self._forget(inst, s)

    def _forget(self, inst: int, s: int) -> None:
        """Segment ``s`` of instance ``inst`` is no longer live: its tokens leave the live count."""
        tok = self._seg_tok.get(inst, {}).pop(s, 0)
        if tok:
            self._live_tok[self._cls[s]] -= tok

    def session_end(self, inst: int, now: float) -> None:
        """Close whatever the session still holds (nothing, when every boundary was reported)."""
        if self.events is not None:
            self.events.append((now, "session_end", str(inst)))
        self.table.end_session(str(inst), now)
        self._ids.pop(inst, None)
        for s in list(self._seg_tok.get(inst, ())):
            self._forget(inst, s)
        self._seg_tok.pop(inst, None)

    def hbm_tokens(self, inst: int, segs: Sequence[int], tokens: np.ndarray, tokens_int: Sequence[int]) -> float:
        """Σ tokens × HBM fraction over segments (a request's context in HBM, in tokens), added left to
        right (the same bits on every machine and in the native core).  When every segment lies wholly in
        one tier the products are whole numbers and the sum is exact: the integer sum is taken instead."""
        sids = self._sids(inst)
        ids = [sids[s] for s in segs]
        acc = self.table.lookup.hbm_share(ids, tokens_int)
        if acc is not None:
            return float(acc)
        total = 0.0
        for t, f in zip(tokens.tolist(), self.table.lookup.hbm_fraction(ids).tolist()):
            total += t * f
        return total

    def snapshot(self) -> tuple[float, ...]:
        """(live HBM, live HBF, cached HBM, cached HBF, cumulative HBM written, cumulative HBF written) bytes."""
        bb = self.bpt * self.table.block_tokens
        live_h = (self.alloc.used_blocks(Tier.HBM) - self.table.cached(Tier.HBM)) * bb
        live_f = (self.alloc.used_blocks(Tier.HBF) - self.table.cached(Tier.HBF)) * bb
        tok, base = self.table.tokens_written(), self._base
        return (float(live_h), float(live_f), float(self.table.cached(Tier.HBM) * bb),
                float(self.table.cached(Tier.HBF) * bb), float((tok[0] - base[0]) * self.bpt),
                float((tok[1] - base[1]) * self.bpt))

    def _by_class(self) -> dict[str, np.ndarray]:
        """(HBM, HBF) tokens written so far per class, a copy."""
        return self.table.written.tokens_by_class()

    def mark(self, window: int = 0) -> None:
        """Remember the per-class totals now (start of ``window``'s measurement)."""
        self._marks[window] = self._by_class()

    def bytes_by_class_tier(self, window: int = 0) -> dict[str, dict[str, float]]:
        """Bytes written per class and tier since :meth:`mark` of ``window`` (since the start if unmarked)."""
        out = {}
        mark = self._marks.get(window, self._base_class)
        for c, v in self._by_class().items():
            if c not in self._plan_classes:  # an aged start's pseudo-segments
                continue
            d = v - mark.get(c, 0)
            out[c] = {"hbm": float(d[0] * self.bpt), "hbf": float(d[1] * self.bpt)}
        return out

