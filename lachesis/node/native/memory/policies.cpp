// The built-in policies' rules (policies.hpp), each as lachesis/memory/policies.py writes it.
#include "policies.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <utility>

#include "allocator.hpp"

namespace lachesis {

namespace {

// policies.HBMFirst (and HBMFirstReclaim: the same rule, the table reclaiming cached HBM blocks)
struct HBMFirst final : Policy {
    int tier(const SegmentInfo&, TableView&) override { return HBM; }
};

// policies.DeterministicOnly: policies._deterministic
struct DeterministicOnly final : Policy {
    const Classes* classes;
    explicit DeterministicOnly(const Classes* c) : classes(c) {}
    int tier(const SegmentInfo& seg, TableView&) override { return classes->deterministic_tier(seg.row.cls); }
};

// policies.Lachesis: the deterministic path, and the workers admitted shortest-predicted first (Lachesis.admitted).
struct Lachesis final : Policy {
    enum Estimate { HELD, MEAN_FLOOR, SPAWN } estimate;
    const Classes* classes;
    Lachesis(Estimate e, const Classes* c) : estimate(e), classes(c) {}

    int tier(const SegmentInfo& seg, TableView& view) override {
        if (seg.row.cls != classes->worker) return classes->deterministic_tier(seg.row.cls);
        return admitted(seg, view) ? HBM : HBF;
    }
    // policies._spawn_size
    static double spawn_size(i64 blocks, double mean_then, double mean) {
        if (blocks < 0) return mean;
        return double(blocks) > mean_then ? double(blocks) : mean_then;
    }
    bool admitted(const SegmentInfo& seg, TableView& view) const {
        const WorkerRanking& w = view.workers();
        const Rows& rows = view.rows();
        const PlacementStats& stats = view.stats();
        // policies._worker_budget
        const i64 pinned = view.used(HBM) - w.hbm_blocks;
        const i64 budget = view.total(HBM) - pinned - stats.reviewer_reserve(view.live_reviewer_hbm_blocks());
        const double limit = double(budget) + BUDGET_SLACK;
        const auto end = w.ahead_end(seg.row, seg.ri);
        if (estimate == SPAWN) {
            const double mean = stats.mean_worker_blocks();
            double acc = 0.0;
            for (auto it = w.ranked.begin(); it != end; ++it) {
                const Ranked& r = rows[std::get<2>(*it)].ranked;
                acc += spawn_size(r.spawn_blocks, r.spawn_mean, mean);
                if (acc > limit) return false;
            }
            i64 b = seg.row.ranked.spawn_blocks;
            double m = seg.row.ranked.spawn_mean;
            if (b < 0) {  // asked before its first placement: it would spawn now
                b = seg.row.n_blocks + seg.new_blocks;
                m = mean;
            }
            return acc + spawn_size(b, m, mean) <= limit;
        }
        if (estimate == HELD) {
            i64 acc = 0;
            for (auto it = w.ranked.begin(); it != end; ++it) {
                acc += rows[std::get<2>(*it)].n_blocks;
                if (double(acc) > limit) return false;
            }
            return double(acc + seg.row.n_blocks + seg.new_blocks) <= limit;
        }
        const double mean = stats.mean_worker_blocks();  // MEAN_FLOOR
        double acc = 0.0;
        for (auto it = w.ranked.begin(); it != end; ++it) {
            const double b = double(rows[std::get<2>(*it)].n_blocks);
            acc += b > mean ? b : mean;
            if (acc > limit) return false;
        }
        const double b = double(seg.row.n_blocks + seg.new_blocks);
        return acc + (b > mean ? b : mean) <= limit;
    }
};

// policies.ReuseThreshold
struct ReuseThreshold final : Policy {
    double quantile, threshold;  // threshold NaN: None (the window's quantile instead)
    ReuseThreshold(double q, double t) : quantile(q), threshold(t) {}
    bool reads_rho_quantile() const override { return std::isnan(threshold); }
    int tier(const SegmentInfo& seg, TableView& view) override {
        const PlacementStats& stats = view.stats();
        const double rho = stats.predicted_rho(view.session_reuse(seg.row.session), seg.row.cls);
        if (std::isnan(rho)) return HBM;
        const double tau = std::isnan(threshold) ? stats.rho_quantile(quantile) : threshold;
        return rho > tau ? HBF : HBM;
    }
};

// policies.Oracle
struct Oracle final : Policy {
    int tier(const SegmentInfo& seg, TableView& view) override {
        const auto [others, hbm_me, todo_me] = view.demand_ahead(seg.ri);
        const i64 demand = others + hbm_me + (todo_me > seg.new_blocks ? todo_me : seg.new_blocks);
        return demand <= view.total(HBM) ? HBM : HBF;
    }
};

double number(const Knobs& k, const char* name) {
    auto it = k.numbers.find(name);
    if (it == k.numbers.end()) throw std::invalid_argument(std::string("policy: missing knob '") + name + "'");
    return it->second;
}

Lachesis::Estimate estimate(const Knobs& k) {  // policies.SIZE_ESTIMATES (the first is the default)
    auto w = k.words.find("size_estimate");
    const std::string e = w == k.words.end() ? "held" : w->second;
    if (e == "held") return Lachesis::HELD;
    if (e == "mean_floor") return Lachesis::MEAN_FLOOR;
    if (e == "spawn") return Lachesis::SPAWN;
    throw std::invalid_argument("policy Lachesis: unknown size_estimate '" + e + "'");
}

// The native classes: each one's name, the knobs it takes and how it is made.
struct Kind {
    const char* name;
    std::vector<std::string> knobs;
    std::unique_ptr<Policy> (*make)(const Knobs&, const Classes*);
};

const std::vector<Kind>& kinds() {
    static const std::vector<Kind> k = {
        {"HBMFirst", {}, [](const Knobs&, const Classes*) -> std::unique_ptr<Policy> { return std::make_unique<HBMFirst>(); }},
        {"DeterministicOnly", {}, [](const Knobs&, const Classes* c) -> std::unique_ptr<Policy> {
             return std::make_unique<DeterministicOnly>(c);
         }},
        {"Lachesis", {"size_estimate"}, [](const Knobs& k, const Classes* c) -> std::unique_ptr<Policy> {
             return std::make_unique<Lachesis>(estimate(k), c);
         }},
        {"ReuseThreshold", {"quantile", "threshold"}, [](const Knobs& k, const Classes*) -> std::unique_ptr<Policy> {
             return std::make_unique<ReuseThreshold>(number(k, "quantile"), number(k, "threshold"));
         }},
        {"Oracle", {}, [](const Knobs&, const Classes*) -> std::unique_ptr<Policy> { return std::make_unique<Oracle>(); }},
    };
    return k;
}

}  // namespace

std::vector<std::string> policy_kinds() {
    std::vector<std::string> out;
    for (const Kind& k : kinds()) out.push_back(k.name);
    return out;
}

std::unique_ptr<Policy> make_policy(const std::string& kind, const Knobs& knobs, const PolicyOptions& options,
                                    const Classes* classes) {
    for (const Kind& k : kinds()) {
        if (kind != k.name) continue;
        auto foreign = [&](const std::string& name) {
            if (std::find(k.knobs.begin(), k.knobs.end(), name) == k.knobs.end())
                throw std::invalid_argument("native policy " + kind + ": no knob '" + name + "'");
        };
        for (auto& e : knobs.numbers) foreign(e.first);
        for (auto& e : knobs.words) foreign(e.first);
        std::unique_ptr<Policy> p = k.make(knobs, classes);
        p->options = options;
        return p;
    }
    throw std::invalid_argument("unknown native policy '" + kind + "'");
}

}  // namespace lachesis
