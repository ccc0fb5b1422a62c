// Python binding of the native node memory (memory.hpp): bind_memory(m) adds NodeMemory, Clock, Recorder,
// PolicySpec, PlanSegments and policy_spec/plan_segments to lachesis.node._core.  Results come back in the
// Python reference's own forms (dicts in the same key order, tuples, int64 arrays).
#include <algorithm>
#include <chrono>
#include <cstring>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "memory.hpp"

namespace py = pybind11;
using namespace lachesis;

namespace {

py::array_t<i64> as_array(const std::vector<i64>& v) {
    py::array_t<i64> a(py::ssize_t(v.size()));
    if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(i64));
    return a;
}

std::string sid(i64 inst, int seg) { return std::to_string(inst) + ":" + std::to_string(seg); }

// The PolicySpec of a built-in policy object (exact type, so a user's subclass stays on the reference
// path); None for any other policy.
py::object policy_spec(py::object policy) {
    py::module_ pol = py::module_::import("lachesis.memory.policies");
    policy = pol.attr("as_policy")(policy);
    py::handle t = py::type::handle_of(policy);
    PolicySpec s;
    py::object stats = py::module_::import("lachesis.memory.placement_stats");
    if (t.is(pol.attr("HBMFirst"))) s.kind = PolicyKind::HBM_FIRST;
    else if (t.is(pol.attr("HBMFirstReclaim"))) s.kind = PolicyKind::HBM_FIRST_RECLAIM;
    else if (t.is(pol.attr("DeterministicOnly"))) s.kind = PolicyKind::DETERMINISTIC;
    else if (t.is(pol.attr("Lachesis"))) {
        s.kind = PolicyKind::LACHESIS;
        std::string e = py::str(policy.attr("size_estimate"));
        if (e == "held") s.size_estimate = SizeEstimate::HELD;
        else if (e == "mean_floor") s.size_estimate = SizeEstimate::MEAN_FLOOR;
        else if (e == "spawn") s.size_estimate = SizeEstimate::SPAWN;
        else return py::none();
    } else if (t.is(pol.attr("ReuseThreshold"))) {
        s.kind = PolicyKind::RHO_THRESHOLD;
        s.quantile = policy.attr("quantile").cast<double>();
        py::object th = policy.attr("threshold");
        s.threshold = th.is_none() ? std::numeric_limits<double>::quiet_NaN() : th.cast<double>();
    } else if (t.is(pol.attr("Oracle"))) s.kind = PolicyKind::ORACLE;
    else return py::none();
    s.rho_window = py::getattr(policy, "rho_window", stats.attr("RHO_WINDOW")).cast<i64>();
    return py::cast(s);
}

// PlanSegments from a lachesis.node.plan.Plan (its per-segment columns).
std::shared_ptr<PlanSegments> plan_segments(py::object plan) {
    auto p = std::make_shared<PlanSegments>();
    py::list cls = plan.attr("seg_class").attr("tolist")();
    p->seg_class.reserve(cls.size());
    for (auto c : cls) p->seg_class.push_back(seg_class_code(py::str(c)));
    p->seg_key = plan.attr("seg_key").attr("tolist")().cast<std::vector<double>>();
    p->seg_tokens = plan.attr("seg_tokens").attr("tolist")().cast<std::vector<i64>>();
    p->seg_reads = plan.attr("seg_reads").attr("tolist")().cast<std::vector<i64>>();
    return p;
}

py::dict class_dict(const std::vector<std::pair<int, i64>>& v) {
    py::dict d;
    for (auto& [c, t] : v) d[py::str(SEG_CLASS_NAMES[c])] = t;
    return d;
}

}  // namespace

