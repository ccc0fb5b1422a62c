// lachesis/node/step_cost.py, natively: step_cost.StepModel.scalar_fn's step at one rank, and step_cost.GroupStep's
// (each rank's own operators, the group operators at the group's mean batch), from the coefficient rows Python hands
// over (lachesis.node.native.step).
#pragma once

#include <array>
#include <vector>

#include "../memory/kv.hpp"

namespace lachesis {

// step_cost._INPUTS, in order: the step's inputs, the rows of every coefficient column.
constexpr std::array<const char*, 6> STEP_INPUTS = {"running", "batch", "kv_hbm", "kv_hbf", "hbm_write", "experts"};
constexpr int N_INPUTS = int(STEP_INPUTS.size());

// One set of operators' coefficient rows, input-major (step_cost.dot_rows' operand): rows are lane-major (every
// operator's lane 0, then lane 1, ...); an operator costs the max over its lanes, and the operators' sum is taken
// left to right (step_cost.sum_in_order).
struct StepRows {
    int n_ops = 0;
    int lanes = 1;
    std::vector<double> cols;  // N_INPUTS x (lanes * n_ops)
    double eval(const double* x, std::vector<double>& t) const;
};

// step_cost.StepModel (G = 1: every operator at the rank's batch) and step_cost.GroupStep (a group: its own operators
// per rank, the group operators at the mean batch).
struct StepModel {
    StepRows all, own, group;
    double flush_per_byte = 0.0;
    double n_local = 0.0;   // StepModel._n_local
    double log_miss = 0.0;  // StepModel._log_miss (-inf: every expert read)

    double experts(double b) const;  // StepModel.experts_read at a float batch
    // StepModel.scalar_fn's step: one rank, every operator
    double one_step(double batch, double h, double f, double fl, double hw, std::vector<double>& scratch) const;
    // GroupStep.rank: one rank's own operators and its flush
    double rank_step(double batch, double h, double f, double fl, double hw, std::vector<double>& scratch) const;
    // GroupStep.experts: the group operators at the group's mean batch
    double group_experts(double mean_batch, std::vector<double>& scratch) const;
};

}  // namespace lachesis
