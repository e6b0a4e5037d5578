// A model's growth (model.h): classes and terms added to an open schema, in
// place while the family keeps room (ABI 1.4 add_class, 1.5 add_terms), else
// by a re-created model the family copies into (grow_classes, grow_terms);
// and the growth limits, folded with the statistics budget.
#include <algorithm>
#include <unordered_set>

#include "tributary/model.h"
#include "tributary/utf8.h"

namespace tributary {

void Model::SetGrowthLimits(const GrowthLimits& limits, uint64_t max_statistics_bytes) {
  user_limits_ = limits;
  stats_budget_ = max_statistics_bytes;
  FoldGrowthBudget();
}

void Model::FoldGrowthBudget() {
  GrowthLimits eff = user_limits_;
  auto fold = [](uint64_t* limit, uint64_t cap) { *limit = *limit == 0 ? cap : std::min(*limit, cap); };
  if (stats_budget_ != 0) {
    // What one more class (term) costs: the statistics over the classes
    // (terms) they have room for, the other dimension as it is now, rounded
    // up (the share of the parts that are not per class is counted in, so
    // the grown statistics stay within the budget). Never below what the
    // model already has (it is not shrunk).
    auto CeilDiv = [](uint64_t a, uint64_t b) { return (a + b - 1) / b; };
    const uint64_t bytes = std::max<uint64_t>(1, statistics_bytes());
    if (schema_.open_classes() && !latent_outputs()) {
      const uint64_t per_class = CeilDiv(bytes, std::max<uint64_t>(1, class_capacity()));
      fold(&eff.max_classes, std::max<uint64_t>(stats_budget_ / per_class, num_classes()));
    }
    if (schema_.open_vocabulary()) {
      const uint64_t per_term = CeilDiv(bytes, std::max<uint64_t>(1, vocab_capacity()));
      fold(&eff.max_terms, std::max<uint64_t>(stats_budget_ / per_term, schema_.vocab_size()));
    }
  }
  schema_.set_limits(eff);
}

Status Model::AddClass(const std::string& name) {
  if (schema_.ClassIndex(name) < 0) {
    const GrowthLimits& lim = schema_.limits();
    if (lim.max_label_bytes != 0 && name.size() > lim.max_label_bytes) {
      return Status::InvalidDocument("cannot add a class named by " + std::to_string(name.size()) +
                                     " bytes: the model's max_label_bytes is " + std::to_string(lim.max_label_bytes));
    }
    if (lim.max_classes != 0 && num_classes() >= lim.max_classes) {
      return Status::InvalidDocument("cannot add class '" + Printable(name, 128) + "': the model has " +
                                     std::to_string(num_classes()) +
                                     " classes, its limit (max_classes, or what its "
                                     "statistics budget allows)");
    }
  }
  stats_.NoteAllWritten();  // add_class writes the new class's entries
  if (latent_outputs()) {   // classes only label documents for evaluation
    if (schema_.ClassIndex(name) < 0) schema_.AddClass(name);
    return Status::OK();
  }
  if (schema_.ClassIndex(name) >= 0) return Status::OK();
  const auto& fv = family_->family();
  if (!fv.grow_classes) {
    return Status::InvalidArgument("family '" + family_->name + "' cannot add class '" + name +
                                   "' to a model being trained (it does not support open classes)");
  }
  // In place while a padding class stays spare after this one: the spare is
  // a class never seen (a family may keep its padding moving as untouched
  // entries move: multinomial does), which grow_classes copies into the new
  // room, so every new class starts where a class declared from the start
  // and never seen would be.
  if (!fv.add_class || num_classes() + 1 >= class_capacity()) return GrowClasses(name);
  // In place: the next padded class comes into use (ABI 1.4 add_class).
  trib_error err{};
  trib_stats view = stats_.View();
  int rc = fv.add_class(fmodel_, &view, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, *family_, "add_class").WithContext("adding class '" + name + "'");
  schema_.AddClass(name);
  ++num_outputs_;
  ++layout_version_;
  FoldGrowthBudget();
  return Status::OK();
}

// A new model with one more class (and, for a family with add_class, room
// for half as many again: amortised O(model / classes) per class), the old
// classes' statistics copied into it by the family (grow_classes).
Status Model::GrowClasses(const std::string& name) {
  const auto& fv = family_->family();
  ModelSchema grown = schema_;
  grown.AddClass(name);
  const uint32_t k = num_classes() + 1;
  uint32_t room = fv.add_class ? std::max(k + k / 2, k + 1) : k;  // <= MaxClassRoom(k); one spare
  // Never more room than the limits allow.
  if (const uint64_t max = schema_.limits().max_classes; max != 0 && room > max) {
    room = static_cast<uint32_t>(std::max<uint64_t>(k, max));
  }
  auto r = CreateInternal(family_, loss_, grown, options_, room, vocab_capacity_);
  if (!r.ok() && room > k) r = CreateInternal(family_, loss_, grown, options_, k, vocab_capacity_);
  if (!r.ok()) return r.status().WithContext("adding class '" + name + "'");
  return TakeGrown(std::move(r).value(), fv.grow_classes, "grow_classes", "adding a class");
}

// The statistics of this model copied by the family's `grow` (grow_classes
// or grow_terms) into `nm`, a model of the grown schema made by
// CreateInternal (blocks' scale and shift carried over, rebuild after), whose
// layout, schema and room this model then takes.
Status Model::TakeGrown(std::unique_ptr<Model> nm, GrowFn grow, const char* call, const char* what) {
  if (nm->stats_.blocks().size() != stats_.blocks().size()) {
    return Status::Internal("family '" + family_->name + "' changed its number of blocks when " + what);
  }
  for (size_t b = 0; b < stats_.blocks().size(); ++b) {
    nm->stats_.mutable_blocks()[b].scale = stats_.blocks()[b].scale;
    nm->stats_.mutable_blocks()[b].shift = stats_.blocks()[b].shift;
  }
  trib_error err{};
  trib_stats old_view = stats_.ConstView();
  trib_stats new_view = nm->stats_.View();
  int rc = grow(fmodel_, &old_view, nm->fmodel_, &new_view, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, *family_, call);
  trib_step step{0.0, learner_.effective_size, 0.0, learner_.updates};
  TRIB_RETURN_IF_ERROR(nm->Rebuild(step));
  std::swap(fmodel_, nm->fmodel_);
  stats_ = std::move(nm->stats_);
  num_outputs_ = nm->num_outputs_;
  class_capacity_ = nm->class_capacity_;
  vocab_capacity_ = nm->vocab_capacity_;
  schema_ = std::move(nm->schema_);
  ++layout_version_;
  FoldGrowthBudget();
  return Status::OK();
}

Status Model::AddTerms(const std::vector<std::string>& names) {
  stats_.NoteAllWritten();  // add_terms writes the new terms' entries
  std::vector<std::string> fresh;
  {
    std::unordered_set<std::string> seen;
    for (const std::string& t : names) {
      if (schema_.TermIndex(t) < 0 && seen.insert(t).second) fresh.push_back(t);
    }
  }
  if (fresh.empty()) return Status::OK();
  if (const uint64_t max = schema_.limits().max_terms; max != 0 && schema_.vocab_size() + fresh.size() > max) {
    return Status::InvalidDocument("cannot add " + std::to_string(fresh.size()) + " terms to the model's " +
                                   std::to_string(schema_.vocab_size()) + ": its limit is " + std::to_string(max) +
                                   " terms (max_terms, or what its statistics budget allows)");
  }
  if (!schema_.open_vocabulary()) {
    return Status::InvalidArgument("cannot add term '" + fresh[0] + "': the model's vocabulary is not open");
  }
  const auto& fv = family_->family();
  if (!fv.add_terms) {
    return Status::InvalidArgument("family '" + family_->name + "' cannot add terms (term '" + fresh[0] + "')");
  }
  const uint64_t v = schema_.vocab_size();
  if (v + fresh.size() > UINT32_MAX) {
    return Status::InvalidArgument("adding " + std::to_string(fresh.size()) + " terms to " + std::to_string(v) +
                                   " exceeds 2^32-1 terms (term ids are 32-bit); use hashed term ids");
  }
  if (v + fresh.size() > vocab_capacity()) return GrowTerms(fresh);
  // In place: the next padded terms come into use (ABI 1.5 add_terms).
  trib_error err{};
  trib_stats view = stats_.View();
  int rc = fv.add_terms(fmodel_, &view, fresh.size(), &err);
  if (rc != TRIB_OK) {
    return PluginStatus(rc, err, *family_, "add_terms").WithContext("adding term '" + fresh[0] + "'");
  }
  schema_.AddTerms(fresh);
  FoldGrowthBudget();
  return Status::OK();
}

// A new model with the new terms and room for half as many again (amortised
// O(classes) per term), the old terms' statistics copied into it by the
// family (grow_terms).
Status Model::GrowTerms(const std::vector<std::string>& names) {
  const auto& fv = family_->family();
  ModelSchema grown = schema_;
  grown.AddTerms(names);
  const uint64_t v = grown.vocab_size();
  uint64_t room = MaxTermRoom(v);
  if (const uint64_t max = schema_.limits().max_terms; max != 0) room = std::max(v, std::min(room, max));
  auto r = CreateInternal(family_, loss_, grown, options_, class_capacity_, room);
  if (!r.ok()) r = CreateInternal(family_, loss_, grown, options_, class_capacity_, v);  // no memory to spare
  if (!r.ok()) return r.status().WithContext("adding term '" + names[0] + "'");
  return TakeGrown(std::move(r).value(), fv.grow_terms, "grow_terms", "adding terms");
}

Status Model::GrowTo(const ModelSchema& reference) {
  for (const auto& c : reference.classes()) {
    if (schema_.ClassIndex(c) < 0) TRIB_RETURN_IF_ERROR(AddClass(c));
  }
  if (!schema_.open_vocabulary() || reference.vocab_size() <= schema_.vocab_size()) return Status::OK();
  const auto& v = reference.vocabulary();
  return AddTerms(std::vector<std::string>(v.begin() + static_cast<std::ptrdiff_t>(schema_.vocab_size()), v.end()));
}

}  // namespace tributary