void bind_memory(py::module_& m) {
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const OutOfMemory& e) {
            py::object cls = py::module_::import("lachesis.node.node_memory").attr("OutOfMemory");
            PyErr_SetObject(cls.ptr(), py::str(e.what()).ptr());
        } catch (const AllocationError& e) {
            py::object cls = py::module_::import("lachesis.kv").attr("AllocationError");
            PyErr_SetObject(cls.ptr(), py::str(e.what()).ptr());
        }
    });

    py::class_<PolicySpec>(m, "PolicySpec")
        .def(py::init<>())
        .def_property_readonly("kind", [](const PolicySpec& s) { return int(s.kind); })
        .def_property_readonly("size_estimate", [](const PolicySpec& s) { return int(s.size_estimate); })
        .def_readonly("quantile", &PolicySpec::quantile)
        .def_readonly("threshold", &PolicySpec::threshold)
        .def_readonly("rho_window", &PolicySpec::rho_window)
        .def_property_readonly("frees_at_boundary", &PolicySpec::frees_at_boundary);
    m.def("policy_spec", &policy_spec, py::arg("policy"),
          "The native form of a built-in policy (object or spec string); None for any other policy.");

    py::class_<PlanSegments, std::shared_ptr<PlanSegments>>(m, "PlanSegments");
    m.def("plan_segments", &plan_segments, py::arg("plan"), "A plan's per-segment columns, for NodeMemory.");

    py::class_<Clock>(m, "Clock")
        .def(py::init([](py::object times, py::object plan) {
                 // clairvoyance.Clock(times, plan.sessions, plan.fingerprint)
                 if (py::str(times.attr("fingerprint")).cast<std::string>() != py::str(plan.attr("fingerprint")).cast<std::string>())
                     throw py::value_error("clairvoyance recorded on trace " + py::repr(times.attr("fingerprint")).cast<std::string>() +
                                           ", not on this run's " + py::repr(plan.attr("fingerprint")).cast<std::string>());
                 auto col = [&](const char* f) { return times.attr(f).attr("tolist")(); };
                 return new Clock(col("session").cast<std::vector<int>>(), col("occurrence").cast<std::vector<int>>(),
                                  col("segment").cast<std::vector<int>>(), col("offset_s").cast<std::vector<double>>());
             }),
             py::arg("times"), py::arg("plan"))
        .def("started", &Clock::started)
        .def("close_s", &Clock::close_s);

    py::class_<Recorder>(m, "Recorder")
        .def(py::init<>())
        .def("started", &Recorder::started)
        .def("closed", &Recorder::closed)
        .def("close_times_arrays", [](const Recorder& r) {
            auto [s, o, g, off] = r.close_times();
            return py::make_tuple(py::array_t<std::int32_t>(py::ssize_t(s.size()), s.data()),
                                  py::array_t<std::int32_t>(py::ssize_t(o.size()), o.data()),
                                  py::array_t<std::int32_t>(py::ssize_t(g.size()), g.data()),
                                  py::array_t<double>(py::ssize_t(off.size()), off.data()));
        });

    py::class_<NodeMemory>(m, "NodeMemory")
        .def(py::init([](i64 hbm, i64 hbf, i64 bt, i64 bpt, const PolicySpec& spec, std::shared_ptr<PlanSegments> plan,
                         Clock* clock, Recorder* recorder) {
                 return new NodeMemory(hbm, hbf, bt, bpt, spec, plan, clock, recorder);
             }),
             py::arg("hbm_blocks"), py::arg("hbf_blocks"), py::arg("block_tokens"), py::arg("bytes_per_token"),
             py::arg("policy"), py::arg("plan"), py::arg("clock") = nullptr, py::arg("recorder") = nullptr,
             py::keep_alive<1, 8>(), py::keep_alive<1, 9>())  // self keeps clock and recorder
        .def("aged_chunks", &NodeMemory::aged_chunks)
        .def("age", &NodeMemory::age, py::arg("order"))
        .def("live_tokens", [](const NodeMemory& n) { return class_dict(n.live_tokens()); })
        .def("session_start", &NodeMemory::session_start, py::arg("inst"), py::arg("session"), py::arg("t0"))
        .def("write_request",
             [](NodeMemory& n, i64 inst, const std::vector<std::pair<int, i64>>& writes, double now) {
                 std::vector<int> s(writes.size());
                 std::vector<i64> t(writes.size());
                 for (std::size_t j = 0; j < writes.size(); ++j) { s[j] = writes[j].first; t[j] = writes[j].second; }
                 return n.write_request(inst, s.data(), t.data(), s.size(), now);
             },
             py::arg("inst"), py::arg("writes"), py::arg("now"))
        .def("close", &NodeMemory::close, py::arg("inst"), py::arg("seg"), py::arg("now"))
        .def("session_end", &NodeMemory::session_end, py::arg("inst"), py::arg("now"))
        .def("hbm_tokens",
             [](const NodeMemory& n, i64 inst, const std::vector<int>& segs, const std::vector<double>& tokens,
                const std::vector<i64>& tokens_int) {
                 if (tokens.size() != segs.size() || tokens_int.size() != segs.size())
                     throw py::value_error("hbm_tokens: segs, tokens and tokens_int differ in length");
                 return n.hbm_tokens(inst, segs.data(), tokens.data(), tokens_int.data(), segs.size());
             },
             py::arg("inst"), py::arg("segs"), py::arg("tokens"), py::arg("tokens_int"))
        .def("snapshot", [](const NodeMemory& n) { auto s = n.snapshot(); return py::make_tuple(s[0], s[1], s[2], s[3], s[4], s[5]); })
        .def("mark", &NodeMemory::mark, py::arg("window") = 0)
        .def("bytes_by_class_tier",
             [](const NodeMemory& n, int window) {
                 py::dict d;
                 for (auto& [c, h, f] : n.bytes_by_class_tier(window)) {
                     py::dict e;
                     e["hbm"] = h;
                     e["hbf"] = f;
                     d[py::str(SEG_CLASS_NAMES[c])] = e;
                 }
                 return d;
             },
             py::arg("window") = 0)
        .def("totals",
             [](const NodeMemory& n) {
                 // written.WriteTotals.as_dict()'s form
                 auto t = n.totals();
                 py::dict by;
                 std::vector<std::pair<std::string, std::array<i64, 2>>> v;
                 for (auto& [c, a] : t.by_class) v.emplace_back(SEG_CLASS_NAMES[c], a);
                 std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first < b.first; });
                 for (auto& [c, a] : v) by[py::str(c)] = py::list(py::make_tuple(a[0], a[1]));
                 py::dict d;
                 d["hbm_tokens"] = t.tokens[0];
                 d["hbf_tokens"] = t.tokens[1];
                 d["hbm_bytes"] = t.tokens[0] * t.bytes_per_token;
                 d["hbf_bytes"] = t.tokens[1] * t.bytes_per_token;
                 d["hbm_blocks"] = t.blocks[0];
                 d["hbf_blocks"] = t.blocks[1];
                 d["evicted_blocks"] = t.evicted_blocks;
                 d["by_class"] = by;
                 return d;
             })
        .def("totals_fields",
             [](const NodeMemory& n) {
                 // written.WriteTotals' fields: tokens, tokens by class (first-open order), blocks, evicted, bytes/token
                 auto t = n.totals();
                 py::dict by;
                 for (auto& [c, a] : t.by_class) by[py::str(SEG_CLASS_NAMES[c])] = py::make_tuple(a[0], a[1]);
                 return py::make_tuple(py::make_tuple(t.tokens[0], t.tokens[1]), by,
                                       py::make_tuple(t.blocks[0], t.blocks[1]), t.evicted_blocks, t.bytes_per_token);
             })
        .def_property_readonly("evicted_blocks", &NodeMemory::evicted_blocks)
        .def_property_readonly("frees_at_boundary", &NodeMemory::frees_at_boundary)
        .def("record_events", &NodeMemory::record_events, py::arg("on") = true)
        .def("recording_events", &NodeMemory::recording_events)
        .def("events",
             [](const NodeMemory& n) {
                 // node_memory.Memory.events' tuples
                 py::list out;
                 for (const MemEvent& e : n.events()) {
                     switch (e.kind) {
                         case 0: out.append(py::make_tuple(e.now, "write", sid(e.inst, e.seg), SEG_CLASS_NAMES[e.seg_class],
                                                           e.tokens, std::to_string(e.inst), e.key)); break;
                         case 1: out.append(py::make_tuple(e.now, "read", sid(e.inst, e.seg), e.tokens)); break;
                         case 2: out.append(py::make_tuple(e.now, "close", sid(e.inst, e.seg))); break;
                         default: out.append(py::make_tuple(e.now, "session_end", std::to_string(e.inst)));
                     }
                 }
                 return out;
             })
        .def("last_write_blocks",
             [](const NodeMemory& n) {
                 py::list out;
                 for (auto& v : n.last_write_blocks()) out.append(as_array(v));
                 return out;
             })
        .def("free_lists", [](const NodeMemory& n) { auto f = n.free_lists(); return py::make_tuple(as_array(f[0]), as_array(f[1])); })
        .def("blocks_of", [](const NodeMemory& n, i64 inst, int seg) { return as_array(n.blocks_of(inst, seg)); })
        .def("replay_timed",
             [](NodeMemory& n, py::array_t<std::int8_t> op, py::array_t<i64> inst, py::array_t<std::int32_t> seg,
                py::array_t<i64> tok, py::array_t<double> now) {
                 // Benchmark only: replay recorded calls without crossing the binding per call; returns the
                 // seconds spent.  op 0 session_start(inst, session=seg, t0=now); 1 write_request of the next
                 // tok rows (each op 9: seg, tokens); 3 close; 4 session_end; 5 mark(seg).
                 auto o = op.unchecked<1>();
                 auto in = inst.unchecked<1>();
                 auto sg = seg.unchecked<1>();
                 auto tk = tok.unchecked<1>();
                 auto nw = now.unchecked<1>();
                 py::ssize_t m = o.shape(0);
                 std::vector<int> ws;
                 std::vector<i64> wt;
                 auto t0 = std::chrono::steady_clock::now();
                 for (py::ssize_t i = 0; i < m; ++i) {
                     switch (o(i)) {
                         case 0: n.session_start(in(i), sg(i), nw(i)); break;
                         case 1: {
                             ws.clear();
                             wt.clear();
                             for (i64 j = 1; j <= tk(i); ++j) { ws.push_back(sg(i + j)); wt.push_back(tk(i + j)); }
                             n.write_request(in(i), ws.data(), wt.data(), ws.size(), nw(i));
                             i += tk(i);
                             break;
                         }
                         case 3: n.close(in(i), sg(i), nw(i)); break;
                         case 4: n.session_end(in(i), nw(i)); break;
                         case 5: n.mark(sg(i)); break;
                         default: throw py::value_error("replay_timed: bad op");
                     }
                 }
                 return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
             })
        .def("cached_blocks", &NodeMemory::cached_blocks)
        .def("used_blocks", &NodeMemory::used_blocks);
}
