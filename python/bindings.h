// The parts of the Python module `tfm._tfm` (python/tfm_python.cc defines the module), each in its
// own file. They bind the public library (include/tfm) and nothing else.
#pragma once

#include <pybind11/pybind11.h>

namespace tfm::internal::python {

void bind_translator(pybind11::module_& m);  // python/translator.cc

}  // namespace tfm::internal::python
