// decode.DecodeEngine (decode.hpp): every float operation in the reference's order.
#include "decode.hpp"

#include <algorithm>
#include <functional>

namespace lachesis {

namespace {
inline double clamp0(double x) { return x < 0.0 ? 0.0 : x; }        // decode: "0.0 if x < 0.0 else x"
inline double py_max(double a, double b) { return b > a ? b : a; }  // Python's max(a, b)
inline double py_min(double a, double b) { return b < a ? b : a; }  // Python's min(a, b)
}  // namespace

DecodeEngine::DecodeEngine(Environment& env, const StepModel& step, int ranks, double record_from,
                           std::size_t capacity)
    : env_(env), step_(step), ranks_(ranks), record_from_(record_from), capacity_(capacity) {
    if (capacity < 1) throw std::invalid_argument("DecodeEngine: capacity must be >= 1");
    rows_.assign(capacity, {0.0, 0.0, 0.0, 0.0});
    slot_rank_.assign(capacity, 0);
    slot_ev_.assign(capacity, -1);
    for (std::size_t i = capacity; i-- > 0;) free_slots_.push_back(int(i));
    rank_sums_.assign(std::size_t(ranks), {0.0, 0.0, 0.0, 0.0});
    rank_n_.assign(std::size_t(ranks), 0);
    rank_time_.assign(std::size_t(ranks), 0.0);
    dirty_.assign(std::size_t(ranks), 0);
    busy_.assign(std::size_t(ranks), 0.0);
}

void DecodeEngine::grow() {  // DecodeEngine._grow
    const std::size_t n = capacity_;
    capacity_ = 2 * n;
    rows_.resize(2 * n, {0.0, 0.0, 0.0, 0.0});
    slot_ev_.resize(2 * n, -1);
    slot_rank_.resize(2 * n, 0);
    std::vector<int> fresh;
    for (std::size_t i = 2 * n; i-- > n;) fresh.push_back(int(i));
    fresh.insert(fresh.end(), free_slots_.begin(), free_slots_.end());
    free_slots_ = std::move(fresh);
}

void DecodeEngine::advance() {  // DecodeEngine._advance
    const double now = env_.now(), t_last = t_last_;
    const double start = pause_end_ <= t_last ? t_last : py_min(pause_end_, now);  // decoding resumes here
    const double dt = now - start;
    const double tau = tau_;
    if (tau > 0 && n_) {
        if (start > t_last) {  // a pause: its time lengthens the step it falls in, for every decoder
            paused_ += start - t_last;
            if (now > record_from_) stalled_s += start - t_last;
        }
        if (dt > 0) {
            const double steps = dt / tau;
            double* r = drem_.data();
            const std::size_t m = drem_.size();
            for (std::size_t k = 0; k < m; ++k) r[k] -= steps;
            if (now > record_from_) {
                if (paused_ != 0.0) {
                    tpot.push_back(tau + paused_);
                    tpot_w.push_back(double(n_));
                    tpot_t.push_back(now);
                }
                tpot.push_back(tau);
                tpot_w.push_back(steps * double(n_));
                tpot_t.push_back(now);
            }
            paused_ = 0.0;
        }
    }
    t_last_ = now;
}

double DecodeEngine::step_time() {  // DecodeEngine._step_time
    if (ranks_ == 1) {
        const auto& s = rank_sums_[0];
        args_ = {clamp0(s[0]), clamp0(s[1]), clamp0(s[2]), clamp0(s[3])};
        return step_.one_step(double(n_), args_[0], args_[1], args_[2], args_[3], scratch_);
    }
    for (int r = 0; r < ranks_; ++r) {
        if (!dirty_[std::size_t(r)]) continue;
        if (rank_n_[std::size_t(r)]) {
            const auto& s = rank_sums_[std::size_t(r)];
            rank_time_[std::size_t(r)] = step_.rank_step(double(rank_n_[std::size_t(r)]), clamp0(s[0]), clamp0(s[1]),
                                                         clamp0(s[2]), clamp0(s[3]), scratch_);
        } else {
            rank_sums_[std::size_t(r)] = {0.0, 0.0, 0.0, 0.0};  // clear float drift
            rank_time_[std::size_t(r)] = 0.0;
        }
        dirty_[std::size_t(r)] = 0;
    }
    double m = rank_time_[0];
    for (int r = 1; r < ranks_; ++r)
        if (rank_time_[std::size_t(r)] > m) m = rank_time_[std::size_t(r)];
    return m + step_.group_experts(double(n_) / double(ranks_), scratch_);
}

void DecodeEngine::reschedule() {  // DecodeEngine._reschedule
    if (!n_) {
        tau_ = 0.0;
        for (auto& s : rank_sums_) s = {0.0, 0.0, 0.0, 0.0};
        std::fill(rank_time_.begin(), rank_time_.end(), 0.0);
        std::fill(dirty_.begin(), dirty_.end(), 0);
        env_.drop_timer();
        return;
    }
    i64 batch = n_;
    if (ranks_ > 1) batch = *std::max_element(rank_n_.begin(), rank_n_.end());
    if (batch > max_batch) max_batch = batch;
    const double tau = tau_ = step_time();
    const double first = drem_.back();  // np.minimum.reduce over the slots: the last, in descending order
    double delay = clamp0(first) * tau;
    if (pause_end_ > env_.now()) delay += pause_end_ - env_.now();
    env_.set_timer(delay);
}

void DecodeEngine::on_timer() {
    advance();
    // The finished decoders: at most FINISHED_TOKENS left, or so few that their decode ends within this instant
    // (now + left * tau == now: the clock cannot advance by it; decode.DecodeEngine._finished).  Both hold for a
    // tail of the descending order.
    const double now = env_.now(), tau = tau_;
    done_.clear();
    std::size_t m = drem_.size();
    while (m > 0 && (drem_[m - 1] <= FINISHED_TOKENS || now + drem_[m - 1] * tau == now)) done_.push_back(dslot_[--m]);
    drem_.resize(m);
    dslot_.resize(m);
    std::sort(done_.begin(), done_.end());  // ascending, as numpy's nonzero()
    for (int i : done_) {
        const auto row = rows_[std::size_t(i)];
        const int r = slot_rank_[std::size_t(i)];
        auto& s = rank_sums_[std::size_t(r)];
        s[0] -= row[0];
        s[1] -= row[1];
        s[2] -= row[2];
        s[3] -= row[3];
        rank_n_[std::size_t(r)] -= 1;
        dirty_[std::size_t(r)] = 1;
        n_ -= 1;
        const int ev = slot_ev_[std::size_t(i)];
        slot_ev_[std::size_t(i)] = -1;
        free_slots_.push_back(i);
        env_.succeed(ev);
    }
    reschedule();
}

double DecodeEngine::stall(int rank, double seconds) {
    advance();
    const double now = env_.now();
    const double end = busy_[std::size_t(rank)] = py_max(busy_[std::size_t(rank)], now) + seconds;
    if (end > pause_end_) {
        pause_end_ = end;
        if (n_) reschedule();
    }
    return end - now;
}

double DecodeEngine::kv_read_bytes() const {
    double acc = 0.0;
    for (const auto& s : rank_sums_) acc = acc + (py_max(s[0], 0.0) + py_max(s[1], 0.0));
    return acc;
}

int DecodeEngine::join(double tokens, double h, double f, double fl, double hw, int rank) {
    const int ev = env_.new_event();
    if (tokens <= 0) {
        env_.succeed(ev);
        return ev;
    }
    advance();
    if (free_slots_.empty()) grow();
    const int i = free_slots_.back();
    free_slots_.pop_back();
    // after the decoders with at least as many tokens left (descending order; among equals the place is immaterial)
    const auto at = std::upper_bound(drem_.begin(), drem_.end(), tokens, std::greater<double>()) - drem_.begin();
    drem_.insert(drem_.begin() + at, tokens);
    dslot_.insert(dslot_.begin() + at, i);
    rows_[std::size_t(i)] = {h, f, fl, hw};
    slot_rank_[std::size_t(i)] = rank;
    auto& s = rank_sums_[std::size_t(rank)];
    s[0] += h;
    s[1] += f;
    s[2] += fl;
    s[3] += hw;
    rank_n_[std::size_t(rank)] += 1;
    dirty_[std::size_t(rank)] = 1;
    n_ += 1;
    slot_ev_[std::size_t(i)] = ev;
    reschedule();
    return ev;
}

int DecodeEngine::join_measured(double tokens, double h, double f, double fl, double hw, int rank, double* first_step) {
    if (ranks_ > 1) {
        const int ev = join(tokens, h, f, fl, hw, rank);
        *first_step = tau_;
        return ev;
    }
    const auto& s = rank_sums_[0];
    const std::array<double, 4> first = {clamp0(s[0]) + h, clamp0(s[1]) + f, clamp0(s[2]) + fl, clamp0(s[3]) + hw};
    const i64 n = n_ + 1;
    const int ev = join(tokens, h, f, fl, hw, rank);
    if (n_ == n && args_ == first) {
        *first_step = tau_;
        return ev;
    }
    *first_step = step_.one_step(double(n), first[0], first[1], first[2], first[3], scratch_);
    return ev;
}

}  // namespace lachesis
