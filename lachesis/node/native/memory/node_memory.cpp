// node_memory.Memory (node_memory.hpp).
#include "node_memory.hpp"

#include <algorithm>
#include <string>

#include "lookup.hpp"

namespace lachesis {

void PlanSegments::check(const Classes& classes) {
    const std::size_t n = seg_class.size();
    if (seg_key.size() != n || seg_tokens.size() != n || seg_reads.size() != n)
        throw std::invalid_argument("plan segment columns differ in length");
    present = {};
    for (std::int32_t c : seg_class) {
        if (c < 0 || c >= classes.n()) throw std::invalid_argument("plan: bad segment class code " + std::to_string(c));
        present[std::size_t(c)] = true;
    }
}

NodeMemory::NodeMemory(const MemorySpec& spec, std::shared_ptr<Policy> policy, std::shared_ptr<const PlanSegments> plan,
                       std::shared_ptr<const Classes> classes, Clock* clock, Recorder* recorder)
    : classes_(std::move(classes)), plan_(std::move(plan)), spec_(spec),
      table_(spec.hbm_blocks, spec.hbf_blocks, spec.block_tokens, spec.ema_alpha, std::move(policy), classes_.get()),
      clock_(clock), recorder_(recorder) {
    if (spec.aged_chunk_tokens < 1) throw std::invalid_argument("aged_chunk_tokens must be >= 1");
}

i64 NodeMemory::aged_chunks() const {
    const i64 t = table_.allocator().n_blocks * spec_.block_tokens;
    return (t + spec_.aged_chunk_tokens - 1) / spec_.aged_chunk_tokens;
}

void NodeMemory::age(const i64* order, std::size_t m) {
    const i64 n = aged_chunks();
    if (i64(m) != n)
        throw std::invalid_argument("age: order must be a permutation of aged_chunks() = " + std::to_string(n));
    const int aged = classes_->aged;
    std::vector<int> ri(std::size_t(n), 0);
    for (i64 k = 0; k < n; ++k) {
        const i64 left = table_.allocator().free_total() * spec_.block_tokens;
        ri[std::size_t(k)] = table_.open(-1, int(k), aged, -1, NaN, 0.0, NaN, NaN);
        table_.add_write(ri[std::size_t(k)], std::min(spec_.aged_chunk_tokens, left), 0.0, nullptr);
    }
    for (i64 k = 0; k < n; ++k) table_.close(ri[std::size_t(k)], -1.0 - double(order[k]));
    base_[HBM] = table_.tokens_written(HBM);
    base_[HBF] = table_.tokens_written(HBF);
    base_class_ = table_.written().tokens_by_class();
}

std::vector<std::pair<int, i64>> NodeMemory::live_tokens() const {
    std::vector<std::pair<int, i64>> out;
    for (int c : live_order_) out.emplace_back(c, live_tok_[std::size_t(c)]);
    return out;
}

void NodeMemory::session_start(i64 inst, int session, double t0) {
    if (clock_) clock_->started(inst, session, t0);
    if (recorder_) recorder_->started(inst, session, t0);
}

std::pair<i64, i64> NodeMemory::write_request(i64 inst, const int* segs, const i64* tokens, std::size_t n, double now) {
    const PlanSegments& p = *plan_;
    const i64 h0 = table_.tokens_written(HBM), f0 = table_.tokens_written(HBF);
    if (last_blocks_.size() < n) last_blocks_.resize(n);
    last_n_ = n;
    Rows& rows = table_.rows();
    for (std::size_t j = 0; j < n; ++j) {  // Memory._write of each (segment, tokens), in order
        const int s = segs[j];
        const i64 t = tokens[j];
        if (s < 0 || std::size_t(s) >= p.seg_class.size())
            throw std::out_of_range("write_request: segment " + std::to_string(s) + " is not in the plan");
        const int cls = p.seg_class[std::size_t(s)];
        if (!live_seen_[std::size_t(cls)]) {
            live_seen_[std::size_t(cls)] = true;
            live_order_.push_back(cls);
        }
        live_tok_[std::size_t(cls)] += t;
        if (record_) events_.push_back(MemEvent{now, 0, inst, s, cls, t, p.seg_key[std::size_t(s)]});
        const int st = rows.state_of(inst, s);
        int ri;
        if (st == NEVER) {
            const double close_s = clock_ ? clock_->close_s(inst, s) : NaN;
            ri = table_.open(inst, s, cls, inst, p.seg_key[std::size_t(s)], now, close_s,
                             double(p.seg_tokens[std::size_t(s)]));
        } else if (st < 0) {
            throw std::invalid_argument("segment '" + segment_id(inst, s) +
                                        "' was already closed; rematerialized KV needs a new segment id");
        } else {
            ri = st;
        }
        rows[ri].live_tokens += t;
        try {
            table_.add_write(ri, t, now, &last_blocks_[j]);
        } catch (AllocationError& e) {
            throw OutOfMemory(e.what());
        }
    }
    return {table_.tokens_written(HBM) - h0, table_.tokens_written(HBF) - f0};
}

void NodeMemory::forget(SegmentRow& row) {
    const i64 t = row.live_tokens;
    row.live_tokens = 0;
    if (t) live_tok_[std::size_t(row.cls)] -= t;
}

void NodeMemory::close(i64 inst, int seg, double now) {
    const int ri = table_.rows().state_of(inst, seg);
    if (ri < 0) return;
    // every read of a segment happens before its boundary, so its Eq. 3 reads are reported there
    const i64 reads = plan_->seg_reads[std::size_t(seg)];
    table_.add_reads(ri, reads);
    if (record_) {
        const int cls = table_.rows()[ri].cls;
        events_.push_back(MemEvent{now, 1, inst, seg, cls, reads, NaN});
        events_.push_back(MemEvent{now, 2, inst, seg, cls, 0, NaN});
    }
    if (recorder_) recorder_->closed(inst, seg, now);
    forget(table_.rows()[ri]);  // before the slot can be reused (the reference: after SegmentTable.close; the same counts)
    table_.close(ri, now);
}

void NodeMemory::session_end(i64 inst, double now) {
    if (record_) events_.push_back(MemEvent{now, 3, inst, 0, 0, 0, NaN});
    table_.end_session(inst, now, [this](int ri) { forget(table_.rows()[ri]); });
}

double NodeMemory::hbm_tokens(i64 inst, const int* segs, const double* tokens, const i64* tokens_int,
                              std::size_t n) const {
    const LiveLookup lookup{table_.rows()};
    i64 acc;
    if (lookup.hbm_share(inst, segs, tokens_int, n, acc)) return double(acc);
    const Instance* rec = table_.rows().find(inst);
    double s = 0.0;  // split across the tiers: tokens x HBM fraction, left to right
    for (std::size_t i = 0; i < n; ++i) s += tokens[i] * lookup.hbm_fraction(rec, segs[i]);
    return s;
}

std::array<double, 6> NodeMemory::snapshot() const {
    const FreeLists& a = table_.allocator();
    const LRUEviction& c = table_.cache();
    const i64 bpt = spec_.bytes_per_token;
    const i64 bb = bpt * spec_.block_tokens;
    const i64 live_h = (a.used(HBM) - c.blocks[HBM]) * bb;
    const i64 live_f = (a.used(HBF) - c.blocks[HBF]) * bb;
    return {double(live_h), double(live_f), double(c.blocks[HBM] * bb), double(c.blocks[HBF] * bb),
            double((table_.tokens_written(HBM) - base_[HBM]) * bpt), double((table_.tokens_written(HBF) - base_[HBF]) * bpt)};
}

void NodeMemory::mark(int window) { marks_[window] = table_.written().tokens_by_class(); }

std::vector<std::tuple<int, double, double>> NodeMemory::bytes_by_class_tier(int window) const {
    auto mk = marks_.find(window);
    const ByClass& mark = mk == marks_.end() ? base_class_ : mk->second;
    const WrittenKV& w = table_.written();
    const i64 bpt = spec_.bytes_per_token;
    std::vector<std::tuple<int, double, double>> out;
    for (int c : w.order) {
        if (!plan_->present[std::size_t(c)]) continue;  // an aged start's pseudo-segments
        std::array<i64, 2> d = w.by_class[std::size_t(c)];
        for (auto& e : mark)
            if (e.first == c) { d[HBM] -= e.second[HBM]; d[HBF] -= e.second[HBF]; }
        out.emplace_back(c, double(d[HBM] * bpt), double(d[HBF] * bpt));
    }
    return out;
}

std::vector<std::vector<i64>> NodeMemory::last_write_blocks() const {
    return {last_blocks_.begin(), last_blocks_.begin() + std::ptrdiff_t(last_n_)};
}

std::array<std::vector<i64>, 2> NodeMemory::free_lists() const {
    const FreeLists& a = table_.allocator();
    std::array<std::vector<i64>, 2> out;
    for (int t = 0; t < 2; ++t)
        for (i64 j = 0; j < a.top[t]; ++j) out[std::size_t(t)].push_back(a.at(t, j));
    return out;
}

std::vector<i64> NodeMemory::blocks_of(i64 inst, int seg) const {
    const Rows& rows = table_.rows();
    const int ri = rows.state_of(inst, seg);
    if (ri >= 0) return rows[ri].ids;
    for (const SegmentRow& r : rows.rows)  // a cached dead segment: scan (inspection only)
        if (r.cached && r.inst == inst && r.seg == seg) return r.ids;
    throw std::out_of_range("segment '" + segment_id(inst, seg) + "' holds no blocks (unknown, freed or evicted)");
}

}  // namespace lachesis
