// _servesim: the pybind11 face of servesim. Returns plain Python data (dicts, lists, floats);
// the pure-Python package python/servesim/ wraps it (DataFrames, plots).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "common/error.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_servesim, m) {
  m.doc() = "servesim: simulate LLM serving clusters and plan GPU capacity";
  m.attr("__version__") = "0.1.0";
  static py::exception<servesim::Error> error_type(m, "Error", PyExc_ValueError);
}
