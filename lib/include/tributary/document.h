// Documents in the model's id space, and their decoding from the wire format.
#ifndef TRIBUTARY_DOCUMENT_H_
#define TRIBUTARY_DOCUMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tributary/plugin_abi.h"
#include "tributary/schema.h"
#include "tributary/status.h"

namespace tributary {

namespace v1 {
class Document;
class Schema;
}  // namespace v1

// Owns the storage behind a trib_document. Reused across documents to avoid
// allocation on the hot path.
struct DocumentBuffer {
  uint64_t index = 0;
  std::string id;
  int64_t label = -1;
  std::vector<uint32_t> term_ids;  // strictly increasing
  std::vector<double> term_counts;
  std::vector<double> reals;
  std::vector<uint32_t> categoricals;
  double weight = 1.0;
  // Missing-value flags (1 = missing), empty when nothing is missing; when
  // set they have one entry per real / categorical.
  std::vector<uint8_t> real_missing;
  std::vector<uint8_t> categorical_missing;

  void Clear();
  // Sorts term ids and merges duplicates (summing counts).
  void Canonicalize();
  double TotalCount() const;
  // A view valid while this buffer is unchanged.
  trib_document View() const;
  // "document #12 (id 'abc')" - how errors name this document.
  std::string Name() const;
};

// Document completion (the held-out evaluation of topic models): the
// document's tokens, ordered by (term id, repetition), alternate between
// `observed` (even positions 0, 2, ...) and `heldout` (odd positions). A
// count is taken as a whole number of tokens (rounded, at least 1). Both
// outputs keep the document's index, id, label, features and weight.
void SplitForCompletion(const trib_document& doc, DocumentBuffer* observed, DocumentBuffer* heldout);

// Names a document the way every error message does.
std::string DocumentName(uint64_t index, const std::string& id);

// Per-stream counters kept while decoding.
struct DecodeCounters {
  uint64_t documents = 0;
  uint64_t unseen_terms = 0;  // occurrences of terms the model does not know
};

// Maps documents of one stream (with its own schema) into a model's id space
// and validates them. Construct once per stream.
class DocumentDecoder {
 public:
  // Fails when the stream's schema cannot be mapped onto the model (hashed vs
  // vocabulary, different hashed_dim, feature kinds that do not match).
  static Result<DocumentDecoder> Create(const ModelSchema& model, const v1::Schema& stream);

  // Decodes `doc` (frame `index` of the stream, 0-based among documents).
  // Errors (kInvalidDocument) name the document and say expected vs found:
  // term id out of range, NaN/inf/non-positive counts, wrong number of
  // reals, NaN/inf reals, a COUNT feature that is not an integer >= 0,
  // categorical out of range, a missing_features entry out of range, bad
  // weight, unknown label, a document with no content at all. A label unknown to the model is an
  // error unless the model's schema has open classes and `allow_new_classes`
  // is set: then *new_class gets the label, out->label is -1, and the caller
  // adds the class (Model::AddClass) and sets out->label itself.
  Status Decode(const v1::Document& doc, uint64_t index, const ModelSchema& model, bool allow_new_classes,
                DocumentBuffer* out, std::string* new_class, DecodeCounters* counters) const;

 private:
  DocumentDecoder() = default;
  std::vector<int64_t> remap_;  // stream term id -> model term id, -1 unseen
  uint64_t stream_vocab_size_ = 0;
  bool hashed_ = false;
  uint64_t hashed_dim_ = 0;
  uint32_t num_reals_ = 0;
  std::vector<uint32_t> real_kinds_;
  std::vector<uint32_t> cat_card_;
  std::vector<std::vector<int64_t>> cat_remap_;
  // Schema feature position -> (is categorical, index within reals or categoricals).
  std::vector<std::pair<bool, uint32_t>> feature_slot_;
};

}  // namespace tributary

#endif  // TRIBUTARY_DOCUMENT_H_
