// allocator.SegmentTable and allocator.Placer (allocator.hpp).
#include "allocator.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

namespace lachesis {

SegmentTable::SegmentTable(i64 hbm_blocks, i64 hbf_blocks, i64 block_tokens, double ema_alpha,
                           std::shared_ptr<Policy> policy, const Classes* classes)
    : classes_(classes), block_tokens_(block_tokens), policy_(std::move(policy)), alloc_(hbm_blocks, hbf_blocks),
      stats_(ema_alpha, policy_ ? policy_->options.rho_window : 1, classes), live_(classes), cache_(hbm_blocks),
      view_(alloc_, cache_, live_, stats_, rows_) {
    if (!policy_) throw std::invalid_argument("SegmentTable: no policy");
    if (block_tokens <= 0) throw std::invalid_argument("block_tokens must be > 0, got " + std::to_string(block_tokens));
    stats_.keep_window = policy_->reads_rho_quantile();
}

int SegmentTable::open(i64 inst, int seg, int cls, i64 session, double rank_key, double now, double close_s,
                       double final_tokens) {
    Instance& rec = rows_.instance(inst);
    const int st = Rows::state_of(&rec, seg);
    if (st != NEVER) {
        if (st >= 0) throw std::invalid_argument("segment '" + segment_id(inst, seg) + "' is already open");
        throw std::invalid_argument("segment '" + segment_id(inst, seg) +
                                    "' was already closed; rematerialized KV needs a new segment id");
    }
    const int ri = rows_.take_slot();
    SegmentRow& row = rows_[ri];
    row.inst = inst;
    row.seg = seg;
    row.cls = cls;
    row.session = session;
    row.rank_key = rank_key;
    row.close_s = close_s;
    if (final_tokens == final_tokens) {
        if (!(final_tokens >= 0 && std::isfinite(final_tokens)))
            throw std::invalid_argument("segment '" + segment_id(inst, seg) +
                                        "': final_tokens must be a finite number >= 0 (or NaN)");
        row.final_tokens = final_tokens;
        row.final_blocks = std::ceil(final_tokens / double(block_tokens_));
    }
    row.last_use = now;
    row.live = true;
    row.open_seq = ++n_opened_;
    Rows::state_slot(rec, seg) = ri;
    Instance& sess = session == inst ? rec : rows_.instance(session);
    sess.open.emplace_back(ri, row.open_seq);
    ++n_live_;
    live_.opened(row, ri);
    stats_.opened(live_.n_reviewers);
    written_.opened(cls);
    return ri;
}

i64 SegmentTable::check_room(i64 nb) {
    const i64 free_total = alloc_.free_total();
    const i64 c = cache_.blocks[HBM] + cache_.blocks[HBF];
    if (nb > free_total + c) {
        throw AllocationError("cannot place " + std::to_string(nb) + " blocks: " + std::to_string(free_total) +
                              " free and " + std::to_string(c) + " cached blocks, " + std::to_string(n_live_) +
                              " live segments hold the rest (" + std::to_string(alloc_.hbm_blocks) + " HBM + " +
                              std::to_string(alloc_.hbf_blocks) + " HBF blocks)");
    }
    return free_total;
}

void SegmentTable::release_emptied() {
    for (int ri : emptied_) rows_.release(ri);
    emptied_.clear();
}

std::pair<i64, int> SegmentTable::place(int ri, i64 nb, std::vector<i64>& out) {
    const int want = policy_->tier(SegmentInfo{rows_[ri], ri, nb}, view_);
    if (want != HBM && want != HBF) throw std::invalid_argument("policy: a tier must be Tier.HBM (0) or Tier.HBF (1)");
    if (want == HBM && policy_->options.reclaims_cached_hbm && cache_.blocks[HBM]) {
        // cached HBM blocks count as free for HBM placement: evict LRU dead HBM blocks first
        const i64 k = std::min(nb - alloc_.free(HBM), cache_.blocks[HBM]);
        if (k > 0) {
            check_room(nb);  // before anything changes
            scratch_.clear();
            cache_.evict(rows_, k, HBM, scratch_, emptied_);
            release_emptied();
            alloc_.release(scratch_.data(), scratch_.size());
        }
    }
    i64 n_hbm = 0;
    int last = HBM;
    if (alloc_.take(want, nb, out, n_hbm, last)) return {n_hbm, last};
    const i64 free_total = check_room(nb);
    i64 first_hbm = 0;
    int first_last = HBM;
    if (free_total) alloc_.take(want, free_total, out, first_hbm, first_last);  // every free block
    scratch_.clear();
    const i64 ev_hbm = cache_.evict(rows_, nb - free_total, -1, scratch_, emptied_);
    release_emptied();
    alloc_.reissue(scratch_, ev_hbm, want, out, last);
    return {first_hbm + ev_hbm, last};
}

void SegmentTable::add_write(int ri, i64 n, double now, std::vector<i64>* handed) {
    SegmentRow& row0 = rows_[ri];
    if (n < 0)
        throw std::invalid_argument("add_write: segment '" + segment_id(row0.inst, row0.seg) +
                                    "': n_tokens must be >= 0, got " + std::to_string(n));
    const i64 bt = block_tokens_;
    const i64 have = row0.n_tokens;
    const i64 room = row0.n_blocks * bt - have;
    const i64 fill = room < n ? room : n;
    const i64 rest = n - fill;
    const i64 nb = (rest + bt - 1) / bt;
    i64 n_hbm = 0;
    int last = HBM;
    // decide and allocate before touching any counter, so a failed write changes nothing; the new ids go straight
    // onto the row's (placement touches no live row's ids, and throws before appending)
    const std::size_t had = row0.ids.size();
    if (nb) {
        if (!row0.placed && row0.cls == classes_->worker)  // not yet placed: this may be its spawn
            live_.workers.placing(row0, row0.n_blocks + nb, stats_.mean_worker_blocks());
        std::tie(n_hbm, last) = place(ri, nb, rows_[ri].ids);
    }
    SegmentRow& row = rows_[ri];
    row.last_use = now;
    row.n_tokens = have + n;
    i64 th = 0, tf = 0;
    if (fill) (row.last_tier ? tf : th) = fill;  // the partly filled last block, in its tier
    if (handed) handed->clear();
    if (!nb) {
        if (fill) written_.wrote(row.cls, th, tf, 0, 0);
        return;
    }
    const i64 n_hbf = nb - n_hbm;
    const i64 slack = nb * bt - rest;  // empty slots of the last new block
    if (last) {
        th += n_hbm * bt;
        tf += n_hbf * bt - slack;
    } else {
        th += n_hbm * bt - slack;
        tf += n_hbf * bt;
    }
    written_.wrote(row.cls, th, tf, n_hbm, n_hbf);
    if (handed) handed->assign(row.ids.begin() + std::ptrdiff_t(had), row.ids.end());
    row.n_blocks += nb;
    row.n_hbm += n_hbm;
    row.last_tier = last;
    row.placed = true;
    live_.grew(row, ri, n_hbm);
}

void SegmentTable::add_reads(int ri, i64 reads) {
    if (reads < 0) throw std::invalid_argument("add_reads: read_tokens must be an integer >= 0");
    rows_[ri].reads += reads;
}

void SegmentTable::close(int ri, double last_use) {
    SegmentRow& row = rows_[ri];
    row.live = false;
    --n_live_;
    live_.closed(row, ri);
    Instance& rec = rows_.instance(row.inst);
    Rows::state_slot(rec, row.seg) = CLOSED;
    Reuse& reuse = row.session == row.inst ? rec.reuse : rows_.instance(row.session).reuse;
    stats_.closed(row.cls, row.n_blocks, reuse, row.n_tokens, row.reads);
    row.last_use = last_use;
    if (policy_->options.frees_at_boundary) {
        if (row.n_blocks) alloc_.release(row.ids.data(), row.ids.size());
        rows_.release(ri);
    } else if (row.n_blocks) {
        cache_.add(row, ri);
    } else {
        rows_.release(ri);
    }
}

WriteTotals SegmentTable::totals(i64 bytes_per_token) const {
    return WriteTotals{{written_.tokens[HBM], written_.tokens[HBF]}, written_.tokens_by_class(),
                       {written_.blocks[HBM], written_.blocks[HBF]}, cache_.evicted, bytes_per_token};
}

}  // namespace lachesis
