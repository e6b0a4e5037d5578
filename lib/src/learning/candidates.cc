// The settings the defaults try (trainer.h DefaultCandidates), a candidate's
// configuration over the caller's (CandidateConfig) and the factory every
// front end hands the Trainer and the live learner (CandidateFactory).
#include "tributary/trainer.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace tributary {

std::vector<CandidateSpec> DefaultCandidates(const ModelConfig& base, bool streaming, const Plugin* family) {
  // (A family without a `prior` option: nothing to search, as if fixed.)
  const bool takes_prior = family == nullptr || !family->has_option_table() || family->FindOption("prior") != nullptr;
  const bool prior_fixed = HasOption(base.family_options, "prior") || !takes_prior;
  const bool margin_search = base.loss == "hinge" && !HasOption(base.loss_options, "margin");
  std::vector<std::string> priors = {""};
  if (!prior_fixed) priors = streaming ? std::vector<std::string>{"", "3"} : std::vector<std::string>{"", "3", "10"};
  std::vector<std::string> margins = {""};
  if (margin_search) margins = {"", "10"};
  std::vector<CandidateSpec> out;
  auto add = [&](const std::string& prior, const std::string& margin) {
    CandidateSpec c;
    c.loss = base.loss;
    c.label = base.loss;
    if (!prior.empty()) {
      c.family_options.emplace_back("prior", prior);
      c.label += " prior=" + prior;
    } else if (!prior_fixed) {
      c.label += " prior=default";
    }
    if (!margin.empty()) {
      c.loss_options.emplace_back("margin", margin);
      c.label += " margin=" + margin;
    } else if (margin_search) {
      c.label += " margin=1";
    }
    out.push_back(std::move(c));
  };
  if (streaming) {  // pairs, not the product: at most three learners in all
    for (size_t i = 0; i < std::max(priors.size(), margins.size()); ++i) {
      add(priors[std::min(i, priors.size() - 1)], margins[std::min(i, margins.size() - 1)]);
    }
  } else {
    for (const auto& p : priors)
      for (const auto& m : margins) add(p, m);
  }
  CandidateSpec nll;
  nll.loss = "nll";
  nll.label = "nll (generative)";
  nll.generative = true;
  out.push_back(std::move(nll));
  return out;
}

ModelConfig CandidateConfig(const ModelConfig& base, const CandidateSpec& c) {
  ModelConfig m = base;
  m.loss = c.loss;
  auto set = [](Options* opts, const std::string& k, const std::string& v) {
    for (auto& kv : *opts) {
      if (kv.first == k) {
        kv.second = v;
        return;
      }
    }
    opts->emplace_back(k, v);
  };
  if (c.generative) {
    m.lambda = -1;  // NLL's own default: exact averaging (batch MAP)
    m.loss_options.clear();
  }
  for (const auto& [k, v] : c.family_options) set(&m.family_options, k, v);
  for (const auto& [k, v] : c.loss_options) set(&m.loss_options, k, v);
  return m;
}

ModelFactory CandidateFactory(const ModelConfig& base, ConfigBuilder build, const Model* decoded_by) {
  return [base, build = std::move(build), decoded_by](const CandidateSpec& c) -> Result<std::unique_ptr<Model>> {
    auto m = build(CandidateConfig(base, c));
    if (!m.ok()) return m.status();
    if (decoded_by != nullptr) TRIB_RETURN_IF_ERROR((*m)->GrowTo(decoded_by->schema()));
    return m;
  };
}

}  // namespace tributary
