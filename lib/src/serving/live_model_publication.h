// What LiveModel's writer side (live_model.cc, live_model_durable.cc) and its
// publications and readers (live_model_publication.cc) share: a publication,
// a reader's hazard slot, and the id check of a document built by hand.
#ifndef TRIBUTARY_SRC_LIVE_MODEL_PUBLICATION_H_
#define TRIBUTARY_SRC_LIVE_MODEL_PUBLICATION_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "tributary/live_model.h"

namespace tributary {

struct LiveModel::Publication {
  std::unique_ptr<Model> model;
  uint64_t version = 0;
  uint64_t epoch = 0;       // the learner's statistics epoch it was made at (SufficientStats::epoch)
  uint64_t serial = 0;      // unique per publication made (a refreshed copy gets a new one)
  uint64_t generation = 0;  // LiveModel::generation_ when made: a copy of a model Restore replaced is never refreshed
};

// One reader's hazard: the publication it is reading, or null. On its own
// cache line, so that readers on different cores do not share one.
struct alignas(64) LiveModel::Slot {
  std::atomic<Publication*> hazard{nullptr};
  std::atomic<bool> taken{false};
};

namespace live_model {

// The checks a DocumentDecoder guarantees, for a document built by hand:
// every id inside the schema (a family reads its statistics by id).
Status CheckDocument(const ModelSchema& schema, const trib_document& doc);

}  // namespace live_model

}  // namespace tributary

#endif  // TRIBUTARY_SRC_LIVE_MODEL_PUBLICATION_H_
