"""The offline bound: the flow optimum against brute force, an independent greedy and a dense LP, and
against every policy replayed on the same event stream (which it must never fall below); what it cannot solve
exactly (token totals past 2**53, a close before its write) refused."""

from __future__ import annotations

import heapq
import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings, target
from hypothesis import strategies as st
from scipy.optimize import linprog
from test_sweep import ONE_CONFIG, TINY

from lachesis.evaluation import grid, store, tables
from lachesis.evaluation import sweep as W
from lachesis.evaluation.bound import MAX_TOKENS, BoundResult, Timeline, hbm_bound, max_absorbed
from lachesis.kv import AllocationError
from lachesis.memory.replay import annotate_clairvoyant, replay_events
from lachesis.node import block_capacity
from lachesis.node import simulator as S
from lachesis.node.node_memory import Memory

POLICIES = ["hbm_first", "hbm_first_reclaim", "deterministic", "lachesis", "rho_threshold", "oracle"]
CLASSES = ["reasoning_laden", "reasoning_stripped", "lead", "worker", "worker", "reviewer"]


# -- independent solvers -----------------------------------------------------------------------------

def brute_force(start, end, size, capacity, weight) -> float:
    """Every whole x (the optimum is whole: total unimodularity), each checked at every point."""
    pts = sorted(set(start) | set(end))
    best = 0.0
    for x in itertools.product(*(range(s + 1) for s in size)):
        if all(sum(xi for xi, a, b in zip(x, start, end) if a <= p < b) <= capacity for p in pts):
            best = max(best, sum(xi * wi for xi, wi in zip(x, weight)))
    return best


def dense_lp(start, end, size, capacity, weight) -> float:
    """The interval LP itself, one row per point (no flow, no compression)."""
    start, end = np.asarray(start), np.asarray(end)
    pts = np.unique(start)
    if not len(pts):
        return 0.0
    a_ub = ((start[None, :] <= pts[:, None]) & (pts[:, None] < end[None, :])).astype(float)
    res = linprog(-np.asarray(weight, float), A_ub=a_ub, b_ub=np.full(len(pts), float(capacity)),
                  bounds=list(zip([0] * len(size), size)), method="highs")
    assert res.status == 0
    return -res.fun


def greedy(start, end, size, capacity) -> int:
    """Uniform weights: admit writes in start order, and whenever the live total exceeds the capacity
    drop tokens of the live writes that close last (optimal for equal weights, a textbook exchange
    argument); written independently of the flow."""
    order = sorted(range(len(start)), key=lambda i: start[i])
    live: list[tuple[int, int, int]] = []  # (-end, i, tokens held)
    held = total = 0
    for i in order:
        # release what closed at or before this write
        keep = [(e, j, x) for e, j, x in live if -e > start[i]]
        held = sum(x for _, _, x in keep)
        live = keep
        heapq.heapify(live)
        if end[i] <= start[i]:
            total += size[i]
            continue
        heapq.heappush(live, (-end[i], i, size[i]))
        held += size[i]
        total += size[i]
        while held > capacity:
            e, j, x = heapq.heappop(live)
            cut = min(x, held - capacity)
            held -= cut
            total -= cut
            if x > cut:
                heapq.heappush(live, (e, j, x - cut))
    return total


intervals = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 6), st.integers(0, 3),
                               st.sampled_from([0, 1, 1, 2, 3])),
                     max_size=5)


@settings(max_examples=300, deadline=None)
@given(iv=intervals, capacity=st.integers(0, 7))
def test_flow_equals_brute_force_and_the_dense_lp(iv, capacity):
    start = [s for s, _, _, _ in iv]
    end = [s + d for s, d, _, _ in iv]
    size = [z for _, _, z, _ in iv]
    weight = [w for *_, w in iv]
    got, status, _ = max_absorbed(start, end, size, capacity, weight)
    assert got == brute_force(start, end, size, capacity, weight)
    assert got == pytest.approx(dense_lp(start, end, size, capacity, weight), abs=1e-6)
    event(status)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), n=st.integers(1, 60), capacity=st.integers(0, 60))
def test_flow_equals_the_greedy_for_equal_weights(data, n, capacity):
    start = data.draw(st.lists(st.integers(0, 40), min_size=n, max_size=n))
    end = [s + data.draw(st.integers(0, 25)) for s in start]
    size = data.draw(st.lists(st.integers(0, 12), min_size=n, max_size=n))
    got, status, _ = max_absorbed(start, end, size, capacity)
    assert got == greedy(start, end, size, capacity)
    event(status)


