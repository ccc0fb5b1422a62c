"""KV placement policies (§4, §5.2, §5.4): which tier a segment's next KV blocks are allocated in.

A policy is an object with one decision function, ``tier(seg, view)``, called by the segment table
(:class:`lachesis.memory.allocator.SegmentTable`) whenever a segment's write needs new blocks; it is told
the segment (:class:`~lachesis.memory.protocol.SegmentInfo`) and memory through a read-only view
(:class:`~lachesis.memory.protocol.MemoryView`), and the allocator falls back to the other tier when the
chosen one is full.  Every view answers the queries a policy asks, so each rule is written once, and a
policy keeps no state of its own.  :func:`as_policy` takes a registered name (:data:`POLICIES`),
``name:key=value,...`` for a policy's knobs, or a policy object.  The policies, the view, how to add one,
and the predictive path's named assumptions (worker size, reviewer reservation, budget and k, scope of
the ranking) are in docs/design.md §5.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

from lachesis.kv import SEG_CLASSES, SHORT_LIVED_CLASSES, Tier, check_class
from lachesis.memory.placement_stats import RHO_WINDOW
from lachesis.memory.protocol import MemoryView, Policy, SegmentInfo

__all__ = [
    "HBMFirst",
    "HBMFirstReclaim",
    "DeterministicOnly",
    "Lachesis",
    "ReuseThreshold",
    "Oracle",
    "POLICIES",
    "SIZE_ESTIMATES",
    "BUDGET_SLACK",
    "as_policy",
    "get_policy",
]


#: the worker budget's tolerance: a sum of sizes within it of the budget still fits (float sums of block counts)
BUDGET_SLACK = 1e-9

_DETERMINISTIC = {c: Tier.HBM if c in SHORT_LIVED_CLASSES else Tier.HBF for c in SEG_CLASSES}


def _deterministic(seg: SegmentInfo) -> Tier:
    """§4's deterministic path: HBM for a short-lived class, HBF for a long-lived one."""
    try:
        return _DETERMINISTIC[seg.seg_class]
    except KeyError:
        check_class(seg.segment_id, seg.seg_class)  # raises ValueError: not a segment class
        raise


class HBMFirst:
    """Engine without Lachesis: HBM while it has a free block, else HBF; boundaries unknown (§5.2)."""

    name = "hbm_first"
    frees_at_boundary = False

    def tier(self, seg: SegmentInfo, view: MemoryView) -> Tier:
        return Tier.HBM


class HBMFirstReclaim(HBMFirst):
    """HBM-first on a vLLM-style block pool [45]: a dead segment's blocks return to its tier's free
    pool still cached, and an HBM allocation takes never-used HBM blocks, then evicts the least
    recently used cached HBM blocks (a segment's tail blocks first, as vLLM frees a request's blocks
    in reverse), before it spills to HBF, where the same order runs.  This is the recency policy of
    §4 ("not after the inactivity that a recency policy waits for [45]"): HBM turns over, but only
    as dead blocks age out, not at the boundary.

    ASSUMPTION (pinned live context): a live segment is never evicted, although a vLLM engine also
    pools the blocks of an idle agent between its requests.  Reason: evicting live context would
    re-prefill it, adding writes the trace does not hold; the policies are compared on the same KV
    volume (§1).  ``last_use`` given at close orders the LRU (default: the close time)."""

    name = "hbm_first_reclaim"
    reclaims_cached_hbm = True


class DeterministicOnly:
    """"W/o predictive path" (§5.4): short-lived classes to HBM, long-lived to HBF, free at boundary."""

    name = "deterministic"
    frees_at_boundary = True

    def tier(self, seg: SegmentInfo, view: MemoryView) -> Tier:
        return _deterministic(seg)


#: the values of :class:`Lachesis`'s ``size_estimate`` knob (docs/design.md §5; the first is the default)
SIZE_ESTIMATES = ("held", "mean_floor", "spawn")


def _worker_budget(view: MemoryView, hbm_live_workers: int) -> int:
    """HBM blocks the ranked workers may hold (§4, docs/design.md §5, budget and k): HBM, less what anything
    but the live workers holds, less the reviewers' reservation."""
    pinned = view.used(Tier.HBM) - hbm_live_workers
    return view.total(Tier.HBM) - pinned - view.stats.reviewer_reserve(view.live_reviewer_hbm_blocks())


def _spawn_size(spawn: tuple[int, float], mean: float) -> float:
    """A worker's size fixed at its spawn (blocks of its first placement, the closed workers' mean then): the
    larger of the two; a worker not yet placed counts at the mean now."""
    b, m = spawn
    if b < 0:
        return mean
    return b if b > m else m


