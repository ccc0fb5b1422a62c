// What the binding files share (lachesis/node/native/__init__.py is the Python side of this seam): numpy arrays
// read in place as Spans, vectors handed back as numpy arrays, and the error classes Python hands over.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "../memory/kv.hpp"

namespace lachesis::bind {

namespace py = pybind11;

template <class T> using Array = py::array_t<T, py::array::c_style | py::array::forcecast>;

// A one-dimensional array's buffer as a Span (the caller keeps the array alive), its field named in errors.
template <class T> Span<T> span(const Array<T>& a, const char* field) {
    if (a.ndim() != 1) throw py::value_error(std::string(field) + " must be one-dimensional");
    return Span<T>{a.data(), std::size_t(a.shape(0))};
}

template <class T> py::array_t<T> to_array(const std::vector<T>& v) {
    py::array_t<T> a(py::ssize_t(v.size()));
    if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(T));
    return a;
}

template <class T> std::vector<T> to_vector(const Array<T>& a, const char* field) {
    const Span<T> s = span(a, field);
    return std::vector<T>(s.begin(), s.end());
}

void bind_memory(py::module_& m);  // memory.cpp
void bind_run(py::module_& m);     // run.cpp

}  // namespace lachesis::bind