def test_flow_at_scale_equals_the_greedy():
    rng = np.random.default_rng(7)
    start = rng.integers(0, 5000, 3000)
    end = start + rng.integers(1, 400, 3000)
    size = rng.integers(1, 500, 3000)
    for cap in (0, 1, 999, 20_000, 10**9):
        got, status, n_arcs = max_absorbed(start, end, size, cap)
        assert got == greedy(start.tolist(), end.tolist(), size.tolist(), cap)
        assert (status == "trivial") == (cap in (0, 10**9)) and (n_arcs > 0) == (status == "optimal")


def test_max_absorbed_argument_errors():
    with pytest.raises(ValueError, match="one length"):
        max_absorbed([0], [1, 2], [1], 1)
    with pytest.raises(ValueError, match=">= 0"):
        max_absorbed([0], [1], [-1], 1)
    with pytest.raises(ValueError, match="capacity"):
        max_absorbed([0], [1], [1], -1)
    with pytest.raises(ValueError, match="capacity"):
        max_absorbed([0], [1], [1], math.nan)


# -- timelines -------------------------------------------------------------------------------------

def test_timeline_from_events_by_hand():
    ev = [(0.0, "write", "a", "lead", 5, "S"), (0.0, "write", "b", "worker", 3, "S"), (1.0, "read", "a", 9),
          (1.0, "close", "b"), (1.0, "write", "a", "lead", 2, "S"), (2.0, "write", "c", "worker", 4, "T"),
          (3.0, "session_end", "S"), (3.0, "write", "d", "worker", 1, "S")]
    tl = Timeline.from_events(ev)
    assert tl.t_write.tolist() == [0.0, 0.0, 1.0, 2.0, 3.0]
    assert tl.start.tolist() == [0, 1, 4, 5, 7]
    assert tl.end.tolist() == [6, 3, 6, 8, 8]  # a: session end; b: its close; c and d: never closed
    assert tl.tokens.tolist() == [5, 3, 2, 4, 1]
    # three tokens of HBM: a's first write (5, live to S's end) gives way to b (3), then a's second (2) and
    # one token of c beside it, and d (1) beside that token of c
    assert hbm_bound(ev, 3).hbm_tokens == 3 + 2 + 1 + 1
    assert hbm_bound(ev, 3).hbm_tokens == brute_force(tl.start.tolist(), tl.end.tolist(), tl.tokens.tolist(), 3,
                                                      [1] * 5)


def test_timeline_errors_name_the_event():
    with pytest.raises(ValueError, match="event 1 .* before the previous"):
        Timeline.from_events([(1.0, "write", "a", "lead", 1), (0.5, "write", "b", "lead", 1)])
    with pytest.raises(ValueError, match="event 2 .* already closed"):
        Timeline.from_events([(0, "write", "a", "lead", 1), (1, "close", "a"), (2, "write", "a", "lead", 1)])
    with pytest.raises(KeyError, match="event 1 .* not open"):
        Timeline.from_events([(0, "write", "a", "lead", 1), (1, "close", "b")])
    with pytest.raises(KeyError, match="not open"):
        Timeline.from_events([(0, "write", "a", "lead", 1), (1, "close", "a"), (2, "close", "a")])
    with pytest.raises(ValueError, match="tokens"):
        Timeline.from_events([(0, "write", "a", "lead", -1)])
    with pytest.raises(ValueError, match="missing column 'end'"):
        Timeline.from_arrays({"t_write": np.zeros(1), "start": np.zeros(1, int), "tokens": np.zeros(1, int)})
    with pytest.raises(ValueError, match="integers"):
        Timeline.from_arrays({"t_write": np.zeros(1), "start": np.zeros(1), "end": np.zeros(1, int),
                              "tokens": np.zeros(1, int)})
    with pytest.raises(ValueError, match="length"):
        Timeline(np.zeros(2), np.zeros(1, np.int64), np.zeros(2, np.int64), np.zeros(2, np.int64))
    with pytest.raises(ValueError, match="NaN"):
        Timeline.from_times([0.0], [math.nan], [1])


