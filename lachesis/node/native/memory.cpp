// node_memory.Memory and its parts, native (memory.hpp).  Each piece names the Python it mirrors;
// the comments say only where the C++ form differs from a line-by-line reading of it.
#include "memory.hpp"

#include <algorithm>
#include <deque>
#include <functional>
#include <queue>

namespace lachesis {

const char* const SEG_CLASS_NAMES[N_CLASSES] = {"reasoning_laden", "reasoning_stripped", "lead", "worker", "reviewer"};

int seg_class_code(const std::string& name) {
    for (int c = 0; c < N_CLASSES; ++c)
        if (name == SEG_CLASS_NAMES[c]) return c;
    throw std::invalid_argument("unknown seg_class '" + name +
                                "'; expected one of ['lead', 'reasoning_laden', 'reasoning_stripped', 'reviewer', 'worker']");
}

namespace {

constexpr double NaN = std::numeric_limits<double>::quiet_NaN();
constexpr double INF = std::numeric_limits<double>::infinity();
constexpr i64 AGED_CHUNK_TOKENS = i64(1) << 14;  // node_memory.AGED_CHUNK_TOKENS
constexpr double EMA_ALPHA = 0.1;                 // kv.EMA_ALPHA
constexpr i64 AGED_SESSION = -1;                  // session "aged" (instances are >= 0)

// policies._DETERMINISTIC: HBM for a short-lived class (kv.SHORT_LIVED_CLASSES), HBF otherwise.
inline int deterministic_tier(int cls) { return (cls == REASONING_LADEN || cls == WORKER || cls == REVIEWER) ? 0 : 1; }

std::string seg_name(i64 inst, int seg) {
    return inst == AGED_SESSION ? "aged:" + std::to_string(seg) : std::to_string(inst) + ":" + std::to_string(seg);
}

// free_lists.TieredAllocator: one stack per tier; pop from the end (lowest ids first at the start).
// A stack is filled lazily: below its low-water mark (the lowest top so far) it still holds its initial ids,
// computed when popped (initial() below), so a run touches only the depth of each list it uses.
struct FreeLists {
    i64 hbm_blocks, hbf_blocks, n_blocks;
    std::unique_ptr<i64[]> stack[2];  // entries below low[t] are not stored yet
    i64 top[2];
    i64 low[2];
    i64 written[2] = {0, 0};

    FreeLists(i64 hbm, i64 hbf) : hbm_blocks(hbm), hbf_blocks(hbf), n_blocks(hbm + hbf) {
        if (hbm < 0 || hbf < 0) throw std::invalid_argument("block counts must be >= 0");
        stack[0].reset(new i64[std::size_t(hbm)]);  // uninitialized: pages are touched as the lists are used
        stack[1].reset(new i64[std::size_t(hbf)]);
        top[0] = low[0] = hbm;
        top[1] = low[1] = hbf;
    }
    i64 initial(int t, i64 j) const { return (t == 0 ? hbm_blocks : n_blocks) - 1 - j; }  // the unpopped list's ids
    i64 at(int t, i64 j) const { return j < low[t] ? initial(t, j) : stack[t][std::size_t(j)]; }
    i64 total(int t) const { return t == 0 ? hbm_blocks : hbf_blocks; }
    i64 free(int t) const { return top[t]; }
    i64 used(int t) const { return total(t) - top[t]; }
    i64 free_total() const { return top[0] + top[1]; }

    void pop(int t, i64 k, std::vector<i64>& out) {  // _pop: the top k, topmost first
        const i64 tp = top[t], lo = tp - k, split = std::max(lo, low[t]);
        const std::size_t o = out.size();
        out.resize(o + std::size_t(k));
        i64* d = out.data() + o;
        const i64* s = stack[t].get();
        for (i64 j = tp - 1; j >= split; --j) *d++ = s[j];                      // stored entries
        for (i64 j = split - 1, id = initial(t, j); j >= lo; --j, ++id) *d++ = id;  // initial ids, never stored
        low[t] = std::min(low[t], lo);  // below the top now: written by a release before any pop reads them
        top[t] = lo;
        written[t] += k;
    }
    // take(t, n): appends n ids to out; returns false (nothing changed) when both lists hold fewer.
    bool take(int t, i64 n, std::vector<i64>& out, i64& n_hbm, int& last) {
        i64 tp = top[t];
        if (n <= tp) {
            pop(t, n, out);
            n_hbm = t == 0 ? n : 0;
            last = t;
            return true;
        }
        int other = 1 - t;
        if (n > tp + top[other]) return false;
        if (tp == 0) {
            pop(other, n, out);
        } else {
            pop(t, tp, out);
            pop(other, n - tp, out);
        }
        n_hbm = t == 0 ? tp : n - tp;
        last = other;
        return true;
    }
    // reissue(ids, n_hbm, want): evicted blocks handed to the write, want's tier first, each in release order.
    void reissue(const std::vector<i64>& ids, i64 n_hbm, int want, std::vector<i64>& out, int& last) {
        i64 n = i64(ids.size());
        written[0] += n_hbm;
        written[1] += n - n_hbm;
        if (n_hbm == n || n_hbm == 0) {
            out.insert(out.end(), ids.begin(), ids.end());
            last = n_hbm ? 0 : 1;
            return;
        }
        for (int pass = 0; pass < 2; ++pass) {
            bool want_hbm = (pass == 0) == (want == 0);
            for (i64 b : ids)
                if ((b < hbm_blocks) == want_hbm) out.push_back(b);
        }
        last = 1 - want;
    }
    // _release / free_owned: each tier's ids pushed so that the first given is on top.
    void release(const i64* ids, std::size_t n) {
        if (!n) return;
        std::size_t k_hbf = 0;
        for (std::size_t j = 0; j < n; ++j) k_hbf += ids[j] >= hbm_blocks;
        if (k_hbf == 0 || k_hbf == n) {  // one tier: the ids reversed onto its stack
            const int t = k_hbf ? 1 : 0;
            i64* s = stack[t].get() + top[t];
            for (std::size_t j = 0; j < n; ++j) s[j] = ids[n - 1 - j];
            top[t] += i64(n);
            return;
        }
        i64* s0 = stack[0].get() + top[0];
        i64* s1 = stack[1].get() + top[1];
        std::size_t w0 = 0, w1 = 0;
        for (std::size_t j = n; j-- > 0;) {
            if (ids[j] >= hbm_blocks) s1[w1++] = ids[j];
            else s0[w0++] = ids[j];
        }
        top[0] += i64(w0);
        top[1] += i64(w1);
    }
};

// live_index.SegmentRow (+ the memory's per-segment live token count).
struct Row {
    i64 inst = 0;
    int seg = 0;
    int cls = 0;
    i64 session = 0;
    double rank_key = NaN;
    std::vector<i64> ids;
    i64 n_blocks = 0, n_hbm = 0, n_tokens = 0;
    int last_tier = 0;
    double last_use = 0.0;
    i64 reads = 0;
    double close_s = NaN, final_tokens = NaN, final_blocks = NaN;
    bool live = false, cached = false, ranked = false;
    i64 open_seq = 0, rank_seq = 0, cache_seq = 0;
    bool has_spawn = false;
    double spawn_size = 0.0;
    i64 mem_tok = 0;  // node_memory's _seg_tok entry
    i64 blocks_to_write() const {
        double f = final_blocks;
        return (f != f || f <= double(n_blocks)) ? 0 : i64(f) - n_blocks;
    }
};

struct Acc { i64 reads = 0, tokens = 0; bool set = false; };

// One instance (a session's replay): the row of each of its segments by plan segment id, kept from lo on
// (-1: closed, kept so that reopening fails as in the reference; -2: never opened), its rows in open order
// (the table's by-session list; entries of closed rows are skipped), and its reuse history per class
// (kv.PlacementStats' per-session one, cleared when the session ends).  A session's segments are contiguous
// ids in a plan, so the row lookups are one subtraction, not a hash of (instance, segment).
struct Instance {
    int lo = 0;
    std::vector<int> state;
    std::vector<std::pair<int, i64>> open;  // (row, open seq)
    std::array<Acc, N_CLASSES> reuse{};
};

constexpr int NEVER = -2, CLOSED = -1;

// kv.PlacementStats.
struct Stats {
    double alpha = EMA_ALPHA;
    i64 closed_workers = 0, closed_worker_blocks = 0, closed_reviewers = 0;
    double reviewer_blocks_ema = 0.0, live_reviewers_ema = 0.0;
    std::array<Acc, N_CLASSES> reuse_class;
    Acc reuse_node;
    i64 rho_window;
    std::deque<double> recent;
    std::vector<double> sorted;  // the window, sorted (kept current at each close)
    bool keep_window = true;     // false: no policy reads the window's quantile (then it is not kept)

