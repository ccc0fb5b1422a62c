"""Capacity search (§5.2): the most concurrent sessions per GPU that the SLO admits, N*.

For one (trace, model, SLO, memory configuration, policy) the search finds the largest N whose short
closed-loop run meets p99 TPOT and p99 TTFT and whose live KV fits HBM + HBF (minus the weights), to a
resolution of ``rel_tol`` × N: it brackets the boundary, then narrows it, stepping along each run's
SLO margin (:class:`Search`, :func:`capacity_search`).

The SLO, the search and its assumptions (monotone capacity; durations counted in mean session
durations): docs/design.md §5, "Load", "Capacity search" and "Decode node" (unit of simulated time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Optional

from lachesis.config import SLO, Config
from lachesis.node import simulator as sim
from lachesis.node.plan import Plan

#: memory snapshots per search run (its settling check is not used; only p99 TPOT/TTFT and OOM are)
SEARCH_SAMPLES = 50


@dataclass(frozen=True)
class SearchParams:
    """How long each run simulates (in mean session durations) and how far the search goes."""

    search_warmup: float = 0.2
    search_measure: float = 0.5
    warmup: float = 0.5
    measure: float = 2.0
    n_max: int = 8192
    n_samples: int = 200
    #: the search stops when the bracket is within this fraction of N (the capacity's resolution)
    rel_tol: float = 0.04

    def search_window(self, plan: Plan) -> sim.Window:
        """A candidate's short run, in seconds of simulated time for this plan."""
        m = plan.mean_session_s
        return sim.Window(duration_s=(self.search_warmup + self.search_measure) * m,
                          warmup_s=self.search_warmup * m, n_samples=SEARCH_SAMPLES)

    def lifetime_window(self, plan: Plan) -> sim.Window:
        """The longer run that lifetime is read from, in seconds of simulated time for this plan."""
        m = plan.mean_session_s
        return sim.Window(duration_s=(self.warmup + self.measure) * m, warmup_s=self.warmup * m,
                          n_samples=self.n_samples)

    def windows(self, plan: Plan) -> list[sim.Window]:
        """The search window and the lifetime window of this plan, in that order."""
        return [self.search_window(plan), self.lifetime_window(plan)]


#: The grid's search and measurement settings: :class:`SearchParams` with a shorter
#: lifetime run.  ASSUMPTION (lifetime window, knobs ``warmup``/``measure``): 0.25 + 1.0 mean session
#: durations instead of 0.5 + 2.0.  Reason: every seed of a cell is a lifetime run of every policy,
#: the grid's main cost; the settled rate is read over the window's second half, so each seed reads
#: 0.5 mean session durations and three seeds 1.5, against 1.0 for one seed at the longer window.
#: The change in gains and settling on a sample of cells is in ``benchmarks/RESULTS.md``
#: (``benchmarks/lifetime_window.py``); the notebooks print the share of settled runs.
PAPER = SearchParams(warmup=0.25, measure=1.0)


#: Search/measurement presets.  "paper": :data:`PAPER` (used by paper.yaml at scale 1); "ci": short
#: windows and a coarse capacity resolution so a reduced grid runs in CI-sized time.  Neither is
#: tuned to any evaluation number.
SEARCH_PRESETS: dict[str, SearchParams] = {
    "paper": PAPER,
    "ci": SearchParams(search_warmup=0.05, search_measure=0.15, warmup=0.1, measure=0.4, rel_tol=0.25, n_samples=60),
}


def margin(rec: dict, slo: SLO) -> float | None:
    """A candidate's load relative to the SLO: max(p99 TPOT / bound, p99 TTFT / bound); None if unknown or OOM."""
    if rec["oom"]:
        return None
    vals = [v for v in (rec["p99_tpot_s"] / slo.p99_tpot_s, rec["p99_ttft_s"] / slo.ttft_s) if v == v]
    return max(vals) if vals else None


def close(cont: Continuation) -> None:
    """Release a paused run (a generator from :func:`lachesis.node.simulator.simulate_windows`)."""
    if cont is not None and hasattr(cont, "close"):
        cont.close()