def test_timeline_arrays_round_trip():
    tl = Timeline.from_times([0.0, 1.0, 1.0], [1.0, math.inf, 2.0], [4, 5, 6])
    back = Timeline.from_arrays(tl.arrays())
    for f, a in tl.arrays().items():
        assert np.array_equal(getattr(back, f), a)


def test_from_times_closes_free_before_writes_at_one_instant():
    # a holds [0, 1), b [1, 2): never live together, so capacity 5 takes both whole
    tl = Timeline.from_times([0.0, 1.0], [1.0, 2.0], [5, 5])
    assert hbm_bound(tl, 5).hbm_tokens == 10
    # a write closed at its own time holds nothing
    assert hbm_bound(Timeline.from_times([3.0], [3.0], [7]), 0).hbm_tokens == 7
    # events keep their order within an instant: the write before the close does not fit beside it
    ev = [(0.0, "write", "a", "lead", 5), (1.0, "write", "b", "lead", 5), (1.0, "close", "a")]
    assert hbm_bound(ev, 5).hbm_tokens == 5


def test_capacity_zero_infinite_and_windows():
    ev = [(float(t), "write", f"s{t % 4}.{t // 8}", "worker", 3 + t, "S") for t in range(8)]
    ev += [(8.0, "session_end", "S")]
    tl = Timeline.from_events(ev)
    total = int(tl.tokens.sum())
    assert hbm_bound(tl, 0).hbm_tokens == 0
    r = hbm_bound(tl, math.inf)
    assert (r.hbm_tokens, r.window_tokens, r.share, r.status) == (total, total, 1.0, "trivial")
    w = hbm_bound(tl, 10, window=(2.0, 5.0), bytes_per_token=3)
    assert w.window_tokens == 5 + 6 + 7 and w.n_writes == 3
    assert w.hbm_tokens == 10 and w.hbm_bytes == 30 and w.window_bytes == 54
    assert w.as_dict()["bound_hbm_share"] == pytest.approx(10 / 18)
    empty = hbm_bound(tl, 10, window=(100.0, 200.0))
    assert empty.window_tokens == 0 and math.isnan(empty.share)
    with pytest.raises(ValueError, match="t0 <= t1"):
        hbm_bound(tl, 1, window=(2.0, 1.0))
    assert isinstance(hbm_bound([], 5), BoundResult) and hbm_bound([], 5).hbm_tokens == 0


# -- the bound against every policy on the same stream ---------------------------------------------------

@st.composite
def streams(draw):
    """Random allocator event streams: segments of any class in a few sessions, written in several
    pieces, read, closed or ended with their session; times non-decreasing with ties."""
    n_seg = draw(st.integers(1, 10))
    segs = [(draw(st.sampled_from(CLASSES)), draw(st.integers(0, 2)), draw(st.sampled_from([0.5, 1.0, 2.0, math.nan])))
            for _ in range(n_seg)]
    gen, live = [0] * n_seg, [False] * n_seg
    events, t = [], 0.0
    for op, i, tok, dt in draw(st.lists(st.tuples(
            st.sampled_from(["write"] * 5 + ["read", "close", "close", "end"]), st.integers(0, n_seg - 1),
            st.integers(0, 30), st.sampled_from([0.0, 0.0, 1.0, 2.5])), min_size=1, max_size=60)):
        t += dt
        cls, sess, key = segs[i]
        sid = f"s{i}.{gen[i]}"
        if op == "write":
            events.append((t, "write", sid, cls, tok, f"S{sess}", key))
            live[i] = True
        elif op == "read" and live[i]:
            events.append((t, "read", sid, tok))
        elif op == "close" and live[i]:
            events.append((t, "close", sid))
            live[i], gen[i] = False, gen[i] + 1
        elif op == "end":
            events.append((t, "session_end", f"S{sess}"))
            for j, (_, s2, _) in enumerate(segs):
                if s2 == sess and live[j]:
                    live[j], gen[j] = False, gen[j] + 1
    return annotate_clairvoyant(events)  # the oracle's facts; the other policies ignore them