    explicit Stats(i64 window) : rho_window(window) {}
    void opened(i64 n_live_reviewers) { live_reviewers_ema += alpha * (double(n_live_reviewers) - live_reviewers_ema); }
    // session: the closing row's session's own reuse history (reuse_session[session])
    void closed(int cls, i64 n_blocks, std::array<Acc, N_CLASSES>& session, i64 tokens, i64 reads) {
        if (cls == WORKER) {
            closed_workers += 1;
            closed_worker_blocks += n_blocks;
        } else if (cls == REVIEWER) {
            if (closed_reviewers == 0) reviewer_blocks_ema = double(n_blocks);
            else reviewer_blocks_ema += alpha * (double(n_blocks) - reviewer_blocks_ema);
            closed_reviewers += 1;
        }
        if (tokens > 0) {
            Acc* accs[3] = {&session[cls], &reuse_class[cls], &reuse_node};
            for (Acc* a : accs) { a->reads += reads; a->tokens += tokens; a->set = true; }
            if (!keep_window) return;
            double rho = double(reads) / double(tokens);
            recent.push_back(rho);
            sorted.insert(std::upper_bound(sorted.begin(), sorted.end(), rho), rho);
            if (i64(recent.size()) > rho_window) {
                double x = recent.front();
                recent.pop_front();
                sorted.erase(std::lower_bound(sorted.begin(), sorted.end(), x));
            }
        }
    }
    double mean_worker_blocks() const { return closed_workers ? double(closed_worker_blocks) / double(closed_workers) : 0.0; }
    i64 reviewer_reserve(i64 live_reviewer_hbm_blocks) const {
        i64 expected = i64(std::ceil(reviewer_blocks_ema * live_reviewers_ema - 1e-9));
        return std::max<i64>(0, expected - live_reviewer_hbm_blocks);
    }
    double predicted_rho(const std::array<Acc, N_CLASSES>* session, int cls) const {  // session: null if none
        const Acc* a = nullptr;
        if (session && (*session)[cls].set) a = &(*session)[cls];
        else if (reuse_class[cls].set) a = &reuse_class[cls];
        else a = &reuse_node;
        return a->tokens ? double(a->reads) / double(a->tokens) : NaN;
    }
    double rho_quantile(double q) const {
        if (sorted.empty()) return NaN;
        i64 i = std::max<i64>(i64(std::ceil(q * double(sorted.size()))) - 1, 0);
        return sorted[std::size_t(i)];
    }
};

// eviction.LRUEviction's heap entry: (last use, cache order, row).
struct CacheEntry {
    double last_use;
    i64 seq;
    int row;
    bool operator>(const CacheEntry& o) const { return last_use > o.last_use || (last_use == o.last_use && seq > o.seq); }
};
using MinHeap = std::priority_queue<CacheEntry, std::vector<CacheEntry>, std::greater<CacheEntry>>;

// LiveSegments.demand_ahead, kept current: the live rows in close order (unknown close last, ties in open
// order), each carrying its demand (HBM blocks held + blocks still to write), in a treap whose nodes sum
// their subtree.  The demand of the rows ahead of one is then a prefix sum, O(log n) instead of a scan of
// every live row.  Integer sums, so the tree's shape never changes a result.  Nodes are indexed by row.
struct DemandTree {
    struct Node { double key = 0.0; i64 seq = 0, val = 0, sum = 0; std::uint32_t prio = 0; int l = -1, r = -1; };
    std::vector<Node> nodes;
    int root = -1;
    std::uint64_t state = 0x9E3779B97F4A7C15ull;  // xorshift: the priorities (any sequence gives the same sums)

