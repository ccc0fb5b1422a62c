// lachesis/memory/live_index.py, natively: what placement reads about the live segments, kept current as the table
// tells each open, placement, growth and close (live_index.WorkerRanking, live_index.LiveSegments,
// live_index.LiveIndex).  The table's rows are read here; each part writes only its own section of a row slot.
#pragma once

#include <cstdint>
#include <set>
#include <tuple>
#include <vector>

#include "segment_row.hpp"

namespace lachesis {

// live_index.WorkerRanking: the live workers sorted by (rank key, NaN last; open order), with the HBM blocks they
// hold, and each one's spawn (its first placement).
struct WorkerRanking {
    using Key = std::tuple<double, i64, int>;  // (rank key, NaN as +inf; open order among workers; row)
    std::set<Key> ranked;
    i64 n_added = 0;
    i64 hbm_blocks = 0;  // HBM blocks all live workers hold

    static Key key(const SegmentRow& row, int ri) {
        return Key(row.rank_key != row.rank_key ? INF : row.rank_key, row.ranked.order, ri);
    }
    void opened(SegmentRow& row, int ri) {  // WorkerRanking.opened
        row.ranked = Ranked{true, ++n_added, -1, NaN};
        ranked.emplace(key(row, ri));
    }
    void placing(SegmentRow& row, i64 blocks, double mean) {  // WorkerRanking.placing: the first time, its spawn
        if (row.ranked.spawn_blocks < 0) {
            row.ranked.spawn_blocks = blocks;
            row.ranked.spawn_mean = mean;
        }
    }
    void grew(i64 n_hbm) { hbm_blocks += n_hbm; }  // WorkerRanking.grew (the row holds its blocks)
    void closed(SegmentRow& row, int ri) {  // WorkerRanking.closed
        ranked.erase(key(row, ri));
        row.ranked.on = false;
        hbm_blocks -= row.n_hbm;
    }
    // The workers ranked before one (WorkerRanking.workers_ahead / spawns_ahead read them in this order).
    std::set<Key>::const_iterator ahead_end(const SegmentRow& row, int ri) const { return ranked.lower_bound(key(row, ri)); }
};

// LiveSegments.demand_ahead, kept current: the live rows in close order (unknown close last, ties in open order),
// each carrying its demand (HBM blocks held + blocks still to write), in a treap whose nodes sum their subtree.  The
// demand of the rows ahead of one is then a prefix sum, O(log n) instead of a scan of every live row.  Integer sums,
// so the tree's shape never changes a result.  Nodes are indexed by row.
struct DemandTree {
    struct Node { double key = 0.0; i64 seq = 0, val = 0, sum = 0; std::uint32_t prio = 0; int l = -1, r = -1; };
    std::vector<Node> nodes;
    int root = -1;
    std::uint64_t state = 0x9E3779B97F4A7C15ull;  // xorshift: the priorities (any sequence gives the same sums)

    static bool before(double ka, i64 sa, double kb, i64 sb) { return ka < kb || (ka == kb && sa < sb); }
    i64 sum(int t) const { return t < 0 ? 0 : nodes[std::size_t(t)].sum; }
    void pull(int t) { Node& n = nodes[std::size_t(t)]; n.sum = sum(n.l) + n.val + sum(n.r); }
    void split(int t, double k, i64 s, int& a, int& b);  // a: the nodes before (k, s); b: the rest
    int merge(int a, int b);                              // every node of a before every node of b
    void insert(int id, double k, i64 s, i64 val);
    void erase(int id);
    void set(int id, i64 val);     // the node's demand, and each sum on its path
    i64 ahead(double k, i64 s) const;  // the demand of the nodes before (k, s)
};

// live_index.LiveSegments: every live segment's close time and demand, built the first time a policy asks (the
// oracle's ranking) and kept current from then on.
struct LiveSegments {
    bool active = false;
    DemandTree demand;

    static double close_key(const SegmentRow& row) { return row.close_s != row.close_s ? INF : row.close_s; }
    static i64 row_demand(const SegmentRow& row) { return row.n_hbm + row.blocks_to_write(); }
    void opened(const SegmentRow& row, int ri) { if (active) demand.insert(ri, close_key(row), row.open_seq, row_demand(row)); }
    void grew(const SegmentRow& row, int ri) { if (active) demand.set(ri, row_demand(row)); }
    void closed(int ri) { if (active) demand.erase(ri); }
    void activate(const Rows& rows);  // LiveSegments._columns: every live row, once
    // LiveSegments.demand_ahead's first part: the demand of the live rows closing before this one
    i64 ahead(const Rows& rows, int ri) {
        if (!active) activate(rows);
        return demand.ahead(close_key(rows[ri]), rows[ri].open_seq);
    }
};

// live_index.LiveIndex: the worker ranking, the live-segment demand, and the live reviewers with their HBM blocks.
struct LiveIndex {
    const Classes* classes;
    WorkerRanking workers;
    LiveSegments segments;
    i64 n_reviewers = 0;          // live reviewer segments
    i64 reviewer_hbm_blocks = 0;  // HBM blocks live reviewers hold

    explicit LiveIndex(const Classes* c) : classes(c) {}
    void opened(SegmentRow& row, int ri) {  // LiveIndex.opened
        if (row.cls == classes->worker) workers.opened(row, ri);
        else if (row.cls == classes->reviewer) ++n_reviewers;
        segments.opened(row, ri);
    }
    void grew(const SegmentRow& row, int ri, i64 n_hbm) {  // LiveIndex.grew (the row already holds its blocks)
        if (row.cls == classes->worker) workers.grew(n_hbm);
        else if (row.cls == classes->reviewer) reviewer_hbm_blocks += n_hbm;
        segments.grew(row, ri);
    }
    void closed(SegmentRow& row, int ri) {  // LiveIndex.closed (the row still holds its blocks)
        if (row.cls == classes->worker) workers.closed(row, ri);
        else if (row.cls == classes->reviewer) {
            --n_reviewers;
            reviewer_hbm_blocks -= row.n_hbm;
        }
        segments.closed(ri);
    }
};

}  // namespace lachesis
