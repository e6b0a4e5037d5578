// DocumentDecoder (document.h): a stream's documents mapped into the model's
// id space and validated, one rule set for every door (files, the server and
// its log, Python, brokers); and the weight rule of explicit weights.
#include "tributary/document.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <type_traits>
#include <unordered_set>

#include "tributary/tokenizer.h"
#include "tributary/utf8.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

namespace {
// A v1::Schema's own terms, or a vector of them, by index.
struct ProtoTerms {
  const v1::Schema& s;
  size_t size() const { return static_cast<size_t>(s.vocabulary_size()); }
  const std::string& operator[](size_t i) const { return s.vocabulary(static_cast<int>(i)); }
};
}  // namespace

Result<DocumentDecoder> DocumentDecoder::Create(const ModelSchema& model, const v1::Schema& stream) {
  return CreateWith(model, stream, ProtoTerms{stream});
}

Result<DocumentDecoder> DocumentDecoder::Create(const ModelSchema& model, const v1::Schema& stream,
                                                const std::vector<std::string>& vocabulary) {
  if (stream.vocabulary_size() > 0) {
    return Status::InvalidArgument("stream schema: the terms are given apart, but the message has " +
                                   std::to_string(stream.vocabulary_size()) + " of its own; expected none");
  }
  return CreateWith(model, stream, vocabulary);
}

template <typename Terms>
Result<DocumentDecoder> DocumentDecoder::CreateWith(const ModelSchema& model, const v1::Schema& stream,
                                                    const Terms& terms) {
  DocumentDecoder d;
  // A stream with an open vocabulary names its terms (tokens, text): a
  // hashed model hashes them. Term ids in such a stream are refused below
  // (its vocabulary is empty).
  if (model.hashed() && stream.open_vocabulary() && stream.hashed_dim() == 0) {
    d.hashed_ = true;
    d.hashed_dim_ = model.hashed_dim();
    d.stream_vocab_size_ = 0;
  } else if (model.hashed() != (stream.hashed_dim() > 0)) {
    return Status::InvalidArgument(std::string("stream schema uses ") +
                                   (stream.hashed_dim() ? "hashed term ids" : "a vocabulary") + " but the model uses " +
                                   (model.hashed() ? "hashed term ids" : "a vocabulary"));
  }
  if (d.hashed_) {
    // (an open-vocabulary stream read by a hashed model: set above)
  } else if (model.hashed()) {
    if (stream.hashed_dim() != model.hashed_dim()) {
      return Status::InvalidArgument("stream hashed_dim " + std::to_string(stream.hashed_dim()) +
                                     " differs from the model's " + std::to_string(model.hashed_dim()));
    }
    d.hashed_ = true;
    d.hashed_dim_ = model.hashed_dim();
    d.stream_vocab_size_ = model.hashed_dim();
  } else {
    const size_t n = terms.size();
    d.stream_vocab_size_ = n;
    if (n >= kUnseen) {
      return Status::InvalidArgument("the stream's vocabulary has more than 2^32-1 terms: term ids are 32 bits");
    }
    const std::vector<std::string>& known = model.vocabulary();
    // The model's own vocabulary (shared with the reader): every id is itself.
    if constexpr (std::is_same_v<Terms, std::vector<std::string>>) d.identity_ = &terms == &known;
    if (!d.identity_) {
      // A model made from this stream (or one it extends) has the stream's
      // term at the same id: a string compare instead of a hash lookup (the
      // vocabulary's terms are distinct, so the lookup would give that id).
      d.remap_.resize(n);
      bool same = true;  // (a stream converted with the model's vocabulary, or a prefix of it)
      for (size_t i = 0; i < n; ++i) {
        const std::string& term = terms[i];
        const int64_t m = i < known.size() && known[i] == term ? static_cast<int64_t>(i) : model.TermIndex(term);
        if (m >= static_cast<int64_t>(kUnseen)) {
          return Status::InvalidArgument("the model's vocabulary has more than 2^32-1 terms: term ids are 32 bits");
        }
        d.remap_[i] = m < 0 ? kUnseen : static_cast<uint32_t>(m);
        same &= m == static_cast<int64_t>(i);
      }
      if (same) {  // then the map is not needed
        d.identity_ = true;
        d.remap_ = {};
      }
    }
    if (model.open_vocabulary()) {
      d.stream_terms_.reserve(n);
      for (size_t i = 0; i < n; ++i) d.stream_terms_.push_back(terms[i]);
    }
  }
  // Dense features are matched by position and kind; categories by name.
  const auto& mf = model.features();
  if (static_cast<size_t>(stream.features_size()) != mf.size()) {
    return Status::InvalidArgument("stream declares " + std::to_string(stream.features_size()) +
                                   " dense features but the model has " + std::to_string(mf.size()));
  }
  for (size_t i = 0; i < mf.size(); ++i) {
    const auto& sf = stream.features(static_cast<int>(i));
    const auto kind_name = [](int k) {
      return k == TRIB_FEATURE_REAL ? "real" : k == TRIB_FEATURE_COUNT ? "count" : "categorical";
    };
    const int stream_kind = sf.kind() == v1::FeatureSpec::REAL    ? TRIB_FEATURE_REAL
                            : sf.kind() == v1::FeatureSpec::COUNT ? TRIB_FEATURE_COUNT
                                                                  : TRIB_FEATURE_CATEGORICAL;
    if (stream_kind != static_cast<int>(mf[i].kind)) {
      return Status::InvalidArgument("feature " + std::to_string(i) + " ('" + sf.name() + "') is " +
                                     kind_name(stream_kind) + " in the stream but " + kind_name(mf[i].kind) +
                                     " in the model");
    }
    if (stream_kind != TRIB_FEATURE_CATEGORICAL) {
      d.feature_slot_.emplace_back(false, d.num_reals_);
      d.real_kinds_.push_back(static_cast<uint32_t>(stream_kind));
      ++d.num_reals_;
      continue;
    }
    d.feature_slot_.emplace_back(true, static_cast<uint32_t>(d.cat_card_.size()));
    std::vector<int64_t> remap(sf.categories_size(), -1);
    for (int c = 0; c < sf.categories_size(); ++c) {
      auto it = std::find(mf[i].categories.begin(), mf[i].categories.end(), sf.categories(c));
      if (it != mf[i].categories.end()) remap[c] = it - mf[i].categories.begin();
    }
    d.cat_card_.push_back(static_cast<uint32_t>(sf.categories_size()));
    d.cat_remap_.push_back(std::move(remap));
  }
  return d;
}