    static bool before(double ka, i64 sa, double kb, i64 sb) { return ka < kb || (ka == kb && sa < sb); }
    i64 sum(int t) const { return t < 0 ? 0 : nodes[std::size_t(t)].sum; }
    void pull(int t) { Node& n = nodes[std::size_t(t)]; n.sum = sum(n.l) + n.val + sum(n.r); }
    // a: the nodes before (k, s); b: the rest
    void split(int t, double k, i64 s, int& a, int& b) {
        if (t < 0) { a = b = -1; return; }
        Node& n = nodes[std::size_t(t)];
        if (before(n.key, n.seq, k, s)) { split(n.r, k, s, n.r, b); a = t; }
        else { split(n.l, k, s, a, n.l); b = t; }
        pull(t);
    }
    int merge(int a, int b) {  // every node of a before every node of b
        if (a < 0) return b;
        if (b < 0) return a;
        if (nodes[std::size_t(a)].prio > nodes[std::size_t(b)].prio) {
            int r = merge(nodes[std::size_t(a)].r, b);
            nodes[std::size_t(a)].r = r;
            pull(a);
            return a;
        }
        int l = merge(a, nodes[std::size_t(b)].l);
        nodes[std::size_t(b)].l = l;
        pull(b);
        return b;
    }
    void insert(int id, double k, i64 s, i64 val) {
        if (std::size_t(id) >= nodes.size()) nodes.resize(std::size_t(id) + 1);
        state ^= state << 13; state ^= state >> 7; state ^= state << 17;
        nodes[std::size_t(id)] = Node{k, s, val, val, std::uint32_t(state >> 32), -1, -1};
        int a, b;
        split(root, k, s, a, b);
        root = merge(merge(a, id), b);
    }
    void erase(int id) {
        const Node n = nodes[std::size_t(id)];
        int a, b, m, c;
        split(root, n.key, n.seq, a, b);
        split(b, n.key, n.seq + 1, m, c);  // m: the node alone (open orders are unique)
        root = merge(a, c);
    }
    void set(int id, i64 val) {  // the node's demand, and each sum on its path
        Node& target = nodes[std::size_t(id)];
        const i64 d = val - target.val;
        if (!d) return;
        target.val = val;
        const double k = target.key;
        const i64 s = target.seq;
        for (int t = root; t >= 0;) {
            Node& n = nodes[std::size_t(t)];
            n.sum += d;
            if (t == id) break;
            t = before(k, s, n.key, n.seq) ? n.l : n.r;
        }
    }
    i64 ahead(double k, i64 s) const {  // the demand of the nodes before (k, s)
        i64 acc = 0;
        for (int t = root; t >= 0;) {
            const Node& n = nodes[std::size_t(t)];
            if (before(n.key, n.seq, k, s)) { acc += sum(n.l) + n.val; t = n.r; }
            else t = n.l;
        }
        return acc;
    }
};

}  // namespace

struct NodeMemoryImpl {
    // configuration
    i64 block_tokens, bpt;
    PolicySpec policy;
    std::shared_ptr<const PlanSegments> plan;
    Clock* clock;
    Recorder* recorder;
    std::array<bool, N_CLASSES> plan_classes{};

    // the table's parts
    FreeLists alloc;
    Stats stats;
    std::vector<Row> rows;
    std::vector<int> spare;                        // row slots free for reuse
    std::vector<std::unique_ptr<Instance>> instances;               // by inst + 1 (the aged pseudo-session: 0)
    std::unordered_map<i64, std::unique_ptr<Instance>> far_instances;  // ids beyond DENSE_INSTANCES
    static constexpr i64 DENSE_INSTANCES = i64(1) << 20;
    i64 n_opened = 0, n_ranked = 0, n_cached = 0;
    i64 live_count = 0;
    DemandTree demand;                               // the oracle's live rows (other policies: empty)
    bool oracle = false;
    std::set<std::tuple<double, i64, int>> workers;  // (rank key, NaN as +inf; rank order; row)
    i64 workers_hbm = 0;
    i64 n_live_reviewers = 0, reviewer_hbm_blocks = 0;
    // written.WrittenKV
    i64 tok[2] = {0, 0}, blk[2] = {0, 0};
    std::array<std::array<i64, 2>, N_CLASSES> by_class{};
    std::vector<int> class_order;  // classes in first-open order
    std::array<bool, N_CLASSES> class_seen{};
    // eviction.LRUEviction
    MinHeap heap, heap_tier[2];
    i64 cached[2] = {0, 0};
    i64 evicted = 0;
    // node_memory.Memory
    std::array<i64, N_CLASSES> live_tok{};
    std::vector<int> live_tok_order;
    std::array<bool, N_CLASSES> live_tok_seen{};
    i64 base[2] = {0, 0};
    std::vector<std::pair<int, std::array<i64, 2>>> base_class;
    std::map<int, std::vector<std::pair<int, std::array<i64, 2>>>> marks;
    bool record = false;
    std::vector<MemEvent> events;
    std::vector<std::vector<i64>> last_blocks;  // the first last_n: the last write_request's (storage kept)
    std::size_t last_n = 0;
    std::vector<i64> scratch, scratch2;

    NodeMemoryImpl(i64 hbm, i64 hbf, i64 bt, i64 bpt_, const PolicySpec& p, std::shared_ptr<const PlanSegments> pl,
                   Clock* c, Recorder* r)
        : block_tokens(bt), bpt(bpt_), policy(p), plan(std::move(pl)), clock(c), recorder(r), alloc(hbm, hbf),
          stats(p.rho_window), oracle(p.kind == PolicyKind::ORACLE) {
        stats.keep_window = p.kind == PolicyKind::RHO_THRESHOLD && std::isnan(p.threshold);
        if (bt <= 0) throw std::invalid_argument("block_tokens must be > 0, got " + std::to_string(bt));
        if (p.rho_window < 1) throw std::invalid_argument("rho_window must be >= 1");
        const auto& pc = plan->seg_class;
        std::size_t n = pc.size();
        if (plan->seg_key.size() != n || plan->seg_tokens.size() != n || plan->seg_reads.size() != n)
            throw std::invalid_argument("plan segment columns differ in length");
        for (int c : pc) {
            if (c < 0 || c >= N_CLASSES) throw std::invalid_argument("plan: bad segment class code " + std::to_string(c));
            plan_classes[c] = true;
        }
    }

