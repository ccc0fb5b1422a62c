// lachesis/memory/eviction.py, natively: eviction.LRUEviction, the dead segments a boundary-unaware policy keeps
// cached, evicted least recently used first (ties in the order they were cached), tail blocks first.
#pragma once

#include <functional>
#include <queue>
#include <vector>

#include "segment_row.hpp"

namespace lachesis {

struct LRUEviction {
    // A heap entry: (last use, cache order, row); stale ones (the row evicted or reused since) are skipped lazily.
    struct Entry {
        double last_use;
        i64 seq;
        int row;
        bool operator>(const Entry& o) const { return last_use > o.last_use || (last_use == o.last_use && seq > o.seq); }
    };
    using MinHeap = std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>>;

    i64 hbm_blocks;  // block ids below it are HBM blocks
    MinHeap heap, heap_tier[2];
    i64 blocks[2] = {0, 0};  // cached dead blocks per tier
    i64 evicted = 0;         // blocks evicted so far
    i64 n_cached = 0;

    explicit LRUEviction(i64 hbm) : hbm_blocks(hbm) {}
    i64 cached(int t) const { return blocks[t]; }  // LRUEviction.cached
    // LRUEviction.add: take over a closed row's blocks (the row slot stays the pool's until its last block goes).
    void add(SegmentRow& row, int ri) {
        row.cached = true;
        row.cache_seq = ++n_cached;
        const Entry e{row.last_use, row.cache_seq, ri};
        heap.push(e);
        if (row.n_hbm) heap_tier[HBM].push(e);
        if (row.n_blocks - row.n_hbm) heap_tier[HBF].push(e);
        blocks[HBM] += row.n_hbm;
        blocks[HBF] += row.n_blocks - row.n_hbm;
    }
    // LRUEviction.evict(k, tier): appends the evicted ids to out (LRU segment first, tail first) and the rows left
    // empty to emptied; returns how many ids are HBM blocks.  tier < 0: either tier.
    i64 evict(Rows& rows, i64 k, int tier, std::vector<i64>& out, std::vector<int>& emptied);
};

}  // namespace lachesis
