// step_cost.StepModel and step_cost.GroupStep's per-step arithmetic (step_cost.hpp), in the reference's order.
#include "step_cost.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace lachesis {

namespace {
void check_step_inputs(double b, double h, double f, double fl, double hw) {
    // step_cost.StepModel.check_tiers' finite-and-non-negative check, naming the argument (step_cost._ARGS)
    const char* names[5] = {"batch", "kv_hbm_bytes", "kv_hbf_bytes", "hbf_flush_bytes", "hbm_write_bytes"};
    const double v[5] = {b, h, f, fl, hw};
    for (int i = 0; i < 5; ++i)
        if (!(0.0 <= v[i] && v[i] < INF))
            throw std::invalid_argument(std::string("decode step: ") + names[i] + " must be finite and >= 0, got " +
                                        std::to_string(v[i]));
}
}  // namespace

// step_cost.dot_rows, then the lane maximum per operator and step_cost.sum_in_order over operators
double StepRows::eval(const double* x, std::vector<double>& t) const {
    const std::size_t rows = std::size_t(lanes) * std::size_t(n_ops);
    t.resize(rows);
    for (std::size_t r = 0; r < rows; ++r) t[r] = cols[r] * x[0];
    for (int k = 1; k < N_INPUTS; ++k) {
        const double* c = cols.data() + std::size_t(k) * rows;
        for (std::size_t r = 0; r < rows; ++r) t[r] = t[r] + c[r] * x[k];
    }
    double acc = 0.0;
    for (int i = 0; i < n_ops; ++i) {
        double m = t[std::size_t(i)];
        for (int k = 1; k < lanes; ++k) {
            const double v = t[std::size_t(k) * std::size_t(n_ops) + std::size_t(i)];
            m = std::isnan(m) ? m : (std::isnan(v) || v > m ? v : m);  // np.maximum
        }
        acc = i == 0 ? m : acc + m;
    }
    return acc;
}

double StepModel::experts(double b) const {
    if (log_miss == -INF) return n_local * (b > 0 ? 1.0 : 0.0);
    return (-n_local) * std::expm1(b * log_miss);
}

double StepModel::one_step(double batch, double h, double f, double fl, double hw, std::vector<double>& scratch) const {
    check_step_inputs(batch, h, f, fl, hw);
    const double x[N_INPUTS] = {batch > 0 ? 1.0 : 0.0, batch, h, f, hw, experts(batch)};
    return all.eval(x, scratch) + fl * flush_per_byte;
}

double StepModel::rank_step(double batch, double h, double f, double fl, double hw, std::vector<double>& scratch) const {
    check_step_inputs(batch, h, f, fl, hw);
    const double x[N_INPUTS] = {batch > 0 ? 1.0 : 0.0, batch, h, f, hw, 0.0};
    return own.eval(x, scratch) + fl * flush_per_byte;
}

double StepModel::group_experts(double b, std::vector<double>& scratch) const {
    if (!group.n_ops) return 0.0;
    const double x[N_INPUTS] = {b > 0 ? 1.0 : 0.0, b, 0.0, 0.0, 0.0, experts(b)};
    return group.eval(x, scratch);
}

}  // namespace lachesis
