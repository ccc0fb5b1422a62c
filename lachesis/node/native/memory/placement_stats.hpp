// lachesis/memory/placement_stats.py, natively: placement_stats.PlacementStats, the running statistics of closed
// segments a policy consults.  The smoothing (placement_stats.EMA_ALPHA) and the window (the policy's rho_window) are
// handed over by the Python side.
#pragma once

#include <algorithm>
#include <cmath>
#include <deque>
#include <vector>

#include "segment_row.hpp"

namespace lachesis {

constexpr double RESERVE_SLACK = 1e-9;  // placement_stats.RESERVE_SLACK

struct PlacementStats {
    double alpha;
    const Classes* classes;
    i64 closed_workers = 0, closed_worker_blocks = 0, closed_reviewers = 0;
    double reviewer_blocks_ema = 0.0, live_reviewers_ema = 0.0;
    Reuse reuse_class{};
    Acc reuse_node;
    i64 rho_window;
    std::deque<double> recent;
    std::vector<double> sorted;  // the window, sorted (kept current at each close)
    bool keep_window = true;     // false: no policy reads the window's quantile (then it is not kept)

    PlacementStats(double alpha_, i64 window, const Classes* c) : alpha(alpha_), classes(c), rho_window(window) {
        if (!(0 < alpha && alpha <= 1)) throw std::invalid_argument("alpha must be in (0, 1]");
        if (window < 1) throw std::invalid_argument("rho_window must be >= 1");
    }
    // PlacementStats.opened: samples the live-reviewer count after the open
    void opened(i64 n_live_reviewers) { live_reviewers_ema += alpha * (double(n_live_reviewers) - live_reviewers_ema); }
    // PlacementStats.closed; ``session``: the closing row's session's own reuse history
    void closed(int cls, i64 n_blocks, Reuse& session, i64 tokens, i64 reads) {
        if (cls == classes->worker) {
            closed_workers += 1;
            closed_worker_blocks += n_blocks;
        } else if (cls == classes->reviewer) {
            if (closed_reviewers == 0) reviewer_blocks_ema = double(n_blocks);
            else reviewer_blocks_ema += alpha * (double(n_blocks) - reviewer_blocks_ema);
            closed_reviewers += 1;
        }
        if (tokens > 0) {
            Acc* accs[3] = {&session[std::size_t(cls)], &reuse_class[std::size_t(cls)], &reuse_node};
            for (Acc* a : accs) { a->reads += reads; a->tokens += tokens; a->set = true; }
            if (!keep_window) return;
            const double rho = double(reads) / double(tokens);
            recent.push_back(rho);
            sorted.insert(std::upper_bound(sorted.begin(), sorted.end(), rho), rho);
            if (i64(recent.size()) > rho_window) {
                const double x = recent.front();
                recent.pop_front();
                sorted.erase(std::lower_bound(sorted.begin(), sorted.end(), x));
            }
        }
    }
    // PlacementStats.mean_worker_blocks
    double mean_worker_blocks() const {
        return closed_workers ? double(closed_worker_blocks) / double(closed_workers) : 0.0;
    }
    // PlacementStats.reviewer_reserve
    i64 reviewer_reserve(i64 live_reviewer_hbm_blocks) const {
        const i64 expected = i64(std::ceil(reviewer_blocks_ema * live_reviewers_ema - RESERVE_SLACK));
        return std::max<i64>(0, expected - live_reviewer_hbm_blocks);
    }
    // PlacementStats.predicted_rho; ``session``: the session's own reuse history (null when it has none)
    double predicted_rho(const Reuse* session, int cls) const {
        const Acc* a;
        if (session && (*session)[std::size_t(cls)].set) a = &(*session)[std::size_t(cls)];
        else if (reuse_class[std::size_t(cls)].set) a = &reuse_class[std::size_t(cls)];
        else a = &reuse_node;
        return a->tokens ? double(a->reads) / double(a->tokens) : NaN;
    }
    // PlacementStats.rho_quantile
    double rho_quantile(double q) const {
        if (sorted.empty()) return NaN;
        const i64 i = std::max<i64>(i64(std::ceil(q * double(sorted.size()))) - 1, 0);
        return sorted[std::size_t(i)];
    }
};

}  // namespace lachesis
