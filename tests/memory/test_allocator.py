"""Property tests of the two-tier allocator and the segment table (docs/design.md §5 contract)."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lachesis.kv import AllocationError, Tier
from lachesis.memory.allocator import SegmentTable
from lachesis.memory.free_lists import TieredAllocator
from lachesis.memory.policies import DeterministicOnly, HBMFirst, HBMFirstReclaim, Lachesis
from lachesis.memory.protocol import MemoryView
from lachesis.memory.replay import parse_event, replay_events

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- TieredAllocator ----------------------------------------------------------------------------------


def test_alloc_serves_requested_tier_then_falls_back():
    a = TieredAllocator(3, 5)
    ids = a.alloc(Tier.HBM, 2)
    assert a.tier_of(ids).tolist() == [0, 0]
    ids2 = a.alloc(Tier.HBM, 4)  # one HBM block left, three from HBF
    assert a.tier_of(ids2).tolist() == [0, 1, 1, 1]
    assert a.free_blocks(Tier.HBM) == 0 and a.free_blocks(Tier.HBF) == 2
    assert a.blocks_written.tolist() == [3, 3]
    hbf = a.alloc(Tier.HBF, 1)
    assert a.tier_of(hbf).tolist() == [1]
    a.check()


def test_exhaustion_raises_and_changes_nothing():
    a = TieredAllocator(2, 2)
    a.alloc(Tier.HBM, 3)
    with pytest.raises(AllocationError, match="only 0 HBM \\+ 1 HBF"):
        a.alloc(Tier.HBM, 2)
    assert a.free_blocks(Tier.HBF) == 1 and a.blocks_written.sum() == 3
    a.check()


def test_free_errors():
    a = TieredAllocator(2, 2)
    ids = a.alloc(Tier.HBM, 2)
    with pytest.raises(AllocationError, match="unknown block id"):
        a.free([7])
    with pytest.raises(AllocationError, match="unknown block id"):
        a.free([-1])
    with pytest.raises(AllocationError, match="more than once"):
        a.free([ids[0], ids[0]])
    with pytest.raises(AllocationError, match="not allocated"):
        a.free([3])  # an HBF block never handed out
    a.free(ids)
    with pytest.raises(AllocationError, match="not allocated"):
        a.free(ids[:1])  # double free
    with pytest.raises(AllocationError, match="integer"):
        a.free(np.array([0.5]))
    assert a.free_blocks(Tier.HBM) == 2
    a.check()


def test_bad_arguments():
    with pytest.raises(ValueError):
        TieredAllocator(-1, 2)
    a = TieredAllocator(1, 1)
    with pytest.raises(ValueError):
        a.alloc(Tier.HBM, -1)
    with pytest.raises(ValueError):
        a.alloc(5, 1)
    assert a.alloc("hbf", 1).tolist() == [1]
    assert a.alloc(Tier.HBM, 0).size == 0


ops = st.lists(
    st.tuples(st.sampled_from(["alloc", "free"]), st.sampled_from([Tier.HBM, Tier.HBF]), st.integers(0, 9),
              st.integers(0, 2**16)),
    max_size=60,
)


@FAST
@given(hbm=st.integers(0, 12), hbf=st.integers(0, 12), program=ops)
def test_allocator_invariants(hbm, hbf, program):
    """No block held twice, none lost, per-tier counts add up, fallback exactly when the tier is empty."""
    a = TieredAllocator(hbm, hbf)
    held: list[int] = []
    written = np.zeros(2, dtype=np.int64)
    for op, tier, n, pick in program:
        if op == "alloc":
            free_before = [a.free_blocks(Tier.HBM), a.free_blocks(Tier.HBF)]
            if n > sum(free_before):
                with pytest.raises(AllocationError):
                    a.alloc(tier, n)
                continue
            ids = a.alloc(tier, n)
            assert ids.dtype == np.int64 and ids.size == n
            tiers = a.tier_of(ids)
            n_pref = int((tiers == tier).sum())
            # Served from the requested tier first; the other tier only once it is empty.
            assert n_pref == min(n, free_before[tier])
            assert (tiers[:n_pref] == tier).all() and (tiers[n_pref:] != tier).all()
            if n_pref < n:
                assert a.free_blocks(tier) == 0
            assert not set(ids.tolist()) & set(held), "a block was handed out twice"
            held.extend(ids.tolist())
            written += np.bincount(tiers, minlength=2)
        elif held:
            rng = np.random.default_rng(pick)
            k = int(rng.integers(1, len(held) + 1))
            sel = rng.choice(len(held), size=k, replace=False)
            ids = [held[i] for i in sel]
            a.free(np.array(ids))
            held = [b for i, b in enumerate(held) if i not in set(sel.tolist())]
            with pytest.raises(AllocationError):
                a.free(np.array(ids[:1]))
        for t in Tier:
            assert a.free_blocks(t) + a.used_blocks(t) == int(a.capacity[t])
        assert a.used_blocks(Tier.HBM) + a.used_blocks(Tier.HBF) == len(held)
        assert a.used_blocks(Tier.HBM) == sum(1 for b in held if b < hbm)
        assert (a.blocks_written == written).all()
        a.check()


# -- SegmentTable ------------------------------------------------------------------------------------


def test_partial_blocks_and_token_attribution():
    t = SegmentTable(TieredAllocator(2, 10), DeterministicOnly(), block_tokens=4)
    assert t.add_write("s", 3, seg_class="reasoning_laden").size == 1
    assert t.add_write("s", 1).size == 0  # fills the partial block
    ids = t.add_write("s", 9)  # one HBM block left: 4 tokens in HBM, 5 in two HBF blocks
    assert TieredAllocator.tier_of(t.allocator, ids).tolist() == [0, 1, 1]
    assert t.totals.tokens.tolist() == [8, 5]
    assert t.add_write("s", 2).size == 0  # the last HBF block had 3 free slots
    assert t.totals.tokens.tolist() == [8, 7]
    assert t.totals.tokens_by_class["reasoning_laden"].tolist() == [8, 7]
    t.add_write("p", 5, seg_class="reasoning_stripped")
    assert t.totals.tokens_by_class["reasoning_stripped"].tolist() == [0, 5]
    assert t.close("s") == 4
    assert t.view.free(Tier.HBM) == 2 and t.view.used(Tier.HBF) == 2
    with pytest.raises(KeyError):
        t.close("s")
    with pytest.raises(ValueError, match="already closed"):
        t.add_write("s", 1, seg_class="reasoning_laden")
    with pytest.raises(KeyError, match="not open"):
        t.add_write("unknown", 1)
    with pytest.raises(ValueError, match="unknown seg_class"):
        t.add_write("x", 1, seg_class="chat")


def test_hbm_first_caches_dead_segments_and_evicts_lru_across_tiers():
    t = SegmentTable(TieredAllocator(2, 2), HBMFirst(), block_tokens=1)
    t.add_write("a", 2, seg_class="reasoning_laden")  # HBM 0,1
    t.add_write("b", 1, seg_class="reasoning_laden")  # HBF
    t.close("a", now=1.0)
    assert t.cached(Tier.HBM) == 2 and t.view.free(Tier.HBM) == 0
    t.add_write("c", 1, seg_class="reasoning_laden")  # dead HBM blocks are not free: goes to HBF
    assert t.totals.tokens.tolist() == [2, 2] and t.totals.evicted_blocks == 0
    t.close("b", now=2.0)
    ids = t.add_write("c", 1)  # both tiers full: evict a's tail block (oldest dead)
    assert t.totals.evicted_blocks == 1 and ids.tolist() == [1]
    assert t.lookup.blocks_of("a").tolist() == [0]
    t.add_write("c", 2)  # evicts a's last block, then b's (next oldest; HBF)
    assert t.totals.evicted_blocks == 3 and t.cached(Tier.HBM) == 0 and t.cached(Tier.HBF) == 0
    assert t.totals.tokens.tolist() == [4, 3]
    with pytest.raises(AllocationError, match="live segments hold the rest"):
        t.add_write("c", 1)  # live context is never evicted


def test_lru_order_follows_last_use_not_close_order():
    t = SegmentTable(TieredAllocator(2, 0), HBMFirst(), block_tokens=1)
    t.add_write("old", 1, 0.0, seg_class="reasoning_laden")
    t.add_write("new", 1, 0.0, seg_class="reasoning_laden")
    t.close("new", now=5.0, last_use=4.0)
    t.close("old", now=6.0, last_use=1.0)  # closed later, but last read earlier: evicted first
    t.add_write("x", 1, 7.0, seg_class="worker")
    assert t.lookup.blocks_of("new").size == 1
    with pytest.raises(KeyError):
        t.lookup.blocks_of("old")
    assert t.lookup.rows()[0]["tier_pref"] == "HBM"


def test_end_session_closes_its_live_segments_only():
    t = SegmentTable(TieredAllocator(4, 4), DeterministicOnly(), block_tokens=2)
    t.add_write("a", 3, seg_class="lead", session_id="s1")
    t.add_write("b", 3, seg_class="worker", session_id="s1")
    t.add_write("c", 3, seg_class="lead", session_id="s2")
    assert t.end_session("s1") == ["a", "b"]
    assert "c" in t.lookup and len(t.lookup) == 1 and t.view.used(Tier.HBM) + t.view.used(Tier.HBF) == 2


def test_parse_event_errors():
    with pytest.raises(ValueError, match="tokens"):
        parse_event((0, "write", "a", "worker", -1))
    with pytest.raises(ValueError, match="kind"):
        parse_event((0, "touch", "a"))
    with pytest.raises(ValueError, match="read needs"):
        parse_event((0, "read", "a"))  # "read" is a kind now; it needs its token count
    with pytest.raises(ValueError, match="close"):
        parse_event((0, "close", "a", 1.0, "extra"))
    with pytest.raises(ValueError, match="last_use"):
        parse_event((0, "close", "a", 1.0))  # last read after the boundary report
    with pytest.raises(KeyError, match="event 1"):
        replay_events([(0, "write", "a", "worker", 1), (1, "close", "zz")], "deterministic", 2, 2)


seg_classes = st.sampled_from(["reasoning_laden", "reasoning_stripped", "lead", "worker", "reviewer"])


@FAST
@given(
    writes=st.lists(st.tuples(st.integers(0, 5), seg_classes, st.integers(0, 40), st.booleans(),
                              st.sampled_from([0.5, 1.0, 2.0])), max_size=50),
    hbm=st.integers(0, 10), hbf=st.integers(0, 30), bt=st.integers(1, 8),
    policy=st.sampled_from([HBMFirst, HBMFirstReclaim, DeterministicOnly, Lachesis]),
)
def test_table_conserves_blocks_and_bytes(writes, hbm, hbf, bt, policy):
    """At every step: blocks held by rows + cached + free = total per tier; bytes = HBM + HBF bytes."""
    t = SegmentTable(TieredAllocator(hbm, hbf), policy(), block_tokens=bt, bytes_per_token=3)
    cls_of: dict[str, str] = {}
    gen: dict[int, int] = {}
    written = 0
    for slot, cls, n, close, key in writes:
        sid = f"s{slot}.{gen.get(slot, 0)}"
        cls = cls_of.setdefault(sid, cls)
        try:
            t.add_write(sid, n, seg_class=cls, rank_key=key)
            written += n
        except AllocationError:
            pass
        if close and sid in t.lookup:
            t.close(sid)
            gen[slot] = gen.get(slot, 0) + 1
        rows = t.lookup.rows()
        held = np.concatenate([t.lookup.blocks_of(r["segment_id"]) for r in rows] + [np.zeros(0, np.int64)])
        assert np.unique(held).size == held.size
        for tier in Tier:
            n_live = int((t.allocator.tier_of(held) == tier).sum())
            assert n_live + t.cached(tier) + t.view.free(tier) == t.view.total(tier)
        assert t.totals.tokens.sum() == written
        assert t.totals.total_bytes == t.totals.hbm_bytes + t.totals.hbf_bytes == 3 * written
        assert sum(v.sum() for v in t.totals.tokens_by_class.values()) == written
        assert sum(r["n_tokens"] for r in rows) <= written
        for r in rows:
            assert r["n_blocks"] == -(-r["n_tokens"] // bt)
        t.allocator.check()


# -- public accessors (what the simulator reads) -------------------------------------------------------


def test_accessors_replace_private_peeks():
    t = SegmentTable(TieredAllocator(3, 10), "hbm_first", block_tokens=2)
    t.add_write("a", 5, seg_class="lead", session_id="S")  # 3 blocks: HBM, HBM, HBM
    t.add_write("b", 4, seg_class="worker", session_id="S")  # 2 blocks: HBF
    t.add_write("a", 2)  # 1 token fills a's last block, 1 in a new HBF block
    assert t.tokens_written() == (6, 5)
    np.testing.assert_array_equal(t.lookup.hbm_fraction(["a", "b", "nope"]), [0.75, 0.0, 0.0])
    assert t.lookup.hbm_fraction([]).shape == (0,) and t.lookup.hbm_fraction(iter(["a"])).dtype == np.float64
    assert t.lookup.is_live("a") and t.lookup.seg_class_of("b") == "worker"
    t.close("a")
    assert not t.lookup.is_live("a") and t.lookup.hbm_fraction(["a"]).tolist() == [0.0]  # dead (cached) is not live
    with pytest.raises(KeyError, match="not open"):
        t.lookup.seg_class_of("a")
    row = t.lookup.rows()[0]
    assert (row["segment_id"], row["read_tokens"], row["n_blocks"]) == ("b", 0, 2)
    assert math.isnan(row["close_s"]) and math.isnan(row["final_tokens"])


@FAST
@given(ops=st.lists(st.tuples(st.sampled_from(["write", "write", "close"]), st.integers(0, 80), seg_classes,
                              st.integers(1, 9), st.sampled_from([math.nan, 1.0, 5.0])), max_size=120))
def test_live_arrays_follow_the_rows(ops):
    """The vectorized live-segment and live-worker arrays equal the rows in open order at every step,
    across slot compaction, whenever they were first asked for."""
    t = SegmentTable(TieredAllocator(40, 400), "lachesis", block_tokens=2)
    closed: set[str] = set()
    for k, (op, slot, cls, n, fact) in enumerate(ops):
        sid = f"s{slot}"
        if op == "write" and sid not in closed:
            cls = t.lookup.seg_class_of(sid) if sid in t.lookup else cls
            t.add_write(sid, n, seg_class=cls, rank_key=fact, close_s=fact, final_tokens=n * 2)
        elif op == "close" and sid in t.lookup:
            t.close(sid)
            closed.add(sid)
        if k % 7 == 3 or k == len(ops) - 1:
            rows = t.lookup.rows()
            close, final, blocks, hbm = t.view.live_segments()
            np.testing.assert_array_equal(blocks, [r["n_blocks"] for r in rows])
            np.testing.assert_array_equal(hbm, [r["n_hbm"] for r in rows])
            np.testing.assert_array_equal(close, [r["close_s"] for r in rows])
            np.testing.assert_array_equal(final, [math.ceil(r["final_tokens"] / 2) for r in rows])
            assert [t.view.segment_position(r["segment_id"]) for r in rows] == list(range(len(rows)))
            ws = [r for r in rows if r["seg_class"] == "worker"]
            ids, keys, wb, wh = t.view.live_workers()
            assert ids.tolist() == [r["segment_id"] for r in ws]
            np.testing.assert_array_equal(wb, [r["n_blocks"] for r in ws])
            assert [t.view.worker_position(r["segment_id"]) for r in ws] == list(range(len(ws)))
    with pytest.raises(KeyError):
        t.view.segment_position("never")


# -- events -------------------------------------------------------------------------------------------


def test_parse_event_new_fields():
    ev = parse_event((1, "write", "a", "worker", 3, None, None, 7.5, 30))
    assert ev[:6] == (1.0, "write", "a", "worker", 3, "") and math.isnan(ev[6]) and ev[7:] == (7.5, 30.0)
    ev = parse_event((1, "write", "a", "worker", 3))
    assert len(ev) == 9 and math.isnan(ev[7]) and math.isnan(ev[8])
    assert parse_event((2, "read", "a", np.int64(12))) == (2.0, "read", "a", 12)
    for bad, field_name in [((0, "read", "a", -1), "read_tokens"), ((0, "read", "a", 1.5), "read_tokens"),
                            ((0, "write", "a", "lead", 1, "S", 1.0, "soon"), "close_s"),
                            ((0, "write", "a", "lead", 1, "S", 1.0, 2.0, -4), "final_tokens"),
                            ((0, "write", "a", "lead", 1, "S", 1.0, 2.0, 3, "x"), "write needs")]:
        with pytest.raises(ValueError, match=field_name):
            parse_event(bad)
    with pytest.raises(KeyError, match="event 1"):
        replay_events([(0, "write", "a", "lead", 1), (1, "read", "zz", 4)], "rho_threshold", 2, 2)
    with pytest.raises(ValueError, match="opened as"):
        replay_events([(0, "write", "a", "lead", 1), (1, "write", "a", "worker", 1)], "hbm_first", 2, 2)


# -- layering -----------------------------------------------------------------------------------------


def test_kv_is_imported_downward():
    """kv imports neither policies nor allocator; policies does not import allocator."""
    code = ("import sys, lachesis.kv as kv; assert 'lachesis.memory.policies' not in sys.modules "
            "and 'lachesis.memory.allocator' not in sys.modules; import lachesis.memory.policies; "
            "assert 'lachesis.memory.allocator' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_policy_sees_the_table_through_its_read_only_view():
    """The policy is handed the table's view (the §4 memory state), never the table itself."""
    seen = []

    class Spy:
        name = "spy"
        frees_at_boundary = True

        def tier(self, seg, view):
            seen.append(view)
            return Tier.HBM

    t = SegmentTable(TieredAllocator(4, 4), Spy(), block_tokens=1)
    t.add_write("a", 2, seg_class="worker", rank_key=1.0)
    assert seen == [t.view] and t.view is not t and isinstance(t.view, MemoryView)
    view = t.view
    assert (view.total(Tier.HBM), view.used(Tier.HBM), view.free(Tier.HBM), view.cached(Tier.HBM)) == (4, 2, 2, 0)
    assert view.stats is t.stats and view.live_reviewer_hbm_blocks() == 0
    assert not hasattr(view, "add_write") and not hasattr(view, "close")