class Lachesis:
    """§4: deterministic path + predictive admission of workers, shortest-predicted first.

    ``size_estimate`` (docs/design.md §5, assumption worker size): what a ranked worker counts for when k
    is found: ``held`` (what it holds; the default, §4 literally), ``mean_floor`` (held, at least the
    finished workers' mean) or ``spawn`` (the mean-floor estimate at its spawn, then fixed)."""

    name = "lachesis"
    frees_at_boundary = True
    #: knobs of a ``lachesis:key=value`` spec that take words, not numbers (:func:`as_policy`)
    text_knobs = ("size_estimate",)

    def __init__(self, size_estimate: str = SIZE_ESTIMATES[0]) -> None:
        if size_estimate not in SIZE_ESTIMATES:
            raise ValueError(f"lachesis: size_estimate must be one of {list(SIZE_ESTIMATES)}, got {size_estimate!r}")
        self.size_estimate = size_estimate
        if size_estimate != SIZE_ESTIMATES[0]:
            self.name = f"{Lachesis.name}:size_estimate={size_estimate}"

    def tier(self, seg: SegmentInfo, view: MemoryView) -> Tier:
        if seg.seg_class != "worker":
            return _deterministic(seg)
        return Tier.HBM if self.admitted(seg, view, self.size_estimate) else Tier.HBF

    @staticmethod
    def admitted(seg: SegmentInfo, view: MemoryView, size_estimate: str = SIZE_ESTIMATES[0]) -> bool:
        """Whether the worker is within the first k of the node's live-worker ranking right now: the sizes
        of the workers ranked up to and including it, summed in rank order, fit the budget.  Sizes are
        >= 0, so the sum never decreases and stops once it exceeds the budget."""
        acc: float = 0
        if size_estimate == "spawn":
            spawns, spawn, hbm_live_workers = view.spawns_ahead(seg.segment_id)
            limit = _worker_budget(view, hbm_live_workers) + BUDGET_SLACK
            mean = view.stats.mean_worker_blocks
            for s in spawns:
                acc += _spawn_size(s, mean)
                if acc > limit:
                    return False
            if spawn[0] < 0:  # asked before its first placement: it would spawn now
                spawn = (seg.n_blocks + seg.new_blocks, mean)
            return acc + _spawn_size(spawn, mean) <= limit
        ahead, mine, hbm_live_workers = view.workers_ahead(seg.segment_id)
        limit = _worker_budget(view, hbm_live_workers) + BUDGET_SLACK
        if size_estimate == "held":
            for b in ahead:
                acc += b
                if acc > limit:
                    return False
            return acc + mine + seg.new_blocks <= limit
        mean = view.stats.mean_worker_blocks  # mean_floor
        for b in ahead:
            acc += b if b > mean else mean
            if acc > limit:
                return False
        b = mine + seg.new_blocks
        return acc + (b if b > mean else mean) <= limit


class ReuseThreshold:
    """Selection by read-to-write ratio, as Kyung et al. select KV for HBF [23] (§2.3): a segment's
    new blocks go to HBF when its predicted ρR/W (Eq. 3) exceeds a threshold, else to HBM.  The
    baseline for §3.4's claim that reuse "should not be used as a proxy for lifetime".

    ASSUMPTION (prediction at write time): ρR/W is realized only once a segment's reads are done, so
    the prediction is :meth:`~lachesis.memory.placement_stats.PlacementStats.predicted_rho`: the realized ρ of the same
    session's earlier closed segments of the same class, falling back to the class on this node,
    then to the node; with no closed segment yet the segment goes to HBM (the engine's default).
    ASSUMPTION (threshold, knob ``quantile``, default 0.5): the ``quantile`` of the realized ρ of the
    last ``window`` closed segments (scale-free, so one setting transfers across workloads), or an
    absolute ``threshold`` when one is given.
    ASSUMPTION (boundaries): it frees a segment's blocks at its boundary, as Lachesis does, so it
    differs from Lachesis in the selection criterion alone (reuse instead of lifetime)."""

    name = "rho_threshold"
    frees_at_boundary = True

    def __init__(self, quantile: float = 0.5, threshold: float | None = None, window: int = RHO_WINDOW) -> None:
        if not 0.0 <= quantile <= 1.0:
            raise ValueError(f"rho_threshold: quantile must be in [0, 1], got {quantile}")
        if threshold is not None and not (threshold >= 0 and math.isfinite(threshold)):
            raise ValueError(f"rho_threshold: threshold must be a finite number >= 0, got {threshold}")
        if int(window) != window or window < 1:
            raise ValueError(f"rho_threshold: window must be an integer >= 1, got {window}")
        self.quantile = float(quantile)
        self.threshold = None if threshold is None else float(threshold)
        self.rho_window = int(window)
        knobs = [f"quantile={self.quantile!r}"] if self.quantile != 0.5 else []
        knobs += [f"threshold={self.threshold!r}"] if self.threshold is not None else []
        knobs += [f"window={self.rho_window}"] if self.rho_window != RHO_WINDOW else []
        if knobs:
            self.name = f"{ReuseThreshold.name}:{','.join(knobs)}"

    def tier(self, seg: SegmentInfo, view: MemoryView) -> Tier:
        check_class(seg.segment_id, seg.seg_class)
        stats = view.stats
        rho = stats.predicted_rho(seg.session_id, seg.seg_class)
        if math.isnan(rho):
            return Tier.HBM
        tau = self.threshold if self.threshold is not None else stats.rho_quantile(self.quantile)
        return Tier.HBF if rho > tau else Tier.HBM


