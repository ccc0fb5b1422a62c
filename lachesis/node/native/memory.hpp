// The memory of one decode GPU, native: lachesis/node/node_memory.py's Memory over the segment table
// (lachesis/memory/allocator.py), the free lists (free_lists.py), the live indexes (live_index.py, lookup.py), the
// LRU cache (eviction.py), the written-KV counters (written.py), the placement statistics (placement_stats.py) and
// the six policies (policies.py).  Bit-identical to the Python reference: same tiers, same block ids
// in the same order, same counters.  The Python modules are the readable reference; docs/design.md §5.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace lachesis {

using i64 = std::int64_t;

// kv.SEG_CLASSES, by index (a class is its code everywhere here).
enum SegClass : int { REASONING_LADEN = 0, REASONING_STRIPPED = 1, LEAD = 2, WORKER = 3, REVIEWER = 4 };
constexpr int N_CLASSES = 5;
extern const char* const SEG_CLASS_NAMES[N_CLASSES];
int seg_class_code(const std::string& name);  // std::invalid_argument naming the class when unknown

// kv.AllocationError (a placement memory cannot hold) and node_memory.OutOfMemory (the run's form).
struct AllocationError : std::runtime_error { using std::runtime_error::runtime_error; };
struct OutOfMemory : std::runtime_error { using std::runtime_error::runtime_error; };

// A policy as policies.as_policy built it: its kind and knobs (the Python side reads them off the object).
enum class PolicyKind : int { HBM_FIRST = 0, HBM_FIRST_RECLAIM = 1, DETERMINISTIC = 2, LACHESIS = 3,
                              RHO_THRESHOLD = 4, ORACLE = 5 };
enum class SizeEstimate : int { HELD = 0, MEAN_FLOOR = 1, SPAWN = 2 };
struct PolicySpec {
    PolicyKind kind = PolicyKind::HBM_FIRST;
    SizeEstimate size_estimate = SizeEstimate::HELD;            // Lachesis
    double quantile = 0.5;                                       // ReuseThreshold
    double threshold = std::numeric_limits<double>::quiet_NaN(); // ReuseThreshold (NaN: None)
    i64 rho_window = 1024;                                       // placement_stats.RHO_WINDOW unless the policy sets it
    bool frees_at_boundary() const { return kind != PolicyKind::HBM_FIRST && kind != PolicyKind::HBM_FIRST_RECLAIM; }
    bool reclaims_cached_hbm() const { return kind == PolicyKind::HBM_FIRST_RECLAIM; }
};

// The plan's per-segment columns Memory reads (Plan.seg_class / seg_key / seg_tokens / seg_reads).
struct PlanSegments {
    std::vector<int> seg_class;     // class code per segment
    std::vector<double> seg_key;    // ranker key (workers), NaN otherwise
    std::vector<i64> seg_tokens;    // final tokens (the oracle's clairvoyant size)
    std::vector<i64> seg_reads;     // Eq. 3 reads, reported at the boundary
};

// clairvoyance.Clock: the oracle's close times (shared by the ranks of a group).  Sessions are plan indices.
class Clock {
public:
    Clock(const std::vector<int>& session, const std::vector<int>& occurrence, const std::vector<int>& segment,
          const std::vector<double>& offset_s);
    void started(i64 inst, int session, double t0);
    double close_s(i64 inst, int segment) const;  // NaN when the baseline never closed it
private:
    // A (session, segment)'s recorded offsets by occurrence (has: recorded) and their mean over occurrences.
    struct Closes { std::vector<double> at; std::vector<char> has; double mean = 0.0; };
    static constexpr int DENSE_OCCURRENCES = 1 << 16;
    static constexpr i64 DENSE_INSTANCES = i64(1) << 20;
    static std::uint64_t pair_key(int session, int segment) {
        return (std::uint64_t(std::uint32_t(session)) << 32) | std::uint32_t(segment);
    }
    std::unordered_map<int, int> seen_;
    std::vector<std::tuple<int, int, double>> inst_dense_;  // by instance: (session, occurrence, start)
    std::vector<char> inst_has_;
    std::unordered_map<i64, std::tuple<int, int, double>> inst_;  // instances beyond the dense range
    std::unordered_map<std::uint64_t, Closes> closes_;
    std::map<std::tuple<int, int, int>, double> far_;  // occurrences beyond the dense range
};

// clairvoyance.Recorder: instance starts and segment closes of a run (for a later oracle run).
class Recorder {
public:
    void started(i64 inst, int session, double t0);
    void closed(i64 inst, int segment, double t) { closes_.emplace_back(inst, segment, t); }
    // CloseTimes columns: (session, occurrence, segment, offset_s)
    std::tuple<std::vector<int>, std::vector<int>, std::vector<int>, std::vector<double>> close_times() const;
private:
    std::unordered_map<int, int> seen_;
    std::unordered_map<i64, std::tuple<int, int, double>> inst_;
    std::vector<std::tuple<i64, int, double>> closes_;
};