Result<DocumentDecoder> DocumentDecoder::ForModel(const ModelSchema& model) {
  // The model's ids need no mapping: made without the vocabulary (the
  // server makes one at every publication, O(features) instead of
  // O(vocabulary)), and term ids are checked against the vocabulary passed
  // to Decode.
  v1::Schema own;
  model.ToProto(&own, /*with_vocabulary=*/false);
  auto d = Create(model, own);
  if (d.ok() && !model.hashed()) d->model_ids_ = true;
  return d;
}

namespace {
bool Finite(double x) { return std::isfinite(x); }
std::string Num(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}
}  // namespace

Status CheckGivenWeight(double weight) {
  if (std::isfinite(weight) && weight > 0 && weight <= kMaxDocumentWeight) return Status::OK();
  return Status::InvalidDocument("weight is " + Num(weight) + ", expected a finite number in (0, 1e6]");
}

Status DocumentDecoder::Decode(const v1::Document& doc, uint64_t index, const ModelSchema& model, DecodeGrowth growth,
                               DocumentBuffer* out, std::string* new_class, DecodeCounters* counters) const {
  out->Clear();
  if (new_class) new_class->clear();
  out->index = index;
  out->id = doc.id();
  auto bad = [&](const std::string& what) {
    return Status::InvalidDocument(DocumentName(index, doc.id()) + ": " + what);
  };
  if (doc.term_ids_size() == 0 && doc.tokens_size() == 0 && doc.text().empty() && doc.reals_size() == 0 &&
      doc.categoricals_size() == 0) {
    return bad("empty document: expected terms, tokens, text or features, found none");
  }
  // One UTF-8 rule for every way in (utf8.h): protobuf parses documents
  // from files and frames with this check, but a front end that builds one
  // (a broker's raw text, an embedding caller) could hand over bytes that
  // would be logged and then never parse again.
  const std::pair<const char*, const std::string*> utf8_fields[] = {
      {"id", &doc.id()}, {"label", &doc.label()}, {"text", &doc.text()}};
  for (const auto& [field, value] : utf8_fields) {
    if (std::string why = Utf8Error(*value); !why.empty()) return bad("field '" + std::string(field) + "': " + why);
  }
  for (int i = 0; i < doc.tokens_size(); ++i) {
    if (std::string why = Utf8Error(doc.tokens(i)); !why.empty()) {
      return bad("tokens[" + std::to_string(i) + "]: " + why);
    }
  }
  // Missing features (their values are placeholders and not validated).
  for (int i = 0; i < doc.missing_features_size(); ++i) {
    const uint32_t f = doc.missing_features(i);
    if (f >= feature_slot_.size()) {
      return bad("missing_features[" + std::to_string(i) + "] is " + std::to_string(f) + ", expected < " +
                 std::to_string(feature_slot_.size()) + " (the number of features)");
    }
    const auto [categorical, slot] = feature_slot_[f];
    auto& flags = categorical ? out->categorical_missing : out->real_missing;
    if (flags.empty()) flags.assign(categorical ? cat_card_.size() : num_reals_, 0);
    flags[slot] = 1;
  }
  if (doc.missing_features_size() > 0 && static_cast<size_t>(doc.missing_features_size()) == feature_slot_.size() &&
      doc.term_ids_size() == 0 && doc.tokens_size() == 0 && doc.text().empty()) {
    bool all = true;
    for (size_t f = 0; f < feature_slot_.size(); ++f) {
      const auto [categorical, slot] = feature_slot_[f];
      // A repeated entry can leave one kind's flags unallocated (found by the
      // decoder fuzz target): then none of that kind is missing.
      const auto& flags = categorical ? out->categorical_missing : out->real_missing;
      all &= !flags.empty() && flags[slot] != 0;
    }
    if (all) return bad("empty document: every feature is missing and there are no terms");
  }
  if (doc.term_counts_size() != 0 && doc.term_counts_size() != doc.term_ids_size()) {
    return bad("term_counts has " + std::to_string(doc.term_counts_size()) + " entries, expected " +
               std::to_string(doc.term_ids_size()) + " (one per term id) or 0");
  }
  if (doc.token_counts_size() != 0 && doc.token_counts_size() != doc.tokens_size()) {
    return bad("token_counts has " + std::to_string(doc.token_counts_size()) + " entries, expected " +
               std::to_string(doc.tokens_size()) + " (one per token) or 0");
  }
  // Weight.
  double w = doc.weight();
  // Bounded: a step scaled by a weight near the largest double overflows
  // the statistics (a model written that way could not be read back).
  if (!Finite(w) || w < 0 || w > kMaxDocumentWeight) {
    return bad("weight is " + Num(w) + ", expected a finite number in [0, 1e6] (0 counts as 1)");
  }
  out->weight = w == 0 ? 1.0 : w;
  // Terms: term ids and tokens, one rule for the counts of both.
  auto check_count = [&](const char* field, int i, double c) {
    if (Finite(c) && c > 0) return Status::OK();
    return bad(std::string(field) + "[" + std::to_string(i) + "] is " + Num(c) + ", expected a finite count > 0");
  };
  uint64_t unseen = 0;
  const bool grow_terms = (growth & kGrowTerms) != 0 && model.open_vocabulary();
  const uint64_t max_terms = model.limits().max_terms;
  thread_local std::unordered_set<std::string> listed;  // out->new_terms, for deduplication
  listed.clear();
  // `name` (null: not known) names a term the model lacks.
  auto add_term = [&](int64_t mid, double c, const std::string* name) {
    if (mid < 0) {
      // An empty name, or one longer than kMaxNewTermBytes (a hostile or
      // broken client would grow the vocabulary without bound), is not added.
      if (grow_terms && name != nullptr && !name->empty()) {
        if (listed.count(*name) != 0) return;
        // Within the limits (a hostile or broken client would grow the
        // vocabulary without bound): else left out and counted as unseen,
        // and the document is learned from the terms the model has.
        if (name->size() <= kMaxNewTermBytes && (max_terms == 0 || model.vocab_size() + listed.size() < max_terms)) {
          listed.insert(*name);
          out->new_terms.push_back(*name);
          return;
        }
        out->terms_over_limit++;
      }
      // Unknown to the model: counted in whole occurrences (saturating).
      unseen += c < 1e18 ? static_cast<uint64_t>(std::llround(c)) : uint64_t{1000000000000000000};
      return;
    }
    out->term_ids.push_back(static_cast<uint32_t>(mid));
    out->term_counts.push_back(c);
  };
  const int num_ids = doc.term_ids_size();
  const uint32_t* sids = doc.term_ids().data();
  const double* sid_counts = doc.term_counts_size() ? doc.term_counts().data() : nullptr;
  if (!remap_.empty() && !identity_) {  // the remap is read at random: its entries fetched together
    for (int i = 0; i < num_ids; ++i) {
      if (sids[i] < remap_.size()) __builtin_prefetch(remap_.data() + sids[i]);
    }
  }
  out->term_ids.reserve(static_cast<size_t>(num_ids) + doc.tokens_size());
  out->term_counts.reserve(static_cast<size_t>(num_ids) + doc.tokens_size());
  for (int i = 0; i < num_ids; ++i) {
    const uint32_t sid = sids[i];
    const double c = sid_counts ? sid_counts[i] : 1.0;
    if (!(c > 0 && c <= std::numeric_limits<double>::max())) {  // not a finite count > 0 (NaN included)
      return check_count("term_counts", i, c);
    }
    uint32_t mid;      // the model's id (add_term below for the rarer cases)
    if (model_ids_) {  // the model's own ids, its vocabulary as it is now
      if (sid >= model.vocab_size()) {
        return bad("term id " + std::to_string(sid) + " out of range: the model's vocabulary has " +
                   std::to_string(model.vocab_size()) + " terms" +
                   (model.open_vocabulary() ? " (send new terms as tokens or text)" : ""));
      }
      mid = sid;
    } else {
      if (stream_vocab_size_ == 0) {
        return bad("term id " + std::to_string(sid) +
                   " in a stream without a vocabulary (expected terms named in tokens or text, or a stream header "
                   "that lists a vocabulary or a hashed_dim)");
      }
      if (sid >= stream_vocab_size_) {
        return bad("term id " + std::to_string(sid) + " out of range: the stream's " +
                   (hashed_ ? "hashed_dim" : "vocabulary size") + " is " + std::to_string(stream_vocab_size_));
      }
      mid = hashed_ || identity_ ? sid : remap_[sid];
      if (mid == kUnseen) {
        if (stream_terms_.empty()) {
          add_term(-1, c, nullptr);
        } else {  // open vocabulary: the model may have learned the term since
          add_term(model.TermIndex(stream_terms_[sid]), c, &stream_terms_[sid]);
        }
        continue;
      }
    }
    out->term_ids.push_back(mid);
    out->term_counts.push_back(c);
  }
  for (int i = 0; i < doc.tokens_size(); ++i) {
    const double c = doc.token_counts_size() ? doc.token_counts(i) : 1.0;
    TRIB_RETURN_IF_ERROR(check_count("token_counts", i, c));
    const std::string& tok = doc.tokens(i);
    add_term(hashed_ ? static_cast<int64_t>(HashToken(tok, hashed_dim_)) : model.TermIndex(tok), c, &tok);
  }
  if (!doc.text().empty()) {
    // Raw text: the library tokenizer, each occurrence once (Canonicalize
    // sums repeats). One scratch vector per thread: decoding allocates
    // nothing per document once warm.
    thread_local std::vector<std::string> words;
    words.clear();
    Tokenize(doc.text(), &words);
    if (words.empty() && doc.term_ids_size() == 0 && doc.tokens_size() == 0 && doc.reals_size() == 0 &&
        doc.categoricals_size() == 0) {
      return bad("empty document: its text has no words (" + std::to_string(doc.text().size()) +
                 " bytes of separators), expected at least one");
    }
    for (const std::string& tok : words) {
      add_term(hashed_ ? static_cast<int64_t>(HashToken(tok, hashed_dim_)) : model.TermIndex(tok), 1.0, &tok);
    }
  }
  // Repeated terms are summed: finite counts can add up to infinity (each
  // count was checked on its own above).
  const bool merged = out->Canonicalize();
  for (size_t i = 0; merged && i < out->term_counts.size(); ++i) {
    if (!std::isfinite(out->term_counts[i])) {
      return bad("the counts of term id " + std::to_string(out->term_ids[i]) +
                 " (repeated in term_ids or tokens) add up to " + Num(out->term_counts[i]) +
                 ", expected a finite total");
    }
  }
  // Dense features.
  if (static_cast<uint32_t>(doc.reals_size()) != num_reals_) {
    return bad("has " + std::to_string(doc.reals_size()) + " real features, expected " + std::to_string(num_reals_));
  }
  for (int i = 0; i < doc.reals_size(); ++i) {
    if (!out->real_missing.empty() && out->real_missing[i]) {
      out->reals.push_back(0.0);
      continue;
    }
    const double v = doc.reals(i);
    if (!Finite(v)) {
      return bad("real feature " + std::to_string(i) + " is " + Num(v) + ", expected a finite number");
    }
    if (real_kinds_[i] == TRIB_FEATURE_COUNT && (v < 0 || v != std::floor(v))) {
      return bad("count feature " + std::to_string(i) + " is " + Num(v) + ", expected an integer >= 0");
    }
    out->reals.push_back(v);
  }
  if (static_cast<size_t>(doc.categoricals_size()) != cat_card_.size()) {
    return bad("has " + std::to_string(doc.categoricals_size()) + " categorical features, expected " +
               std::to_string(cat_card_.size()));
  }
  for (int i = 0; i < doc.categoricals_size(); ++i) {
    if (!out->categorical_missing.empty() && out->categorical_missing[i]) {
      out->categoricals.push_back(0);
      continue;
    }
    uint32_t v = doc.categoricals(i);
    if (v >= cat_card_[i]) {
      return bad("categorical feature " + std::to_string(i) + " is " + std::to_string(v) + ", expected < " +
                 std::to_string(cat_card_[i]));
    }
    int64_t m = cat_remap_[i][v];
    if (m < 0) return bad("categorical feature " + std::to_string(i) + " has a category unknown to the model");
    out->categoricals.push_back(static_cast<uint32_t>(m));
  }
  // Label.
  if (doc.has_label()) {
    int64_t k = model.ClassIndex(doc.label());
    if (k < 0) {
      if ((growth & kGrowClasses) != 0 && model.open_classes() && new_class) {
        // A new class within the model's limits (GrowthLimits): each class
        // costs a share of the statistics, and its name is in every answer.
        const GrowthLimits& lim = model.limits();
        if (lim.max_label_bytes != 0 && doc.label().size() > lim.max_label_bytes) {
          out->limit_refusal = DocumentBuffer::LimitRefusal::kLabelBytes;
          return bad("label of " + std::to_string(doc.label().size()) + " bytes, expected at most " +
                     std::to_string(lim.max_label_bytes) + " bytes for a new class (the model's max_label_bytes)");
        }
        if (lim.max_classes != 0 && model.classes().size() >= lim.max_classes) {
          out->limit_refusal = DocumentBuffer::LimitRefusal::kClasses;
          return bad("label '" + Printable(doc.label(), 128) + "' would be class " +
                     std::to_string(model.classes().size() + 1) + ", over the model's limit of " +
                     std::to_string(lim.max_classes) + " classes (max_classes, or what its statistics budget allows)");
        }
        *new_class = doc.label();
      } else {
        std::string names;
        for (size_t i = 0; i < model.classes().size() && i < 10; ++i) {
          names += (i ? ", " : "") + Printable(model.classes()[i], 64);
        }
        if (model.classes().size() > 10) names += ", ...";
        return bad("label '" + Printable(doc.label(), 128) +
                   "' is not a class of the model (expected one of: " + names + ")");
      }
    }
    out->label = k;
  }
  if (counters) {
    counters->documents++;
    counters->unseen_terms += unseen;
  }
  return Status::OK();
}

Status DocumentDecoder::DecodeForLearning(const v1::Document& doc, uint64_t index, const ModelSchema& model,
                                          const std::string& label_required_by, DocumentBuffer* out,
                                          std::string* new_class) const {
  TRIB_RETURN_IF_ERROR(Decode(doc, index, model, kGrowClassesAndTerms, out, new_class, nullptr));
  if (!label_required_by.empty() && out->label < 0 && new_class->empty()) {
    return Status::InvalidDocument(out->Name() + ": loss '" + label_required_by +
                                   "' needs a label, the document has none");
  }
  return Status::OK();
}

}  // namespace tributary
