// lachesis/memory/segment_row.py, natively: one segment's row, and the table's rows as it finds them (the C++ form of
// allocator.SegmentTable's live rows by segment id, its closed ids and its rows by session).  The table
// (allocator.hpp) is the only writer of a row; its parts read the rows they are told of.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kv.hpp"

namespace lachesis {

// What live_index.WorkerRanking keeps of a live worker (its RankedWorker): where it sorts, its spawn.
struct Ranked {
    bool on = false;   // in the ranking
    i64 order = 0;     // open order among workers (ties of the rank key)
    i64 spawn_blocks = -1;    // blocks of its first placement; -1 before it
    double spawn_mean = NaN;  // the closed workers' mean size in blocks then
};

// segment_row.SegmentRow.  A row is named by (inst, seg): its session instance and its plan segment (an aged start's
// pseudo-segments: inst -1); ``session`` is where its reuse history goes (placement_stats.PlacementStats).  The slot
// also holds, each in its own field written by that part alone, what a part keeps per segment in the reference under
// the segment's id: the worker ranking's record (``ranked``), the cache pool's order (``cache_seq``) and the node
// memory's live tokens (``live_tokens``); one slot keeps a segment's numbers in one place in memory.
struct SegmentRow {
    i64 inst = 0;
    int seg = 0;
    int cls = 0;
    i64 session = 0;
    double rank_key = NaN;
    std::vector<i64> ids;  // block ids in write order (SegmentRow.block_ids)
    i64 n_blocks = 0, n_hbm = 0, n_tokens = 0;
    int last_tier = 0;
    double last_use = 0.0;
    i64 reads = 0;
    double close_s = NaN, final_tokens = NaN, final_blocks = NaN;
    bool live = false, cached = false, placed = false;  // placed: SegmentRow.tier_pref is set
    i64 open_seq = 0;  // open order (the table's live rows are a dict in open order)
    Ranked ranked;       // live_index.WorkerRanking's
    i64 cache_seq = 0;   // eviction.LRUEviction's: cache order (its heap entries' tie-break)
    i64 live_tokens = 0; // node_memory.Memory's _seg_tok entry
    i64 blocks_to_write() const {  // SegmentRow.blocks_to_write
        const double f = final_blocks;
        return (f != f || f <= double(n_blocks)) ? 0 : i64(f) - n_blocks;
    }
};

// What a reuse history holds (placement_stats.PlacementStats' [reads, tokens] accumulators; ``set``: present).
struct Acc { i64 reads = 0, tokens = 0; bool set = false; };
using Reuse = PerClass<Acc>;

// One session instance: the row of each of its plan segments kept from lo on (CLOSED: closed, kept so that reopening
// fails as in the reference; NEVER: never opened), its rows in open order (the table's by-session list; entries of
// rows closed since are skipped) and its own reuse history (PlacementStats' per-session one).  A session's segments
// are contiguous ids in a plan, so finding a row is one subtraction, not a hash of (instance, segment).
struct Instance {
    int lo = 0;
    std::vector<int> state;
    std::vector<std::pair<int, i64>> open;  // (row, open seq)
    Reuse reuse{};
};

constexpr int NEVER = -2, CLOSED = -1;

// The rows (slots reused once a row is neither live nor cached) and the instances (dense by id, a map beyond).
struct Rows {
    std::vector<SegmentRow> rows;
    std::vector<int> spare;
    std::vector<std::unique_ptr<Instance>> dense;  // by inst + 1 (the aged pseudo-session: 0)
    std::unordered_map<i64, std::unique_ptr<Instance>> far;
    static constexpr i64 DENSE_INSTANCES = i64(1) << 20;

    SegmentRow& operator[](int ri) { return rows[std::size_t(ri)]; }
    const SegmentRow& operator[](int ri) const { return rows[std::size_t(ri)]; }

    const Instance* find(i64 inst) const {
        if (inst >= -1 && inst + 1 < DENSE_INSTANCES) {
            const std::size_t j = std::size_t(inst + 1);
            return j < dense.size() ? dense[j].get() : nullptr;
        }
        auto it = far.find(inst);
        return it == far.end() ? nullptr : it->second.get();
    }
    Instance* find(i64 inst) { return const_cast<Instance*>(static_cast<const Rows&>(*this).find(inst)); }
    Instance& instance(i64 inst) {
        std::unique_ptr<Instance>* p;
        if (inst >= -1 && inst + 1 < DENSE_INSTANCES) {
            const std::size_t j = std::size_t(inst + 1);
            if (j >= dense.size()) dense.resize(std::max(j + 1, 2 * dense.size()));
            p = &dense[j];
        } else {
            p = &far[inst];
        }
        if (!*p) *p = std::make_unique<Instance>();
        return **p;
    }
    // The row of (inst, seg): >= 0 live, CLOSED or NEVER.
    static int state_of(const Instance* r, int seg) {
        if (!r) return NEVER;
        const i64 j = i64(seg) - r->lo;
        return (j < 0 || j >= i64(r->state.size())) ? NEVER : r->state[std::size_t(j)];
    }
    int state_of(i64 inst, int seg) const { return state_of(find(inst), seg); }
    static int& state_slot(Instance& r, int seg) {  // grows the instance's range to hold seg
        if (r.state.empty()) {
            r.lo = seg;
            r.state.assign(1, NEVER);
        } else if (seg < r.lo) {
            r.state.insert(r.state.begin(), std::size_t(i64(r.lo) - seg), NEVER);
            r.lo = seg;
        } else if (i64(seg) - r.lo >= i64(r.state.size())) {
            r.state.resize(std::size_t(i64(seg) - r.lo + 1), NEVER);
        }
        return r.state[std::size_t(i64(seg) - r.lo)];
    }
    int take_slot() {  // a fresh row (its ids' storage kept from the slot's last row)
        if (!spare.empty()) {
            const int ri = spare.back();
            spare.pop_back();
            std::vector<i64> ids = std::move(rows[std::size_t(ri)].ids);
            rows[std::size_t(ri)] = SegmentRow();
            rows[std::size_t(ri)].ids = std::move(ids);
            return ri;
        }
        rows.emplace_back();
        return int(rows.size()) - 1;
    }
    void release(int ri) {  // a row neither live nor cached: its slot can be reused
        rows[std::size_t(ri)].ids.clear();
        spare.push_back(ri);
    }
};

// "inst:seg" (the reference's segment id; "aged:k" for an aged start's pseudo-segment).
inline std::string segment_id(i64 inst, int seg) {
    return inst == -1 ? "aged:" + std::to_string(seg) : std::to_string(inst) + ":" + std::to_string(seg);
}

}  // namespace lachesis
