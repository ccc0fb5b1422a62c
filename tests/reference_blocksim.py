"""Per-block reference simulator: plain Python, one object per KV block, obviously correct.

A differential oracle for :mod:`lachesis.memory.allocator` (and for the decode-node simulator): it parses
the event list itself (the format in docs/design.md §5), replays it block by
block and token by token, and re-implements the built-in policies naively from their definitions
in :mod:`lachesis.memory.policies` and :mod:`lachesis.memory.placement_stats` (Python lists, ``sorted``,
loops over the whole history; no numpy, no code shared with the allocator).  A user policy object (any object with
``tier(seg, view)``, ``frees_at_boundary``) is driven through this per-block allocator instead,
with a naive :class:`RefView` as its memory view.

Entry point: :func:`reference_replay(events, policy, hbm_blocks, hbf_blocks, block_tokens)`,
returning a :class:`lachesis.memory.allocator.WriteTotals` comparable field by field with
:func:`lachesis.memory.replay.replay_events`.  ``policy`` is a built-in name, a name with knobs
(``"rho_threshold:quantile=0.25"``) or a policy object.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np

from lachesis.kv import AllocationError
from lachesis.memory.allocator import WriteTotals
from lachesis.memory.placement_stats import EMA_ALPHA, RHO_WINDOW
from lachesis.memory.protocol import SegmentInfo

HBM, HBF = 0, 1
CLASSES = {"reasoning_laden", "reasoning_stripped", "lead", "worker", "reviewer"}
SHORT = {"reasoning_laden", "worker", "reviewer"}
BOUNDARY = {"reasoning_laden": "turn_end", "reasoning_stripped": "session_end", "lead": "session_end",
            "worker": "subagent_return", "reviewer": "subagent_return"}
BUILTIN = {"hbm_first", "hbm_first_reclaim", "deterministic", "lachesis", "rho_threshold", "oracle"}


def _num(x: Any) -> float:
    return math.nan if x is None else float(x)


def parse(ev: Sequence[Any]) -> tuple:
    """The event tuple with its optional fields filled in (naive; raises ValueError when malformed)."""
    t, kind = float(ev[0]), ev[1]
    if kind == "write":
        pad = list(ev) + [None] * (9 - len(ev))
        tok = pad[4]
        if isinstance(tok, bool) or int(tok) != tok or tok < 0:
            raise ValueError(f"bad tokens in {ev!r}")
        return (t, "write", str(pad[2]), str(pad[3]), int(tok), "" if pad[5] is None else str(pad[5]),
                _num(pad[6]), _num(pad[7]), _num(pad[8]))
    if kind == "read":
        if len(ev) != 4 or int(ev[3]) != ev[3] or ev[3] < 0:
            raise ValueError(f"bad read event {ev!r}")
        return (t, "read", str(ev[2]), int(ev[3]))
    if kind == "close":
        return (t, "close", str(ev[2]), t if len(ev) < 4 or ev[3] is None else float(ev[3]))
    if kind == "session_end":
        return (t, "session_end", str(ev[2]))
    raise ValueError(f"bad event kind in {ev!r}")


class Block:
    """One KV block."""

    def __init__(self, bid: int, tier: int) -> None:
        self.id = bid
        self.tier = tier
        self.owner: "Seg | None" = None
        self.tokens = 0


class Seg:
    """One segment and the list of its Block objects, in write order."""

    def __init__(self, sid: str, cls: str, session: str, key: float, order: int, close_s: float = math.nan,
                 final_tokens: float = math.nan) -> None:
        self.id = sid
        self.cls = cls
        self.session = session
        self.key = key
        self.order = order
        self.close_s = close_s
        self.final_tokens = final_tokens
        self.blocks: list[Block] = []
        self.spawn_size: float | None = None  # Lachesis size_estimate=spawn: its size fixed at its first decision
        self.spawn_blocks = -1  # a worker's first decision: the blocks it asked for, and the closed workers' mean then
        self.spawn_mean = math.nan
        self.tokens = 0
        self.reads = 0
        self.dead = False
        self.close_seq = -1
        self.last_use = 0.0


class RefView:
    """Naive :class:`lachesis.memory.protocol.MemoryView` over the per-block state (for policy objects)."""

    def __init__(self, sim: "RefSim") -> None:
        self.sim = sim

    @property
    def stats(self) -> Any:
        return self.sim.stats_obj()

    def total(self, tier: int) -> int:
        return sum(1 for b in self.sim.blocks if b.tier == tier)

    def free(self, tier: int) -> int:
        return sum(1 for b in self.sim.blocks if b.tier == tier and b.owner is None)

    def used(self, tier: int) -> int:
        return sum(1 for b in self.sim.blocks if b.tier == tier and b.owner is not None)

    def cached(self, tier: int) -> int:
        return sum(1 for b in self.sim.blocks if b.tier == tier and b.owner is not None and b.owner.dead)

    def live_workers(self):
        ws = [s for s in self.sim.live_in_order() if s.cls == "worker"]
        return (np.array([s.id for s in ws], dtype=object), np.array([s.key for s in ws], dtype=float),
                np.array([len(s.blocks) for s in ws], dtype=np.int64),
                np.array([sum(1 for b in s.blocks if b.tier == HBM) for s in ws], dtype=np.int64))

    def worker_position(self, segment_id: str) -> int:
        ws = [s.id for s in self.sim.live_in_order() if s.cls == "worker"]
        if segment_id not in ws:
            raise KeyError(f"worker segment {segment_id!r} is not live")
        return ws.index(segment_id)

    def live_reviewer_hbm_blocks(self) -> int:
        return sum(1 for s in self.sim.live_in_order() if s.cls == "reviewer" for b in s.blocks if b.tier == HBM)

    def _ranked_workers(self, segment_id: str) -> tuple[list[Seg], Seg, int]:
        """The live workers ranked before one (rank key, NaN last, then open order), that one, and the HBM
        blocks all live workers hold."""
        ws = sorted((s for s in self.sim.live_in_order() if s.cls == "worker"),
                    key=lambda s: (math.inf if math.isnan(s.key) else s.key, s.order))
        ids = [s.id for s in ws]
        if segment_id not in ids:
            raise KeyError(f"worker segment {segment_id!r} is not live")
        i = ids.index(segment_id)
        return ws[:i], ws[i], sum(1 for s in ws for b in s.blocks if b.tier == HBM)

    def workers_ahead(self, segment_id: str):
        ahead, me, hbm = self._ranked_workers(segment_id)
        return iter([len(s.blocks) for s in ahead]), len(me.blocks), hbm

    def spawns_ahead(self, segment_id: str):
        ahead, me, hbm = self._ranked_workers(segment_id)
        return iter([(s.spawn_blocks, s.spawn_mean) for s in ahead]), (me.spawn_blocks, me.spawn_mean), hbm

    def demand_ahead(self, segment_id: str):
        segs = self.sim.live_in_order()
        me = next((s for s in segs if s.id == segment_id), None)
        if me is None:
            raise KeyError(f"segment {segment_id!r} is not live")

        def key(s: Seg) -> tuple[float, int]:
            return (math.inf if math.isnan(s.close_s) else s.close_s, s.order)

        def demand(s: Seg) -> tuple[int, int]:
            fb = self.sim.final_blocks(s)
            return sum(1 for b in s.blocks if b.tier == HBM), 0 if math.isnan(fb) else max(int(fb) - len(s.blocks), 0)

        others = sum(sum(demand(s)) for s in segs if s is not me and key(s) < key(me))
        return (others, *demand(me))

    def live_segments(self):
        segs = self.sim.live_in_order()
        return (np.array([s.close_s for s in segs], dtype=float),
                np.array([self.sim.final_blocks(s) for s in segs], dtype=float),
                np.array([len(s.blocks) for s in segs], dtype=np.int64),
                np.array([sum(1 for b in s.blocks if b.tier == HBM) for s in segs], dtype=np.int64))

    def segment_position(self, segment_id: str) -> int:
        ids = [s.id for s in self.sim.live_in_order()]
        if segment_id not in ids:
            raise KeyError(f"segment {segment_id!r} is not live")
        return ids.index(segment_id)


class _Stats:
    """Naive re-derivation of PlacementStats from the full history."""

    def __init__(self, sim: "RefSim") -> None:
        self.sim = sim

    @property
    def mean_worker_blocks(self) -> float:
        sizes = self.sim.closed_worker_sizes
        return sum(sizes) / len(sizes) if sizes else 0.0

    def reviewer_reserve(self, live_reviewer_hbm_blocks: int) -> int:
        r = 0.0
        for i, x in enumerate(self.sim.closed_reviewer_sizes):
            r = float(x) if i == 0 else r + EMA_ALPHA * (x - r)
        n = 0.0
        for x in self.sim.live_reviewer_samples:
            n = n + EMA_ALPHA * (x - n)
        return max(0, math.ceil(r * n - 1e-9) - live_reviewer_hbm_blocks)

    def predicted_rho(self, session: str, cls: str) -> float:
        """Token-weighted realized ρ of closed segments: same session epoch and class, else class, else all."""
        hist = self.sim.closed_reuse  # (session, epoch, class, reads, tokens), tokens > 0
        epoch = self.sim.epoch.get(session, 0)
        for pick in (lambda h: h[0] == session and h[1] == epoch and h[2] == cls, lambda h: h[2] == cls,
                     lambda h: True):
            sel = [h for h in hist if pick(h)]
            if sel:
                return sum(h[3] for h in sel) / sum(h[4] for h in sel)
        return math.nan

    def rho_quantile(self, q: float) -> float:
        """Inverted-CDF q-quantile of the realized ρ of the last ``window`` closed segments."""
        recent = sorted(h[3] / h[4] for h in self.sim.closed_reuse[-self.sim.rho_window:])
        if not recent:
            return math.nan
        return recent[max(math.ceil(q * len(recent)) - 1, 0)]


def _word_or_float(v: str) -> Any:
    try:
        return float(v)
    except ValueError:
        return v  # a word knob (Lachesis's size_estimate)


def _spec(policy: str) -> tuple[str, dict[str, Any]]:
    name, _, rest = policy.partition(":")
    knobs = {k: _word_or_float(v) for k, v in (p.split("=") for p in rest.split(","))} if rest else {}
    if name not in BUILTIN:
        raise ValueError(f"unknown policy {policy!r}")
    return name, knobs


class RefSim:
    """The per-block memory: a list of Block objects, segments, and the naive policies."""

    def __init__(self, hbm_blocks: int, hbf_blocks: int, block_tokens: int, policy: Any) -> None:
        self.blocks = [Block(i, HBM if i < hbm_blocks else HBF) for i in range(hbm_blocks + hbf_blocks)]
        self.hbm_blocks = hbm_blocks
        self.bt = block_tokens
        self.policy = policy
        self.name, self.knobs = _spec(policy) if isinstance(policy, str) else (None, {})
        self.frees = (not self.name.startswith("hbm_first")) if self.name else bool(policy.frees_at_boundary)
        self.reclaim = ((self.name == "hbm_first_reclaim") if self.name
                        else bool(getattr(policy, "reclaims_cached_hbm", False)))
        window = self.knobs.get("window", RHO_WINDOW) if self.name else getattr(policy, "rho_window", RHO_WINDOW)
        self.rho_window = int(window)
        self.segs: dict[str, Seg] = {}
        self.closed: set[str] = set()
        self.n_opened = 0
        self.n_closed = 0
        self.closed_worker_sizes: list[int] = []
        self.closed_reviewer_sizes: list[int] = []
        self.live_reviewer_samples: list[int] = []
        self.closed_reuse: list[tuple[str, int, str, int, int]] = []
        self.epoch: dict[str, int] = {}  # session -> how many session_end events it has seen
        self.tokens = [0, 0]
        self.by_class: dict[str, list[int]] = {}
        self.blocks_written = [0, 0]
        self.evicted = 0
        self.view = RefView(self)  # one view for the run (a policy may keep state per view)

    def stats_obj(self) -> _Stats:
        return _Stats(self)

    def live_in_order(self) -> list[Seg]:
        return sorted((s for s in self.segs.values() if not s.dead), key=lambda s: s.order)

    def final_blocks(self, s: Seg) -> float:
        return math.nan if math.isnan(s.final_tokens) else float(math.ceil(s.final_tokens / self.bt))

    # -- policy ------------------------------------------------------------------------------------
    def choose(self, seg: Seg, nb: int) -> int:
        if self.name is None:
            info = SegmentInfo(seg.id, seg.cls, seg.session, "", seg.key, BOUNDARY[seg.cls],
                               len(seg.blocks), seg.tokens, nb, seg.reads, seg.close_s, seg.final_tokens)
            return int(self.policy.tier(info, self.view))
        if self.name.startswith("hbm_first"):
            return HBM
        if self.name == "rho_threshold":
            return self.choose_rho(seg)
        if self.name == "oracle":
            return self.choose_oracle(seg, nb)
        if self.name == "deterministic" or seg.cls != "worker":
            return HBM if seg.cls in SHORT else HBF
        # Lachesis predictive path, naively (lachesis.memory.policies docstring, size_estimate).
        stats = _Stats(self)
        mode = self.knobs.get("size_estimate", "held")
        mean = stats.mean_worker_blocks
        if mode == "spawn" and seg.spawn_size is None:
            seg.spawn_size = max(float(len(seg.blocks) + nb), mean)
        workers = [s for s in self.live_in_order() if s.cls == "worker"]
        hbm_used = sum(1 for b in self.blocks if b.tier == HBM and b.owner is not None)
        worker_hbm = sum(1 for s in workers for b in s.blocks if b.tier == HBM)
        rev_hbm = sum(1 for s in self.live_in_order() if s.cls == "reviewer" for b in s.blocks if b.tier == HBM)
        budget = self.hbm_blocks - (hbm_used - worker_hbm) - stats.reviewer_reserve(rev_hbm)
        ranked = sorted(workers, key=lambda s: (math.inf if math.isnan(s.key) else s.key, s.order))
        acc = 0.0
        for s in ranked:
            size = len(s.blocks) + (nb if s is seg else 0)
            if mode == "held":
                acc += float(size)
            elif mode == "spawn":
                acc += mean if s.spawn_size is None else s.spawn_size
            else:
                acc += max(float(size), mean)
            if acc > budget + 1e-9:
                return HBF
            if s is seg:
                return HBM
        raise AssertionError("deciding worker not among live workers")

    def choose_rho(self, seg: Seg) -> int:
        """ρR/W selection: HBF iff the predicted ρ exceeds the threshold; HBM without evidence."""
        stats = _Stats(self)
        rho = stats.predicted_rho(seg.session, seg.cls)
        if math.isnan(rho):
            return HBM
        knobs = self.knobs
        tau = knobs["threshold"] if "threshold" in knobs else stats.rho_quantile(knobs.get("quantile", 0.5))
        return HBF if rho > tau else HBM

    def choose_oracle(self, seg: Seg, nb: int) -> int:
        """Clairvoyant: HBM iff the segments closing no later than this one (ties: opened earlier) fit."""
        def key(s: Seg) -> tuple[float, int]:
            return (math.inf if math.isnan(s.close_s) else s.close_s, s.order)

        demand = 0
        for s in self.live_in_order():
            if key(s) <= key(seg):
                held_hbm = sum(1 for b in s.blocks if b.tier == HBM)
                fb = self.final_blocks(s)
                todo = 0 if math.isnan(fb) else max(int(fb) - len(s.blocks), 0)
                if s is seg:
                    todo = max(todo, nb)
                demand += held_hbm + todo
        return HBM if demand <= self.hbm_blocks else HBF

    # -- blocks --------------------------------------------------------------------------------------
    def free_block(self, tier: int) -> Block | None:
        for b in self.blocks:
            if b.tier == tier and b.owner is None:
                return b
        return None

    def evict(self, k: int) -> None:
        dead = sorted((s for s in self.segs.values() if s.dead and s.blocks), key=lambda s: (s.last_use, s.close_seq))
        if sum(len(s.blocks) for s in dead) < k:
            raise AllocationError("reference: memory exhausted (live segments hold every block)")
        for s in dead:
            while s.blocks and k > 0:
                b = s.blocks.pop()  # tail block first
                b.owner = None
                b.tokens = 0
                k -= 1
                self.evicted += 1
            if k == 0:
                return

    def evict_tier(self, tier: int) -> bool:
        """Evict the tail-most block of ``tier`` of the least recently used dead segment holding one."""
        dead = sorted((s for s in self.segs.values() if s.dead and any(b.tier == tier for b in s.blocks)),
                      key=lambda s: (s.last_use, s.close_seq))
        if not dead:
            return False
        seg = dead[0]
        i = max(j for j, b in enumerate(seg.blocks) if b.tier == tier)
        b = seg.blocks.pop(i)
        b.owner = None
        b.tokens = 0
        self.evicted += 1
        return True

    def write(self, sid: str, cls: str, n: int, session: str, key: float, close_s: float = math.nan,
              final_tokens: float = math.nan) -> None:
        if sid in self.closed:
            raise ValueError(f"segment {sid!r} was already closed")
        seg = self.segs.get(sid)
        if seg is not None and seg.cls != cls:
            raise ValueError(f"segment {sid!r} written as {cls!r} but opened as {seg.cls!r}")
        if seg is None:
            if cls not in CLASSES:
                raise ValueError(f"unknown seg_class {cls!r}")
            seg = Seg(sid, cls, session, key, self.n_opened, close_s, final_tokens)
            self.n_opened += 1
            self.segs[sid] = seg
            self.by_class.setdefault(cls, [0, 0])
            self.live_reviewer_samples.append(sum(1 for s in self.live_in_order() if s.cls == "reviewer"))
        room = (self.bt - seg.blocks[-1].tokens) if seg.blocks else 0
        nb = max(0, math.ceil((n - room) / self.bt))
        new: list[Block] = []
        if nb:
            if seg.cls == "worker" and seg.spawn_blocks < 0:  # its first decision: its spawn
                seg.spawn_blocks, seg.spawn_mean = len(seg.blocks) + nb, _Stats(self).mean_worker_blocks
            want = self.choose(seg, nb)
            while len(new) < nb:
                b = self.free_block(want)
                if b is None and want == HBM and self.reclaim and self.evict_tier(HBM):
                    continue  # a cached dead HBM block was evicted: take it on the next pass
                b = b or self.free_block(1 - want)
                if b is None:
                    self.evict(nb - len(new))
                    continue
                b.owner = seg
                self.blocks_written[b.tier] += 1
                new.append(b)
        seg.blocks.extend(new)
        # Token by token: into the first block of this segment with room.
        cursor = len(seg.blocks) - len(new) - (1 if room else 0)
        for _ in range(n):
            while seg.blocks[cursor].tokens == self.bt:
                cursor += 1
            blk = seg.blocks[cursor]
            blk.tokens += 1
            self.tokens[blk.tier] += 1
            self.by_class[cls][blk.tier] += 1
        seg.tokens += n

    def read(self, sid: str, n: int) -> None:
        seg = self.segs.get(sid)
        if seg is None or seg.dead:
            raise KeyError(f"segment {sid!r} is not open")
        seg.reads += n

    def close(self, sid: str, last_use: float = 0.0) -> None:
        seg = self.segs.get(sid)
        if seg is None or seg.dead:
            raise KeyError(f"segment {sid!r} is not open")
        self.closed.add(sid)
        if seg.cls == "worker":
            self.closed_worker_sizes.append(len(seg.blocks))
        elif seg.cls == "reviewer":
            self.closed_reviewer_sizes.append(len(seg.blocks))
        if seg.tokens > 0:
            self.closed_reuse.append((seg.session, self.epoch.get(seg.session, 0), seg.cls, seg.reads, seg.tokens))
        if self.frees:
            for b in seg.blocks:
                b.owner = None
                b.tokens = 0
            del self.segs[sid]
        else:
            seg.dead = True
            seg.close_seq = self.n_closed
            seg.last_use = last_use
        self.n_closed += 1

    def end_session(self, session: str, now: float) -> None:
        for s in self.live_in_order():
            if s.session == session:
                self.close(s.id, now)
        self.epoch[session] = self.epoch.get(session, 0) + 1

    def check(self) -> None:
        """No block held twice, none lost: every owned block is in its owner's list exactly once."""
        held = [b.id for s in self.segs.values() for b in s.blocks]
        assert len(held) == len(set(held))
        assert sorted(held) == sorted(b.id for b in self.blocks if b.owner is not None)

    def totals(self) -> WriteTotals:
        return WriteTotals(
            tokens=np.array(self.tokens, dtype=np.int64),
            tokens_by_class={c: np.array(v, dtype=np.int64) for c, v in self.by_class.items()},
            blocks=np.array(self.blocks_written, dtype=np.int64),
            evicted_blocks=self.evicted,
        )


