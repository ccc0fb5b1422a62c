// The node memory's binding (memory/node_memory.hpp and its parts): the typed seam objects Python builds
// (Classes, MemorySpec, PolicyOptions, a Policy, PlanSegments, Clock, Recorder), NodeMemory itself, the read-only
// view a Python policy is given (protocol.MemoryView, answered by the native table) and the totals it returns.
#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <optional>

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "../memory/node_memory.hpp"
#include "../memory/policies.hpp"
#include "common.hpp"

namespace lachesis::bind {

namespace {

// The Python classes of node_memory.OutOfMemory and kv.AllocationError, handed over by lachesis.node.native (held
// for the interpreter's life).
PyObject* out_of_memory_class = nullptr;
PyObject* allocation_error_class = nullptr;

void set_error_classes(py::object out_of_memory, py::object allocation_error) {
    Py_XDECREF(out_of_memory_class);
    Py_XDECREF(allocation_error_class);
    out_of_memory_class = out_of_memory.release().ptr();
    allocation_error_class = allocation_error.release().ptr();
}

// What a Python policy's view reads, through the memory it belongs to (gone once the memory is: then an error).
struct PyMemoryRef {
    std::weak_ptr<NodeMemory> mem;
    std::shared_ptr<NodeMemory> get() const {
        auto m = mem.lock();
        if (!m) throw py::value_error("this view's node memory is gone");
        return m;
    }
};

int tier_of(int t) {  // kv.as_tier's check of an int
    if (t != HBM && t != HBF) throw py::value_error("unknown tier " + std::to_string(t) + "; expected Tier.HBM (0) or Tier.HBF (1)");
    return t;
}

// "inst:seg" / "aged:k" -> (inst, seg); false when the id has neither form
bool parse_id(const std::string& id, i64& inst, int& seg) {
    const auto colon = id.find(':');
    if (colon == std::string::npos) return false;
    try {
        const std::string head = id.substr(0, colon);
        std::size_t used = 0;
        inst = head == "aged" ? -1 : std::stoll(head, &used);
        if (head != "aged" && used != head.size()) return false;
        seg = std::stoi(id.substr(colon + 1), &used);
        return used == id.size() - colon - 1;
    } catch (const std::exception&) {
        return false;
    }
}

int live_row(const NodeMemory& m, const std::string& id, bool worker) {
    i64 inst;
    int seg;
    const int ri = parse_id(id, inst, seg) ? m.table().rows().state_of(inst, seg) : -1;
    if (ri < 0 || (worker && m.table().rows()[ri].cls != m.classes().worker))
        throw py::key_error(std::string(worker ? "worker segment '" : "segment '") + id +
                            "' is not live in the segment table");
    return ri;
}

// The live rows, workers only or all, in open order.
std::vector<int> live_rows(const NodeMemory& m, bool workers) {
    const Rows& rows = m.table().rows();
    std::vector<int> out;
    for (std::size_t ri = 0; ri < rows.rows.size(); ++ri) {
        const SegmentRow& r = rows.rows[ri];
        if (r.live && (!workers || r.cls == m.classes().worker)) out.push_back(int(ri));
    }
    std::sort(out.begin(), out.end(), [&](int a, int b) { return rows[a].open_seq < rows[b].open_seq; });
    return out;
}

// placement_stats.PlacementStats as a Python policy reads it (protocol.MemoryView.stats).
struct PyStats : PyMemoryRef {
    double predicted_rho(const std::string& session_id, const std::string& seg_class) const {
        auto m = get();
        const auto& names = m->classes().names;
        const auto c = std::find(names.begin(), names.end(), seg_class);
        const PlacementStats& s = m->table().stats();
        if (c == names.end()) return s.reuse_node.tokens ? double(s.reuse_node.reads) / double(s.reuse_node.tokens) : NaN;
        i64 inst;
        const Reuse* reuse = nullptr;
        if (session_id == "aged") reuse = m->table().view().session_reuse(-1);
        else {
            try {
                std::size_t used = 0;
                inst = std::stoll(session_id, &used);
                if (used == session_id.size()) reuse = m->table().view().session_reuse(inst);
            } catch (const std::exception&) {
            }
        }
        return s.predicted_rho(reuse, int(c - names.begin()));
    }
};

// allocator.TableView as a Python policy reads it (protocol.MemoryView).
struct PyView : PyMemoryRef {};

// A policy written in Python (protocol.Policy), run by the native table: each decision calls ``decide`` with the
// row's fields and this memory's view; lachesis.node.native builds the SegmentInfo and asks the policy.
struct CallbackPolicy final : Policy {
    py::object decide;
    py::object view;
    bool reads_rho_quantile() const override { return true; }
    bool calls_python() const override { return true; }
    int tier(const SegmentInfo& s, TableView&) override {
        py::gil_scoped_acquire gil;  // held already in a run that calls Python (NodeRun::calls_python)
        const SegmentRow& r = s.row;
        return decide(r.inst, r.seg, r.n_blocks, r.n_tokens, s.new_blocks, r.reads, r.close_s, r.final_tokens, view)
            .cast<int>();
    }
};

struct PyPlanSegments : PlanSegments {
    Array<std::int32_t> a_class;
    Array<double> a_key;
    Array<i64> a_tokens, a_reads;
};

// written.WriteTotals' fields, classes by name.
struct PyWriteTotals {
    py::tuple tokens, blocks;
    py::dict tokens_by_class;
    i64 evicted_blocks, bytes_per_token;
};

py::str class_name(const NodeMemory& m, int c) { return py::str(m.classes().names[std::size_t(c)]); }

}  // namespace

void bind_memory(py::module_& m) {
    m.def("set_error_classes", &set_error_classes, py::arg("out_of_memory"), py::arg("allocation_error"),
          "The exceptions the core raises as node_memory.OutOfMemory and kv.AllocationError.");
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const OutOfMemory& e) {
            PyErr_SetString(out_of_memory_class ? out_of_memory_class : PyExc_RuntimeError, e.what());
        } catch (const AllocationError& e) {
            PyErr_SetString(allocation_error_class ? allocation_error_class : PyExc_RuntimeError, e.what());
        }
    });

    py::class_<Classes, std::shared_ptr<Classes>>(m, "Classes", "kv.SEG_CLASSES as the core numbers them.")
        .def(py::init([](std::vector<std::string> names, std::vector<bool> short_lived, int worker, int reviewer,
                         int aged) {
                 return std::make_shared<Classes>(std::move(names),
                                                  std::vector<char>(short_lived.begin(), short_lived.end()), worker,
                                                  reviewer, aged);
             }),
             py::kw_only(), py::arg("names"), py::arg("short_lived"), py::arg("worker"), py::arg("reviewer"),
             py::arg("aged"))
        .def_readonly("names", &Classes::names)
        .def_readonly("worker", &Classes::worker)
        .def_readonly("reviewer", &Classes::reviewer)
        .def_readonly("aged", &Classes::aged);

    py::class_<MemorySpec>(m, "MemorySpec", "node_memory.MemorySizes and the constants the memory reads.")
        .def(py::init([](i64 hbm, i64 hbf, i64 bt, i64 bpt, i64 chunk, double alpha) {
                 return MemorySpec{hbm, hbf, bt, bpt, chunk, alpha};
             }),
             py::kw_only(), py::arg("hbm_blocks"), py::arg("hbf_blocks"), py::arg("block_tokens"),
             py::arg("bytes_per_token"), py::arg("aged_chunk_tokens"), py::arg("ema_alpha"))
        .def_readonly("hbm_blocks", &MemorySpec::hbm_blocks)
        .def_readonly("hbf_blocks", &MemorySpec::hbf_blocks)
        .def_readonly("block_tokens", &MemorySpec::block_tokens)
        .def_readonly("bytes_per_token", &MemorySpec::bytes_per_token)
        .def_readonly("aged_chunk_tokens", &MemorySpec::aged_chunk_tokens)
        .def_readonly("ema_alpha", &MemorySpec::ema_alpha);

    py::class_<PolicyOptions>(m, "PolicyOptions", "protocol.Policy's attributes the table honours.")
        .def(py::init([](bool frees, bool reclaims, i64 window) { return PolicyOptions{frees, reclaims, window}; }),
             py::kw_only(), py::arg("frees_at_boundary"), py::arg("reclaims_cached_hbm"), py::arg("rho_window"))
        .def_readonly("frees_at_boundary", &PolicyOptions::frees_at_boundary)
        .def_readonly("reclaims_cached_hbm", &PolicyOptions::reclaims_cached_hbm)
        .def_readonly("rho_window", &PolicyOptions::rho_window);

    py::class_<Policy, std::shared_ptr<Policy>>(m, "Policy", "A placement rule the native table runs.")
        .def_property_readonly("options", [](const Policy& p) { return p.options; })
        .def_property_readonly("calls_python", &Policy::calls_python);
    m.def("policy_kinds", &policy_kinds, "The native policy classes (lachesis.registry's PolicyEntry.native).");
    m.def("make_policy",
          [](const std::string& kind, std::map<std::string, double> numbers, std::map<std::string, std::string> words,
             const PolicyOptions& options, std::shared_ptr<Classes> classes) {
              return std::shared_ptr<Policy>(make_policy(kind, Knobs{std::move(numbers), std::move(words)}, options,
                                                         classes.get()));
          },
          py::kw_only(), py::arg("kind"), py::arg("numbers"), py::arg("words"), py::arg("options"), py::arg("classes"),
          py::keep_alive<0, 5>(), "A built-in policy's native rule, its knobs by name (a number NaN: None).");
    m.def("callback_policy",
          [](py::function decide, const PolicyOptions& options) {
              auto p = std::make_shared<CallbackPolicy>();
              p->decide = std::move(decide);
              p->options = options;
              return std::shared_ptr<Policy>(p);
          },
          py::kw_only(), py::arg("decide"), py::arg("options"),
          "A policy written in Python: decide(inst, seg, n_blocks, n_tokens, new_blocks, read_tokens, close_s, "
          "final_tokens, view) -> tier, for one memory.");

    py::class_<PyPlanSegments, std::shared_ptr<PyPlanSegments>>(m, "PlanSegments",
                                                                "plan.Plan.segment_columns, read in place.")
        .def(py::init([](Array<std::int32_t> cls, Array<double> key, Array<i64> tokens, Array<i64> reads,
                         std::shared_ptr<Classes> classes) {
                 auto p = std::make_shared<PyPlanSegments>();
                 p->a_class = cls;
                 p->a_key = key;
                 p->a_tokens = tokens;
                 p->a_reads = reads;
                 p->seg_class = span(p->a_class, "seg_class");
                 p->seg_key = span(p->a_key, "seg_key");
                 p->seg_tokens = span(p->a_tokens, "seg_tokens");
                 p->seg_reads = span(p->a_reads, "seg_reads");
                 p->check(*classes);
                 return p;
             }),
             py::kw_only(), py::arg("seg_class"), py::arg("seg_key"), py::arg("seg_tokens"), py::arg("seg_reads"),
             py::arg("classes"))
        .def_property_readonly("n_segments", [](const PyPlanSegments& p) { return p.seg_class.size(); });

    py::class_<Clock>(m, "Clock", "clairvoyance.Clock over a CloseTimes' columns.")
        .def(py::init([](Array<std::int32_t> session, Array<std::int32_t> occurrence, Array<std::int32_t> segment,
                         Array<double> offset_s) {
                 auto v = [](const Array<std::int32_t>& a, const char* f) {
                     const auto s = span(a, f);
                     return std::vector<int>(s.begin(), s.end());
                 };
                 return new Clock(v(session, "session"), v(occurrence, "occurrence"), v(segment, "segment"),
                                  to_vector(offset_s, "offset_s"));
             }),
             py::kw_only(), py::arg("session"), py::arg("occurrence"), py::arg("segment"), py::arg("offset_s"))
        .def("started", &Clock::started, py::arg("inst"), py::arg("session"), py::arg("t0"))
        .def("close_s", &Clock::close_s, py::arg("inst"), py::arg("segment"));

    py::class_<Recorder>(m, "Recorder", "clairvoyance.Recorder.")
        .def(py::init<>())
        .def("started", &Recorder::started, py::arg("inst"), py::arg("session"), py::arg("t0"))
        .def("closed", &Recorder::closed, py::arg("inst"), py::arg("segment"), py::arg("t"))
        .def("close_times",
             [](const Recorder& r) {
                 auto [s, o, g, off] = r.close_times();
                 auto i32 = [](const std::vector<int>& v) {
                     return to_array(std::vector<std::int32_t>(v.begin(), v.end()));
                 };
                 return py::make_tuple(i32(s), i32(o), i32(g), to_array(off));
             },
             "CloseTimes' columns (session, occurrence, segment, offset_s).");

    py::class_<PyWriteTotals>(m, "WriteTotals", "written.WriteTotals' fields (classes by name, first-open order).")
        .def_readonly("tokens", &PyWriteTotals::tokens)
        .def_readonly("tokens_by_class", &PyWriteTotals::tokens_by_class)
        .def_readonly("blocks", &PyWriteTotals::blocks)
        .def_readonly("evicted_blocks", &PyWriteTotals::evicted_blocks)
        .def_readonly("bytes_per_token", &PyWriteTotals::bytes_per_token);

    py::class_<PyStats>(m, "PlacementStats", "placement_stats.PlacementStats as a policy reads it.")
        .def_property_readonly("alpha", [](const PyStats& s) { return s.get()->table().stats().alpha; })
        .def_property_readonly("rho_window", [](const PyStats& s) { return s.get()->table().stats().rho_window; })
        .def_property_readonly("closed_workers", [](const PyStats& s) { return s.get()->table().stats().closed_workers; })
        .def_property_readonly("closed_worker_blocks",
                               [](const PyStats& s) { return s.get()->table().stats().closed_worker_blocks; })
        .def_property_readonly("closed_reviewers",
                               [](const PyStats& s) { return s.get()->table().stats().closed_reviewers; })
        .def_property_readonly("reviewer_blocks_ema",
                               [](const PyStats& s) { return s.get()->table().stats().reviewer_blocks_ema; })
        .def_property_readonly("live_reviewers_ema",
                               [](const PyStats& s) { return s.get()->table().stats().live_reviewers_ema; })
        .def_property_readonly("mean_worker_blocks",
                               [](const PyStats& s) { return s.get()->table().stats().mean_worker_blocks(); })
        .def("reviewer_reserve",
             [](const PyStats& s, i64 live) { return s.get()->table().stats().reviewer_reserve(live); },
             py::arg("live_reviewer_hbm_blocks"))
        .def("predicted_rho", &PyStats::predicted_rho, py::arg("session_id"), py::arg("seg_class"))
        .def("rho_quantile", [](const PyStats& s, double q) { return s.get()->table().stats().rho_quantile(q); },
             py::arg("q"));

    py::class_<PyView>(m, "TableView", "allocator.TableView: what a policy may read of the native table.")
        .def_property_readonly("stats", [](const PyView& v) { return PyStats{{v.mem}}; })
        .def("total", [](const PyView& v, int t) { return v.get()->table().allocator().total(tier_of(t)); }, py::arg("tier"))
        .def("free", [](const PyView& v, int t) { return v.get()->table().allocator().free(tier_of(t)); }, py::arg("tier"))
        .def("used", [](const PyView& v, int t) { return v.get()->table().allocator().used(tier_of(t)); }, py::arg("tier"))
        .def("cached", [](const PyView& v, int t) { return v.get()->table().cache().cached(tier_of(t)); }, py::arg("tier"))
        .def("live_reviewer_hbm_blocks", [](const PyView& v) { return v.get()->table().live().reviewer_hbm_blocks; })
        .def("workers_ahead",
             [](const PyView& v, const std::string& id) {
                 auto m = v.get();
                 const int ri = live_row(*m, id, true);
                 const Rows& rows = m->table().rows();
                 const WorkerRanking& w = m->table().live().workers;
                 py::list ahead;
                 for (auto it = w.ranked.begin(), end = w.ahead_end(rows[ri], ri); it != end; ++it)
                     ahead.append(rows[std::get<2>(*it)].n_blocks);
                 return py::make_tuple(py::iter(ahead), rows[ri].n_blocks, w.hbm_blocks);
             },
             py::arg("segment_id"))
        .def("spawns_ahead",
             [](const PyView& v, const std::string& id) {
                 auto m = v.get();
                 const int ri = live_row(*m, id, true);
                 const Rows& rows = m->table().rows();
                 const WorkerRanking& w = m->table().live().workers;
                 py::list ahead;
                 for (auto it = w.ranked.begin(), end = w.ahead_end(rows[ri], ri); it != end; ++it) {
                     const Ranked& r = rows[std::get<2>(*it)].ranked;
                     ahead.append(py::make_tuple(r.spawn_blocks, r.spawn_mean));
                 }
                 const Ranked& me = rows[ri].ranked;
                 return py::make_tuple(py::iter(ahead), py::make_tuple(me.spawn_blocks, me.spawn_mean), w.hbm_blocks);
             },
             py::arg("segment_id"))
        .def("demand_ahead",
             [](const PyView& v, const std::string& id) {
                 auto m = v.get();
                 const auto d = m->table().view().demand_ahead(live_row(*m, id, false));
                 return py::make_tuple(d[0], d[1], d[2]);
             },
             py::arg("segment_id"))
        .def("live_workers",
             [](const PyView& v) {
                 auto m = v.get();
                 const Rows& rows = m->table().rows();
                 const std::vector<int> live = live_rows(*m, true);
                 py::list ids;
                 std::vector<double> key;
                 std::vector<i64> blocks, hbm;
                 for (int ri : live) {
                     ids.append(segment_id(rows[ri].inst, rows[ri].seg));
                     key.push_back(rows[ri].rank_key);
                     blocks.push_back(rows[ri].n_blocks);
                     hbm.push_back(rows[ri].n_hbm);
                 }
                 py::object obj = py::module_::import("numpy").attr("array")(ids, py::arg("dtype") = "object");
                 return py::make_tuple(obj, to_array(key), to_array(blocks), to_array(hbm));
             })
        .def("worker_position",
             [](const PyView& v, const std::string& id) {
                 auto m = v.get();
                 const int ri = live_row(*m, id, true);
                 const std::vector<int> live = live_rows(*m, true);
                 return std::find(live.begin(), live.end(), ri) - live.begin();
             },
             py::arg("segment_id"))
        .def("live_segments",
             [](const PyView& v) {
                 auto m = v.get();
                 const Rows& rows = m->table().rows();
                 std::vector<double> close, final_blocks;
                 std::vector<i64> blocks, hbm;
                 for (int ri : live_rows(*m, false)) {
                     close.push_back(rows[ri].close_s);
                     final_blocks.push_back(rows[ri].final_blocks);
                     blocks.push_back(rows[ri].n_blocks);
                     hbm.push_back(rows[ri].n_hbm);
                 }
                 return py::make_tuple(to_array(close), to_array(final_blocks), to_array(blocks), to_array(hbm));
             })
        .def("segment_position",
             [](const PyView& v, const std::string& id) {
                 auto m = v.get();
                 const int ri = live_row(*m, id, false);
                 const std::vector<int> live = live_rows(*m, false);
                 return std::find(live.begin(), live.end(), ri) - live.begin();
             },
             py::arg("segment_id"));

    py::class_<NodeMemory, std::shared_ptr<NodeMemory>>(m, "NodeMemory", "node_memory.Memory, natively.")
        .def(py::init([](const MemorySpec& spec, std::shared_ptr<Policy> policy, std::shared_ptr<PyPlanSegments> plan,
                         std::shared_ptr<Classes> classes, std::optional<Clock*> clock,
                         std::optional<Recorder*> recorder) {
                 auto mem = std::make_shared<NodeMemory>(spec, policy, plan, classes, clock.value_or(nullptr),
                                                         recorder.value_or(nullptr));
                 if (auto* cb = dynamic_cast<CallbackPolicy*>(policy.get())) {
                     if (cb->view) throw py::value_error("a policy written in Python serves one node memory");
                     cb->view = py::cast(PyView{{mem}});
                 }
                 return mem;
             }),
             py::kw_only(), py::arg("spec"), py::arg("policy"), py::arg("plan"), py::arg("classes"),
             py::arg("clock") = std::nullopt, py::arg("recorder") = std::nullopt, py::keep_alive<1, 6>(),
             py::keep_alive<1, 7>())
        .def("aged_chunks", &NodeMemory::aged_chunks)
        .def("age", [](NodeMemory& n, Array<i64> order) {
                 const auto s = span(order, "order");
                 n.age(s.data(), s.size());
             }, py::arg("order"))
        .def("live_tokens",
             [](const NodeMemory& n) {
                 py::dict d;
                 for (auto& [c, t] : n.live_tokens()) d[class_name(n, c)] = t;
                 return d;
             })
        .def("session_start", &NodeMemory::session_start, py::arg("inst"), py::arg("session"), py::arg("t0"))
        .def("write_request",
             [](NodeMemory& n, i64 inst, const std::vector<std::pair<int, i64>>& writes, double now) {
                 std::vector<int> s(writes.size());
                 std::vector<i64> t(writes.size());
                 for (std::size_t j = 0; j < writes.size(); ++j) {
                     s[j] = writes[j].first;
                     t[j] = writes[j].second;
                 }
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
        .def("snapshot",
             [](const NodeMemory& n) {
                 const auto s = n.snapshot();
                 return py::make_tuple(s[0], s[1], s[2], s[3], s[4], s[5]);
             })
        .def("mark", &NodeMemory::mark, py::arg("window") = 0)
        .def("bytes_by_class_tier",
             [](const NodeMemory& n, int window) {
                 py::dict d;
                 for (auto& [c, h, f] : n.bytes_by_class_tier(window)) {
                     py::dict e;
                     e["hbm"] = h;
                     e["hbf"] = f;
                     d[class_name(n, c)] = e;
                 }
                 return d;
             },
             py::arg("window") = 0)
        .def("totals",
             [](const NodeMemory& n) {
                 const WriteTotals t = n.totals();
                 py::dict by;
                 for (auto& [c, a] : t.tokens_by_class) by[class_name(n, c)] = py::make_tuple(a[0], a[1]);
                 return PyWriteTotals{py::make_tuple(t.tokens[0], t.tokens[1]), py::make_tuple(t.blocks[0], t.blocks[1]),
                                      by, t.evicted_blocks, t.bytes_per_token};
             })
        .def_property_readonly("evicted_blocks", &NodeMemory::evicted_blocks)
        .def_property_readonly("frees_at_boundary", &NodeMemory::frees_at_boundary)
        .def_property_readonly("view", [](const std::shared_ptr<NodeMemory>& n) { return PyView{{n}}; },
                               "The read-only view a policy of this memory is given.")
        .def("record_events", &NodeMemory::record_events, py::arg("on") = true)
        .def("recording_events", &NodeMemory::recording_events)
        .def("events",
             [](const NodeMemory& n) {
                 // node_memory.Memory.events' tuples
                 py::list out;
                 for (const MemEvent& e : n.events()) {
                     const std::string sid = segment_id(e.inst, e.seg);
                     switch (e.kind) {
                         case 0: out.append(py::make_tuple(e.now, "write", sid, class_name(n, e.seg_class), e.tokens,
                                                           std::to_string(e.inst), e.key)); break;
                         case 1: out.append(py::make_tuple(e.now, "read", sid, e.tokens)); break;
                         case 2: out.append(py::make_tuple(e.now, "close", sid)); break;
                         default: out.append(py::make_tuple(e.now, "session_end", std::to_string(e.inst)));
                     }
                 }
                 return out;
             })
        .def("last_write_blocks",
             [](const NodeMemory& n) {
                 py::list out;
                 for (auto& v : n.last_write_blocks()) out.append(to_array(v));
                 return out;
             })
        .def("free_lists",
             [](const NodeMemory& n) {
                 auto f = n.free_lists();
                 return py::make_tuple(to_array(f[0]), to_array(f[1]));
             })
        .def("blocks_of", [](const NodeMemory& n, i64 inst, int seg) { return to_array(n.blocks_of(inst, seg)); },
             py::arg("inst"), py::arg("seg"))
        .def("cached_blocks", &NodeMemory::cached_blocks)
        .def("used_blocks", &NodeMemory::used_blocks)
        .def("replay_timed",
             [](NodeMemory& n, Array<std::int8_t> op, Array<i64> inst, Array<std::int32_t> seg, Array<i64> tok,
                Array<double> now) {
                 // Benchmark only: replay recorded calls without crossing the binding per call; returns the seconds
                 // spent.  op 0 session_start(inst, session=seg, t0=now); 1 write_request of the next tok rows (each
                 // op 9: seg, tokens); 3 close; 4 session_end; 5 mark(seg).
                 const auto o = span(op, "op");
                 const auto in = span(inst, "inst");
                 const auto sg = span(seg, "seg");
                 const auto tk = span(tok, "tok");
                 const auto nw = span(now, "now");
                 std::vector<int> ws;
                 std::vector<i64> wt;
                 const auto t0 = std::chrono::steady_clock::now();
                 for (std::size_t i = 0; i < o.size(); ++i) {
                     switch (o[i]) {
                         case 0: n.session_start(in[i], sg[i], nw[i]); break;
                         case 1: {
                             ws.clear();
                             wt.clear();
                             for (i64 j = 1; j <= tk[i]; ++j) {
                                 ws.push_back(sg[i + std::size_t(j)]);
                                 wt.push_back(tk[i + std::size_t(j)]);
                             }
                             n.write_request(in[i], ws.data(), wt.data(), ws.size(), nw[i]);
                             i += std::size_t(tk[i]);
                             break;
                         }
                         case 3: n.close(in[i], sg[i], nw[i]); break;
                         case 4: n.session_end(in[i], nw[i]); break;
                         case 5: n.mark(sg[i]); break;
                         default: throw py::value_error("replay_timed: bad op");
                     }
                 }
                 return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
             },
             py::arg("op"), py::arg("inst"), py::arg("seg"), py::arg("tok"), py::arg("now"));
}

}  // namespace lachesis::bind
