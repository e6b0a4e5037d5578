#include "tributary/model_config.h"

#include <sstream>

#include <utility>

#include "tributary/v1/tributary.pb.h"

namespace tributary {

namespace {
// True for a loss whose steps never decay the statistics (self-weight c = 0,
// sdEM Table 1: NCLL, hinge), asked of the loss itself on two tied classes.
bool GradientLoss(const Plugin& loss) {
  const double scores[2] = {0.0, 0.0};
  double w[2] = {0.0, 0.0}, c = 1.0, value = 0.0;
  trib_error err{};
  return loss.loss().weights(scores, 2, 0, w, &c, &value, &err) == TRIB_OK && c == 0.0;
}
}  // namespace

Result<StepSchedule::Kind> ParseScheduleKind(const std::string& name) {
  if (name == "inverse") return StepSchedule::Kind::kInverseLinear;
  if (name == "poly") return StepSchedule::Kind::kPolynomial;
  if (name == "constant") return StepSchedule::Kind::kConstant;
  return Status::InvalidArgument("schedule '" + name + "': expected inverse, poly or constant");
}

Result<std::unique_ptr<Model>> NewModel(const ModelConfig& c, const PluginRegistry& registry,
                                        const v1::Schema& schema_proto, uint64_t stream_documents,
                                        const std::string& source) {
  return NewModel(c, registry, ModelSchema::FromProto(schema_proto), stream_documents, source);
}

Result<std::unique_ptr<Model>> NewModel(const ModelConfig& c, const PluginRegistry& registry,
                                        const Result<ModelSchema>& made, uint64_t stream_documents,
                                        const std::string& source) {
  // The settings alone first: their errors name the setting or the plugin.
  auto fam = registry.Find(c.family, TRIB_KIND_FAMILY);
  if (!fam.ok()) return fam.status();
  auto loss = registry.Find(c.loss, TRIB_KIND_LOSS);
  if (!loss.ok()) return loss.status();
  const StepSchedule::Kind schedule_kind = c.schedule;
  // Then the model for the stream's schema: a refusal may be the schema's as
  // well as an option's, so it names the stream.
  auto in_source = [&source](const Status& st) {
    if (source.empty() || st.message().find("'" + source + "'") != std::string::npos) return st;
    return st.WithContext("'" + source + "'");
  };
  if (!made.ok()) return in_source(made.status());
  // A family's defaults under a gradient loss (ABI 1.6 gradient_lambda,
  // gradient_prior), for what the user left unset; the prior goes into the
  // model's options, so its snapshots record it.
  const trib_family_vtable& fv = (*fam)->family();
  const bool gradient = GradientLoss(**loss);
  Options family_options = c.family_options;
  if (gradient && fv.gradient_prior != nullptr && !HasOption(family_options, "prior")) {
    family_options.emplace_back("prior", fv.gradient_prior);
  }
  // The effective corpus size n: given, the stream's length, or the live
  // default. Families that derive their parameters from n (e.g. LDA's
  // lambda = n mu) see it from the first rebuild, Create's (one pass over the
  // statistics, not two).
  if (c.n != 0 && !(c.n >= 1 && c.n <= kMaxEffectiveSize)) {
    std::ostringstream v;
    v << c.n;
    return Status::InvalidArgument("n (the effective data-set size) is " + v.str() +
                                   ": expected a finite number in [1, 1e12], or none for the stream's length");
  }
  if (c.n == 0 && static_cast<double>(stream_documents) > kMaxEffectiveSize) {
    return in_source(Status::InvalidArgument(
        "the stream's header says it holds " + std::to_string(stream_documents) +
        " documents (document_count), more than the largest effective data-set size n (1e12); pass --n"));
  }
  const double n = c.n > 0 ? c.n : stream_documents > 0 ? static_cast<double>(stream_documents) : kLiveDefaultN;
  auto model = Model::Create(*fam, nullptr, made.value(), std::move(family_options), c.seed, n);
  if (!model.ok()) return in_source(model.status());
  if (Status st = (*model)->SetLoss(*loss, c.loss_options); !st.ok()) return in_source(st);
  LearnerState& ls = (*model)->learner_state();
  ls.schedule.kind = schedule_kind;
  ls.schedule.lambda = c.lambda >= 0                        ? c.lambda
                       : gradient && fv.gradient_lambda > 0 ? fv.gradient_lambda
                                                            : (*loss)->loss().default_lambda;
  ls.schedule.tau0 = c.tau0;
  ls.schedule.kappa = c.kappa;
  ls.schedule.rho = c.rho;
  if (((*model)->latent_outputs() || fv.random_start != 0) && !c.schedule_given) {
    // A latent family (or one that says so, ABI 1.8 random_start: slda)
    // starts from a random, symmetry-breaking initialisation that rho_0 = 1
    // would overwrite with the first document's statistics.
    ls.schedule.kind = StepSchedule::Kind::kPolynomial;
    ls.schedule.tau0 = kLatentTau0;
    ls.schedule.kappa = kLatentKappa;
  }
  TRIB_RETURN_IF_ERROR(ls.schedule.Validate());
  ls.effective_size = n;  // (kLiveDefaultN for a live stream: its length is unknown)
  return model;
}

v1::Schema TextStreamSchema(const std::vector<std::string>& classes, bool open_classes) {
  v1::Schema s;
  s.set_open_vocabulary(true);
  s.set_open_classes(open_classes);
  for (const auto& c : classes) s.add_class_names(c);
  return s;
}

v1::Schema DefaultTextSchema(const Plugin* family, uint64_t hashed_dim, const std::vector<std::string>& classes,
                             bool open_classes) {
  v1::Schema s = TextStreamSchema(classes, open_classes);
  const bool open =
      hashed_dim == 0 && family != nullptr && family->kind == TRIB_KIND_FAMILY && family->family().add_terms != nullptr;
  if (!open) {
    s.set_open_vocabulary(false);
    s.set_hashed_dim(hashed_dim > 0 ? hashed_dim : kLiveHashedDim);
  }
  return s;
}

}  // namespace tributary
