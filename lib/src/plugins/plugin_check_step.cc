// The plugin checks of the sdEM step's contracts (plugin_checks.h):
// rho0-noop (a step with rho = 0 changes nothing), cache-rebuild (the cache
// the commits keep equals the one rebuild() makes) and fused-step (the fused
// step equals accumulate + commit, bit for bit).
#include <algorithm>
#include <cstring>

#include "plugin_checks.h"
#include "tributary/sdem_learner.h"

namespace tributary::plugin_check {

namespace {

// The delta buffer of a hand-driven step.
struct DeltaBuffer {
  std::vector<uint64_t> index;
  std::vector<double> value;
  static int Grow(trib_delta* d, size_t min_capacity) {
    auto* self = static_cast<DeltaBuffer*>(d->host);
    const size_t cap = std::max(min_capacity, d->capacity * 2);
    try {
      self->index.resize(cap);
      self->value.resize(cap);
    } catch (...) {
      return TRIB_ERR_NO_MEMORY;
    }
    d->index = self->index.data();
    d->value = self->value.data();
    d->capacity = cap;
    return TRIB_OK;
  }
  trib_delta View() {
    if (index.empty()) {
      index.resize(256);
      value.resize(256);
    }
    return trib_delta{index.data(), value.data(), 0, index.size(), this, &Grow};
  }
};

// One sdEM step with rho = 0, driven through the vtable as SdemLearner::Learn
// does (sdem_learner.cc): score, loss weights, accumulate, the engine's
// update (mu <- (1 - 0) mu + 0: nothing to do for any block or entry), then
// the family's commit with step.rho = 0.
Status Rho0Step(Model* m, ScoringState* state, const trib_document& doc) {
  const uint32_t K = m->num_outputs();
  std::vector<double> scores(K), w(K);
  TRIB_RETURN_IF_ERROR(m->Score(doc, state, scores.data()));
  double c = 0, loss_value = 0;
  TRIB_RETURN_IF_ERROR(m->LossWeights(scores.data(), doc.label, w.data(), &c, &loss_value));
  const auto& fv = m->family().family();
  DeltaBuffer buf;
  trib_delta delta = buf.View();
  trib_error err{};
  trib_stats view = m->stats().View();
  int rc = fv.accumulate(m->family_model(), &view, state->get(), &doc, w.data(), &delta, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, m->family(), "accumulate");
  std::vector<double> old_raw(delta.size);
  for (size_t j = 0; j < delta.size; ++j) {
    if (delta.index[j] >= m->stats().size()) {
      return Status::PluginError("accumulate produced index " + std::to_string(delta.index[j]) +
                                 " >= " + std::to_string(m->stats().size()));
    }
    old_raw[j] = m->stats().raw()[delta.index[j]];
  }
  const LearnerState& ls = m->learner_state();
  trib_step step{0.0, ls.effective_size, c, ls.updates};
  view = m->stats().View();
  rc = fv.commit(m->family_model(), &view, delta.index, old_raw.data(), delta.size, &step, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, m->family(), "commit");
  return Status::OK();
}

}  // namespace

void CheckRho0(Checks& checks, Model* m, const std::vector<DocumentBuffer>& docs, uint64_t seed) {
  const std::string name = "rho0-noop";
  const SufficientStats::RawValues raw = m->stats().raw();
  const std::vector<trib_block> blocks = m->stats().blocks();
  std::vector<double> cache;
  if (HasCache(*m)) {
    auto c = ExportCache(*m);
    if (!c.ok()) return checks.Fail(name, c.status().ToString());
    cache = std::move(c).value();
  }
  auto state = m->NewScoringState(seed);
  if (!state.ok()) return checks.Fail(name, state.status().ToString());
  const size_t steps = std::min<size_t>(docs.size(), 50);
  for (size_t i = 0; i < steps; ++i) {
    Status st = Rho0Step(m, state->get(), ViewFor(*m, docs[i]));
    if (!st.ok()) return checks.Fail(name, "step with rho = 0 on " + docs[i].Name() + ": " + st.ToString());
    std::string d = Diff("raw", raw, m->stats().raw());
    if (d.empty()) d = DiffBlocks(blocks, m->stats().blocks());
    if (d.empty() && HasCache(*m)) {
      auto c = ExportCache(*m);
      if (!c.ok()) return checks.Fail(name, c.status().ToString());
      d = Diff("cache", cache, *c);
    }
    if (!d.empty()) return checks.Fail(name, "after a step with rho = 0 on " + docs[i].Name() + ": " + d);
  }
  checks.Pass(name);
}

void CheckCacheRebuild(Checks& checks, const Model& trained) {
  const std::string name = "cache-rebuild";
  if (!HasCache(trained)) return checks.Skip(name, "the family exports no cache");
  auto copy = trained.Clone();
  if (!copy.ok()) return checks.Fail(name, copy.status().ToString());
  Model& m = **copy;
  auto before = ExportCache(m);
  if (!before.ok()) return checks.Fail(name, before.status().ToString());
  const SufficientStats::RawValues raw = m.stats().raw();
  const LearnerState& ls = m.learner_state();
  Status st = m.Rebuild(trib_step{0.0, ls.effective_size, 0.0, ls.updates});
  if (!st.ok()) return checks.Fail(name, st.ToString());
  auto after = ExportCache(m);
  if (!after.ok()) return checks.Fail(name, after.status().ToString());
  std::string d = Diff("raw", raw, m.stats().raw());
  if (!d.empty()) return checks.Fail(name, "rebuild with rho = 0 changed feasible statistics: " + d);
  d = Diff("cache", *before, *after, 1e-9);
  if (!d.empty()) return checks.Fail(name, "incremental " + d + " (rebuilt), beyond 1e-9 relative");
  checks.Pass(name);
}

// fused-step (only for families with ABI 1.7 fused_step): one pass with each
// built-in loss on two models made alike, one learner using the fused step
// and one calling accumulate + apply + commit; after every document the
// statistics and block maps are the same bit for bit, and at the end the
// exported caches and every score.
void CheckFusedStep(Checks& checks, const PluginRegistry& registry, std::shared_ptr<const Plugin> family,
                    const ModelSchema& schema, const std::vector<DocumentBuffer>& docs, uint64_t seed) {
  const std::string name = "fused-step";
  uint64_t fused = 0, steps = 0;
  std::string losses;
  for (const std::string& loss_name : {std::string("nll"), std::string("ncll"), std::string("hinge")}) {
    auto loss = registry.FindByName(loss_name, TRIB_KIND_LOSS);
    if (!loss.ok()) continue;
    std::unique_ptr<Model> models[2];
    std::unique_ptr<SdemLearner> learners[2];
    bool refused = false;
    for (int i = 0; i < 2 && !refused; ++i) {
      auto m = Model::Create(family, *loss, schema, {}, seed);
      if (!m.ok()) return checks.Fail(name, loss_name + ": " + m.status().ToString());
      models[i] = std::move(m).value();
      models[i]->learner_state().effective_size = static_cast<double>(std::max<size_t>(1, docs.size()));
      auto l = SdemLearner::Create(models[i].get(), seed);
      if (!l.ok()) {
        refused = true;  // (the loss does not train this family: train-<loss> says so)
        break;
      }
      learners[i] = std::move(l).value();
      learners[i]->set_use_fused_step(i == 0);
    }
    if (refused) continue;
    const std::string at = loss_name + ", ";
    for (size_t d = 0; d < docs.size(); ++d) {
      const Status a = learners[0]->Learn(docs[d].View());
      const Status b = learners[1]->Learn(docs[d].View());
      if (a.ok() != b.ok()) {
        return checks.Fail(
            name, at + docs[d].Name() + ": fused step " + a.ToString() + ", accumulate + commit " + b.ToString());
      }
      if (!a.ok()) break;  // (both refused: train-<loss> reports it)
      ++steps;
      std::string diff = DiffBlocks(models[0]->stats().blocks(), models[1]->stats().blocks());
      if (diff.empty()) diff = Diff("raw", models[0]->stats().raw(), models[1]->stats().raw());
      if (diff.empty()) {
        // Same values are not enough: the same bits (a -0 for a +0 would do).
        const auto& ra = models[0]->stats().raw();
        if (std::memcmp(ra.data(), models[1]->stats().raw().data(), ra.size() * sizeof(double)) != 0) {
          diff = "raw differs in its bits";
        }
      }
      if (!diff.empty()) {
        return checks.Fail(name, at + "after " + docs[d].Name() + ": fused step vs accumulate + commit: " + diff);
      }
    }
    fused += learners[0]->fused_steps();
    if (HasCache(*models[0])) {
      auto ca = ExportCache(*models[0]), cb = ExportCache(*models[1]);
      if (!ca.ok() || !cb.ok()) return checks.Fail(name, at + (!ca.ok() ? ca : cb).status().ToString());
      std::string diff = Diff("cache", *ca, *cb);
      if (!diff.empty()) return checks.Fail(name, at + "fused step vs accumulate + commit: " + diff);
    }
    auto sa = ScoreAll(*models[0], docs, seed), sb = ScoreAll(*models[1], docs, seed);
    if (!sa.ok() || !sb.ok()) return checks.Fail(name, at + (!sa.ok() ? sa : sb).status().ToString());
    std::string diff = Diff("score", *sa, *sb);
    if (!diff.empty()) return checks.Fail(name, at + "fused step vs accumulate + commit: " + diff);
    losses += (losses.empty() ? "" : ", ") + loss_name;
  }
  if (fused == 0) {
    return checks.Fail(name, "the family has fused_step but no step used it (" + std::to_string(steps) +
                                 " steps with " + (losses.empty() ? std::string("no loss") : losses) + ")");
  }
  checks.Pass(name);
}

}  // namespace tributary::plugin_check
