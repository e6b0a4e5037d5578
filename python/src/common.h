// What every file of the binding (python/src) shares: the pybind11 alias, a
// Status on its way to Python (StatusError, Throw, Check, Take), the plugin
// registry and Python keyword settings as the library's Options.
#ifndef TRIBUTARY_PYTHON_SRC_COMMON_H_
#define TRIBUTARY_PYTHON_SRC_COMMON_H_

// numpy.h and stl.h in every file: the casters a file sees (std::vector <->
// list, arrays) must be the same in all of them; a std::vector cast where
// stl.h is not seen would compile and fail at run time.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <utility>

#include "tributary/model.h"
#include "tributary/plugin_registry.h"
#include "tributary/status.h"

namespace py = pybind11;

namespace tributary::python {

// A Status on its way to Python.
struct StatusError {
  Status status;
};

[[noreturn]] inline void Throw(const Status& st) { throw StatusError{st}; }
inline void Check(const Status& st) {
  if (!st.ok()) Throw(st);
}
template <typename T>
T Take(Result<T> r) {
  if (!r.ok()) Throw(r.status());
  return std::move(r).value();
}

// The plugin registry: the package's own plugin directory (the built-ins,
// set by tributary/__init__.py before the first use), then
// $TRIBUTARY_PLUGIN_PATH, as the program does.
const PluginRegistry& Registry();
// The built-in plugin directory Registry() starts from (empty: the library's
// own); set_builtin_plugin_dir sets it.
std::string& BuiltinDir();

// A dict of settings as Options: bools as true/false, floats by repr.
Options ToOptions(const py::dict& d);

}  // namespace tributary::python

#endif  // TRIBUTARY_PYTHON_SRC_COMMON_H_
