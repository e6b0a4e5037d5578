// Documents in the model's id space, and their decoding from the wire format.
#ifndef TRIBUTARY_DOCUMENT_H_
#define TRIBUTARY_DOCUMENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tributary/huge_pages.h"
#include "tributary/plugin_abi.h"
#include "tributary/schema.h"
#include "tributary/status.h"

namespace tributary {

namespace v1 {
class Document;
class Schema;
}  // namespace v1

/// Owns the storage behind a trib_document. Reused across documents to avoid
/// allocation on the hot path.
struct DocumentBuffer {
  uint64_t index = 0;                  ///< position of the document in its stream, 0-based
  std::string id;                      ///< the client's id of the document; may be empty
  int64_t label = -1;                  ///< class index in the model's schema, or -1 when unlabelled
  std::vector<uint32_t> term_ids;      ///< strictly increasing
  std::vector<double> term_counts;     ///< count of each term of term_ids (finite, > 0), same length
  std::vector<double> reals;           ///< one value per real or COUNT feature of the schema, in order
  std::vector<uint32_t> categoricals;  ///< one category index (in the model's order) per categorical feature
  double weight = 1.0;                 ///< how much the document counts in learning (finite, > 0)
  /// Missing-value flags (1 = missing), empty when nothing is missing; when
  /// set they have one entry per real / categorical.
  std::vector<uint8_t> real_missing;
  std::vector<uint8_t> categorical_missing;  ///< as real_missing, one flag per categorical
  /// Terms the model does not know, in order of first occurrence, when the
  /// model's vocabulary is open and the decoder was allowed to grow it (they
  /// are not in term_ids): the caller adds them (Model::AddTerms) and decodes
  /// again (DecodeGrowing in learner.h does both).
  std::vector<std::string> new_terms;
  /// New terms left out because the model's vocabulary is at its limit
  /// (GrowthLimits::max_terms) or they are longer than kMaxNewTermBytes:
  /// counted as unseen terms, never added.
  uint32_t terms_over_limit = 0;
  /// Which growth limit made Decode refuse the document.
  enum class LimitRefusal : uint8_t {
    kNone,       ///< none did
    kClasses,    ///< GrowthLimits::max_classes
    kLabelBytes  ///< GrowthLimits::max_label_bytes
  };
  LimitRefusal limit_refusal = LimitRefusal::kNone;  ///< set when a growth limit refused the document

  /// Resets every field to its default, keeping the vectors' capacity.
  void Clear();
  /// Sorts term ids and merges duplicates (summing counts). Returns true
  /// when some were merged (only then can a count have changed).
  bool Canonicalize();
  /// The sum of term_counts (trib_document::total_count).
  double TotalCount() const;
  /// A view valid while this buffer is unchanged.
  trib_document View() const;
  /// "document #12 (id 'abc')" - how errors name this document.
  std::string Name() const;
};

/// Many documents in memory, stored in large chunks: what a learner that makes
/// several passes keeps. Adding a document allocates nothing per document and
/// never moves what is stored (no copy when the set grows), and visiting the
/// documents in a shuffled order touches one small record and the document's
/// own terms, not a heap block per field. Views stay valid as long as the set.
/// Add() is not thread-safe; concurrent const calls are.
class DocumentSet {
 public:
  DocumentSet() = default;
  DocumentSet(const DocumentSet&) = delete;
  DocumentSet& operator=(const DocumentSet&) = delete;
  /// Moves the storage; views into it stay valid.
  DocumentSet(DocumentSet&&) = default;
  /// Moves the storage; views into it stay valid.
  DocumentSet& operator=(DocumentSet&&) = default;

  /// Copies `d` (its id, terms, features, missing flags, label and weight).
  void Add(const trib_document& d);
  /// Copies the document `d` holds.
  void Add(const DocumentBuffer& d) { Add(d.View()); }
  /// The number of documents added.
  size_t size() const { return size_; }
  /// True if no document was added.
  bool empty() const { return size_ == 0; }
  /// Document `i` (< size(), in the order added); its pointers stay valid as long as the set.
  trib_document View(size_t i) const { return at(i).view; }
  /// The label of document `i` (< size()): a class index, or -1.
  int64_t label(size_t i) const { return at(i).view.label; }
  /// "document #12 (id 'abc')", as DocumentBuffer::Name().
  std::string Name(size_t i) const;
  /// Hints the processor to fetch document i's record, then (once that has
  /// arrived) its terms: a pass in shuffled order calls PrefetchRecord a few
  /// documents ahead and Prefetch fewer.
  void PrefetchRecord(size_t i) const { __builtin_prefetch(&at(i)); }
  /// Hints the processor to fetch document i's term ids and counts (see PrefetchRecord).
  void Prefetch(size_t i) const;
  /// Bytes allocated, for reports.
  size_t bytes() const { return bytes_; }

