// clairvoyance.Clock and clairvoyance.Recorder (clairvoyance.hpp).
#include "clairvoyance.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace lachesis {

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

}  // namespace lachesis