#: A paused run (:func:`lachesis.node.simulator.simulate_windows`) that yields its longer windows, or None
Continuation = Optional[Iterator[sim.SimResult]]
Probe = Callable[[int], tuple[sim.SimResult, Continuation]]  # n -> (the short run's result, its continuation)


class Search:
    """One capacity search's explicit state: candidates tried, the bracket, and the best run kept.

    ``lo`` is the largest N known feasible (0: none yet), ``hi`` the smallest known infeasible above it
    (None: none yet).  Only the best feasible candidate's continuation is kept; every other one is
    closed as soon as it is superseded.
    """

    def __init__(self, probe: Probe, slo: SLO, params: SearchParams):
        self.probe, self.slo, self.params = probe, slo, params
        self.tried: dict[int, dict] = {}
        self.lo: int = 0
        self.hi: int | None = None
        self.best_n: int = 0
        self.best_cont: Continuation = None

    # -- candidates ------------------------------------------------------------------------------

    def ok(self, n: int) -> bool:
        """Run candidate ``n`` (once) and return whether it met the SLO."""
        if n not in self.tried:
            r, cont = self.probe(n)
            feasible = bool(r.meets(self.slo))
            m = r.measurement
            self.tried[n] = dict(n=n, p99_tpot_s=m.p99_tpot_s, p99_ttft_s=m.p99_ttft_s, oom=m.oom, feasible=feasible)
            if feasible and n > self.best_n:
                close(self.best_cont)
                self.best_n, self.best_cont = n, cont
            else:
                close(cont)
        return self.tried[n]["feasible"]

    def width(self, n: int) -> int:
        """The capacity's resolution at N."""
        return max(1, int(self.params.rel_tol * n))

    def estimate(self, pts: list[int]) -> float | None:
        """N at which the margin reaches 1, on the line through two tried candidates (or one and the origin)."""
        ms: list[tuple[int, float]] = [(n, m) for n in pts
                                       if (m := margin(self.tried[n], self.slo)) is not None and m > 0]
        if len(ms) == 1:
            ms = [(0, 0.0)] + ms
        if len(ms) != 2:
            return None
        (n0, m0), (n1, m1) = sorted(ms)
        if n1 == n0 or m1 <= m0:
            return None
        return n0 + (1.0 - m0) * (n1 - n0) / (m1 - m0)

    def _feasible(self, last: int) -> list[int]:
        return sorted(n for n, t in self.tried.items() if t["feasible"])[-last:]

    def _infeasible(self, first: int) -> list[int]:
        return sorted(n for n, t in self.tried.items() if not t["feasible"])[:first]

    # -- phases ----------------------------------------------------------------------------------

    def bracket_up(self, hinted: bool) -> None:
        """From a feasible ``lo``, step up until a candidate fails (or n_max): the margin line's crossing,
        at least 2^k × rel_tol above lo after k estimates in a row that fell short, at most 2 × lo.
        Without an estimate: doubling, or (from a hint) 10 %, 20 %, 40 %, … steps."""
        p, streak = self.params, 0
        while self.hi is None and self.lo < p.n_max:
            lo = self.lo
            est = self.estimate(self._feasible(2)) if lo > 1 else None
            if est is None:
                nxt = max(lo + 1, int(lo * (1 + 0.1 * 2 ** streak))) if hinted else 2 * lo
            else:
                floor_ = max(lo + self.width(lo), int(lo * (1 + p.rel_tol * 2 ** streak)))
                nxt = min(max(int(round(est)), floor_), 2 * lo)
            nxt = min(nxt, p.n_max)
            if self.ok(nxt):
                # count the steps that fell short: a hinted blind step or an estimate below the cap
                streak += hinted if est is None else (nxt < 2 * lo)
                self.lo = nxt
            else:
                self.hi = nxt

    def bracket_down(self) -> bool:
        """From an infeasible ``hi`` with nothing feasible yet, step down (the same rule, downward).
        Returns False when N = 1 fails too (nothing is feasible)."""
        p, streak = self.params, 0
        while self.lo == 0:
            hi = self.hi
            assert hi is not None  # NOTE: the step down starts from, and keeps, an infeasible hi
            est = self.estimate(self._infeasible(2))
            if est is None:
                nxt = max(1, min(hi - 1, int(hi / (1 + 0.1 * 2 ** streak))))
            else:
                ceil_ = min(hi - self.width(hi), int(hi / (1 + p.rel_tol * 2 ** streak)))
                nxt = max(1, min(max(int(round(est)), hi // 2), ceil_, hi - 1))
            if self.ok(nxt):
                self.lo = nxt
            elif nxt == 1:
                return False
            else:
                self.hi, streak = nxt, streak + 1
        return True

    def narrow(self) -> None:
        """Alternate two steps until the bracket is within rel_tol:

        estimate: the margin line's crossing between lo and hi (regula falsi), kept inside the middle
                  half of the bracket, so a noisy margin still removes at least a quarter of it;
        confirm:  one resolution step from the end the estimate just moved, which closes the bracket
                  when the estimate was right.
        Without margins (or with a flat margin line) each step is a bisection.
        """
        p = self.params
        confirm = None  # side the last estimate landed on (True: feasible, lo moved)
        while self.hi is not None and self.hi - self.lo > self.width(self.lo):
            lo, hi, est = self.lo, self.hi, None
            if confirm is None:
                est = self.estimate([lo, hi])
                q = (hi - lo) / 4
                mid = (lo + hi) // 2 if est is None else int(round(min(max(est, lo + q), hi - q)))
            elif confirm:
                mid = lo + self.width(lo)
            else:
                mid = hi - max(1, int(p.rel_tol * hi / (1 + p.rel_tol)))
            mid = min(max(mid, lo + 1), hi - 1)
            feasible = self.ok(mid)
            if feasible:
                self.lo = mid
            else:
                self.hi = mid
            confirm = feasible if (confirm is None and est is not None) else None

    def run(self, hint: int | None = None) -> tuple[int, list[dict], Continuation]:
        """Bracket and narrow; returns (N*, candidates tried in N order, N*'s continuation or None)."""
        start = min(int(hint), self.params.n_max) if hint and hint > 1 else 1
        if self.ok(start):
            self.lo = start
            self.bracket_up(hinted=start != 1)
        elif start > 1:
            self.hi = start
            if not self.bracket_down():
                return self._result()
        else:
            return self._result()
        self.narrow()
        return self._result()

    def _result(self) -> tuple[int, list[dict], Continuation]:
        cont = self.best_cont if self.best_n == self.lo else None
        if cont is None:
            close(self.best_cont)
        return self.lo, sorted(self.tried.values(), key=lambda d: d["n"]), cont


def search(probe: Probe, slo: SLO, params: SearchParams = SearchParams(),
           hint: int | None = None) -> tuple[int, list[dict], Continuation]:
    """The capacity search over ``probe(n) -> (short-run result, continuation)``: (N*, tried, continuation)."""
    return Search(probe, slo, params).run(hint)


def capacity_search(plan: Plan, cfg: Config, policy: str, seed: int = 0,
                    params: SearchParams = SearchParams(), run=sim.simulate,
                    hint: int | None = None) -> tuple[int, list[dict]]:
    """Largest N (sessions per GPU) meeting the SLO and fitting memory: bracket, then narrow.

    Without a hint the bracket grows from N = 1 (doubling, or to the margin line's crossing when that
    is nearer); with a ``hint`` (e.g. N* of another policy at the same cell) it starts there and steps
    up or down.  The result is always a candidate that ran and met the SLO with the next larger bracket
    end failing.  ``run(plan, cfg, policy, n, duration_s=, warmup_s=, n_samples=, settings=)`` is one
    candidate's short run (the simulator by default; a stub in tests).
    """
    w = params.search_window(plan)

    def probe(n: int):
        return run(plan, cfg, policy, n, duration_s=w.duration_s, warmup_s=w.warmup_s, n_samples=w.n_samples,
                   settings=sim.RunSettings(seed=seed)), None

    n_star, tried, _ = search(probe, cfg.slo, params, hint)
    return n_star, tried