 private:
  struct Entry {
    trib_document view;  ///< points into the chunks below
  };
  /// Records per block: as many as fill one 2 MiB page.
  static constexpr size_t kEntriesPerBlock = huge_pages::kPage / sizeof(Entry);
  static constexpr size_t kChunkBytes = size_t{1} << 22;
  /// Blocks and chunks are whole 2 MiB pages (huge_pages::Allocate), advised
  /// as transparent huge pages once the set holds kHugeAfter bytes: a set of
  /// hundreds of megabytes then costs hundreds of page faults instead of tens
  /// of thousands, and a pass in shuffled order misses the TLB far less,
  /// while a small set keeps touching only the 4 KiB pages it uses.
  static constexpr size_t kHugeAfter = size_t{16} << 20;
  const Entry& at(size_t i) const { return blocks_[i / kEntriesPerBlock].get()[i % kEntriesPerBlock]; }
  /// Copies n items of `bytes` bytes each into the current chunk (a new one
  /// when it lacks room); returns where they went, or null for n = 0.
  const void* Append(const void* p, size_t n, size_t bytes, size_t align);
  std::vector<std::unique_ptr<Entry, huge_pages::Free>> blocks_;
  std::vector<std::unique_ptr<unsigned char, huge_pages::Free>> chunks_;
  size_t used_ = 0, capacity_ = 0;  ///< of the current chunk
  size_t size_ = 0, bytes_ = 0;
};

/// Document completion (the held-out evaluation of topic models): the
/// document's tokens, ordered by (term id, repetition), alternate between
/// `observed` (even positions 0, 2, ...) and `heldout` (odd positions). A
/// count is taken as a whole number of tokens (rounded, at least 1). Both
/// outputs keep the document's index, id, label, features and weight.
void SplitForCompletion(const trib_document& doc, DocumentBuffer* observed, DocumentBuffer* heldout);

/// Names a document the way every error message does.
std::string DocumentName(uint64_t index, const std::string& id);

/// Longest term an open vocabulary learns, in bytes: a longer token is
/// counted as unseen instead (no word is this long; a client that sends
/// megabyte tokens must not grow the model by megabytes).
inline constexpr size_t kMaxNewTermBytes = 256;
/// The largest document weight Decode accepts: a step scaled by a weight
/// near the largest double overflows the statistics.
inline constexpr double kMaxDocumentWeight = 1e6;

/// The weight rule of every door where a weight is given explicitly (HTTP's
/// "weight", InputDocument::SetWeight): a finite number in (0,
/// kMaxDocumentWeight]. (The wire format cannot tell 0 from absent, proto3,
/// and reads both as 1; a given 0 is refused rather than read as 1.) Errors:
/// InvalidDocument "weight is W, expected a finite number in (0, 1e6]".
Status CheckGivenWeight(double weight);

/// What Decode may report as new for the caller to add to the model: labels
/// unknown to a schema with open classes, terms unknown to a schema with an
/// open vocabulary. Learning allows both; evaluating a latent family allows
/// classes only (its labels merely name documents); predicting allows none.
enum DecodeGrowth : unsigned { kGrowNothing = 0, kGrowClasses = 1, kGrowTerms = 2, kGrowClassesAndTerms = 3 };

/// Per-stream counters kept while decoding.
struct DecodeCounters {
  uint64_t documents = 0;     ///< documents decoded successfully
  uint64_t unseen_terms = 0;  ///< occurrences of terms the model does not know
};

/// Maps documents of one stream (with its own schema) into a model's id space
/// and validates them. Construct once per stream.
class DocumentDecoder {
 public:
  /// Fails when the stream's schema cannot be mapped onto the model (hashed vs
  /// vocabulary, different hashed_dim, feature kinds that do not match).
  static Result<DocumentDecoder> Create(const ModelSchema& model, const v1::Schema& stream);
  /// The same for a stream whose vocabulary was read apart from its schema
  /// (DocumentReader::fields() and vocabulary()): `stream` has no vocabulary
  /// of its own. When `vocabulary` is the model's own (a model made from the
  /// reader's schema shares it), every term keeps its id without a look.
  static Result<DocumentDecoder> Create(const ModelSchema& model, const v1::Schema& stream,
                                        const std::vector<std::string>& vocabulary);
  /// A decoder of documents in the model's own id space (what the server's
  /// clients and its log speak): term ids are the model's, checked against
  /// the vocabulary of the schema passed to Decode (with an open vocabulary:
  /// the model's as it is then, not as it was when the decoder was made).
  /// O(features) to make, whatever the vocabulary.
  static Result<DocumentDecoder> ForModel(const ModelSchema& model);

