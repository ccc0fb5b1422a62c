// The Python module lachesis.node._core: the native node memory and run, each bound by its own file; the seam's
// version and the constants the core keeps copies of (tests/node/test_native_contract.py compares them with Python's).
#include <pybind11/stl.h>

#include "../memory/placement_stats.hpp"
#include "../memory/policies.hpp"
#include "../run/decode.hpp"
#include "../run/events.hpp"
#include "common.hpp"

// The seam's version (native.build_record.INTERFACE), defined by setup.py: a module built for another is refused.
#ifndef LACHESIS_INTERFACE
#error "LACHESIS_INTERFACE is defined by setup.py (lachesis/node/native/build_record.py)"
#endif

PYBIND11_MODULE(_core, m) {
    namespace py = pybind11;
    using namespace lachesis;
    m.doc() = "Native core of the Lachesis decode node; the Python modules are the reference it is tested against.";
    m.attr("INTERFACE") = LACHESIS_INTERFACE;
    m.def("copied_constants", [] {
        // what the core copies from Python rather than receives: each Python name and the core's value
        py::dict d;
        d["lachesis.node.decode.FINISHED_TOKENS"] = FINISHED_TOKENS;
        d["lachesis.memory.policies.BUDGET_SLACK"] = BUDGET_SLACK;
        d["lachesis.memory.placement_stats.RESERVE_SLACK"] = RESERVE_SLACK;
        py::tuple inputs(STEP_INPUTS.size());
        for (std::size_t i = 0; i < STEP_INPUTS.size(); ++i) inputs[i] = STEP_INPUTS[i];
        d["lachesis.node.step_cost._INPUTS"] = inputs;
        d["simpy.core.URGENT"] = Environment::URGENT;
        d["simpy.core.NORMAL"] = Environment::NORMAL;
        return d;
    });
    lachesis::bind::bind_memory(m);
    lachesis::bind::bind_run(m);
}
