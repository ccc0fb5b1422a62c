"""The decode engine: continuous batching on an expert-parallel group of G ranks stepping in
lockstep, where every decoder advances together between two events (a join or a finish) in one
vectorized update, so a run costs per event, not per decode step.  Step pricing is
:mod:`lachesis.node.step_cost`'s; the decode node's assumptions are in docs/design.md §5 ("Decode node").
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import simpy

from lachesis.node.step_cost import GroupStep

_min_reduce = np.minimum.reduce  # ndarray.min() without the method's Python overhead

#: the decoder slots an engine starts with (it doubles them when full)
CAPACITY = 256
#: a decoder with no more tokens left than this has finished (float drift of the steps' sum)
FINISHED_TOKENS = 1e-7


def _priced_by_group(*args: float) -> float:
    raise RuntimeError("DecodeEngine: one rank needs a step_fn (a group prices its step with GroupStep)")


def _no_experts(mean_batch: float) -> float:
    """A group whose ``step_fn`` prices each rank's own part: no group-wide term."""
    return 0.0


class DecodeEngine:
    """Continuous-batching decode on an expert-parallel group of ``ranks`` GPUs stepping in lockstep;
    one vectorized update per join/finish event.

    Between two events the batches and their bytes are fixed, so the step time is constant and every
    decoder of every rank advances by (elapsed / step) tokens in one numpy update.  Remaining tokens of
    idle slots are +inf, so ``rem.min()`` is the next finisher without masking; each rank's roofline
    inputs (batch, KV bytes per tier, flush bytes, HBM write bytes) are kept as running sums.

    One rank prices its step with ``step_fn(batch, kv_hbm, kv_hbf, flush, hbm_write)``.  A group prices
    it with ``group`` (:class:`lachesis.node.step_cost.GroupStep`: the slowest rank's own operators and flush, plus
    the routed experts at the group's mean batch); a ``step_fn`` given for a group prices each rank's own
    part, with no group-wide term.  :meth:`stall` pauses the whole group while a rank's device lands KV.
    """

    def __init__(self, env: simpy.Environment, step_fn: Callable[..., float] | None = None,
                 record_from: float = 0.0, capacity: int = CAPACITY, ranks: int = 1, group: GroupStep | None = None):
        self.env, self.record_from = env, record_from
        self.step_fn: Callable[..., float] = step_fn if step_fn is not None else _priced_by_group
        self.ranks = int(ranks)
        if self.ranks > 1:
            if step_fn is None:
                if group is None:
                    raise ValueError("DecodeEngine: a group of ranks needs a step_fn or its GroupStep")
                self._rank_fn: Callable[..., float] = group.rank
                self._experts_fn: Callable[[float], float] = group.experts
            else:
                self._rank_fn, self._experts_fn = step_fn, _no_experts
        self.rem = np.full(capacity, np.inf)
        #: (kv_hbm, kv_hbf, hbf flush, hbm write) per occupied slot, None on a free one
        self.rows: list[Any] = [None] * capacity
        self.slot_rank = [0] * capacity
        # per rank: Python floats, the same IEEE sums as a numpy vector, cheaper per event
        self.rank_sums = [[0.0, 0.0, 0.0, 0.0] for _ in range(self.ranks)]
        self.sums = self.rank_sums[0]
        self.rank_n = [0] * self.ranks
        self.rank_time = [0.0] * self.ranks
        self._dirty: set[int] = set()
        self.n = 0
        self.events: list[Any] = [None] * capacity  # the finish event per occupied slot, None on a free one
        self.free_slots = list(range(capacity - 1, -1, -1))
        self.t_last = 0.0
        self.tau = 0.0
        self._timer: simpy.Event | None = None  # the pending finish timer; earlier ones are stale
        self.tpot: list[float] = []
        self.tpot_w: list[float] = []
        self.tpot_t: list[float] = []  # end time of each recorded interval (windows filter on it)
        self.max_batch = 0
        self._args: tuple = ()  # the step inputs behind ``tau`` (batch aside; one rank)
        self.busy = [0.0] * self.ranks  # when each rank's device finishes the landings queued on it
        self.pause_end = 0.0  # the group decodes nothing before this time (a rank is landing KV)
        self._paused = 0.0  # paused seconds not yet charged to a recorded step
        self.stalled_s = 0.0  # seconds the group spent paused with decoders waiting, after record_from

    def _grow(self) -> None:
        n = len(self.rem)
        self.rem = np.concatenate([self.rem, np.full(n, np.inf)])
        self.rows += [None] * n
        self.events += [None] * n
        self.slot_rank += [0] * n
        self.free_slots = list(range(2 * n - 1, n - 1, -1)) + self.free_slots

    def _advance(self) -> None:
        now = self.env.now
        t_last = self.t_last
        start = t_last if self.pause_end <= t_last else min(self.pause_end, now)  # decoding resumes here
        dt = now - start
        tau = self.tau
        if tau > 0 and self.n:
            if start > t_last:  # a pause: its time lengthens the step it falls in, for every decoder
                self._paused += start - t_last
                if now > self.record_from:
                    self.stalled_s += start - t_last
            if dt > 0:
                steps = dt / tau
                self.rem -= steps
                if now > self.record_from:
                    if self._paused:
                        self.tpot.append(tau + self._paused)
                        self.tpot_w.append(float(self.n))
                        self.tpot_t.append(now)
                    self.tpot.append(tau)
                    self.tpot_w.append(steps * self.n)
                    self.tpot_t.append(now)
                self._paused = 0.0
        self.t_last = now

    def _step_time(self) -> float:
        """The group's step at the current batches (one rank: its step function on its sums)."""
        if self.ranks == 1:
            h, f, fl, hw = self.sums
            # max(x, 0.0) spelled out (the same value, NaN and -0.0 included): float drift is clamped at zero
            args = self._args = (0.0 if h < 0.0 else h, 0.0 if f < 0.0 else f, 0.0 if fl < 0.0 else fl,
                                 0.0 if hw < 0.0 else hw)
            return self.step_fn(self.n, *args)
        rank_fn, times = self._rank_fn, self.rank_time
        for r in self._dirty:
            nr = self.rank_n[r]
            if nr:
                h, f, fl, hw = self.rank_sums[r]
                times[r] = rank_fn(float(nr), 0.0 if h < 0.0 else h, 0.0 if f < 0.0 else f,
                                   0.0 if fl < 0.0 else fl, 0.0 if hw < 0.0 else hw)
            else:
                self.rank_sums[r][:] = (0.0, 0.0, 0.0, 0.0)  # clear float drift
                times[r] = 0.0
        self._dirty.clear()
        return max(times) + self._experts_fn(self.n / self.ranks)

    def _reschedule(self) -> None:
        n = self.n
        if not n:
            self.tau = 0.0
            for s in self.rank_sums:
                s[:] = (0.0, 0.0, 0.0, 0.0)  # clear float drift
            self.rank_time = [0.0] * self.ranks
            self._dirty.clear()
            self._timer = None
            return
        batch = n if self.ranks == 1 else max(self.rank_n)
        if batch > self.max_batch:
            self.max_batch = batch
        tau = self.tau = self._step_time()
        first = float(_min_reduce(self.rem))
        delay = (0.0 if first < 0.0 else first) * tau
        if self.pause_end > self.env.now:
            delay += self.pause_end - self.env.now
        timer = self._timer = simpy.events.Timeout(self.env, delay)
        timer.callbacks.append(self._on_timer)

    def _on_timer(self, timer: simpy.Event) -> None:
        if timer is not self._timer:  # superseded by a later join or finish
            return
        self._advance()
        done = self._finished()
        rows, slot_rank, rank_sums, rank_n, dirty = self.rows, self.slot_rank, self.rank_sums, self.rank_n, self._dirty
        for i in done.tolist():
            self.rem[i] = np.inf
            row = rows[i]
            rows[i] = None
            r = slot_rank[i]
            sums = rank_sums[r]
            sums[0] -= row[0]
            sums[1] -= row[1]
            sums[2] -= row[2]
            sums[3] -= row[3]
            rank_n[r] -= 1
            dirty.add(r)
            self.n -= 1
            ev = self.events[i]
            self.events[i] = None
            self.free_slots.append(i)
            ev.succeed()
        self._reschedule()

    def _finished(self) -> np.ndarray:
        """The slots whose decoder has finished, ascending: at most :data:`FINISHED_TOKENS` left, or so few that
        their decode ends within this instant (``now + left * tau == now``: far into a run the clock's resolution
        exceeds the last steps' time, and a timer for them would land on this same instant forever)."""
        rem, now, tau = self.rem, self.env.now, self.tau
        done = rem <= FINISHED_TOKENS
        if now + float(_min_reduce(rem)) * tau == now:  # both conditions hold for every decoder up to some size
            with np.errstate(invalid="ignore"):  # an idle slot's +inf times a zero step: NaN, not finished
                done |= now + rem * tau == now
        return done.nonzero()[0]

    def stall(self, rank: int, seconds: float) -> float:
        """Land KV on ``rank`` for ``seconds`` of its device: landings on one rank queue, the group decodes
        nothing while any rank lands (the next MoE layer waits for it).  Returns the seconds until this
        landing is done."""
        self._advance()
        now = self.env.now
        end = self.busy[rank] = max(self.busy[rank], now) + seconds
        if end > self.pause_end:
            self.pause_end = end
            if self.n:
                self._reschedule()
        return end - now

    def kv_read_bytes(self) -> float:
        """KV bytes one decode step reads now, summed over the group's ranks."""
        return sum(max(s[0], 0.0) + max(s[1], 0.0) for s in self.rank_sums)

    def join_measured(self, tokens: float, hbm_bytes: float, hbf_bytes: float, flush_bytes: float,
                      hbm_write_bytes: float = 0.0, rank: int = 0) -> tuple[simpy.Event, float]:
        """:meth:`join`, and the step time with this decoder added to the batch as it stood (its first step,
        for TTFT): the new step time when the step inputs after joining equal those, so a request pays one
        step-model call, not two."""
        if self.ranks > 1:
            ev = self.join(tokens, hbm_bytes, hbf_bytes, flush_bytes, hbm_write_bytes, rank)
            return ev, self.tau
        h, f, fl, hw = self.sums
        first = ((0.0 if h < 0.0 else h) + hbm_bytes, (0.0 if f < 0.0 else f) + hbf_bytes,
                 (0.0 if fl < 0.0 else fl) + flush_bytes, (0.0 if hw < 0.0 else hw) + hbm_write_bytes)
        n = self.n + 1
        ev = self.join(tokens, hbm_bytes, hbf_bytes, flush_bytes, hbm_write_bytes)
        if self.n == n and self._args == first:
            return ev, self.tau
        return ev, self.step_fn(n, *first)

    def join(self, tokens: float, hbm_bytes: float, hbf_bytes: float, flush_bytes: float,
             hbm_write_bytes: float = 0.0, rank: int = 0) -> simpy.Event:
        """Start decoding ``tokens`` output tokens on ``rank``; the event fires when the last one is generated."""
        ev = simpy.Event(self.env)
        if tokens <= 0:
            ev.succeed()
            return ev
        self._advance()
        if not self.free_slots:
            self._grow()
        i = self.free_slots.pop()
        self.rem[i] = tokens
        row = (float(hbm_bytes), float(hbf_bytes), float(flush_bytes), float(hbm_write_bytes))
        self.rows[i] = row
        self.slot_rank[i] = rank
        s = self.rank_sums[rank]
        s[0] += row[0]
        s[1] += row[1]
        s[2] += row[2]
        s[3] += row[3]
        self.rank_n[rank] += 1
        self._dirty.add(rank)
        self.n += 1
        self.events[i] = ev
        self._reschedule()
        return ev

