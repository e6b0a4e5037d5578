// The model's own schema: its vocabulary (or hashing), classes and features.
#ifndef TRIBUTARY_SCHEMA_H_
#define TRIBUTARY_SCHEMA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tributary/plugin_abi.h"
#include "tributary/status.h"

namespace tributary {

namespace v1 {
class Schema;
}

/// One dense feature of a ModelSchema, in the schema's feature order.
struct FeatureSpecInfo {
  std::string name;                            ///< the feature's name in the stream schema (not checked unique)
  trib_feature_kind kind = TRIB_FEATURE_REAL;  ///< REAL and COUNT go to a document's reals, CATEGORICAL to categoricals
  std::vector<std::string> categories;         ///< a categorical feature's category names (>= 1); empty otherwise
};

/// Largest hashed vocabulary a schema may declare: 2^24 ids (fastText's
/// default is 2M buckets, Vowpal Wabbit's 2^18). A header's hashed_dim sizes
/// per-class statistics before any document is read, so an unchecked one
/// (2^30 in a few bytes) would make a reader allocate hundreds of GB.
inline constexpr uint64_t kMaxHashedDim = uint64_t{1} << 24;

/// How far an open model may grow while it learns (ModelSchema::limits();
/// 0: no limit). Not part of the schema on the wire: the limits are the
/// caller's (`serve --max-classes`, `--max-terms`, `--max-label-bytes`,
/// `--max-model-bytes`), set again on every open. Model::SetGrowthLimits
/// folds a statistics budget into max_classes / max_terms.
struct GrowthLimits {
  uint64_t max_classes = 0;      ///< a label that would be one class more is refused
  uint64_t max_terms = 0;        ///< new terms past it are not added (counted as unseen)
  uint64_t max_label_bytes = 0;  ///< a new class name longer than this is refused
};

/// Copies of a schema share its vocabulary (the term names and their index,
/// the largest part of a big model's schema): a copy costs O(classes +
/// features), and the first AddTerms on a shared vocabulary copies it
/// (copy-on-write). A model published to readers while the learner goes on
/// (the server's Publish, Model::Clone) therefore does not copy the
/// vocabulary. Thread safety: a schema is a value; copies may be used and
/// destroyed on different threads.
class ModelSchema {
 public:
  /// Validates: unique non-empty term names, unique class names, categorical
  /// features with >= 1 category. Zero classes is valid (unlabelled streams).
  static Result<ModelSchema> FromProto(const v1::Schema& proto);
  /// The same for a schema whose terms were read apart from the message
  /// (DocumentReader keeps a stream's vocabulary out of its header): `proto`
  /// has no vocabulary of its own (else InvalidArgument), and the terms are
  /// *terms, moved into the schema on success and left where they are on
  /// error.
  static Result<ModelSchema> FromProto(const v1::Schema& proto, std::vector<std::string>* terms);
  /// `with_vocabulary` false leaves the vocabulary out (a decoder of the
  /// model's own ids needs only the rest).
  void ToProto(v1::Schema* out, bool with_vocabulary = true) const;

  /// The number of term ids: hashed_dim() for a hashed schema, else the vocabulary's size.
  uint64_t vocab_size() const { return hashed_dim_ ? hashed_dim_ : vocab_->terms.size(); }
  /// True if term ids are token hashes (HashToken) rather than vocabulary indices.
  bool hashed() const { return hashed_dim_ != 0; }
  /// The number of hash buckets (<= kMaxHashedDim), or 0 for a schema with a vocabulary.
  uint64_t hashed_dim() const { return hashed_dim_; }
  /// The term names, indexed by term id; empty for a hashed schema.
  const std::vector<std::string>& vocabulary() const { return vocab_->terms; }
  /// The class names, indexed by class (label) index; may be empty.
  const std::vector<std::string>& classes() const { return classes_; }
  /// Labels unknown to the schema become new classes while learning (Model::AddClass does it).
  bool open_classes() const { return open_classes_; }
  /// Sets open_classes(); no validation.
  void set_open_classes(bool open) { open_classes_ = open; }
  /// Terms unknown to the vocabulary are added while learning (never with
  /// hashed_dim). Model::AddTerms does it; Schema.open_vocabulary on the wire.
  bool open_vocabulary() const { return open_vocabulary_; }
  /// Sets open_vocabulary(); no validation: the caller must not open the vocabulary of a hashed schema.
  void set_open_vocabulary(bool open) { open_vocabulary_ = open; }
  /// The dense features, in the order a stream declares them.
  const std::vector<FeatureSpecInfo>& features() const { return features_; }
  /// The number of REAL and COUNT features: the length of a document's reals.
  uint32_t num_reals() const { return num_reals_; }
  /// The number of categories of each categorical feature, in feature order: the length of a document's
  /// categoricals and the bound of each entry.
  const std::vector<uint32_t>& categorical_cardinalities() const { return cat_card_; }
  /// Kind of each entry of a document's reals: TRIB_FEATURE_REAL or _COUNT.
  const std::vector<uint32_t>& real_kinds() const { return real_kinds_; }