def _hbm_tokens(events, policy, hbm, bt) -> int | None:
    try:
        return int(replay_events(events, policy, hbm, 10_000, bt).tokens[0])
    except AllocationError:
        return None


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=streams(), hbm=st.integers(0, 12), bt=st.integers(1, 5))
def test_bound_is_at_least_every_policy_on_the_same_stream(events, hbm, bt):
    """The timeline is fixed in a replay, so no policy may place more HBM tokens than the bound, exactly."""
    bound = hbm_bound(events, hbm * bt).hbm_tokens
    best = 0
    for pol in POLICIES:
        got = _hbm_tokens(events, pol, hbm, bt)
        if got is not None:
            assert got <= bound, pol
            best = max(best, got)
    assert bound <= sum(e[4] for e in events if e[1] == "write")
    target(float(bound - best), label="bound minus the best policy")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=streams(), hbm=st.integers(0, 10), bt=st.integers(1, 4),
       cut=st.tuples(st.floats(0, 60), st.floats(0, 60)))
def test_bound_over_a_window_is_at_least_every_policy_in_that_window(events, hbm, bt, cut):
    """A policy's HBM tokens among the writes of [t0, t1): its replay up to t1 minus its replay up to t0
    (a policy decides from the past only; the oracle's facts ride on the writes)."""
    t0, t1 = sorted(cut)
    bound = hbm_bound(events, hbm * bt, window=(t0, t1))
    before = [e for e in events if e[0] < t0]
    upto = [e for e in events if e[0] < t1]
    for pol in POLICIES:
        a, b = _hbm_tokens(before, pol, hbm, bt), _hbm_tokens(upto, pol, hbm, bt)
        if a is not None and b is not None:
            assert b - a <= bound.hbm_tokens, pol
    assert 0 <= bound.hbm_tokens <= bound.window_tokens


@settings(max_examples=100, deadline=None)
@given(events=streams(), caps=st.lists(st.integers(0, 80), min_size=2, max_size=4))
def test_bound_grows_with_capacity(events, caps):
    tl = Timeline.from_events(events)
    got = [hbm_bound(tl, c).hbm_tokens for c in sorted(caps)]
    assert got == sorted(got)


# -- on the grid: the baseline run's timeline, the bound in its row, the derived tables -------------------

def _cell(policies=("hbm_first", "lachesis", "oracle"), memory="1/7"):
    return [grid.Point("fixture", memory, "Llama-4-Maverick", "tight", p, 1.0, 0) for p in policies]


@pytest.mark.parametrize("memory", ["1/7", "4/4"])
def test_the_baseline_row_carries_the_bound_of_its_own_run(fixture_plan, tmp_path, monkeypatch, memory):
    pts = _cell(memory=memory)
    rows = W.evaluate_cell(pts, TINY, str(tmp_path), load=ONE_CONFIG)
    base, n = rows[0], rows[0]["n_sessions"]
    assert base["bound_status"] in ("optimal", "trivial") and base["bound_n_writes"] > 0
    # the same window and timeline as the run's own bytes: exact
    assert base["bound_window_bytes"] == base["bytes_by_tier"]["hbm"] + base["bytes_by_tier"]["hbf"]
    assert base["bytes_by_tier"]["hbm"] <= base["bound_hbm_bytes"] <= base["bound_window_bytes"]
    assert base["bound_lifetime_years"] >= base["lifetime_years"]
    assert all(not any(k.startswith("bound_") for k in r) for r in rows[1:])
    # the timeline is filed under the baseline's run at N*, read back without simulating, and gives the row's bound
    key = store.point_key(pts[0], fixture_plan.fingerprint, TINY, n=n)
    assert (tmp_path / f"{key}.timeline.npz").exists()
    monkeypatch.setattr(S, "simulate_windows", lambda *a, **k: (_ for _ in ()).throw(AssertionError("reran")))
    tl = W.baseline_timeline(pts[2], n, TINY, str(tmp_path), fixture_plan)
    cfg = pts[0].config()
    bpt, bt = cfg.model.kv_bytes_per_token, cfg.deployment.block_tokens
    again = hbm_bound(tl, base["bound_capacity_tokens"], (base["warmup_s"], math.inf), bpt)
    assert again.hbm_bytes == base["bound_hbm_bytes"] and again.window_bytes == base["bound_window_bytes"]
    assert base["bound_capacity_tokens"] == Memory(fixture_plan, cfg, "hbm_first").alloc.hbm_blocks * bt