  /// Decodes `doc` (frame `index` of the stream, 0-based among documents).
  /// Errors (kInvalidDocument) name the document and say expected vs found:
  /// term id out of range, NaN/inf/non-positive term or token counts (one rule
  /// for both), term_counts / token_counts not one per term id / token (nor
  /// empty), counts of a repeated term adding up to infinity, wrong number of
  /// reals, NaN/inf reals, a COUNT feature that is not an integer >= 0,
  /// categorical out of range, a missing_features entry out of range, bad
  /// weight, unknown label, a document with no content at all. A label unknown to the model is an
  /// error unless the model's schema has open classes and `growth` has
  /// kGrowClasses: then *new_class gets the label, out->label is -1, and the
  /// caller adds the class (Model::AddClass) and sets out->label itself. A
  /// term unknown to the model is dropped and counted
  /// (counters->unseen_terms), unless the model's vocabulary is open and
  /// `growth` has kGrowTerms: then it is listed in out->new_terms for the
  /// caller to add (Model::AddTerms) before decoding the document again
  /// (DecodeGrowing, learner.h).
  Status Decode(const v1::Document& doc, uint64_t index, const ModelSchema& model, DecodeGrowth growth,
                DocumentBuffer* out, std::string* new_class, DecodeCounters* counters) const;

  /// The rule a document must pass to be learned, shared by whatever accepts
  /// documents for learning: the server checks each document of a learn
  /// request with it before logging any, and `tributary client learn` checks
  /// each document before sending its batch. Decode with new classes and
  /// terms allowed (`new_class` must not be null: a label unknown to a schema
  /// with open classes is returned there, as Decode does; new terms are in
  /// out->new_terms), then, when
  /// `label_required_by` is not empty (the name of a loss that needs labels),
  /// a document without a label is refused: "<document>: loss 'ncll' needs a
  /// label, the document has none" (kInvalidDocument).
  Status DecodeForLearning(const v1::Document& doc, uint64_t index, const ModelSchema& model,
                           const std::string& label_required_by, DocumentBuffer* out, std::string* new_class) const;

 private:
  DocumentDecoder() = default;
  /// Stream term id -> model term id, kUnseen for a term the model lacks
  /// (32 bits: the table is read at random, one entry per term, and half the
  /// size stays in cache twice as well).
  std::vector<uint32_t> remap_;
  static constexpr uint32_t kUnseen = 0xffffffffu;
  /// Create's work over the stream's terms (a v1::Schema's, or a vector).
  template <typename Terms>
  static Result<DocumentDecoder> CreateWith(const ModelSchema& model, const v1::Schema& stream, const Terms& terms);
  /// The stream's term names, kept when the model's vocabulary is open: a
  /// term unseen when the decoder was made may have been added since.
  std::vector<std::string> stream_terms_;
  bool model_ids_ = false;  ///< ForModel (not hashed)
  /// Every stream id is the model's own: no lookup (remap_ is then empty).
  bool identity_ = false;
  uint64_t stream_vocab_size_ = 0;
  bool hashed_ = false;
  uint64_t hashed_dim_ = 0;
  uint32_t num_reals_ = 0;
  std::vector<uint32_t> real_kinds_;
  std::vector<uint32_t> cat_card_;
  std::vector<std::vector<int64_t>> cat_remap_;
  /// Schema feature position -> (is categorical, index within reals or categoricals).
  std::vector<std::pair<bool, uint32_t>> feature_slot_;
};

}  // namespace tributary

#endif  // TRIBUTARY_DOCUMENT_H_
