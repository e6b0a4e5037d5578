#include "tributary/learner.h"

namespace tributary {

const char* EngineName(Engine engine) {
  switch (engine) {
    case Engine::kAuto:
      return "auto";
    case Engine::kSdem:
      return "sdem";
    case Engine::kSep:
      return "sep";
    case Engine::kEp:
      return "ep";
    case Engine::kAdf:
      return "adf";
  }
  return "?";
}

Result<Engine> ParseEngine(std::string_view name) {
  for (Engine e : {Engine::kAuto, Engine::kSdem, Engine::kSep, Engine::kEp, Engine::kAdf}) {
    if (name == EngineName(e)) return e;
  }
  return Status::InvalidArgument("unknown engine '" + std::string(name) + "' (expected auto, sdem, sep, ep or adf)");
}

Result<Engine> ResolveEngine(Engine engine, const Plugin& family) {
  const bool has_sep = SepLearner::Supports(family);
  if (engine == Engine::kAuto) return has_sep ? Engine::kSep : Engine::kSdem;
  if (engine == Engine::kSdem) {
    if (has_sep) {
      return Status::InvalidArgument("family '" + family.name +
                                     "' is trained by SEP, EP or ADF, not sdEM (use --engine auto, sep, ep or adf)");
    }
    return engine;
  }
  if (!has_sep) {
    return Status::InvalidArgument("family '" + family.name + "' cannot be trained with --engine " +
                                   EngineName(engine) + ": it has no SEP hooks (use --engine auto or sdem)");
  }
  return engine;
}

std::string RecordedLoss(Engine engine, const Plugin& family, const std::string& loss) {
  auto resolved = ResolveEngine(engine, family);
  return resolved.ok() && *resolved != Engine::kSdem ? std::string("nll") : loss;
}

std::string LabelRequiredBy(const Plugin* loss) {
  return loss != nullptr && loss->kind == TRIB_KIND_LOSS && loss->loss().requires_label ? loss->name : std::string();
}

Result<std::unique_ptr<Learner>> Learner::Create(Model* model, const LearnerOptions& options) {
  if (model == nullptr) return Status::InvalidArgument("learner: no model");
  std::unique_ptr<Learner> l(new Learner());
  l->model_ = model;
  l->options_ = options;
  auto engine = ResolveEngine(options.engine, model->family());
  if (!engine.ok()) return engine.status();
  l->engine_ = *engine;
  TRIB_RETURN_IF_ERROR(l->Build());
  return l;
}

Status Learner::Build() {
  layout_ = model_->layout_version();
  if (engine_ == Engine::kSdem) {
    auto l = SdemLearner::Create(model_, options_.seed);
    if (!l.ok()) return l.status();
    sdem_ = std::move(l).value();
    sdem_->set_trace(trace_);
    return Status::OK();
  }
  if (sep_) return Status::OK();  // SEP's families name classes only: its state stands
  SepOptions so;
  so.engine = engine_ == Engine::kEp ? SepEngine::kEp : engine_ == Engine::kAdf ? SepEngine::kAdf : SepEngine::kSep;
  so.effective_size = options_.effective_size;
  so.damping = options_.damping;
  so.seed = options_.seed;
  auto l = SepLearner::Create(model_, so);
  if (!l.ok()) return l.status();
  sep_ = std::move(l).value();
  sep_->set_trace(trace_);
  return Status::OK();
}

void Learner::set_trace(BlockTrace* trace) {
  trace_ = trace;
  if (sdem_) sdem_->set_trace(trace);
  if (sep_) sep_->set_trace(trace);
}

Status Learner::Learn(const trib_document& doc, LearnResult* result) {
  // A class added since the last document changed a classifier's layout
  // (Model::AddClass): the engine's scoring state is stale. The step counter
  // lives in the model, so a rebuilt sdEM learner goes on where it was.
  if (model_->layout_version() != layout_) TRIB_RETURN_IF_ERROR(Build());
  if (sdem_) {
    LearnOutcome o;
    TRIB_RETURN_IF_ERROR(sdem_->Learn(doc, &o));
    if (result) {
      *result = LearnResult();
      result->predicted = o.predicted;
      result->scores = &sdem_->last_scores();
    }
    return Status::OK();
  }
  SepOutcome o;
  TRIB_RETURN_IF_ERROR(sep_->Learn(doc, &o));
  if (result) {
    *result = LearnResult();
    result->skipped = o.skipped;
    result->skip_reason = o.skip_reason;
    result->log_z = o.log_z;
  }
  return Status::OK();
}

Status DecodeGrowing(const DocumentDecoder& decoder, const v1::Document& doc, uint64_t index, Model* model,
                     DecodeGrowth growth, DocumentBuffer* out, DecodeCounters* counters, bool* grew) {
  if (grew) *grew = false;
  std::string new_class;
  TRIB_RETURN_IF_ERROR(decoder.Decode(doc, index, model->schema(), growth, out, &new_class, counters));
  if (!out->new_terms.empty()) {
    const std::vector<std::string> terms = std::move(out->new_terms);
    TRIB_RETURN_IF_ERROR(model->AddTerms(terms).WithContext(out->Name()));
    if (grew) *grew = true;
    // Decoded again with the terms known (counted once: no counters).
    TRIB_RETURN_IF_ERROR(decoder.Decode(doc, index, model->schema(), growth, out, &new_class, nullptr));
    if (!out->new_terms.empty()) {
      return Status::Internal(out->Name() + ": term '" + out->new_terms[0] + "' still unknown after it was added");
    }
  }
  if (!new_class.empty()) {
    TRIB_RETURN_IF_ERROR(model->AddClass(new_class).WithContext(out->Name()));
    out->label = model->schema().ClassIndex(new_class);
    if (grew) *grew = true;
  }
  return Status::OK();
}

}  // namespace tributary