def test_the_bound_holds_for_every_policy_replayed_on_a_simulated_run(fixture_plan):
    """A simulated HBM-first run's event stream, replayed through every policy at the run's capacity."""
    pt = _cell(("hbm_first",))[0]
    cfg = pt.config()
    r = S.simulate(fixture_plan, cfg, "hbm_first", 6, duration_s=600.0, warmup_s=100.0,
                   settings=S.RunSettings(seed=0, record_events=True))
    bt = cfg.deployment.block_tokens
    hbm_blocks, hbf_blocks = block_capacity.kv_blocks(cfg.memory, cfg.model, cfg.deployment)  # the run's own memory
    events = annotate_clairvoyant(r.events)
    assert int(replay_events(events, "hbm_first", hbm_blocks, hbf_blocks, bt).tokens[0]) == r.totals.tokens[0]
    for blocks in (hbm_blocks, hbm_blocks // 8, hbm_blocks // 40):  # the run's HBM, and smaller ones that bind
        bound = hbm_bound(events, blocks * bt)
        got = {pol: int(replay_events(events, pol, blocks, hbf_blocks, bt).tokens[0]) for pol in POLICIES}
        assert max(got.values()) <= bound.hbm_tokens <= bound.window_tokens
    assert bound.status == "optimal" and bound.hbm_tokens < bound.window_tokens
    # and over the run's measurement window, against the run itself
    w = W.bound_fields(r, cfg, Timeline.from_events(r.events))
    tiers = r.lifetime.bytes_by_tier
    assert tiers["hbm"] <= w["bound_hbm_bytes"] and w["bound_window_bytes"] == sum(tiers.values())


@pytest.mark.parametrize("damage", ["truncated", "edited"])
def test_a_bad_timeline_is_reported_and_the_baseline_rerun(fixture_plan, tmp_path, damage):
    pts = _cell(("hbm_first", "lachesis"))
    rows = W.evaluate_cell(pts, TINY, str(tmp_path), load=ONE_CONFIG)
    n = rows[0]["n_sessions"]
    (path,) = tmp_path.glob("*.timeline.npz")
    good = W.baseline_timeline(pts[1], n, TINY, str(tmp_path), fixture_plan)
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:100])
    else:
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        arrays["tokens"] = arrays["tokens"] + 1
        with open(path, "wb") as fh:
            np.savez_compressed(fh, **arrays)
    with pytest.warns(store.CacheWarning, match=path.name):
        back = W.baseline_timeline(pts[1], n, TINY, str(tmp_path), fixture_plan)
    for f, a in good.arrays().items():
        np.testing.assert_array_equal(getattr(back, f), a)
    # the rerun (a run at a given load) files the same bound as the search's continued run
    rerun = W.cached_entry(pts[0], tmp_path, TINY, n)
    assert rerun["bound_hbm_bytes"] == rows[0]["bound_hbm_bytes"]


def test_ratio_table_and_hbm_share_read_the_bound_off_the_baseline_rows():
    rows = [dict(workload="w", model="m", slo="tight", memory="1/7", seed=s, policy=p, lifetime_years=v,
                 bytes_hbm=h, bytes_hbf=10 - h)
            for s, vals in ((0, ((2.0, 1), (3.0, 3), (2.5, 2))), (1, ((2.0, 1), (2.5, 2), (4.0, 4))))
            for p, (v, h) in zip(("hbm_first", "lachesis", "oracle"), vals)]
    for r, life, share in zip([rows[0], rows[3]], (6.0, 4.0), (0.5, 0.6)):
        r.update(bound_lifetime_years=life, bound_hbm_share=share)
    t = tables.ratio_table(pd.DataFrame(rows))
    assert t["bound"].tolist() == [6.0, 4.0] and t["bound/hbm_first"].tolist() == [3.0, 2.0]
    assert t["lachesis_share_of_bound_gain"].tolist() == [0.25, 0.25]
    assert t["oracle_share_of_bound_gain"].tolist() == [0.125, 1.0]
    hs = tables.hbm_share(pd.DataFrame(rows)).set_index(["seed", "policy"])["hbm_share"]
    assert hs[(0, "bound")] == 0.5 and hs[(1, "bound")] == 0.6 and hs[(1, "oracle")] == 0.4
    # without the bound columns (a grid from before the bound) the tables are as they were
    plain = tables.ratio_table(pd.DataFrame(rows).drop(columns=["bound_lifetime_years", "bound_hbm_share"]))
    assert "bound" not in plain and "lachesis_share_of_bound_gain" not in plain
    stats = {s.statistic.key: s.values for s in tables.single_agent_stats(pd.DataFrame(rows).assign(memory="1/7"))}
    assert stats["single.beyond.bound/hbm_first"].tolist() == [3.0, 2.0]
    assert stats["single.beyond.hbm_share.bound"].tolist() == [0.5, 0.6]


