// Python binding of the native run (node.hpp): bind_node(m) adds NodeRun to lachesis.node._core.  The plan,
// the step model's rows and the run's settings cross once, as arrays; the records come back as arrays.
#include <cstring>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "node.hpp"

namespace py = pybind11;
using namespace lachesis;

namespace {

template <class T>
std::vector<T> vec(const py::dict& d, const char* key) {
    if (!d.contains(key)) throw py::key_error(std::string("NodeRun: missing ") + key);
    return py::cast<std::vector<T>>(d[key]);
}

py::array_t<double> arr(const std::vector<double>& v) {
    py::array_t<double> a(py::ssize_t(v.size()));
    if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(double));
    return a;
}

template <std::size_t N>
py::array_t<double> table(const std::vector<std::array<double, N>>& v) {
    py::array_t<double> a({py::ssize_t(v.size()), py::ssize_t(N)});
    if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * N * sizeof(double));
    return a;
}

StepRows rows(const py::dict& d, const char* prefix) {
    StepRows r;
    std::string p(prefix);
    r.n_ops = py::cast<int>(d[(p + "_ops").c_str()]);
    r.lanes = py::cast<int>(d["lanes"]);
    r.cols = vec<double>(d, (p + "_cols").c_str());
    if (r.cols.size() != std::size_t(6) * r.n_ops * r.lanes) throw py::value_error("NodeRun: step rows of the wrong size");
    return r;
}

}  // namespace

void bind_node(py::module_& m) {
    py::class_<NodeRun>(m, "NodeRun")
        .def(py::init([](py::dict plan, py::dict step, py::dict run, std::vector<NodeMemory*> mems) {
                 PlanArrays P;
                 P.t_user = vec<double>(plan, "t_user");
                 P.t_tools = vec<double>(plan, "t_tools");
                 P.t_obs = vec<double>(plan, "t_obs");
                 P.out = vec<i64>(plan, "out");
                 P.w_ptr = vec<i64>(plan, "w_ptr");
                 P.w_seg = vec<int>(plan, "w_seg");
                 P.w_tok = vec<i64>(plan, "w_tok");
                 P.r_ptr = vec<i64>(plan, "r_ptr");
                 P.r_seg = vec<int>(plan, "r_seg");
                 P.r_tok = vec<i64>(plan, "r_tok");
                 P.r_tok_f = vec<double>(plan, "r_tok_f");
                 P.r_sum = vec<double>(plan, "r_sum");
                 P.ca_ptr = vec<i64>(plan, "ca_ptr");
                 P.ca_seg = vec<int>(plan, "ca_seg");
                 P.ce_ptr = vec<i64>(plan, "ce_ptr");
                 P.ce_seg = vec<int>(plan, "ce_seg");
                 P.kid_ptr = vec<i64>(plan, "kid_ptr");
                 P.kid_agent = vec<int>(plan, "kid_agent");
                 P.agent_ptr = vec<i64>(plan, "agent_ptr");
                 P.agent_req = vec<int>(plan, "agent_req");
                 P.root_ptr = vec<i64>(plan, "root_ptr");
                 P.root_agent = vec<int>(plan, "root_agent");
                 StepSpec S;
                 S.all = rows(step, "all");
                 S.own = rows(step, "own");
                 S.group = rows(step, "group");
                 S.flush_per_byte = py::cast<double>(step["flush_per_byte"]);
                 S.n_local = py::cast<double>(step["n_local"]);
                 S.log_miss = py::cast<double>(step["log_miss"]);
                 LandingSpec L;
                 L.bw_hbm = py::cast<double>(run["bw_hbm"]);
                 L.bw_hbf = py::cast<double>(run["bw_hbf"]);
                 L.kv_bytes_per_token = py::cast<double>(run["kv_bytes_per_token"]);
                 RunSpec R;
                 R.ranks = py::cast<int>(run["ranks"]);
                 R.n_sessions = py::cast<i64>(run["n_sessions"]);
                 R.bytes_per_token = py::cast<double>(run["bytes_per_token"]);
                 R.first_warmup = py::cast<double>(run["first_warmup"]);
                 R.stall = py::cast<bool>(run["stall"]);
                 R.land = py::cast<bool>(run["land"]);
                 R.ttft_ref = py::cast<double>(run["ttft_ref"]);
                 R.nominal_tpot = py::cast<double>(run["nominal_tpot"]);
                 R.order = vec<i64>(run, "order");
                 R.firsts = vec<i64>(run, "firsts");
                 R.phases = vec<double>(run, "phases");
                 for (auto w : run["windows"]) {
                     auto t = py::cast<py::tuple>(w);
                     R.windows.push_back({py::cast<double>(t[0]), py::cast<double>(t[1]), py::cast<int>(t[2])});
                 }
                 return new NodeRun(std::move(P), std::move(S), L, std::move(R), std::move(mems));
             }),
             py::arg("plan"), py::arg("step"), py::arg("run"), py::arg("mems"), py::keep_alive<1, 5>())
        .def("run_window", &NodeRun::run_window, py::arg("k"), py::call_guard<py::gil_scoped_release>(),
             "Advance to window k's end (or until memory runs out) and take its last sample.")
        .def_property_readonly("oom", &NodeRun::oom)
        .def_property_readonly("now", &NodeRun::now)
        .def_property_readonly("requests", &NodeRun::requests)
        .def_property_readonly("sessions", &NodeRun::sessions)
        .def_property_readonly("max_batch", &NodeRun::max_batch)
        .def_property_readonly("stalled_s", &NodeRun::stalled_s)
        .def("decode_records", [](const NodeRun& r) {
            return py::make_tuple(arr(r.tpot()), arr(r.tpot_w()), arr(r.tpot_t()), arr(r.ttft()), arr(r.ttft_t()));
        }, "(TPOT, its weights, its end times, TTFT, its admission times)")
        .def("observed", [](const NodeRun& r, int k) {
            const Observed& o = r.observed(k);
            py::array_t<std::int32_t> cls(py::ssize_t(o.point_classes.size()));
            if (!o.point_classes.empty())
                std::memcpy(cls.mutable_data(), o.point_classes.data(), o.point_classes.size() * sizeof(std::int32_t));
            py::array_t<bool> ints(py::ssize_t(o.sample_int_time.size()));
            for (std::size_t i = 0; i < o.sample_int_time.size(); ++i) ints.mutable_data()[i] = o.sample_int_time[i] != 0;
            return py::make_tuple(table(o.samples), ints, table(o.points), cls, o.evicted_at_warmup);
        }, py::arg("k"), "(samples, their times as simpy's int 0, operating points, classes present per point as "
                         "bits, blocks evicted at warm-up end)");
}
