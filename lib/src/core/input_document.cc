#include "tributary/input_document.h"

#include "tributary/document.h"

#include "tributary/v1/tributary.pb.h"

namespace tributary {

InputDocument& InputDocument::SetId(std::string id) {
  id_ = std::move(id);
  return *this;
}

InputDocument& InputDocument::AddText(std::string_view text) {
  if (!text_.empty()) text_ += ' ';
  text_.append(text);
  return *this;
}

InputDocument& InputDocument::AddTerm(std::string_view term, double count) {
  terms_.emplace_back(std::string(term), count);
  return *this;
}

InputDocument& InputDocument::SetReal(std::string_view feature, double value) {
  features_.push_back(FeatureValue{std::string(feature), false, false, value, {}});
  return *this;
}

InputDocument& InputDocument::SetCategory(std::string_view feature, std::string_view category) {
  features_.push_back(FeatureValue{std::string(feature), true, false, 0, std::string(category)});
  return *this;
}

InputDocument& InputDocument::SetMissing(std::string_view feature) {
  features_.push_back(FeatureValue{std::string(feature), false, true, 0, {}});
  return *this;
}

InputDocument& InputDocument::SetLabel(std::string_view class_name) {
  label_ = std::string(class_name);
  has_label_ = true;
  return *this;
}

InputDocument& InputDocument::SetWeight(double weight) {
  weight_ = weight;
  return *this;
}

void InputDocument::Clear() {
  id_.clear();
  text_.clear();
  label_.clear();
  has_label_ = false;
  weight_ = 1.0;
  terms_.clear();
  features_.clear();
}

Status InputDocument::ToProto(const ModelSchema& schema, v1::Document* out) const {
  out->Clear();
  out->set_id(id_);
  if (has_label_) out->set_label(label_);
  // (document.h CheckGivenWeight: the wire format reads 0 as "absent", i.e.
  // 1, so a given 0 is refused here, as HTTP refuses it.)
  if (weight_ != 1.0) {
    TRIB_RETURN_IF_ERROR(CheckGivenWeight(weight_));
    out->set_weight(weight_);
  }
  if (!text_.empty()) out->set_text(text_);
  for (const auto& [term, count] : terms_) {
    out->add_tokens(term);
    out->add_token_counts(count);
  }
  const auto& specs = schema.features();
  if (features_.empty() && specs.empty()) return Status::OK();
  // Each given feature to its position in the schema.
  std::vector<int> given(specs.size(), -1);
  for (size_t i = 0; i < features_.size(); ++i) {
    const FeatureValue& f = features_[i];
    size_t pos = 0;
    while (pos < specs.size() && specs[pos].name != f.name) ++pos;
    if (pos == specs.size()) {
      std::string names;
      for (const auto& s : specs) names += (names.empty() ? "'" : ", '") + s.name + "'";
      return Status::InvalidDocument("feature '" + f.name + "' is not in the model's schema (its features: " +
                                     (names.empty() ? std::string("none") : names) + ")");
    }
    if (given[pos] >= 0) return Status::InvalidDocument("feature '" + f.name + "' is set twice");
    const bool categorical = specs[pos].kind == TRIB_FEATURE_CATEGORICAL;
    if (!f.missing && f.categorical != categorical) {
      return Status::InvalidDocument("feature '" + f.name + "' is " + (categorical ? "CATEGORICAL" : "numeric") +
                                     ", expected " + (categorical ? "a category (SetCategory)" : "a value (SetReal)") +
                                     ", found " + (f.categorical ? "a category" : "a value"));
    }
    given[pos] = static_cast<int>(i);
  }
  for (size_t pos = 0; pos < specs.size(); ++pos) {
    // A feature not given is missing (as an absent key is in a Python dict
    // or a River-style stream): the decoder refuses it for a family that
    // cannot learn or score with a missing value, naming the feature.
    static const FeatureValue kAbsent = [] {
      FeatureValue v;
      v.missing = true;
      return v;
    }();
    const FeatureValue& f = given[pos] < 0 ? kAbsent : features_[static_cast<size_t>(given[pos])];
    const bool categorical = specs[pos].kind == TRIB_FEATURE_CATEGORICAL;
    if (f.missing) out->add_missing_features(static_cast<uint32_t>(pos));
    if (!categorical) {
      out->add_reals(f.missing ? 0.0 : f.value);
      continue;
    }
    uint32_t index = 0;
    if (!f.missing) {
      const auto& cats = specs[pos].categories;
      while (index < cats.size() && cats[index] != f.category) ++index;
      if (index == cats.size()) {
        std::string names;
        for (const auto& c : cats) names += (names.empty() ? "'" : ", '") + c + "'";
        return Status::InvalidDocument("feature '" + f.name + "': category '" + f.category + "' is not one of its " +
                                       std::to_string(cats.size()) + " categories (" + names + ")");
      }
    }
    out->add_categoricals(index);
  }
  return Status::OK();
}

}  // namespace tributary