// One recorded allocator event (Memory.events): kind 0 write (tokens, key), 1 read (tokens), 2 close,
// 3 session_end (seg unused).  Segment id "inst:seg".
struct MemEvent { double now; int kind; i64 inst; int seg; int seg_class; i64 tokens; double key; };

struct NodeMemoryImpl;  // memory.cpp: the table, free lists, cache, indexes and policy

// node_memory.Memory: one GPU's memory as the simulator drives it.
class NodeMemory {
public:
    // Memory(plan, cfg, policy, clock, recorder): hbm/hbf blocks are block_capacity.kv_blocks(...), block_tokens is
    // cfg.deployment.block_tokens, bytes_per_token cfg.model.kv_bytes_per_token.  clock/recorder may be null
    // and are shared by the ranks of a group (the caller keeps them alive).
    NodeMemory(i64 hbm_blocks, i64 hbf_blocks, i64 block_tokens, i64 bytes_per_token, const PolicySpec& policy,
               std::shared_ptr<const PlanSegments> plan, Clock* clock = nullptr, Recorder* recorder = nullptr);
    ~NodeMemory();
    NodeMemory(NodeMemory&&) noexcept;
    NodeMemory& operator=(NodeMemory&&) noexcept;

    // Number of pseudo-segments of an aged start: ceil(n_blocks * block_tokens / AGED_CHUNK_TOKENS).
    i64 aged_chunks() const;
    // Memory.age(rng) with order = rng.permutation(aged_chunks()) drawn by the caller (numpy's generator).
    void age(const std::vector<i64>& order);
    // Memory.live_tokens(): live tokens per class, in the order classes were first written.
    std::vector<std::pair<int, i64>> live_tokens() const;
    // Memory.session_start(inst, session, t0): session is its index in plan.sessions.
    void session_start(i64 inst, int session, double t0);
    // Memory.write_request(inst, [(seg, tokens)...], now) -> (HBM, HBF) tokens placed; throws OutOfMemory.
    std::pair<i64, i64> write_request(i64 inst, const int* segs, const i64* tokens, std::size_t n, double now);
    // Memory.close(inst, s, now): report a boundary (no-op when the segment is not live).
    void close(i64 inst, int seg, double now);
    // Memory.session_end(inst, now): close what the session still holds, in open order.
    void session_end(i64 inst, double now);
    // Memory.hbm_tokens(inst, segs, tokens, tokens_int): context tokens in HBM.  When a segment is split
    // across tiers the sum of tokens*fraction is taken LEFT TO RIGHT (the Python reference uses numpy's
    // dot there; see INTERFACE.md).
    double hbm_tokens(i64 inst, const int* segs, const double* tokens, const i64* tokens_int, std::size_t n) const;
    // Memory.snapshot(): (live HBM, live HBF, cached HBM, cached HBF, HBM written, HBF written) bytes.
    std::array<double, 6> snapshot() const;
    // Memory.mark(window): per-class totals now.
    void mark(int window = 0);
    // Memory.bytes_by_class_tier(window): (class, HBM bytes, HBF bytes) in first-open order, plan classes only.
    std::vector<std::tuple<int, double, double>> bytes_by_class_tier(int window = 0) const;

    // mem.table.totals: tokens [HBM, HBF], per class (first-open order), blocks per tier, evicted blocks.
    struct Totals { std::array<i64, 2> tokens; std::vector<std::pair<int, std::array<i64, 2>>> by_class;
                    std::array<i64, 2> blocks; i64 evicted_blocks; i64 bytes_per_token; };
    Totals totals() const;
    i64 evicted_blocks() const;
    bool frees_at_boundary() const;

    // Memory.events: set recording on (mem.events = []) and read what was recorded.
    void record_events(bool on);
    bool recording_events() const;
    const std::vector<MemEvent>& events() const;

    // Inspection (tests): block ids handed to the last write_request's writes, one vector per write
    // (empty when the write filled its last block only), and the free lists (stack order, bottom first).
    std::vector<std::vector<i64>> last_write_blocks() const;
    std::array<std::vector<i64>, 2> free_lists() const;
    std::vector<i64> blocks_of(i64 inst, int seg) const;  // a live or cached segment's ids, write order
    std::array<i64, 2> cached_blocks() const;
    std::array<i64, 2> used_blocks() const;

private:
    std::unique_ptr<NodeMemoryImpl> d_;
};

}  // namespace lachesis
