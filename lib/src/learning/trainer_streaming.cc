// The Trainer's streaming mode (trainer.h, "Streaming"): every candidate
// learns each document as it arrives, except one labelled document in
// `reservoir_every`, offered to a per-class reservoir (Algorithm R); at
// Finish() the candidates are compared on the reservoir, which holds every
// class seen, and the kept one learns what is still held.
#include "tributary/trainer.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tributary {

Result<std::unique_ptr<Trainer>> Trainer::Create(const ModelFactory& factory, const TrainerConfig& config) {
  if (config.candidates.empty()) return Status::InvalidArgument("trainer: no candidate settings");
  std::unique_ptr<Trainer> t(new Trainer());
  t->config_ = config;
  t->rng_.seed(config.seed);
  for (const CandidateSpec& spec : config.candidates) {
    Candidate c;
    c.spec = spec;
    auto m = factory(spec);
    if (!m.ok()) return m.status().WithContext("candidate '" + spec.label + "'");
    c.model = std::move(m).value();
    auto l = Learner::Create(c.model.get(), LearnerOptions::Sdem(config.seed));
    if (!l.ok()) return l.status().WithContext("candidate '" + spec.label + "'");
    c.learner = std::move(l).value();
    t->candidates_.push_back(std::move(c));
  }
  return t;
}

Status Trainer::SyncClasses() {
  // The learners rebuild themselves for the grown layout (learner.h).
  const Model& ref = *candidates_[0].model;
  for (size_t c = 1; c < candidates_.size(); ++c) {
    TRIB_RETURN_IF_ERROR(candidates_[c].model->GrowTo(ref.schema()));
  }
  return Status::OK();
}

Status Trainer::LearnAll(const DocumentBuffer& doc) {
  for (Candidate& c : candidates_) {
    Status st = c.learner->Learn(doc.View());
    if (!st.ok()) {
      // Only the first candidate can refuse a document the others took
      // (they share the family and the document): report it as it is.
      return candidates_.size() == 1 ? st : st.WithContext("candidate '" + c.spec.label + "'");
    }
    ++updates_;
  }
  return Status::OK();
}

Status Trainer::Learn(const DocumentBuffer& doc) {
  ++seen_;
  const bool choose = candidates_.size() > 1;
  if (!choose || doc.label < 0 || config_.reservoir_every == 0 || (seen_ % config_.reservoir_every) != 0) {
    return LearnAll(doc);
  }
  // Refuse a bad document now, not when it leaves the reservoir: score it.
  {
    auto state = candidates_[0].model->NewScoringState();
    if (!state.ok()) return state.status();
    std::vector<double> s(candidates_[0].model->num_outputs());
    TRIB_RETURN_IF_ERROR(candidates_[0].model->Score(doc.View(), state->get(), s.data()).WithContext(doc.Name()));
    for (double x : s) {
      if (std::isnan(x) || x == INFINITY) return LearnAll(doc);  // the learner names the problem
    }
  }
  const size_t y = static_cast<size_t>(doc.label);
  if (reservoir_.size() <= y) {
    reservoir_.resize(y + 1);
    offered_.resize(y + 1, 0);
  }
  const uint64_t k = ++offered_[y];
  if (reservoir_[y].size() < config_.reservoir_per_class) {
    reservoir_[y].push_back(doc);
    return Status::OK();
  }
  // Algorithm R: keep the new document with probability cap / k; the one it
  // replaces (or the new one) is learned now.
  const uint64_t j = rng_() % k;
  if (j < reservoir_[y].size()) {
    DocumentBuffer out = std::move(reservoir_[y][j]);
    reservoir_[y][j] = doc;
    return LearnAll(out);
  }
  return LearnAll(doc);
}

Result<std::unique_ptr<Model>> Trainer::Finish(TrainReport* report) {
  TrainReport rep;
  rep.mode = "streaming";
  std::vector<const DocumentBuffer*> held;
  for (const auto& r : reservoir_)
    for (const auto& d : r) held.push_back(&d);
  rep.validation_documents = held.size();
  size_t kept = 0;
  if (candidates_.size() > 1 && !held.empty()) {
    const size_t C = candidates_.size();
    std::vector<double> acc(C), ncll(C);
    std::vector<std::vector<char>> right(C);
    std::vector<bool> gen(C);
    for (size_t c = 0; c < C; ++c) {
      TRIB_RETURN_IF_ERROR(EvaluateOn(*candidates_[c].model, held, &acc[c], &ncll[c], &right[c]));
      gen[c] = candidates_[c].spec.generative;
      CandidateResult cr;
      cr.label = candidates_[c].spec.label;
      cr.validation_accuracy = acc[c];
      cr.validation_ncll = ncll[c];
      cr.epochs = 1;
      rep.candidates.push_back(cr);
    }
    kept = ChooseCandidate(acc, ncll, right, gen);
    rep.candidates[kept].kept = true;
  }
  Candidate& k = candidates_[kept];
  std::shuffle(held.begin(), held.end(), rng_);
  for (const DocumentBuffer* d : held) {
    TRIB_RETURN_IF_ERROR(k.learner->Learn(d->View()));
    ++updates_;
  }
  reservoir_.clear();
  rep.kept = k.spec.label;
  rep.final_epochs = 1;
  rep.validation_learned = true;
  rep.document_updates = updates_;
  if (report) *report = rep;
  return std::move(k.model);
}

}  // namespace tributary
