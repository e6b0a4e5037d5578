// CheckPlugin (tributary/plugin_check.h): loads the file, then runs the
// checks of its kind. A family's: a generated schema the family accepts, one
// pass with each built-in loss (train-<loss>, else train-sep) giving the
// trained model the other checks use (plugin_check_step.cc,
// plugin_check_model.cc), reported in the order plugin_check.h lists them.
#include "tributary/plugin_check.h"

#include <algorithm>
#include <memory>

#include "plugin_checks.h"
#include "tributary/sep_engine.h"

namespace tributary {

const char* CheckOutcomeName(CheckOutcome outcome) {
  switch (outcome) {
    case CheckOutcome::kPass:
      return "PASS";
    case CheckOutcome::kFail:
      return "FAIL";
    case CheckOutcome::kSkip:
      return "SKIP";
  }
  return "?";
}

size_t PluginCheckReport::Count(CheckOutcome outcome) const {
  return static_cast<size_t>(
      std::count_if(checks.begin(), checks.end(), [&](const PluginCheckResult& c) { return c.outcome == outcome; }));
}

namespace plugin_check {
namespace {

void CheckFamily(const PluginRegistry& registry, std::shared_ptr<const Plugin> family,
                 const PluginCheckOptions& options, PluginCheckReport* report) {
  Checks checks{report};
  // A schema the family accepts.
  std::string refusals;
  std::unique_ptr<GeneratedSchema> schema;
  for (int which = 0; which < 3 && !schema; ++which) {
    auto s = MakeSchema(which);
    if (!s.ok()) {
      refusals += (refusals.empty() ? "" : "; ") + s.status().ToString();
      continue;
    }
    auto m = Model::Create(family, nullptr, s->schema, {}, options.seed);
    if (m.ok()) {
      schema = std::make_unique<GeneratedSchema>(std::move(s).value());
    } else {
      refusals += (refusals.empty() ? "" : "; ") + s->description + ": " + m.status().ToString();
    }
  }
  if (!schema) return checks.Fail("schema", "create() refused every generated schema (" + refusals + ")");
  report->schema = schema->description;
  const std::vector<DocumentBuffer> docs = MakeStream(schema->schema, options.documents, options.seed);

  // train-<loss>: one pass with each built-in loss; the first model that
  // trains is the one the other checks use.
  std::unique_ptr<Model> trained;
  std::vector<PluginCheckResult> train_results;
  for (const std::string& loss_name : {std::string("nll"), std::string("ncll"), std::string("hinge")}) {
    const std::string name = "train-" + loss_name;
    auto loss = registry.FindByName(loss_name, TRIB_KIND_LOSS);
    if (!loss.ok()) {
      train_results.push_back({name, CheckOutcome::kSkip, "no loss: " + loss.status().ToString()});
      continue;
    }
    auto m = Model::Create(family, *loss, schema->schema, {}, options.seed);
    if (!m.ok()) {
      train_results.push_back({name, CheckOutcome::kFail, m.status().ToString()});
      continue;
    }
    bool refused = false;
    Status st = TrainOnePass(m->get(), docs, options.seed, &refused);
    if (!st.ok()) {
      train_results.push_back(
          {name, refused ? CheckOutcome::kSkip : CheckOutcome::kFail, (refused ? "refused: " : "") + st.ToString()});
      continue;
    }
    std::string d = NonFiniteStats(**m);
    if (d.empty()) {
      auto scores = ScoreAll(**m, docs, options.seed);
      if (!scores.ok()) {
        d = scores.status().ToString();
      } else {
        d = BadScores(*scores, (*m)->num_outputs(), docs);
      }
    }
    if (!d.empty()) {
      train_results.push_back({name, CheckOutcome::kFail, "after one pass: " + d});
      continue;
    }
    train_results.push_back({name, CheckOutcome::kPass, ""});
    if (!trained) {
      trained = std::move(m).value();
      report->info.emplace_back("trained_with", loss_name);
    }
  }

  // A family with SEP hooks and no sdEM update: the other checks run on a
  // model trained with SEP instead (rho0-noop is about the sdEM step).
  bool sep_trained = false;
  if (!trained && SepLearner::Supports(*family)) {
    const std::string name = "train-sep";
    auto m = Model::Create(family, nullptr, schema->schema, {}, options.seed);
    std::string d;
    if (!m.ok()) {
      d = m.status().ToString();
    } else {
      (*m)->learner_state().effective_size = static_cast<double>(std::max<size_t>(1, docs.size()));
      SepOptions so;
      so.seed = options.seed;
      auto l = SepLearner::Create(m->get(), so);
      if (!l.ok()) d = l.status().ToString();
      for (size_t i = 0; d.empty() && i < docs.size(); ++i) {
        Status st = (*l)->Learn(docs[i].View());
        if (!st.ok()) d = st.ToString();
      }
      if (d.empty()) d = NonFiniteStats(**m);
      if (d.empty()) {
        auto scores = ScoreAll(**m, docs, options.seed);
        d = scores.ok() ? BadScores(*scores, (*m)->num_outputs(), docs) : scores.status().ToString();
      }
    }
    if (d.empty()) {
      train_results.push_back({name, CheckOutcome::kPass, ""});
      trained = std::move(m).value();
      sep_trained = true;
      report->info.emplace_back("trained_with", "sep");
    } else {
      train_results.push_back({name, CheckOutcome::kFail, d});
    }
  }

  const std::string no_model = "no loss trained the family (see train-*)";
  if (sep_trained) {
    checks.Skip("rho0-noop", "the family has no sdEM update (trained with SEP)");
    // The cache contract (export_cache equals rebuild up to rounding) is the
    // one of caches kept by the sdEM commit; SEP families may export engine
    // state (e.g. reference frames) that rebuild restarts.
    checks.Skip("cache-rebuild",
                "the family has no sdEM update (trained with SEP); the cache is checked for sdEM only");
    CheckSnapshot(checks, registry, *trained, docs, options.seed);
  } else if (trained) {
    // rho0-noop on a copy, so that a family that breaks it spoils no other check.
    auto copy = trained->Clone();
    if (!copy.ok()) {
      checks.Fail("rho0-noop", "Clone: " + copy.status().ToString());
    } else {
      CheckRho0(checks, copy->get(), docs, options.seed);
    }
    CheckCacheRebuild(checks, *trained);
    CheckSnapshot(checks, registry, *trained, docs, options.seed);
  } else {
    checks.Skip("rho0-noop", no_model);
    checks.Skip("cache-rebuild", no_model);
    checks.Skip("snapshot-roundtrip", no_model);
  }
  if (trained && !trained->latent_outputs() && family->family().add_class) {
    std::string loss_name;
    for (const auto& [k, v] : report->info) {
      if (k == "trained_with") loss_name = v;
    }
    if (loss_name != "sep") CheckAddClass(checks, registry, family, loss_name, schema->schema, docs, options.seed);
  }
  for (auto& r : train_results) report->checks.push_back(std::move(r));
  if (trained && family->family().fused_step != nullptr) {
    CheckFusedStep(checks, registry, family, schema->schema, docs, options.seed);
  }
  if (trained) {
    CheckConcurrentScore(checks, *trained, docs, options.seed, options.threads);
    if (family->family().freeze != nullptr) CheckFrozenScore(checks, *trained, docs, options.seed);
  } else {
    if (family->family().fused_step != nullptr) checks.Skip("fused-step", no_model);
    checks.Skip("concurrent-score", no_model);
    if (family->family().freeze != nullptr) checks.Skip("frozen-score", no_model);
  }
}

}  // namespace
}  // namespace plugin_check

PluginCheckReport CheckPlugin(const PluginRegistry& registry, const std::string& path,
                              const PluginCheckOptions& options) {
  PluginCheckReport report;
  report.path = path;
  plugin_check::Checks checks{&report};
  Status st = registry.Add(path);
  std::shared_ptr<const Plugin> plugin;
  if (st.ok()) {
    for (trib_plugin_kind kind : {TRIB_KIND_FAMILY, TRIB_KIND_LOSS}) {
      auto r = LoadPluginFile(path, kind);
      if (r.ok()) {
        plugin = *r;
        break;
      }
      st = r.status();
    }
  }
  if (!plugin) {
    checks.Fail("load", st.ToString());
    return report;
  }
  report.loaded = true;
  report.kind = KindName(plugin->kind);
  report.name = plugin->name;
  report.version = plugin->version;
  checks.Pass("load");
  if (plugin->kind == TRIB_KIND_FAMILY) {
    plugin_check::CheckFamily(registry, plugin, options, &report);
  } else {
    plugin_check::CheckLoss(registry, plugin, options, &report);
  }
  return report;
}

}  // namespace tributary