    const Instance* find_instance(i64 inst) const {
        if (inst >= -1 && inst + 1 < DENSE_INSTANCES) {
            std::size_t j = std::size_t(inst + 1);
            return j < instances.size() ? instances[j].get() : nullptr;
        }
        auto it = far_instances.find(inst);
        return it == far_instances.end() ? nullptr : it->second.get();
    }
    Instance* find_instance(i64 inst) { return const_cast<Instance*>(std::as_const(*this).find_instance(inst)); }
    Instance& instance(i64 inst) {
        std::unique_ptr<Instance>* p;
        if (inst >= -1 && inst + 1 < DENSE_INSTANCES) {
            std::size_t j = std::size_t(inst + 1);
            if (j >= instances.size()) instances.resize(std::max(j + 1, 2 * instances.size()));
            p = &instances[j];
        } else {
            p = &far_instances[inst];
        }
        if (!*p) *p = std::make_unique<Instance>();
        return **p;
    }
    // The row of (inst, seg): >= 0 live, CLOSED, NEVER.
    static int state_of(const Instance* r, int seg) {
        if (!r) return NEVER;
        const i64 j = i64(seg) - r->lo;
        return (j < 0 || j >= i64(r->state.size())) ? NEVER : r->state[std::size_t(j)];
    }
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

    // -- LiveSet.open / SegmentTable._open ------------------------------------------------------------
    int open(i64 inst, int seg, int cls, i64 session, double rank_key, double now, double close_s, double final_tokens) {
        Instance& rec = instance(inst);
        const int st = state_of(&rec, seg);
        if (st != NEVER) {
            if (st >= 0) throw std::invalid_argument("segment '" + seg_name(inst, seg) + "' is already open");
            throw std::invalid_argument("segment '" + seg_name(inst, seg) +
                                        "' was already closed; rematerialized KV needs a new segment id");
        }
        int ri;
        if (!spare.empty()) {
            ri = spare.back();
            spare.pop_back();
            std::vector<i64> ids = std::move(rows[ri].ids);  // its storage kept for the new row
            rows[ri] = Row();
            rows[ri].ids = std::move(ids);
        } else {
            ri = int(rows.size());
            rows.emplace_back();
        }
        Row& row = rows[ri];
        row.inst = inst;
        row.seg = seg;
        row.cls = cls;
        row.session = session;
        row.rank_key = rank_key;
        row.close_s = close_s;
        if (final_tokens == final_tokens) {
            if (!(final_tokens >= 0 && std::isfinite(final_tokens)))
                throw std::invalid_argument("segment '" + seg_name(inst, seg) + "': final_tokens must be a finite number >= 0 (or NaN)");
            row.final_tokens = final_tokens;
            row.final_blocks = std::ceil(final_tokens / double(block_tokens));
        }
        row.last_use = now;
        row.live = true;
        row.open_seq = ++n_opened;
        state_slot(rec, seg) = ri;
        Instance& sess = session == inst ? rec : instance(session);
        sess.open.emplace_back(ri, row.open_seq);
        ++live_count;
        if (oracle) demand.insert(ri, close_key(row), row.open_seq, row_demand(row));
        if (cls == WORKER) {
            row.ranked = true;
            row.rank_seq = ++n_ranked;
            workers.emplace(rank_key != rank_key ? INF : rank_key, row.rank_seq, ri);
        } else if (cls == REVIEWER) {
            ++n_live_reviewers;
        }
        stats.opened(n_live_reviewers);
        if (!class_seen[cls]) {
            class_seen[cls] = true;
            class_order.push_back(cls);
        }
        return ri;
    }

    // -- LiveSet.close -------------------------------------------------------------------------------
    void unregister(int ri) {
        Row& row = rows[ri];
        row.live = false;
        --live_count;
        if (oracle) demand.erase(ri);
        if (row.ranked) {
            workers.erase(std::make_tuple(row.rank_key != row.rank_key ? INF : row.rank_key, row.rank_seq, ri));
            row.ranked = false;
            workers_hbm -= row.n_hbm;
        }
        if (row.cls == REVIEWER) {
            --n_live_reviewers;
            reviewer_hbm_blocks -= row.n_hbm;
        }
        Instance& rec = instance(row.inst);
        state_slot(rec, row.seg) = CLOSED;
        stats.closed(row.cls, row.n_blocks, row.session == row.inst ? rec.reuse : instance(row.session).reuse,
                     row.n_tokens, row.reads);
    }

    static double close_key(const Row& row) { return row.close_s != row.close_s ? INF : row.close_s; }
    static i64 row_demand(const Row& row) { return row.n_hbm + row.blocks_to_write(); }

    // -- policies.*.tier ------------------------------------------------------------------------------
    int decide(int ri, i64 nb) {
        const Row& row = rows[ri];
        switch (policy.kind) {
            case PolicyKind::HBM_FIRST:
            case PolicyKind::HBM_FIRST_RECLAIM: return 0;
            case PolicyKind::DETERMINISTIC: return deterministic_tier(row.cls);
            case PolicyKind::LACHESIS:
                if (row.cls != WORKER) return deterministic_tier(row.cls);
                return admitted(ri, nb) ? 0 : 1;
            case PolicyKind::RHO_THRESHOLD: {
                const Instance* sess = find_instance(row.session);
                double rho = stats.predicted_rho(sess ? &sess->reuse : nullptr, row.cls);
                if (std::isnan(rho)) return 0;
                double tau = std::isnan(policy.threshold) ? stats.rho_quantile(policy.quantile) : policy.threshold;
                return rho > tau ? 1 : 0;
            }
            case PolicyKind::ORACLE: {
                // LiveSegments.demand_ahead: demand of the live rows closing before this one (ties: open order).
                i64 others = demand.ahead(close_key(row), row.open_seq);
                i64 demand_all = others + row.n_hbm + std::max(row.blocks_to_write(), nb);
                return demand_all <= alloc.total(0) ? 0 : 1;
            }
        }
        return 0;
    }

