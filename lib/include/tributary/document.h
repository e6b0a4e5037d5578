// Documents in the model's id space, and their decoding from the wire format.
#ifndef TRIBUTARY_DOCUMENT_H_
#define TRIBUTARY_DOCUMENT_H_

#include <cstdint>
#include <memory>
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

// Many documents in memory, stored in large chunks: what a learner that makes
// several passes keeps. Adding a document allocates nothing per document and
// never moves what is stored (no copy when the set grows), and visiting the
// documents in a shuffled order touches one small record and the document's
// own terms, not a heap block per field. Views stay valid as long as the set.
// Add() is not thread-safe; concurrent const calls are.
class DocumentSet {
 public:
  DocumentSet() = default;
  DocumentSet(const DocumentSet&) = delete;
  DocumentSet& operator=(const DocumentSet&) = delete;
  DocumentSet(DocumentSet&&) = default;
  DocumentSet& operator=(DocumentSet&&) = default;

  // Copies `d` (its id, terms, features, missing flags, label and weight).
  void Add(const trib_document& d);
  void Add(const DocumentBuffer& d) { Add(d.View()); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  trib_document View(size_t i) const { return at(i).view; }
  int64_t label(size_t i) const { return at(i).view.label; }
  // "document #12 (id 'abc')", as DocumentBuffer::Name().
  std::string Name(size_t i) const;
  // Hints the processor to fetch document i's record, then (once that has
  // arrived) its terms: a pass in shuffled order calls PrefetchRecord a few
  // documents ahead and Prefetch fewer.
  void PrefetchRecord(size_t i) const { __builtin_prefetch(&at(i)); }
  void Prefetch(size_t i) const;
  // Bytes allocated, for reports.
  size_t bytes() const { return bytes_; }

 private:
  struct Entry {
    trib_document view;  // points into the chunks below
  };
  static constexpr size_t kEntriesPerBlock = 4096;
  static constexpr size_t kChunkBytes = size_t{1} << 22;
  const Entry& at(size_t i) const { return blocks_[i / kEntriesPerBlock][i % kEntriesPerBlock]; }
  // Copies n items of `bytes` bytes each into the current chunk (a new one
  // when it lacks room); returns where they went, or null for n = 0.
  const void* Append(const void* p, size_t n, size_t bytes, size_t align);
  std::vector<std::unique_ptr<Entry[]>> blocks_;
  std::vector<std::unique_ptr<unsigned char[]>> chunks_;
  size_t used_ = 0, capacity_ = 0;  // of the current chunk
  size_t size_ = 0, bytes_ = 0;
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
  // term id out of range, NaN/inf/non-positive term or token counts (one rule
  // for both), term_counts / token_counts not one per term id / token (nor
  // empty), counts of a repeated term adding up to infinity, wrong number of
  // reals, NaN/inf reals, a COUNT feature that is not an integer >= 0,
  // categorical out of range, a missing_features entry out of range, bad
  // weight, unknown label, a document with no content at all. A label unknown to the model is an
  // error unless the model's schema has open classes and `allow_new_classes`
  // is set: then *new_class gets the label, out->label is -1, and the caller
  // adds the class (Model::AddClass) and sets out->label itself.
  Status Decode(const v1::Document& doc, uint64_t index, const ModelSchema& model, bool allow_new_classes,
                DocumentBuffer* out, std::string* new_class, DecodeCounters* counters) const;

  // The rule a document must pass to be learned, shared by whatever accepts
  // documents for learning: the server checks each document of a learn
  // request with it before logging any, and `tributary client learn` checks
  // each document before sending its batch. Decode with new classes allowed
  // (`new_class` must not be null: a label unknown to a schema with open
  // classes is returned there, as Decode does), then, when
  // `label_required_by` is not empty (the name of a loss that needs labels),
  // a document without a label is refused: "<document>: loss 'ncll' needs a
  // label, the document has none" (kInvalidDocument).
  Status DecodeForLearning(const v1::Document& doc, uint64_t index, const ModelSchema& model,
                           const std::string& label_required_by, DocumentBuffer* out, std::string* new_class) const;

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