def reference_replay(events: Iterable[Sequence[Any]], policy: Any, hbm_blocks: int, hbf_blocks: int,
                     block_tokens: int = 16) -> WriteTotals:
    """Replay events block by block; ``policy`` is a built-in name (naive re-implementation) or a policy object."""
    sim = RefSim(hbm_blocks, hbf_blocks, block_tokens, policy)
    for raw in events:
        ev = parse(raw)
        if ev[1] == "write":
            _, _, sid, cls, tok, session, key, close_s, final = ev
            sim.write(sid, cls, tok, session, key, close_s, final)
        elif ev[1] == "read":
            sim.read(ev[2], ev[3])
        elif ev[1] == "close":
            sim.close(ev[2], ev[3])
        else:
            sim.end_session(ev[2], ev[0])
    return sim.totals()


def exhausted_or(fn, *args):
    """``fn(*args)``, or "exhausted" when memory cannot hold the stream (an AllocationError)."""
    try:
        return fn(*args)
    except AllocationError:
        return "exhausted"


def compare_to_reference(events, policy, hbm, hbf, bt):
    """The fast replay (:func:`lachesis.memory.replay.replay_events`) and this reference on one stream: the same
    totals, or both exhausted; returns the fast replay's."""
    from lachesis.memory.policies import get_policy
    from lachesis.memory.replay import replay_events

    fast = exhausted_or(replay_events, events, get_policy(policy), hbm, hbf, bt)
    ref = exhausted_or(reference_replay, events, policy, hbm, hbf, bt)
    if isinstance(fast, str) or isinstance(ref, str):
        assert fast == ref
        return fast
    assert fast.as_dict() == ref.as_dict()
    return fast