    // Lachesis.admitted (the segment table's in-place forms: _admitted_held, _admitted_ranked, _admitted_spawn).
    bool admitted(int ri, i64 nb) {
        Row& row = rows[ri];
        i64 pinned = alloc.used(0) - workers_hbm;
        i64 reserve = stats.reviewer_reserve(reviewer_hbm_blocks);
        double limit = double(alloc.total(0) - pinned - reserve) + 1e-9;
        auto me = std::make_tuple(row.rank_key != row.rank_key ? INF : row.rank_key, row.rank_seq, ri);
        auto end = workers.lower_bound(me);
        switch (policy.size_estimate) {
            case SizeEstimate::HELD: {
                i64 acc = row.n_blocks + nb;
                for (auto it = workers.begin(); it != end; ++it) {
                    acc += rows[std::get<2>(*it)].n_blocks;
                    if (double(acc) > limit) return false;
                }
                return double(acc) <= limit;
            }
            case SizeEstimate::MEAN_FLOOR: {
                double mean = stats.mean_worker_blocks();
                double acc = 0.0;
                for (auto it = workers.begin(); it != end; ++it) {
                    i64 b = rows[std::get<2>(*it)].n_blocks;
                    acc += double(b) > mean ? double(b) : mean;
                    if (acc > limit) return false;
                }
                i64 b = row.n_blocks + nb;
                acc += double(b) > mean ? double(b) : mean;
                return acc <= limit;
            }
            case SizeEstimate::SPAWN: {
                double mean = stats.mean_worker_blocks();
                if (!row.has_spawn) {
                    double b = double(row.n_blocks + nb);
                    row.has_spawn = true;
                    row.spawn_size = b > mean ? b : mean;
                }
                // _fits: np.cumsum of the estimates in rank order up to and including this worker.
                double acc = 0.0;
                for (auto it = workers.begin(); it != end; ++it) {
                    const Row& w = rows[std::get<2>(*it)];
                    acc += w.has_spawn ? w.spawn_size : mean;
                }
                acc += row.spawn_size;
                return acc <= double(alloc.total(0) - pinned - reserve) + 1e-9;
            }
        }
        return false;
    }

    // -- eviction.LRUEviction -------------------------------------------------------------------------
    void cache_add(int ri) {
        Row& row = rows[ri];
        row.cached = true;
        row.cache_seq = ++n_cached;
        CacheEntry e{row.last_use, row.cache_seq, ri};
        heap.push(e);
        if (row.n_hbm) heap_tier[0].push(e);
        if (row.n_blocks - row.n_hbm) heap_tier[1].push(e);
        cached[0] += row.n_hbm;
        cached[1] += row.n_blocks - row.n_hbm;
    }

    // evict(k, tier): appends the evicted ids to out (LRU segment first, tail first); returns how many are HBM.
    i64 evict(i64 k, int tier, std::vector<i64>& out) {
        MinHeap& h = tier < 0 ? heap : heap_tier[tier];
        i64 hbm = alloc.hbm_blocks;
        i64 n_hbm_all = 0;
        std::size_t start = out.size();
        while (k > 0) {
            const CacheEntry e = h.top();
            Row& row = rows[e.row];
            bool here = row.cached && row.cache_seq == e.seq;
            i64 n_t = !here ? 0 : tier < 0 ? row.n_blocks : tier == 0 ? row.n_hbm : row.n_blocks - row.n_hbm;
            if (n_t == 0) {
                h.pop();
                continue;
            }
            std::vector<i64>& ids = row.ids;
            i64 take = std::min(k, n_t);
            i64 n_hbm;
            if (take == row.n_blocks) {
                out.insert(out.end(), ids.rbegin(), ids.rend());
                n_hbm = row.n_hbm;
                ids.clear();
            } else if (tier < 0) {
                i64 sz = i64(ids.size());
                i64 c = 0;
                for (i64 j = sz - 1; j >= sz - take; --j) {
                    out.push_back(ids[j]);
                    c += ids[j] < hbm;
                }
                i64 held = row.n_hbm;
                n_hbm = held == row.n_blocks ? take : held ? c : 0;
                ids.resize(std::size_t(sz - take));
            } else {
                // the last `take` blocks of the tier, from the tail; the rest keep their order
                std::vector<char> gone(ids.size(), 0);
                i64 got = 0;
                for (i64 j = i64(ids.size()) - 1; j >= 0 && got < take; --j) {
                    if ((ids[j] >= hbm) == bool(tier)) {
                        out.push_back(ids[j]);
                        gone[j] = 1;
                        ++got;
                    }
                }
                std::size_t w = 0;
                for (std::size_t j = 0; j < ids.size(); ++j)
                    if (!gone[j]) ids[w++] = ids[j];
                ids.resize(w);
                n_hbm = tier == 0 ? take : 0;
            }
            n_hbm_all += n_hbm;
            cached[0] -= n_hbm;
            cached[1] -= take - n_hbm;
            row.n_hbm -= n_hbm;
            row.n_blocks -= take;
            if (row.n_blocks == 0) {
                row.cached = false;
                release_row(e.row);
            }
            k -= take;
        }
        evicted += i64(out.size() - start);
        return n_hbm_all;
    }

    void release_row(int ri) {  // a row neither live nor cached: its slot can be reused
        Row& row = rows[ri];
        row.ids.clear();  // the storage stays with the slot
        spare.push_back(ri);
    }

    // -- allocator.Placer ------------------------------------------------------------------------------
    i64 check_room(i64 nb) {
        i64 free_total = alloc.free_total();
        i64 c = cached[0] + cached[1];
        if (nb > free_total + c) {
            throw AllocationError("cannot place " + std::to_string(nb) + " blocks: " + std::to_string(free_total) +
                                  " free and " + std::to_string(c) + " cached blocks, " + std::to_string(live_count) +
                                  " live segments hold the rest (" + std::to_string(alloc.hbm_blocks) + " HBM + " +
                                  std::to_string(alloc.hbf_blocks) + " HBF blocks)");
        }
        return free_total;
    }