  /// -1 when absent.
  int64_t TermIndex(const std::string& term) const;
  /// The index of the class `name`; -1 when absent.
  int64_t ClassIndex(const std::string& name) const;
  /// Appends the terms not in the vocabulary yet, in order (ids vocab_size(),
  /// vocab_size() + 1, ...). For Model::AddTerms, which grows the statistics.
  void AddTerms(const std::vector<std::string>& names);
  /// Appends a class (open_classes only); returns its index.
  uint32_t AddClass(const std::string& name);

  /// The growth limits Decode and Model::AddClass / AddTerms apply (not on
  /// the wire; copied with the schema).
  const GrowthLimits& limits() const { return limits_; }
  /// Sets limits() (Model::SetGrowthLimits does, with its budget folded in).
  void set_limits(const GrowthLimits& limits) { limits_ = limits; }

  /// The C view handed to families (valid while this schema is unchanged).
  trib_schema CView() const;

 private:
  /// The terms and their index: open addressing with linear probing over ids
  /// into `terms` (a slot holds id + 1, 0 is empty), so indexing a vocabulary
  /// copies no string and allocates one array, not a node per term (a
  /// node-based map of 11,554 terms was a seventh of a short `train`'s
  /// start-up, bench/LDA_RESULTS.md "Start-up").
  struct Vocabulary {
    std::vector<std::string> terms;
    std::vector<uint32_t> slots;  ///< a power of two, more than twice `indexed` (empty when nothing is)
    size_t indexed = 0;           ///< distinct terms in `slots`
    /// The id of `t`, or -1.
    int64_t Find(std::string_view t) const;
    /// Indexes terms[id] unless its term is indexed already; returns the id
    /// the term has after the call (id, or the earlier one).
    uint32_t Insert(uint32_t id);
    /// Slots for n distinct terms without rehashing.
    void Reserve(size_t n);
    /// The slot holding `t`, or the empty one where it would go (slots not empty).
    size_t Probe(std::string_view t) const;
  };
  void Index();
  /// The vocabulary to change: this schema's own (copied first when shared).
  Vocabulary& MutableVocabulary();
  /// FromProto's work: the schema of proto's fields other than its
  /// vocabulary, with *terms as the terms (moved in on success only).
  static Result<ModelSchema> FromFields(const v1::Schema& proto, std::vector<std::string>* terms);
  std::shared_ptr<Vocabulary> vocab_ = std::make_shared<Vocabulary>();
  uint64_t hashed_dim_ = 0;
  std::vector<std::string> classes_;
  bool open_classes_ = false;
  bool open_vocabulary_ = false;
  std::vector<FeatureSpecInfo> features_;
  uint32_t num_reals_ = 0;
  std::vector<uint32_t> cat_card_;
  std::vector<uint32_t> real_kinds_;
  std::unordered_map<std::string, uint32_t> class_index_;
  GrowthLimits limits_;
};

/// 64-bit FNV-1a of a token, reduced to [0, dim): how raw tokens map to ids in
/// a hashed schema. Stable across platforms and versions.
uint64_t HashToken(const std::string& token, uint64_t dim);

}  // namespace tributary

#endif  // TRIBUTARY_SCHEMA_H_
