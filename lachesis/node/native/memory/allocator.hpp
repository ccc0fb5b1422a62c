// lachesis/memory/allocator.py, natively: allocator.SegmentTable, the one writer of its rows, telling its parts each
// event (the live index of each open, placement, growth and close; the placement statistics of each open and close;
// the written-KV counters of each write; the cache pool of each dead segment it keeps), allocator.Placer (the tier
// of a write's new blocks from the policy, then the free lists, evicting cached dead blocks when both run out) and
// allocator.TableView (what a policy reads).
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "eviction.hpp"
#include "free_lists.hpp"
#include "live_index.hpp"
#include "placement_stats.hpp"
#include "protocol.hpp"
#include "written.hpp"

namespace lachesis {

// allocator.TableView: protocol.MemoryView over the table's parts (never the table).
class TableView {
public:
    TableView(const FreeLists& a, const LRUEviction& c, LiveIndex& l, PlacementStats& s, Rows& r)
        : alloc_(a), cache_(c), live_(l), stats_(s), rows_(r) {}
    i64 total(int t) const { return alloc_.total(t); }
    i64 free(int t) const { return alloc_.free(t); }
    i64 used(int t) const { return alloc_.used(t); }
    i64 cached(int t) const { return cache_.cached(t); }
    i64 live_reviewer_hbm_blocks() const { return live_.reviewer_hbm_blocks; }
    const PlacementStats& stats() const { return stats_; }
    const Rows& rows() const { return rows_; }
    const WorkerRanking& workers() const { return live_.workers; }
    // LiveSegments.demand_ahead: (demand of the live rows closing before row ri, its HBM blocks, its blocks to write)
    std::array<i64, 3> demand_ahead(int ri) const {
        const SegmentRow& row = rows_[ri];
        return {live_.segments.ahead(rows_, ri), row.n_hbm, row.blocks_to_write()};
    }
    // a session's own reuse history (PlacementStats.predicted_rho's first choice); null when it has none
    const Reuse* session_reuse(i64 session) const {
        const Instance* s = rows_.find(session);
        return s ? &s->reuse : nullptr;
    }

private:
    const FreeLists& alloc_;
    const LRUEviction& cache_;
    LiveIndex& live_;
    PlacementStats& stats_;
    Rows& rows_;
};

// allocator.SegmentTable over one GPU's free lists.
class SegmentTable {
public:
    SegmentTable(i64 hbm_blocks, i64 hbf_blocks, i64 block_tokens, double ema_alpha, std::shared_ptr<Policy> policy,
                 const Classes* classes);
    SegmentTable(const SegmentTable&) = delete;
    SegmentTable& operator=(const SegmentTable&) = delete;

    // SegmentTable._open: a new live row (close_s / final_tokens: the oracle's clairvoyant facts, NaN unknown).
    int open(i64 inst, int seg, int cls, i64 session, double rank_key, double now, double close_s, double final_tokens);
    // SegmentTable.add_write on an open row; the new block ids appended to handed (when given).
    void add_write(int ri, i64 n, double now, std::vector<i64>* handed);
    // SegmentTable.add_reads
    void add_reads(int ri, i64 reads);
    // SegmentTable.close: free the row's blocks at its boundary, or cache them (boundary-unaware policy).
    void close(int ri, double last_use);
    // SegmentTable.end_session: close what the session still holds, in open order; each row is given to
    // before_close first (the node memory's own bookkeeping).
    template <class F> void end_session(i64 session, double now, F before_close);

    i64 tokens_written(int t) const { return written_.tokens[t]; }  // SegmentTable.tokens_written
    WriteTotals totals(i64 bytes_per_token) const;                   // SegmentTable.totals
    const WrittenKV& written() const { return written_; }
    const FreeLists& allocator() const { return alloc_; }
    const PlacementStats& stats() const { return stats_; }
    const LiveIndex& live() const { return live_; }
    const LRUEviction& cache() const { return cache_; }
    const Rows& rows() const { return rows_; }
    Rows& rows() { return rows_; }
    TableView& view() { return view_; }
    Policy& policy() { return *policy_; }
    const Policy& policy() const { return *policy_; }
    i64 block_tokens() const { return block_tokens_; }
    const Classes& classes() const { return *classes_; }

private:
    std::pair<i64, int> place(int ri, i64 nb, std::vector<i64>& out);  // Placer.place: (HBM blocks, last tier)
    i64 check_room(i64 nb);                                            // Placer._check_room
    void release_emptied();

    const Classes* classes_;
    i64 block_tokens_;
    std::shared_ptr<Policy> policy_;
    FreeLists alloc_;
    PlacementStats stats_;
    WrittenKV written_;
    LiveIndex live_;
    LRUEviction cache_;
    Rows rows_;
    TableView view_;
    i64 n_opened_ = 0, n_live_ = 0;
    std::vector<i64> scratch_;
    std::vector<int> emptied_;
};

template <class F> void SegmentTable::end_session(i64 session, double now, F before_close) {
    if (Instance* rec = rows_.find(session)) {
        std::vector<std::pair<int, i64>> mine = std::move(rec->open);
        rec->open = {};
        for (auto& e : mine) {
            SegmentRow& row = rows_[e.first];
            if (!row.live || row.open_seq != e.second) continue;
            before_close(e.first);
            close(e.first, now);
        }
        rec = rows_.find(session);
        rec->reuse = {};  // PlacementStats.session_ended
    }
}

}  // namespace lachesis