    // place: nb new ids appended to out; returns (n_hbm, last tier).
    std::pair<i64, int> place(int ri, i64 nb, std::vector<i64>& out) {
        int want = decide(ri, nb);
        if (want == 0 && policy.reclaims_cached_hbm() && cached[0]) {
            i64 k = std::min(nb - alloc.free(0), cached[0]);
            if (k > 0) {
                check_room(nb);
                scratch2.clear();
                evict(k, 0, scratch2);
                alloc.release(scratch2.data(), scratch2.size());
            }
        }
        i64 n_hbm = 0;
        int last = 0;
        if (alloc.take(want, nb, out, n_hbm, last)) return {n_hbm, last};
        i64 free_total = check_room(nb);
        i64 first_hbm = 0;
        int first_last = 0;
        if (free_total) alloc.take(want, free_total, out, first_hbm, first_last);
        scratch2.clear();
        i64 ev_hbm = evict(nb - free_total, -1, scratch2);
        i64 r_hbm = 0;
        alloc.reissue(scratch2, ev_hbm, want, out, last);
        r_hbm = ev_hbm;
        return {first_hbm + r_hbm, last};
    }

    // -- SegmentTable.add_write (the row already open) ---------------------------------------------------
    void add_write(int ri, i64 n, double now, std::vector<i64>* handed) {
        Row& row0 = rows[ri];
        if (n < 0)
            throw std::invalid_argument("add_write: segment '" + seg_name(row0.inst, row0.seg) +
                                        "': n_tokens must be >= 0, got " + std::to_string(n));
        i64 bt = block_tokens;
        i64 have = row0.n_tokens;
        i64 room = row0.n_blocks * bt - have;
        i64 fill = room < n ? room : n;
        i64 rest = n - fill;
        i64 nb = (rest + bt - 1) / bt;
        i64 n_hbm = 0;
        int last = 0;
        // the new ids go straight onto the row's (place touches no live row's ids; it throws before appending)
        const std::size_t had = rows[ri].ids.size();
        if (nb) std::tie(n_hbm, last) = place(ri, nb, rows[ri].ids);
        Row& row = rows[ri];  // (place does not grow rows, but keep the reference fresh)
        row.last_use = now;
        row.n_tokens = have + n;
        auto& bc = by_class[row.cls];
        if (fill) {
            tok[row.last_tier] += fill;
            bc[row.last_tier] += fill;
        }
        if (handed) handed->clear();
        if (!nb) return;
        i64 n_hbf = nb - n_hbm;
        i64 slack = nb * bt - rest;
        i64 th, tf;
        if (last) { th = n_hbm * bt; tf = n_hbf * bt - slack; }
        else { th = n_hbm * bt - slack; tf = n_hbf * bt; }
        tok[0] += th;
        tok[1] += tf;
        bc[0] += th;
        bc[1] += tf;
        blk[0] += n_hbm;
        blk[1] += n_hbf;
        if (handed) handed->assign(row.ids.begin() + std::ptrdiff_t(had), row.ids.end());
        row.n_blocks += nb;
        row.n_hbm += n_hbm;
        row.last_tier = last;
        if (row.ranked) workers_hbm += n_hbm;
        else if (n_hbm && row.cls == REVIEWER) reviewer_hbm_blocks += n_hbm;
        if (oracle && row.live) demand.set(ri, row_demand(row));
    }

    // -- SegmentTable.close ------------------------------------------------------------------------------
    void table_close(int ri, double now, double last_use) {
        unregister(ri);
        Row& row = rows[ri];
        row.last_use = last_use;
        (void)now;
        if (policy.frees_at_boundary()) {
            if (row.n_blocks) alloc.release(row.ids.data(), row.ids.size());
            release_row(ri);
        } else if (row.n_blocks) {
            cache_add(ri);
        } else {
            release_row(ri);
        }
    }

    void forget(Row& row) {
        i64 t = row.mem_tok;
        row.mem_tok = 0;
        if (t) live_tok[row.cls] -= t;
    }

    std::vector<std::pair<int, std::array<i64, 2>>> by_class_copy() const {
        std::vector<std::pair<int, std::array<i64, 2>>> out;
        for (int c : class_order) out.emplace_back(c, by_class[c]);
        return out;
    }
};

// -- clairvoyance ------------------------------------------------------------------------------------
Clock::Clock(const std::vector<int>& session, const std::vector<int>& occurrence, const std::vector<int>& segment,
             const std::vector<double>& offset_s) {
    std::size_t n = session.size();
    if (occurrence.size() != n || segment.size() != n || offset_s.size() != n)
        throw std::invalid_argument("CloseTimes: columns differ in length");
    std::unordered_map<std::uint64_t, std::pair<double, i64>> sums;  // per (session, segment), in input order
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t key = pair_key(session[i], segment[i]);
        Closes& c = closes_[key];
        const int occ = occurrence[i];
        if (occ >= 0 && occ < DENSE_OCCURRENCES) {  // a negative one is never looked up (instances count from 0)
            if (std::size_t(occ) >= c.at.size()) {
                c.at.resize(std::size_t(occ) + 1, NaN);
                c.has.resize(std::size_t(occ) + 1, 0);
            }
            c.at[std::size_t(occ)] = offset_s[i];  // the last of duplicates, as a map's assignment
            c.has[std::size_t(occ)] = 1;
        } else if (occ >= 0) {
            far_[std::make_tuple(session[i], occ, segment[i])] = offset_s[i];
        }
        auto& a = sums[key];
        a.first += offset_s[i];
        a.second += 1;
    }
    for (auto& kv : sums) closes_[kv.first].mean = kv.second.first / double(kv.second.second);
}

void Clock::started(i64 inst, int session, double t0) {
    int k = seen_[session]++;
    if (inst >= 0 && inst < DENSE_INSTANCES) {
        if (std::size_t(inst) >= inst_dense_.size()) {
            inst_dense_.resize(std::max(std::size_t(inst) + 1, 2 * inst_dense_.size()));
            inst_has_.resize(inst_dense_.size(), 0);
        }
        inst_dense_[std::size_t(inst)] = std::make_tuple(session, k, t0);
        inst_has_[std::size_t(inst)] = 1;
    } else {
        inst_[inst] = std::make_tuple(session, k, t0);
    }
}

