// The checks of a loss plugin (plugin_checks.h): train-multinomial (one pass
// of the built-in multinomial family with the loss), weights-finite and
// weights-pure.
#include <cmath>

#include "plugin_checks.h"

namespace tributary::plugin_check {

void CheckLoss(const PluginRegistry& registry, std::shared_ptr<const Plugin> loss, const PluginCheckOptions& options,
               PluginCheckReport* report) {
  Checks checks{report};
  const trib_loss_vtable& lv = loss->loss();
  report->info.emplace_back("requires_label", lv.requires_label ? "true" : "false");
  report->info.emplace_back("default_lambda", Num(lv.default_lambda));
  auto family = registry.FindByName("multinomial", TRIB_KIND_FAMILY);
  if (!family.ok()) return checks.Fail("train-multinomial", "no family: " + family.status().ToString());
  auto schema = MakeSchema(0);
  if (!schema.ok()) return checks.Fail("train-multinomial", schema.status().ToString());
  report->schema = schema->description;
  const std::vector<DocumentBuffer> docs = MakeStream(schema->schema, options.documents, options.seed);
  auto m = Model::Create(*family, loss, schema->schema, {}, options.seed);
  if (!m.ok()) return checks.Fail("train-multinomial", m.status().ToString());
  Model& model = **m;
  bool refused = false;
  Status st = TrainOnePass(&model, docs, options.seed, &refused);
  std::string d = st.ok() ? NonFiniteStats(model) : st.ToString();
  std::vector<double> scores;
  if (d.empty()) {
    auto s = ScoreAll(model, docs, options.seed);
    if (s.ok()) {
      scores = std::move(s).value();
      d = BadScores(scores, model.num_outputs(), docs);
    } else {
      d = s.status().ToString();
    }
  }
  if (!d.empty()) return checks.Fail("train-multinomial", d);
  checks.Pass("train-multinomial");

  // The weights on every document's scores, labelled (and unlabelled when the
  // loss allows it), twice.
  const uint32_t K = model.num_outputs();
  std::vector<double> w(K), w2(K);
  std::string bad, impure;
  for (size_t i = 0; i < docs.size() && bad.empty(); ++i) {
    for (int64_t label : {docs[i].label, int64_t{-1}}) {
      if (label < 0 && lv.requires_label) continue;
      double c = 0, value = 0, c2 = 0, value2 = 0;
      const double* s = scores.data() + i * K;
      Status ws = model.LossWeights(s, label, w.data(), &c, &value);
      if (!ws.ok()) {
        bad = docs[i].Name() + " (label " + std::to_string(label) + "): " + ws.ToString();
        break;
      }
      for (uint32_t k = 0; k < K && bad.empty(); ++k) {
        if (!std::isfinite(w[k])) bad = "w[" + std::to_string(k) + "] " + Num(w[k]);
      }
      if (bad.empty() && !std::isfinite(c)) bad = "c " + Num(c);
      if (bad.empty() && !std::isfinite(value)) bad = "loss value " + Num(value);
      if (!bad.empty()) {
        bad = docs[i].Name() + " (label " + std::to_string(label) + "): " + bad;
        break;
      }
      if (impure.empty()) {
        Status ws2 = model.LossWeights(s, label, w2.data(), &c2, &value2);
        std::string dd = ws2.ok() ? Diff("w", w, w2) : ws2.ToString();
        if (dd.empty() && !Same(c, c2)) dd = "c " + Num(c) + " != " + Num(c2);
        if (dd.empty() && !Same(value, value2)) dd = "loss value " + Num(value) + " != " + Num(value2);
        if (!dd.empty()) impure = docs[i].Name() + ": " + dd + " (same arguments, second call)";
      }
    }
  }
  if (bad.empty()) {
    checks.Pass("weights-finite");
  } else {
    checks.Fail("weights-finite", bad);
  }
  if (impure.empty()) {
    checks.Pass("weights-pure");
  } else {
    checks.Fail("weights-pure", impure);
  }
}

}  // namespace tributary::plugin_check
