"""Capacity search (lachesis.node.capacity): exact on monotone oracles, cheap with margins, robust to noise."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from sim_fixtures import multi_agent_trace

from lachesis.analysis.ranker import rank_keys
from lachesis.analysis.segments import recover
from lachesis.config import DEFAULT, SLO
from lachesis.node import capacity as C
from lachesis.node import simulator as S
from lachesis.node.plan import build_plan


def _run_result(p99_tpot_s: float, p99_ttft_s: float, meets) -> SimpleNamespace:
    """What the search reads of a run: its percentiles and memory, and whether it met the SLO."""
    return SimpleNamespace(measurement=SimpleNamespace(p99_tpot_s=p99_tpot_s, p99_ttft_s=p99_ttft_s, oom=False),
                           meets=meets)


def _step_oracle(boundary: int, calls: list[int] | None = None, p99: float = 0.0):
    """A run that meets the SLO exactly up to ``boundary`` sessions, at percentiles ``p99`` (0: no margin to
    estimate from; NaN: none known), noting in ``calls`` each N it is asked for."""
    def run(_plan, _cfg, _policy, n, **kw):
        if calls is not None:
            calls.append(n)
        return _run_result(p99, p99, meets=lambda slo: n <= boundary)
    return run


@pytest.fixture(scope="module")
def plan():
    tr = multi_agent_trace()
    seg = recover(tr, seed=0)
    return build_plan(tr, seg, rank_keys(tr, seg))


def test_capacity_search_finds_threshold_with_fake_runs(plan):
    """Gallop + bisection lands exactly on the largest feasible N of a monotone oracle."""
    for boundary in (1, 2, 37, 100, 1023):
        calls: list[int] = []
        n_star, tried = C.capacity_search(plan, DEFAULT, "lachesis", params=C.SearchParams(n_max=4096, rel_tol=0),
                                          run=_step_oracle(boundary, calls))
        assert n_star == boundary
        assert len(calls) == len(set(calls)) <= 2 * int(np.log2(boundary + 1)) + 3


@pytest.mark.parametrize("hint", [1, 5, 40, 41, 300, 5000])
def test_hinted_search_finds_the_same_threshold(plan, hint):
    """Starting from another policy's N* (any hint, above or below) gives the same boundary."""
    for boundary in (1, 3, 40, 777):
        n_star, tried = C.capacity_search(plan, DEFAULT, "lachesis", params=C.SearchParams(n_max=4096, rel_tol=0),
                                          run=_step_oracle(boundary), hint=hint)
        assert n_star == boundary, (hint, boundary)


def _margin_oracle(boundary: float, noise: float = 0.0, seed: int = 0, calls: list | None = None):
    """p99 TPOT = SLO × (0.1 + 0.9 n / boundary), times a fixed pseudo-random factor per n: a roofline-like load."""
    slo = DEFAULT.slo.p99_tpot_s

    def run(_p, _c, _pol, n, **kw):
        if calls is not None:
            calls.append(n)
        jitter = 1 + noise * (np.random.default_rng([seed, n]).random() * 2 - 1)
        tpot = slo * (0.1 + 0.9 * n / boundary) * jitter
        return _run_result(tpot, 0.5, meets=lambda s, t=tpot: t <= s.p99_tpot_s)
    return run


@pytest.mark.parametrize("hint", [None, 30, 150, 900])
def test_margin_guided_search_is_exact_and_cheaper(plan, hint):
    """On a linear load, the regula-falsi steps land on the exact boundary with fewer runs than bisection."""
    exact = C.SearchParams(n_max=4096, rel_tol=0)
    for boundary in (7, 140, 1000):
        calls: list[int] = []
        n_star, _ = C.capacity_search(plan, DEFAULT, "lachesis", params=exact, hint=hint,
                                      run=_margin_oracle(boundary, calls=calls))
        assert n_star == boundary, (hint, boundary)
        blind: list[int] = []  # the same oracle without margins (NaN TPOT): gallop/steps + bisection only
        C.capacity_search(plan, DEFAULT, "lachesis", params=exact, hint=hint,
                          run=_step_oracle(boundary, blind, p99=float("nan")))
        assert len(calls) <= len(blind), (hint, boundary, calls, blind)
        if boundary >= 140:
            assert len(calls) < len(blind), (hint, boundary, calls, blind)


@pytest.mark.parametrize("seed", range(6))
def test_search_on_noisy_load_keeps_its_guarantee(plan, seed):
    """With ±8 % noise on the load (not monotone in N), N* still ran feasible and a failing candidate
    lies within rel_tol above it; no candidate runs twice."""
    params = C.SearchParams(n_max=4096, rel_tol=0.04)
    for hint in (None, 100, 400):
        calls: list[int] = []
        n_star, tried = C.capacity_search(plan, DEFAULT, "lachesis", params=params, hint=hint,
                                          run=_margin_oracle(250, noise=0.08, seed=seed, calls=calls))
        by_n = {t["n"]: t for t in tried}
        assert by_n[n_star]["feasible"]
        above = [n for n, t in by_n.items() if n > n_star and not t["feasible"]]
        assert above and min(above) - n_star <= max(1, int(0.04 * n_star))
        assert len(calls) == len(set(calls))
        assert 0.85 * 250 <= n_star <= 1.15 * 250


def test_capacity_search_zero_when_one_session_fails(plan):
    run = lambda *a, **k: _run_result(1.0, 0.0, meets=lambda slo: False)  # noqa: E731
    assert C.capacity_search(plan, DEFAULT, "lachesis", run=run)[0] == 0


def test_capacity_search_on_toy_roofline(plan):
    """With step time = 4 ms × batch, the found N meets the SLO and N+1 does not (same short run)."""
    slo = SLO("toy", p99_tpot_s=0.012)
    cfg = DEFAULT.with_(slo=slo)
    toy = lambda b, *a: 0.004 * b  # noqa: E731

    def run(*a, settings, **k):
        return S.simulate(*a, **k, settings=replace(settings, step_fn=toy))

    params = C.SearchParams(search_warmup=0.3, search_measure=1.0, n_max=64, rel_tol=0)
    n_star, tried = C.capacity_search(plan, cfg, "lachesis", params=params, run=run)
    by_n = {t["n"]: t for t in tried}
    assert 1 <= n_star < 64
    assert by_n[n_star]["feasible"] and by_n[n_star]["p99_tpot_s"] <= 0.012
    assert not by_n[n_star + 1]["feasible"] and by_n[n_star + 1]["p99_tpot_s"] > 0.012


def test_hinted_blind_search_grows_its_steps(plan):
    """Without margins, steps from a hint grow 10 %, 20 %, 40 %, … so a far boundary costs O(log) runs."""
    calls: list[int] = []
    n_star, _ = C.capacity_search(plan, DEFAULT, "lachesis", params=C.SearchParams(n_max=4096, rel_tol=0),
                                  run=_step_oracle(777, calls, p99=float("nan")), hint=5)
    assert n_star == 777 and len(calls) <= 20, calls
