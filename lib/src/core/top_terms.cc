// TopComponentTerms (top_terms.h).
#include "tributary/top_terms.h"

#include <algorithm>
#include <cstddef>

namespace tributary {

Status TopComponentTerms(const Model& m, uint32_t k, size_t top, std::vector<TermProbability>* out) {
  out->clear();
  std::vector<double> p;
  TRIB_RETURN_IF_ERROR(m.ComponentTerms(k, &p));
  std::vector<uint32_t> ids(p.size());
  for (uint32_t i = 0; i < ids.size(); ++i) ids[i] = i;
  const size_t n = std::min(top, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
                    [&](uint32_t a, uint32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  const auto& vocab = m.schema().vocabulary();
  out->reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t id = ids[i];
    out->push_back(TermProbability{id < vocab.size() ? vocab[id] : "#" + std::to_string(id), id, p[id]});
  }
  return Status::OK();
}

}  // namespace tributary
