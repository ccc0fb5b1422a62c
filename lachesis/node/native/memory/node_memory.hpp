// lachesis/node/node_memory.py, natively: node_memory.Memory, one decode GPU's memory as the simulator drives it
// (the segment table, allocator.hpp, behind the calls a replay makes; the aged start of a boundary-unaware cache).
// Bit-identical to the Python reference: the same tiers, the same block ids in the same order, the same counters.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "allocator.hpp"
#include "clairvoyance.hpp"

namespace lachesis {

// node_memory.OutOfMemory: live KV exceeded HBM + HBF (the run's form of an AllocationError).
struct OutOfMemory : std::runtime_error { using std::runtime_error::runtime_error; };

// node_memory.MemorySizes (the blocks of each tier, the tokens per block, the KV bytes per token), with the
// constants the memory reads: node_memory.AGED_CHUNK_TOKENS and placement_stats.EMA_ALPHA.
struct MemorySpec {
    i64 hbm_blocks = 0, hbf_blocks = 0, block_tokens = 16, bytes_per_token = 1;
    i64 aged_chunk_tokens = 1;
    double ema_alpha = 1.0;
};

// The plan's per-segment columns Memory reads (plan.Plan.segment_columns): class code, ranker key (workers; NaN
// otherwise), final tokens (the oracle's clairvoyant size), decode-stage reads (Eq. 3, reported at the boundary).
struct PlanSegments {
    Span<std::int32_t> seg_class;
    Span<double> seg_key;
    Span<i64> seg_tokens;
    Span<i64> seg_reads;
    PerClass<bool> present{};  // the classes the plan holds (an aged start's pseudo-class may not be one)
    void check(const Classes& classes);  // equal lengths, valid codes; fills present
};

// One recorded event (Memory.events): 0 write (tokens, key), 1 read (tokens), 2 close, 3 session_end (seg unused).
struct MemEvent { double now; int kind; i64 inst; int seg; int seg_class; i64 tokens; double key; };

class NodeMemory {
public:
    // Memory(plan, cfg, policy, clock, recorder): clock and recorder may be null and are shared by the ranks of a
    // group (the caller keeps them alive).
    NodeMemory(const MemorySpec& spec, std::shared_ptr<Policy> policy, std::shared_ptr<const PlanSegments> plan,
               std::shared_ptr<const Classes> classes, Clock* clock = nullptr, Recorder* recorder = nullptr);

    // The pseudo-segments of an aged start: ceil(blocks * block_tokens / AGED_CHUNK_TOKENS).
    i64 aged_chunks() const;
    // Memory.age(order): order is the LRU order of the pseudo-segments, a permutation drawn by the caller.
    void age(const i64* order, std::size_t n);
    // Memory.live_tokens(): live tokens per class, in the order classes were first written.
    std::vector<std::pair<int, i64>> live_tokens() const;
    // Memory.session_start(inst, session, t0): session is its index in plan.Plan.sessions.
    void session_start(i64 inst, int session, double t0);
    // Memory.write_request(inst, [(seg, tokens)...], now) -> (HBM, HBF) tokens placed; throws OutOfMemory.
    std::pair<i64, i64> write_request(i64 inst, const int* segs, const i64* tokens, std::size_t n, double now);
    // Memory.close(inst, s, now): report a boundary (nothing when the segment is not live).
    void close(i64 inst, int seg, double now);
    // Memory.session_end(inst, now): close what the session still holds, in open order.
    void session_end(i64 inst, double now);
    // Memory.hbm_tokens(inst, segs, tokens, tokens_int): context tokens in HBM, summed left to right.
    double hbm_tokens(i64 inst, const int* segs, const double* tokens, const i64* tokens_int, std::size_t n) const;
    // Memory.snapshot(): (live HBM, live HBF, cached HBM, cached HBF, HBM written, HBF written) bytes.
    std::array<double, 6> snapshot() const;
    void mark(int window = 0);  // Memory.mark
    // Memory.bytes_by_class_tier(window): (class, HBM bytes, HBF bytes) in first-open order, plan classes only.
    std::vector<std::tuple<int, double, double>> bytes_by_class_tier(int window = 0) const;
    WriteTotals totals() const { return table_.totals(spec_.bytes_per_token); }  // SegmentTable.totals
    i64 evicted_blocks() const { return table_.cache().evicted; }
    bool frees_at_boundary() const { return table_.policy().options.frees_at_boundary; }
    bool calls_python() const { return table_.policy().calls_python(); }

    void record_events(bool on) { record_ = on; if (on) events_.clear(); }  // Memory.events = [] / None
    bool recording_events() const { return record_; }
    const std::vector<MemEvent>& events() const { return events_; }

    // Inspection (tests): the ids handed to the last write_request's writes (one vector per write, empty when it
    // only filled its last block), the free lists (stack order, bottom first), a live or cached segment's ids.
    std::vector<std::vector<i64>> last_write_blocks() const;
    std::array<std::vector<i64>, 2> free_lists() const;
    std::vector<i64> blocks_of(i64 inst, int seg) const;
    std::array<i64, 2> cached_blocks() const { return {table_.cache().blocks[HBM], table_.cache().blocks[HBF]}; }
    std::array<i64, 2> used_blocks() const { return {table_.allocator().used(HBM), table_.allocator().used(HBF)}; }
    SegmentTable& table() { return table_; }
    const SegmentTable& table() const { return table_; }
    const Classes& classes() const { return *classes_; }

private:
    void forget(SegmentRow& row);  // Memory._forget: the row's tokens leave the live count

    std::shared_ptr<const Classes> classes_;
    std::shared_ptr<const PlanSegments> plan_;
    MemorySpec spec_;
    SegmentTable table_;
    Clock* clock_;
    Recorder* recorder_;
    PerClass<i64> live_tok_{};
    std::vector<int> live_order_;
    PerClass<bool> live_seen_{};
    i64 base_[2] = {0, 0};  // (HBM, HBF) tokens of an aged start, not part of any window's writes
    ByClass base_class_;
    std::map<int, ByClass> marks_;
    bool record_ = false;
    std::vector<MemEvent> events_;
    std::vector<std::vector<i64>> last_blocks_;  // the first last_n_: the last write_request's (storage kept)
    std::size_t last_n_ = 0;
};

}  // namespace lachesis
