// lachesis/node/clairvoyance.py, natively: clairvoyance.Clock (a baseline run's close offsets read back as the
// oracle's close times, shared by the ranks of a group) and clairvoyance.Recorder (a run's own closes).  Sessions are
// plan indices.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "kv.hpp"

namespace lachesis {

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

}  // namespace lachesis