def test_only_the_run_that_sized_the_load_carries_the_bound(fixture_plan, tmp_path):
    """seed_load="fixed": the first seed's searched run solves the bound; a replica at its load does not,
    and the tables then hold the bound for that seed alone."""
    lead = W.evaluate_cell(_cell(("hbm_first", "lachesis")), TINY, str(tmp_path), load=ONE_CONFIG)
    other = [grid.Point("fixture", "1/7", "Llama-4-Maverick", "tight", p, 1.0, 1) for p in ("hbm_first", "lachesis")]
    rows = W.replicate_cell(other, lead, TINY, str(tmp_path))
    assert "bound_hbm_bytes" in lead[0] and not any(k.startswith("bound_") for r in rows for k in r)
    assert not list(tmp_path.glob("*.timeline.npz"))[1:]  # one timeline: the first seed's
    t = tables.ratio_table(W.results_frame(lead + rows))
    assert t.set_index("seed")["bound"].notna().tolist() == [True, False]


def test_bound_marks_draws_a_line_per_finite_group_and_an_arrow_when_unbounded():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lachesis.plotting import BOUND_LABEL, bound_marks

    fig, ax = plt.subplots()
    key = bound_marks(ax, [0, 1, 2, 3], [4.0, np.inf, np.nan, 6.0], lo=[3.0, 1.0, 1.0, np.nan], hi=[5.0, 2.0, 2.0, 7.0])
    (lines,) = ax.collections
    segs = lines.get_segments()
    assert [tuple(s[:, 1]) for s in segs] == [(4.0, 4.0), (6.0, 6.0)] and [tuple(s[:, 0])
                                                                           for s in segs] == [(-0.4, 0.4), (2.6, 3.4)]
    assert [(p.get_y(), p.get_height()) for p in ax.patches] == [(3.0, 2.0)]  # a band only where lo and hi are known
    (arrow,) = ax.lines
    assert arrow.get_xdata().tolist() == [1.0] and key.get_label() == BOUND_LABEL
    plt.close(fig)


# -- refused: token totals past 2**53, a close before its write ---------------------------------------


@pytest.mark.parametrize("tokens", [np.array([2**62] * 3), np.array([2**64 - 1], dtype=np.uint64),
                                    np.array([MAX_TOKENS // 2, MAX_TOKENS // 2])])
def test_huge_token_totals_are_refused_not_wrapped(tokens) -> None:
    n = len(tokens)
    with pytest.raises(ValueError, match=r"field 'tokens' totals .* limit of 2\*\*53"):
        Timeline.from_times(np.arange(n, dtype=float), np.arange(n, dtype=float) + 5, tokens)


def test_a_timeline_built_directly_is_refused_too() -> None:
    with pytest.raises(ValueError, match=r"^Timeline: field 'tokens' totals"):
        Timeline(np.zeros(2), np.array([0, 1]), np.array([2, 2]), np.array([2**62, 2**62]))


def test_events_with_huge_tokens_are_refused() -> None:
    ev = [(0.0, "write", "s0", "lead", 2**62, "sess"), (1.0, "write", "s1", "lead", 2**62, "sess")]
    with pytest.raises(ValueError, match="from_events: field 'tokens' totals"):
        Timeline.from_events(ev)


def test_below_the_limit_the_window_and_share_stay_exact() -> None:
    big = 2**50
    r = hbm_bound(Timeline.from_times([0.0, 1.0, 2.0], [10.0, 10.0, 10.0], [big, big, big]), hbm_tokens=2 * big)
    assert r.window_tokens == 3 * big and r.hbm_tokens == 2 * big and r.share == pytest.approx(2 / 3)


def test_a_close_before_its_write_is_refused_not_counted_as_absorbed() -> None:
    with pytest.raises(ValueError, match=r"write 1: field 't_close' 0\.5 precedes its write at t_write 1\.0"):
        Timeline.from_times([0.0, 1.0], [5.0, 0.5], [10, 10])


def test_a_close_at_its_write_still_holds_nothing() -> None:
    assert hbm_bound(Timeline.from_times([3.0], [3.0], [7]), 0).hbm_tokens == 7
