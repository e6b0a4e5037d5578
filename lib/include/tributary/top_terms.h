// TopComponentTerms: a model's components (topics, mixture components, the
// latent outputs of a latent family or a classifier's topics, model.h
// num_components) described by their most probable terms, as `tributary
// topics` lists them and the server's status page shows them.
#ifndef TRIBUTARY_TOP_TERMS_H_
#define TRIBUTARY_TOP_TERMS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tributary/model.h"
#include "tributary/status.h"

namespace tributary {

/// One term of a component, with its probability.
struct TermProbability {
  std::string term;  ///< its name (the vocabulary's), or "#<id>" when the vocabulary has none (hashed)
  uint32_t id = 0;   ///< its id
  double p = 0;      ///< p(term | component)
};

/// The `top` most probable terms of component `k` (p(term | k), Model::ComponentTerms),
/// most probable first (ties: lower id first). Errors: those of
/// Model::ComponentTerms (a family that does not describe its components by
/// terms, k out of range). Cost: O(vocabulary) time and memory.
Status TopComponentTerms(const Model& m, uint32_t k, size_t top, std::vector<TermProbability>* out);

}  // namespace tributary

#endif  // TRIBUTARY_TOP_TERMS_H_
