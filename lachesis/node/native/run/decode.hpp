// lachesis/node/decode.py, natively: decode.DecodeEngine, continuous batching on a group of ranks stepping in
// lockstep; every decoder advances together between two events (a join or a finish).
#pragma once

#include <array>
#include <vector>

#include "events.hpp"
#include "step_cost.hpp"

namespace lachesis {

// decode.FINISHED_TOKENS: a decoder with no more tokens left than this has finished.
constexpr double FINISHED_TOKENS = 1e-7;

class DecodeEngine {
public:
    DecodeEngine(Environment& env, const StepModel& step, int ranks, double record_from, std::size_t capacity);
    // DecodeEngine.join: start decoding tokens on rank; the event fires when the last one is generated
    int join(double tokens, double h, double f, double fl, double hw, int rank);
    // DecodeEngine.join_measured: join, and the step with this decoder added to the batch as it stood
    int join_measured(double tokens, double h, double f, double fl, double hw, int rank, double* first_step);
    double stall(int rank, double seconds);  // DecodeEngine.stall
    double kv_read_bytes() const;            // DecodeEngine.kv_read_bytes
    void on_timer();                         // DecodeEngine._on_timer (the current timer: superseded ones are dropped)

    // what a window's result reads (DecodeEngine.tpot, .tpot_w, .tpot_t, .max_batch, .stalled_s)
    std::vector<double> tpot, tpot_w, tpot_t;
    i64 max_batch = 0;
    double stalled_s = 0.0;

private:
    void grow();
    void advance();
    double step_time();
    void reschedule();

    Environment& env_;
    const StepModel& step_;
    const int ranks_;
    const double record_from_;
    std::size_t capacity_;
    std::vector<std::array<double, 4>> rows_;
    std::vector<int> slot_rank_, slot_ev_, free_slots_;
    // The decoders, packed in descending order of remaining tokens, and the slot of each (an idle slot's remaining
    // tokens are +inf in the reference; nothing reads them).  Every decoder advances by the same steps and rounding
    // is monotone, so the order holds as they advance: the fewest tokens left is the last, the finished ones are the
    // tail, and a join is placed by binary search.
    std::vector<double> drem_;
    std::vector<int> dslot_;
    std::vector<int> done_;
    std::vector<std::array<double, 4>> rank_sums_;
    std::vector<i64> rank_n_;
    std::vector<double> rank_time_;
    std::vector<char> dirty_;
    i64 n_ = 0;
    double t_last_ = 0.0, tau_ = 0.0;
    std::array<double, 4> args_{};  // G = 1: the step inputs behind tau
    std::vector<double> busy_;
    double pause_end_ = 0.0, paused_ = 0.0;
    std::vector<double> scratch_;
};

}  // namespace lachesis
