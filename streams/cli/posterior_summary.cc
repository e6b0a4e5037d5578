#include "posterior_summary.h"

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "tributary/sep_engine.h"

namespace tributary::cli {

using json = nlohmann::json;

Status AddPosteriorSummary(const Model& m, json* j) {
  struct Ctx {
    json* j;
  } ctx{j};
  auto visit = [](void* c, const char* name, uint32_t component, const double* values, size_t count) {
    json& out = *static_cast<Ctx*>(c)->j;
    json v = json::array();
    for (size_t i = 0; i < count; ++i) v.push_back(values[i]);
    if (component == UINT32_MAX) {
      out[name] = v;
    } else {
      json& comps = out["components"];
      if (!comps.is_array()) comps = json::array();
      while (comps.size() <= component) comps.push_back(json::object());
      comps[component][name] = v;
    }
  };
  auto r = SepLearner::Summary(m, visit, &ctx);
  return r.status();
}

}  // namespace tributary::cli
