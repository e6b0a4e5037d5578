#include "tributary/schema.h"

#include <functional>
#include <string_view>

#include "tributary/v1/tributary.pb.h"

namespace tributary {

Result<ModelSchema> ModelSchema::FromProto(const v1::Schema& proto) {
  std::vector<std::string> terms(proto.vocabulary().begin(), proto.vocabulary().end());
  return FromFields(proto, &terms);
}

Result<ModelSchema> ModelSchema::FromProto(const v1::Schema& proto, std::vector<std::string>* terms) {
  if (proto.vocabulary_size() > 0) {
    return Status::InvalidArgument("schema: the terms are given apart, but the message has " +
                                   std::to_string(proto.vocabulary_size()) + " of its own; expected none");
  }
  return FromFields(proto, terms);
}

Result<ModelSchema> ModelSchema::FromFields(const v1::Schema& proto, std::vector<std::string>* terms) {
  ModelSchema s;
  if (proto.hashed_dim() > 0 && !terms->empty()) {
    return Status::InvalidArgument("schema: both a vocabulary (" + std::to_string(terms->size()) +
                                   " terms) and hashed_dim (" + std::to_string(proto.hashed_dim()) +
                                   ") are set; expected one of them");
  }
  if (proto.hashed_dim() > kMaxHashedDim) {
    return Status::InvalidArgument("schema: hashed_dim " + std::to_string(proto.hashed_dim()) +
                                   " exceeds the maximum " + std::to_string(kMaxHashedDim) +
                                   " (2^24; every class keeps hashed_dim statistics)");
  }
  if (proto.hashed_dim() > 0 && proto.open_vocabulary()) {
    return Status::InvalidArgument("schema: both open_vocabulary and hashed_dim (" +
                                   std::to_string(proto.hashed_dim()) +
                                   ") are set; expected one of them (hashed ids need no vocabulary)");
  }
  s.hashed_dim_ = proto.hashed_dim();
  s.open_vocabulary_ = proto.open_vocabulary();
  s.classes_.assign(proto.class_names().begin(), proto.class_names().end());
  s.open_classes_ = proto.open_classes();
  for (const auto& f : proto.features()) {
    FeatureSpecInfo info;
    info.name = f.name();
    if (f.kind() == v1::FeatureSpec::REAL || f.kind() == v1::FeatureSpec::COUNT) {
      info.kind = f.kind() == v1::FeatureSpec::REAL ? TRIB_FEATURE_REAL : TRIB_FEATURE_COUNT;
      s.real_kinds_.push_back(static_cast<uint32_t>(info.kind));
      ++s.num_reals_;
    } else if (f.kind() == v1::FeatureSpec::CATEGORICAL) {
      info.kind = TRIB_FEATURE_CATEGORICAL;
      info.categories.assign(f.categories().begin(), f.categories().end());
      if (info.categories.empty()) {
        return Status::InvalidArgument("schema: categorical feature '" + f.name() +
                                       "' has no categories; expected at least 1");
      }
      s.cat_card_.push_back(static_cast<uint32_t>(info.categories.size()));
    } else {
      return Status::InvalidArgument("schema: feature '" + f.name() + "' has unknown kind " + std::to_string(f.kind()));
    }
    s.features_.push_back(std::move(info));
  }
  // No classes at all is a valid schema (unlabelled streams for latent
  // families); a classifier family refuses it when the model is created.
  s.vocab_->terms = std::move(*terms);
  s.Index();
  Vocabulary& v = *s.vocab_;
  Status bad;
  if (v.indexed != v.terms.size()) {
    for (size_t i = 0; i < v.terms.size() && bad.ok(); ++i) {
      const int64_t first = v.Find(v.terms[i]);
      if (first != static_cast<int64_t>(i)) {
        bad = Status::InvalidArgument("schema: vocabulary term '" + v.terms[i] + "' appears twice (ids " +
                                      std::to_string(first) + " and " + std::to_string(i) + ")");
      }
    }
  }
  if (bad.ok() && s.class_index_.size() != s.classes_.size()) {
    bad = Status::InvalidArgument("schema: duplicate class names");
  }
  if (!bad.ok()) {
    *terms = std::move(v.terms);  // (the caller's again)
    return bad;
  }
  return s;
}

ModelSchema::Vocabulary& ModelSchema::MutableVocabulary() {
  // use_count() == 1: no copy holds it, and none can appear meanwhile (only
  // this schema could be copied to make one).
  if (vocab_.use_count() > 1) vocab_ = std::make_shared<Vocabulary>(*vocab_);
  return *vocab_;
}

size_t ModelSchema::Vocabulary::Probe(std::string_view t) const {
  const size_t mask = slots.size() - 1;
  size_t h = std::hash<std::string_view>{}(t)&mask;
  while (slots[h] != 0 && terms[slots[h] - 1] != t) h = (h + 1) & mask;
  return h;
}

int64_t ModelSchema::Vocabulary::Find(std::string_view t) const {
  if (slots.empty()) return -1;
  const uint32_t s = slots[Probe(t)];
  return s == 0 ? -1 : static_cast<int64_t>(s) - 1;
}

void ModelSchema::Vocabulary::Reserve(size_t n) {
  if (2 * n < slots.size()) return;
  size_t size = 16;
  while (size < 2 * n + 1) size *= 2;
  std::vector<uint32_t> old = std::move(slots);
  slots.assign(size, 0);
  // The indexed terms are distinct, so each probe ends on an empty slot.
  for (uint32_t s : old) {
    if (s != 0) slots[Probe(terms[s - 1])] = s;
  }
}

uint32_t ModelSchema::Vocabulary::Insert(uint32_t id) {
  Reserve(indexed + 1);
  const size_t h = Probe(terms[id]);
  if (slots[h] != 0) return slots[h] - 1;
  slots[h] = id + 1;
  ++indexed;
  return id;
}

void ModelSchema::Index() {
  Vocabulary& v = MutableVocabulary();
  v.slots.clear();
  v.indexed = 0;
  v.Reserve(v.terms.size());
  for (size_t i = 0; i < v.terms.size(); ++i) v.Insert(static_cast<uint32_t>(i));
  class_index_.clear();
  for (size_t i = 0; i < classes_.size(); ++i) class_index_.emplace(classes_[i], static_cast<uint32_t>(i));
}

void ModelSchema::ToProto(v1::Schema* out, bool with_vocabulary) const {
  out->Clear();
  if (with_vocabulary) {
    for (const auto& t : vocab_->terms) out->add_vocabulary(t);
  }
  out->set_hashed_dim(hashed_dim_);
  for (const auto& c : classes_) out->add_class_names(c);
  out->set_open_classes(open_classes_);
  out->set_open_vocabulary(open_vocabulary_);
  for (const auto& f : features_) {
    auto* fs = out->add_features();
    fs->set_name(f.name);
    fs->set_kind(f.kind == TRIB_FEATURE_REAL    ? v1::FeatureSpec::REAL
                 : f.kind == TRIB_FEATURE_COUNT ? v1::FeatureSpec::COUNT
                                                : v1::FeatureSpec::CATEGORICAL);
    for (const auto& c : f.categories) fs->add_categories(c);
  }
}

int64_t ModelSchema::TermIndex(const std::string& term) const { return vocab_->Find(term); }

int64_t ModelSchema::ClassIndex(const std::string& name) const {
  auto it = class_index_.find(name);
  return it == class_index_.end() ? -1 : static_cast<int64_t>(it->second);
}

void ModelSchema::AddTerms(const std::vector<std::string>& names) {
  if (names.empty()) return;
  Vocabulary& v = MutableVocabulary();
  v.Reserve(v.indexed + names.size());
  for (const std::string& t : names) {
    if (v.Find(t) >= 0) continue;
    v.terms.push_back(t);
    v.Insert(static_cast<uint32_t>(v.terms.size() - 1));
  }
}

uint32_t ModelSchema::AddClass(const std::string& name) {
  auto idx = static_cast<uint32_t>(classes_.size());
  classes_.push_back(name);
  class_index_.emplace(name, idx);
  return idx;
}

trib_schema ModelSchema::CView() const {
  trib_schema s{};
  s.struct_size = sizeof(trib_schema);
  s.vocab_size = vocab_size();
  s.num_classes = static_cast<uint32_t>(classes_.size());
  s.num_reals = num_reals_;
  s.num_categoricals = static_cast<uint32_t>(cat_card_.size());
  s.categorical_cardinalities = cat_card_.data();
  s.real_kinds = real_kinds_.data();
  return s;
}

uint64_t HashToken(const std::string& token, uint64_t dim) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : token) {
    h ^= ch;
    h *= 1099511628211ULL;
  }
  return dim ? h % dim : h;
}

}  // namespace tributary