double Clock::close_s(i64 inst, int segment) const {
    const std::tuple<int, int, double>* started = nullptr;
    if (inst >= 0 && inst < DENSE_INSTANCES) {
        if (std::size_t(inst) < inst_dense_.size() && inst_has_[std::size_t(inst)]) started = &inst_dense_[std::size_t(inst)];
    } else if (auto it = inst_.find(inst); it != inst_.end()) {
        started = &it->second;
    }
    if (!started) throw std::out_of_range("clock: instance " + std::to_string(inst) + " never started");
    auto [i, k, t0] = *started;
    auto c = closes_.find(pair_key(i, segment));
    if (c == closes_.end()) return NaN;  // neither a close of this occurrence nor of any
    double off = c->second.mean;
    if (k < DENSE_OCCURRENCES) {
        if (std::size_t(k) < c->second.at.size() && c->second.has[std::size_t(k)]) off = c->second.at[std::size_t(k)];
    } else if (auto e = far_.find(std::make_tuple(i, k, segment)); e != far_.end()) {
        off = e->second;
    }
    return t0 + off;
}

void Recorder::started(i64 inst, int session, double t0) {
    int k = seen_[session]++;
    inst_[inst] = std::make_tuple(session, k, t0);
}

std::tuple<std::vector<int>, std::vector<int>, std::vector<int>, std::vector<double>> Recorder::close_times() const {
    std::vector<int> s, o, g;
    std::vector<double> off;
    for (auto& [inst, seg, t] : closes_) {
        auto [i, k, t0] = inst_.at(inst);
        s.push_back(i);
        o.push_back(k);
        g.push_back(seg);
        off.push_back(t - t0);
    }
    return {s, o, g, off};
}

// -- NodeMemory (node_memory.Memory) ---------------------------------------------------------------------
NodeMemory::NodeMemory(i64 hbm_blocks, i64 hbf_blocks, i64 block_tokens, i64 bytes_per_token, const PolicySpec& policy,
                       std::shared_ptr<const PlanSegments> plan, Clock* clock, Recorder* recorder)
    : d_(std::make_unique<NodeMemoryImpl>(hbm_blocks, hbf_blocks, block_tokens, bytes_per_token, policy,
                                          std::move(plan), clock, recorder)) {}
NodeMemory::~NodeMemory() = default;
NodeMemory::NodeMemory(NodeMemory&&) noexcept = default;
NodeMemory& NodeMemory::operator=(NodeMemory&&) noexcept = default;

i64 NodeMemory::aged_chunks() const {
    i64 t = d_->alloc.n_blocks * d_->block_tokens;
    return (t + AGED_CHUNK_TOKENS - 1) / AGED_CHUNK_TOKENS;
}

void NodeMemory::age(const std::vector<i64>& order) {
    NodeMemoryImpl& m = *d_;
    i64 n = aged_chunks();
    if (i64(order.size()) != n)
        throw std::invalid_argument("age: order must be a permutation of aged_chunks() = " + std::to_string(n));
    std::vector<int> ri(static_cast<std::size_t>(n), 0);
    for (i64 k = 0; k < n; ++k) {
        i64 left = m.alloc.free_total() * m.block_tokens;
        ri[k] = m.open(AGED_SESSION, int(k), REASONING_STRIPPED, AGED_SESSION, NaN, 0.0, NaN, NaN);
        try {
            m.add_write(ri[k], std::min(AGED_CHUNK_TOKENS, left), 0.0, nullptr);
        } catch (AllocationError& e) {
            throw OutOfMemory(e.what());
        }
    }
    for (i64 k = 0; k < n; ++k) m.table_close(ri[k], 0.0, -1.0 - double(order[k]));
    m.base[0] = m.tok[0];
    m.base[1] = m.tok[1];
    m.base_class = m.by_class_copy();
}

std::vector<std::pair<int, i64>> NodeMemory::live_tokens() const {
    std::vector<std::pair<int, i64>> out;
    for (int c : d_->live_tok_order) out.emplace_back(c, d_->live_tok[c]);
    return out;
}

void NodeMemory::session_start(i64 inst, int session, double t0) {
    if (d_->clock) d_->clock->started(inst, session, t0);
    if (d_->recorder) d_->recorder->started(inst, session, t0);
}

std::pair<i64, i64> NodeMemory::write_request(i64 inst, const int* segs, const i64* tokens, std::size_t n, double now) {
    NodeMemoryImpl& m = *d_;
    const PlanSegments& p = *m.plan;
    i64 h0 = m.tok[0], f0 = m.tok[1];
    if (m.last_blocks.size() < n) m.last_blocks.resize(n);
    m.last_n = n;
    for (std::size_t j = 0; j < n; ++j) {
        int s = segs[j];
        i64 t = tokens[j];
        if (s < 0 || std::size_t(s) >= p.seg_class.size())
            throw std::out_of_range("write_request: segment " + std::to_string(s) + " is not in the plan");
        int cls = p.seg_class[s];
        if (!m.live_tok_seen[cls]) {
            m.live_tok_seen[cls] = true;
            m.live_tok_order.push_back(cls);
        }
        m.live_tok[cls] += t;
        if (m.record) m.events.push_back(MemEvent{now, 0, inst, s, cls, t, p.seg_key[s]});
        const int st = NodeMemoryImpl::state_of(m.find_instance(inst), s);
        int ri;
        if (st == NEVER) {
            double close_s = m.clock ? m.clock->close_s(inst, s) : NaN;
            ri = m.open(inst, s, cls, inst, p.seg_key[s], now, close_s, double(p.seg_tokens[s]));
        } else if (st < 0) {
            throw std::invalid_argument("segment '" + seg_name(inst, s) +
                                        "' was already closed; rematerialized KV needs a new segment id");
        } else {
            ri = st;
        }
        m.rows[ri].mem_tok += t;
        try {
            m.add_write(ri, t, now, &m.last_blocks[j]);
        } catch (AllocationError& e) {
            throw OutOfMemory(e.what());
        }
    }
    return {m.tok[0] - h0, m.tok[1] - f0};
}