class Oracle:
    """Clairvoyant placement: it knows every live segment's close time and final size at write time
    and keeps the shortest-remaining-lifetime segments in HBM while they fit.  An upper bound in
    spirit on what lifetime knowledge can buy: a clairvoyant heuristic, not a proven optimum, and
    not deployable.

    Rule: rank every live segment by close time (unknown = never, last; ties in open order); a
    segment's HBM demand is the HBM blocks it holds plus the blocks it has still to write (final
    size minus blocks held; at least the blocks being written, for the deciding segment).  Its new
    blocks go to HBM iff the demands of the segments closing no later than it, plus its own, fit in
    HBM.  ASSUMPTION (unknown facts): a segment without a close time ranks last and one without a
    final size counts with what it holds; both come from a recorded run (``close_s`` and
    ``final_tokens`` of :meth:`lachesis.memory.allocator.SegmentTable.add_write`).  Frees at boundary."""

    name = "oracle"
    frees_at_boundary = True

    def tier(self, seg: SegmentInfo, view: MemoryView) -> Tier:
        check_class(seg.segment_id, seg.seg_class)
        others, hbm_me, todo_me = view.demand_ahead(seg.segment_id)
        demand = others + hbm_me + (todo_me if todo_me > seg.new_blocks else seg.new_blocks)
        return Tier.HBM if demand <= view.total(Tier.HBM) else Tier.HBF


POLICIES: dict[str, type] = {p.name: p for p in (HBMFirst, HBMFirstReclaim, DeterministicOnly, Lachesis,
                                                 ReuseThreshold, Oracle)}


def _knobs(spec: str, text: str, cls: type) -> dict[str, Any]:
    """``key=value,...`` of a policy spec as numbers (int when written as digits), or as words for
    the keys of the policy's ``text_knobs``; a key the policy does not take, or one given twice, is refused."""
    words = getattr(cls, "text_knobs", ())
    takes = [p for p in inspect.signature(cls).parameters if p != "self"]
    out: dict[str, Any] = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"policy {spec!r}: expected name:key=value[,key=value...], got {part!r}")
        if key.strip() not in takes:
            raise ValueError(f"policy {spec!r}: {cls.__name__} has no knob {key.strip()!r}"
                             f" (it takes {takes or 'none'})")
        if key.strip() in out:
            raise ValueError(f"policy {spec!r}: knob {key.strip()!r} given twice")
        if key.strip() in words:
            out[key.strip()] = value.strip()
            continue
        try:
            out[key.strip()] = int(value) if value.strip().isdigit() else float(value)
        except ValueError:
            raise ValueError(f"policy {spec!r}: knob {key.strip()!r} must be a number, got {value!r}") from None
    return out


def as_policy(policy: Policy | str) -> Policy:
    """The one coercion at the API edge: a registered name (``"lachesis"``), a name with knobs
    (``"rho_threshold:quantile=0.25"``, a fresh object each call), or a policy object (returned as is)."""
    if isinstance(policy, str):
        name, sep, rest = policy.partition(":")
        cls = POLICIES.get(name.strip())
        if cls is None:
            raise ValueError(f"unknown policy {name!r}; expected one of {sorted(POLICIES)}")
        kwargs = _knobs(policy, rest, cls) if sep else {}
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise ValueError(f"policy {policy!r}: {exc}") from None
    if not isinstance(policy, Policy):
        missing = [a for a in ("name", "frees_at_boundary", "tier") if not hasattr(policy, a)]
        raise TypeError(f"policy {policy!r} is not a policy: missing {missing} (see lachesis.memory.protocol.Policy)")
    return policy


def get_policy(name: str) -> Policy:
    """A fresh policy object by registered name (or name with knobs); :func:`as_policy` for strings."""
    if not isinstance(name, str):
        raise TypeError(f"get_policy takes a policy name, got {type(name).__name__}; use as_policy for objects")
    return as_policy(name)
