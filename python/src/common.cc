#include "common.h"

#include <vector>

namespace tributary::python {

std::string& BuiltinDir() {
  static std::string dir;
  return dir;
}

const PluginRegistry& Registry() {
  static PluginRegistry* reg = [] {
    std::vector<std::string> path;
    path.push_back(BuiltinDir().empty() ? PluginRegistry::BuiltinPluginDir() : BuiltinDir());
    auto rest = PluginRegistry::DefaultSearchPath();
    for (size_t i = 1; i < rest.size(); ++i) path.push_back(rest[i]);
    return new PluginRegistry(std::move(path), true);
  }();
  return *reg;
}

Options ToOptions(const py::dict& d) {
  Options out;
  for (auto [k, v] : d) {
    std::string value;
    if (py::isinstance<py::bool_>(v)) {
      value = v.cast<bool>() ? "true" : "false";
    } else if (py::isinstance<py::float_>(v)) {
      // repr: the shortest text that reads back as the same double.
      value = py::repr(v).cast<std::string>();
    } else {
      value = py::str(v).cast<std::string>();
    }
    out.emplace_back(py::str(k).cast<std::string>(), value);
  }
  return out;
}

}  // namespace tributary::python