def test_a_dropped_table_frees_its_blocks_without_the_cycle_collector():
    """The table and its policy view hold no reference cycle: replaying with a large free list frees it at once
    (a cycle would keep every replay's arrays until the collector ran)."""
    import gc
    import weakref

    from lachesis.memory.allocator import SegmentTable as Table
    from lachesis.memory.free_lists import TieredAllocator as Allocator

    gc.disable()
    try:
        for policy in ("hbm_first", "lachesis", "oracle", "rho_threshold", "deterministic", "hbm_first_reclaim"):
            a = Allocator(10, 100)
            t = Table(a, policy, block_tokens=4)
            t.add_write("s", 10, 0.0, seg_class="worker", session_id="x", rank_key=1.0)
            alive = weakref.ref(a)
            del a, t
            assert alive() is None, policy
    finally:
        gc.enable()


# -- block counts: whole numbers ----------------------------------------------------------------------


@pytest.mark.parametrize("hbm, hbf", [(2.9, 3), (2, 3.7), (True, 3)])
def test_block_counts_must_be_whole(hbm, hbf):
    """TieredAllocator(2.9, 3.7) is refused, not truncated to 2 and 3 blocks."""
    from lachesis.memory.free_lists import TieredAllocator

    with pytest.raises(ValueError, match="whole number of blocks"):
        TieredAllocator(hbm, hbf)


def test_a_fractional_block_count_and_a_bad_event_time_are_refused_naming_them() -> None:
    """``alloc("HBM", 2.7)`` is not 2 blocks; an event at NaN, before its predecessor or at 'abc' is refused with its
    index and field."""
    from lachesis.memory.replay import replay_events

    a = TieredAllocator(4, 4)
    for bad in (2.7, 2.0, True, "2", None):
        with pytest.raises(ValueError, match="alloc: n must be a whole number of blocks >= 0"):
            a.alloc("hbm", bad)
    assert a.alloc("hbm", np.int64(2)).size == 2
    w = (0.0, "write", "s", "worker", 16, "x")
    for events, said in (([(float("nan"), *w[1:])], r"event 0 \(nan, .*field 't' must be a finite number"),
                         ([(5.0, *w[1:]), (1.0, "close", "s")], r"event 1 .*field 't' 1.0 precedes .* 5.0"),
                         ([w, ("abc", "close", "s")], r"event 1 \('abc', 'close', 's'\): field 't' must be a number")):
        with pytest.raises(ValueError, match=said):
            replay_events(events, "hbm_first", 10, 10)