void NodeMemory::close(i64 inst, int seg, double now) {
    NodeMemoryImpl& m = *d_;
    const int ri = NodeMemoryImpl::state_of(m.find_instance(inst), seg);
    if (ri < 0) return;
    i64 reads = m.plan->seg_reads[seg];
    if (reads < 0) throw std::invalid_argument("add_reads: read_tokens must be an integer >= 0");
    m.rows[ri].reads += reads;
    if (m.record) {
        m.events.push_back(MemEvent{now, 1, inst, seg, m.rows[ri].cls, reads, NaN});
        m.events.push_back(MemEvent{now, 2, inst, seg, m.rows[ri].cls, 0, NaN});
    }
    if (m.recorder) m.recorder->closed(inst, seg, now);
    Row& row = m.rows[ri];
    m.forget(row);  // before the slot can be reused (Python: after table.close; same counts)
    m.table_close(ri, now, now);
}

void NodeMemory::session_end(i64 inst, double now) {
    NodeMemoryImpl& m = *d_;
    if (m.record) m.events.push_back(MemEvent{now, 3, inst, 0, 0, 0, NaN});
    if (Instance* rec = m.find_instance(inst)) {
        std::vector<std::pair<int, i64>> mine = std::move(rec->open);
        rec->open = {};
        for (auto& e : mine) {
            Row& row = m.rows[e.first];
            if (!row.live || row.open_seq != e.second) continue;
            m.forget(row);
            m.table_close(e.first, now, now);
        }
        rec->reuse = {};  // PlacementStats.session_ended
    }
}

double NodeMemory::hbm_tokens(i64 inst, const int* segs, const double* tokens, const i64* tokens_int, std::size_t n) const {
    const NodeMemoryImpl& m = *d_;
    const Instance* rec = m.find_instance(inst);
    auto row_of = [&](int seg) -> const Row* {
        const int ri = NodeMemoryImpl::state_of(rec, seg);
        return ri < 0 ? nullptr : &m.rows[std::size_t(ri)];
    };
    i64 acc = 0;  // LiveLookup.hbm_share
    for (std::size_t j = 0; j < n; ++j) {
        const Row* r = row_of(segs[j]);
        if (r && r->n_hbm) {
            if (r->n_hbm != r->n_blocks) {  // split across the tiers: tokens x HBM fraction, left to right
                double s = 0.0;
                for (std::size_t i = 0; i < n; ++i) {
                    const Row* q = row_of(segs[i]);
                    s += tokens[i] * ((q && q->n_blocks) ? double(q->n_hbm) / double(q->n_blocks) : 0.0);
                }
                return s;
            }
            acc += tokens_int[j];
        }
    }
    return double(acc);
}

std::array<double, 6> NodeMemory::snapshot() const {
    const NodeMemoryImpl& m = *d_;
    i64 bb = m.bpt * m.block_tokens;
    i64 live_h = (m.alloc.used(0) - m.cached[0]) * bb;
    i64 live_f = (m.alloc.used(1) - m.cached[1]) * bb;
    return {double(live_h), double(live_f), double(m.cached[0] * bb), double(m.cached[1] * bb),
            double((m.tok[0] - m.base[0]) * m.bpt), double((m.tok[1] - m.base[1]) * m.bpt)};
}

void NodeMemory::mark(int window) { d_->marks[window] = d_->by_class_copy(); }

std::vector<std::tuple<int, double, double>> NodeMemory::bytes_by_class_tier(int window) const {
    const NodeMemoryImpl& m = *d_;
    auto mk = m.marks.find(window);
    const auto& mark = mk == m.marks.end() ? m.base_class : mk->second;
    std::vector<std::tuple<int, double, double>> out;
    for (int c : m.class_order) {
        if (!m.plan_classes[c]) continue;
        std::array<i64, 2> d = m.by_class[c];
        for (auto& e : mark)
            if (e.first == c) { d[0] -= e.second[0]; d[1] -= e.second[1]; }
        out.emplace_back(c, double(d[0] * m.bpt), double(d[1] * m.bpt));
    }
    return out;
}

NodeMemory::Totals NodeMemory::totals() const {
    const NodeMemoryImpl& m = *d_;
    return Totals{{m.tok[0], m.tok[1]}, m.by_class_copy(), {m.blk[0], m.blk[1]}, m.evicted, m.bpt};
}

i64 NodeMemory::evicted_blocks() const { return d_->evicted; }
bool NodeMemory::frees_at_boundary() const { return d_->policy.frees_at_boundary(); }
void NodeMemory::record_events(bool on) { d_->record = on; if (on) d_->events.clear(); }
bool NodeMemory::recording_events() const { return d_->record; }
const std::vector<MemEvent>& NodeMemory::events() const { return d_->events; }
std::vector<std::vector<i64>> NodeMemory::last_write_blocks() const {
    return {d_->last_blocks.begin(), d_->last_blocks.begin() + std::ptrdiff_t(d_->last_n)};
}

std::array<std::vector<i64>, 2> NodeMemory::free_lists() const {
    const NodeMemoryImpl& m = *d_;
    std::array<std::vector<i64>, 2> out;
    for (int t = 0; t < 2; ++t)
        for (i64 j = 0; j < m.alloc.top[t]; ++j) out[std::size_t(t)].push_back(m.alloc.at(t, j));
    return out;
}

std::vector<i64> NodeMemory::blocks_of(i64 inst, int seg) const {
    const NodeMemoryImpl& m = *d_;
    const int ri = NodeMemoryImpl::state_of(m.find_instance(inst), seg);
    if (ri >= 0) return m.rows[std::size_t(ri)].ids;
    // a cached dead segment: scan (inspection only)
    for (const Row& r : m.rows)
        if (r.cached && r.inst == inst && r.seg == seg) return r.ids;
    throw std::out_of_range("segment '" + seg_name(inst, seg) + "' holds no blocks (unknown, freed or evicted)");
}

std::array<i64, 2> NodeMemory::cached_blocks() const { return {d_->cached[0], d_->cached[1]}; }
std::array<i64, 2> NodeMemory::used_blocks() const { return {d_->alloc.used(0), d_->alloc.used(1)}; }

}  // namespace lachesis
