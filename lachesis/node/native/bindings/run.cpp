// The run's binding (run/simulator.hpp): the typed seam objects Python builds (PlanRequests, StepRows, StepModel,
// Landing, Window, RunSpec), NodeRun itself, and what it returns (Observed, DecodeRecords).
#include <pybind11/stl.h>

#include "../run/simulator.hpp"
#include "common.hpp"

namespace lachesis::bind {

namespace {

struct PyPlanRequests : PlanRequests {
    std::vector<py::object> keep;  // the arrays the spans read
};

// simulator._Observer's observations of one window, as arrays.
struct PyObserved {
    py::array_t<double> samples, points;
    py::array_t<bool> sample_int_time;
    py::array_t<std::int32_t> point_classes;
    i64 evicted_at_warmup;
};

// What a window's result reads of the decode engine and the run's counts.
struct PyDecodeRecords {
    py::array_t<double> tpot, tpot_w, tpot_t, ttft, ttft_t;
    i64 max_batch, requests, sessions;
    double stalled_s, now;
    bool oom;
};

template <class T> py::array_t<double> table(const std::vector<T>& v, std::size_t width) {
    const std::size_t rows = width ? v.size() * sizeof(T) / sizeof(double) / width : 0;
    py::array_t<double> a({py::ssize_t(rows), py::ssize_t(width)});
    if (rows) std::memcpy(a.mutable_data(), v.data(), rows * width * sizeof(double));
    return a;
}

}  // namespace

void bind_run(py::module_& m) {
    py::class_<PyPlanRequests, std::shared_ptr<PyPlanRequests>>(m, "PlanRequests",
                                                                "plan.Plan.request_arrays, read in place.")
        .def(py::init([](Array<double> t_user, Array<double> t_tools, Array<double> t_obs, Array<i64> out,
                         Array<i64> w_ptr, Array<std::int32_t> w_seg, Array<i64> w_tok, Array<i64> r_ptr,
                         Array<std::int32_t> r_seg, Array<i64> r_tok, Array<double> r_tok_f, Array<double> r_sum,
                         Array<i64> ca_ptr, Array<std::int32_t> ca_seg, Array<i64> ce_ptr, Array<std::int32_t> ce_seg,
                         Array<i64> kid_ptr, Array<std::int32_t> kid_agent, Array<i64> agent_ptr,
                         Array<std::int32_t> agent_req, Array<i64> root_ptr, Array<std::int32_t> root_agent) {
                 auto p = std::make_shared<PyPlanRequests>();
                 auto keep = [&](auto& a, const char* field) {
                     p->keep.push_back(a);
                     return span(a, field);
                 };
                 p->t_user = keep(t_user, "t_user");
                 p->t_tools = keep(t_tools, "t_tools");
                 p->t_obs = keep(t_obs, "t_obs");
                 p->out = keep(out, "out");
                 p->w_ptr = keep(w_ptr, "w_ptr");
                 p->w_seg = keep(w_seg, "w_seg");
                 p->w_tok = keep(w_tok, "w_tok");
                 p->r_ptr = keep(r_ptr, "r_ptr");
                 p->r_seg = keep(r_seg, "r_seg");
                 p->r_tok = keep(r_tok, "r_tok");
                 p->r_tok_f = keep(r_tok_f, "r_tok_f");
                 p->r_sum = keep(r_sum, "r_sum");
                 p->ca_ptr = keep(ca_ptr, "ca_ptr");
                 p->ca_seg = keep(ca_seg, "ca_seg");
                 p->ce_ptr = keep(ce_ptr, "ce_ptr");
                 p->ce_seg = keep(ce_seg, "ce_seg");
                 p->kid_ptr = keep(kid_ptr, "kid_ptr");
                 p->kid_agent = keep(kid_agent, "kid_agent");
                 p->agent_ptr = keep(agent_ptr, "agent_ptr");
                 p->agent_req = keep(agent_req, "agent_req");
                 p->root_ptr = keep(root_ptr, "root_ptr");
                 p->root_agent = keep(root_agent, "root_agent");
                 p->check();
                 return p;
             }),
             py::kw_only(), py::arg("t_user"), py::arg("t_tools"), py::arg("t_obs"), py::arg("out"), py::arg("w_ptr"),
             py::arg("w_seg"), py::arg("w_tok"), py::arg("r_ptr"), py::arg("r_seg"), py::arg("r_tok"),
             py::arg("r_tok_f"), py::arg("r_sum"), py::arg("ca_ptr"), py::arg("ca_seg"), py::arg("ce_ptr"),
             py::arg("ce_seg"), py::arg("kid_ptr"), py::arg("kid_agent"), py::arg("agent_ptr"), py::arg("agent_req"),
             py::arg("root_ptr"), py::arg("root_agent"))
        .def_property_readonly("n_requests", [](const PyPlanRequests& p) { return p.t_user.size(); });

    py::class_<StepRows>(m, "StepRows", "One set of operators' coefficient rows (step_cost.dot_rows' operand).")
        .def(py::init([](int n_ops, int lanes, Array<double> cols) {
                 StepRows r;
                 r.n_ops = n_ops;
                 r.lanes = lanes;
                 if (cols.ndim() != 2 || cols.shape(0) != N_INPUTS || cols.shape(1) != py::ssize_t(n_ops) * lanes)
                     throw py::value_error("StepRows: cols must be (inputs, lanes * n_ops)");
                 r.cols.assign(cols.data(), cols.data() + cols.size());
                 return r;
             }),
             py::kw_only(), py::arg("n_ops"), py::arg("lanes"), py::arg("cols"))
        .def_readonly("n_ops", &StepRows::n_ops)
        .def_readonly("lanes", &StepRows::lanes);

    py::class_<StepModel>(m, "StepModel", "step_cost.StepModel / GroupStep: the step's coefficient rows.")
        .def(py::init([](StepRows all, StepRows own, StepRows group, double flush_per_byte, double n_local,
                         double log_miss) { return StepModel{std::move(all), std::move(own), std::move(group),
                                                             flush_per_byte, n_local, log_miss}; }),
             py::kw_only(), py::arg("all"), py::arg("own"), py::arg("group"), py::arg("flush_per_byte"),
             py::arg("n_local"), py::arg("log_miss"))
        .def("one_step",
             [](const StepModel& s, double b, double h, double f, double fl, double hw) {
                 std::vector<double> scratch;
                 return s.one_step(b, h, f, fl, hw, scratch);
             },
             py::arg("batch"), py::arg("kv_hbm_bytes"), py::arg("kv_hbf_bytes"), py::arg("hbf_flush_bytes"),
             py::arg("hbm_write_bytes"));

    py::class_<Landing>(m, "Landing", "kv_landing.landing_fn's bandwidths.")
        .def(py::init([](double h, double f, double kb) { return Landing{h, f, kb}; }), py::kw_only(),
             py::arg("bw_hbm"), py::arg("bw_hbf"), py::arg("kv_bytes_per_token"));

    py::class_<RunWindow>(m, "Window", "simulator.Window.")
        .def(py::init([](double d, double w, int n) { return RunWindow{d, w, n}; }), py::kw_only(),
             py::arg("duration_s"), py::arg("warmup_s"), py::arg("n_samples"))
        .def_readonly("duration_s", &RunWindow::duration_s)
        .def_readonly("warmup_s", &RunWindow::warmup_s)
        .def_readonly("n_samples", &RunWindow::n_samples);

    py::class_<RunSpec>(m, "RunSpec", "A run's node, load, random draws and windows (simulator.RunSetup).")
        .def(py::init([](int ranks, i64 n_sessions, double bytes_per_token, double first_warmup, bool stall, bool land,
                         double ttft_ref, double nominal_tpot, i64 decode_capacity, Landing landing, Array<i64> order,
                         Array<i64> firsts, Array<double> phases, std::vector<RunWindow> windows) {
                 RunSpec r;
                 r.ranks = ranks;
                 r.n_sessions = n_sessions;
                 r.bytes_per_token = bytes_per_token;
                 r.first_warmup = first_warmup;
                 r.stall = stall;
                 r.land = land;
                 r.ttft_ref = ttft_ref;
                 r.nominal_tpot = nominal_tpot;
                 r.decode_capacity = decode_capacity;
                 r.landing = landing;
                 r.order = to_vector(order, "order");
                 r.firsts = to_vector(firsts, "firsts");
                 r.phases = to_vector(phases, "phases");
                 r.windows = std::move(windows);
                 return r;
             }),
             py::kw_only(), py::arg("ranks"), py::arg("n_sessions"), py::arg("bytes_per_token"),
             py::arg("first_warmup"), py::arg("stall"), py::arg("land"), py::arg("ttft_ref"), py::arg("nominal_tpot"),
             py::arg("decode_capacity"), py::arg("landing"), py::arg("order"), py::arg("firsts"), py::arg("phases"),
             py::arg("windows"))
        .def_readonly("ranks", &RunSpec::ranks)
        .def_readonly("n_sessions", &RunSpec::n_sessions);

    py::class_<PyObserved>(m, "Observed", "One window's observations (simulator._Observer's).")
        .def_readonly("samples", &PyObserved::samples, "(t, sessions live, Memory.snapshot...) per sample")
        .def_readonly("sample_int_time", &PyObserved::sample_int_time, "whether a sample's time is simpy's int 0")
        .def_readonly("points", &PyObserved::points, "(t, KV read per step, live KV bytes per class) per point")
        .def_readonly("point_classes", &PyObserved::point_classes, "the classes present per point, as bits")
        .def_readonly("evicted_at_warmup", &PyObserved::evicted_at_warmup);

    py::class_<PyDecodeRecords>(m, "DecodeRecords", "What a window's result reads of the decode engine and the run.")
        .def_readonly("tpot", &PyDecodeRecords::tpot)
        .def_readonly("tpot_w", &PyDecodeRecords::tpot_w)
        .def_readonly("tpot_t", &PyDecodeRecords::tpot_t)
        .def_readonly("ttft", &PyDecodeRecords::ttft)
        .def_readonly("ttft_t", &PyDecodeRecords::ttft_t)
        .def_readonly("max_batch", &PyDecodeRecords::max_batch)
        .def_readonly("stalled_s", &PyDecodeRecords::stalled_s)
        .def_readonly("requests", &PyDecodeRecords::requests)
        .def_readonly("sessions", &PyDecodeRecords::sessions)
        .def_readonly("now", &PyDecodeRecords::now)
        .def_readonly("oom", &PyDecodeRecords::oom);

    py::class_<NodeRun>(m, "NodeRun", "simulator._Run, natively.")
        .def(py::init([](std::shared_ptr<PyPlanRequests> plan, StepModel step, RunSpec spec,
                         std::vector<NodeMemory*> memories) {
                 return new NodeRun(plan, std::move(step), std::move(spec), std::move(memories));
             }),
             py::kw_only(), py::arg("plan"), py::arg("step"), py::arg("spec"), py::arg("memories"),
             py::keep_alive<1, 5>())
        .def("run_window",
             [](NodeRun& r, int k) {
                 // Ctrl-C acts within INTERRUPT_EVERY events: a pending signal's exception leaves the run
                 r.set_interrupt_check([] {
                     py::gil_scoped_acquire gil;
                     if (PyErr_CheckSignals() != 0) throw py::error_already_set();
                 });
                 if (r.calls_python()) {
                     r.run_window(k);  // a policy written in Python: the lock stays held
                 } else {
                     py::gil_scoped_release nogil;
                     r.run_window(k);
                 }
             },
             py::arg("k"), "Advance to window k's end (or until memory runs out) and take its last sample.")
        .def_property_readonly("calls_python", &NodeRun::calls_python)
        .def("observed",
             [](const NodeRun& r, int k) {
                 const Observed& o = r.observed(k);
                 py::array_t<bool> ints(py::ssize_t(o.sample_int_time.size()));
                 for (std::size_t i = 0; i < o.sample_int_time.size(); ++i) ints.mutable_data()[i] = o.sample_int_time[i];
                 return PyObserved{table(o.samples, 8), table(o.points, std::size_t(2 + o.n_classes)), ints,
                                   to_array(std::vector<std::int32_t>(o.point_classes.begin(), o.point_classes.end())),
                                   o.evicted_at_warmup};
             },
             py::arg("k"))
        .def("decode_records", [](const NodeRun& r) {
            const DecodeEngine& e = r.engine();
            return PyDecodeRecords{to_array(e.tpot), to_array(e.tpot_w), to_array(e.tpot_t), to_array(r.ttft()),
                                   to_array(r.ttft_t()), e.max_batch, r.requests(), r.sessions(), e.stalled_s, r.now(),
                                   r.oom()};
        });
}

}  // namespace lachesis::bind
