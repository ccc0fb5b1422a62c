// The Python module lachesis.node._core: the native parts of the decode node, each bound by its own file.
#include <pybind11/pybind11.h>

void bind_memory(pybind11::module_& m);  // bindings_memory.cpp: the node memory (segment table, free lists, policies)
void bind_node(pybind11::module_& m);    // bindings_node.cpp: the run (event loop, decode engine, step model)

PYBIND11_MODULE(_core, m) {
    m.doc() = "Native core of the Lachesis decode node; the Python modules are the reference it is tested against.";
    bind_memory(m);
    bind_node(m);
}
