// The plugin checks of a trained model's contracts (plugin_checks.h):
// snapshot-roundtrip (saved equals loaded), add-class (a class added in place
// equals one added by grow_classes), concurrent-score (threads score as one
// does) and frozen-score (the frozen table scores as score() does).
#include <algorithm>
#include <cmath>
#include <thread>

#include "plugin_checks.h"
#include "tributary/predictor.h"

namespace tributary::plugin_check {

void CheckSnapshot(Checks& checks, const PluginRegistry& registry, const Model& m,
                   const std::vector<DocumentBuffer>& docs, uint64_t seed) {
  const std::string name = "snapshot-roundtrip";
  TempDir dir;
  const std::string path = dir.path + "/model.trib";
  Status st = m.Save(path);
  if (!st.ok()) return checks.Fail(name, "Save: " + st.ToString());
  auto loaded = Model::Load(path, registry);
  if (!loaded.ok()) return checks.Fail(name, "Load: " + loaded.status().ToString());
  const Model& l = **loaded;
  std::string d = Diff("raw", m.stats().raw(), l.stats().raw());
  if (d.empty()) d = DiffBlocks(m.stats().blocks(), l.stats().blocks());
  if (d.empty()) {
    auto a = ScoreAll(m, docs, seed);
    if (!a.ok()) return checks.Fail(name, a.status().ToString());
    auto b = ScoreAll(l, docs, seed);
    if (!b.ok()) return checks.Fail(name, "after Load: " + b.status().ToString());
    d = Diff("score", *a, *b);
  }
  if (!d.empty()) return checks.Fail(name, d + " (saved != loaded)");
  checks.Pass(name);
}

// add-class (families with ABI 1.4 add_class): a class brought into use in
// place gives the model grow_classes gives. The trained history is replayed
// on two models, one of the family as it is and one of the same family with
// add_class removed (every class through grow_classes); both gain two
// classes (the first by grow_classes in both, which leaves room; the second
// in place in the first model only), learn a pass in which a third of the
// documents carry each new label, and must score every document the same to
// 1e-9 relative (grow_classes' rebuild re-sums caches in another order). The
// padded model must then survive a snapshot round trip bit for bit.
void CheckAddClass(Checks& checks, const PluginRegistry& registry, const std::shared_ptr<const Plugin>& family,
                   const std::string& loss_name, const ModelSchema& schema, const std::vector<DocumentBuffer>& docs,
                   uint64_t seed) {
  const std::string name = "add-class";
  auto loss = registry.FindByName(loss_name, TRIB_KIND_LOSS);
  if (!loss.ok()) return checks.Fail(name, loss.status().ToString());
  auto copying_family = std::make_shared<Plugin>(*family);
  copying_family->vtable.family.add_class = nullptr;
  std::vector<DocumentBuffer> relabelled = docs;
  const int64_t K = static_cast<int64_t>(schema.classes().size());
  for (size_t i = 0; i < relabelled.size(); ++i) {
    if (i % 3 != 0) relabelled[i].label = K + static_cast<int64_t>(i % 3) - 1;
  }
  std::unique_ptr<Model> models[2];
  for (int which = 0; which < 2; ++which) {
    const std::string path = which == 0 ? "in place" : "grow_classes only";
    auto m = Model::Create(which == 0 ? family : copying_family, *loss, schema, {}, seed);
    if (!m.ok()) return checks.Fail(name, path + ": " + m.status().ToString());
    bool refused = false;
    Status st = TrainOnePass(m->get(), docs, seed, &refused);
    if (st.ok()) st = (*m)->AddClass("added-1");
    const double* before = (*m)->stats().raw().data();
    if (st.ok()) st = (*m)->AddClass("added-2");
    if (st.ok() && which == 0 && (*m)->stats().raw().data() != before) {
      return checks.Fail(name, "the second class moved the statistics (class_capacity " +
                                   std::to_string((*m)->class_capacity()) + "): add_class was not used");
    }
    if (st.ok()) st = TrainOnePass(m->get(), relabelled, seed, &refused);
    if (!st.ok()) return checks.Fail(name, path + ": " + st.ToString());
    models[which] = std::move(m).value();
  }
  auto a = ScoreAll(*models[0], relabelled, seed);
  if (!a.ok()) return checks.Fail(name, "in place: " + a.status().ToString());
  auto b = ScoreAll(*models[1], relabelled, seed);
  if (!b.ok()) return checks.Fail(name, "grow_classes only: " + b.status().ToString());
  std::string d = Diff("score", *a, *b, 1e-9);
  if (!d.empty()) return checks.Fail(name, d + " (in place != grow_classes only, 1e-9 relative)");
  TempDir dir;
  const std::string path = dir.path + "/grown.trib";
  Status st = models[0]->Save(path);
  if (!st.ok()) return checks.Fail(name, "Save: " + st.ToString());
  auto loaded = Model::Load(path, registry);
  if (!loaded.ok()) return checks.Fail(name, "Load of the grown model: " + loaded.status().ToString());
  d = Diff("raw", models[0]->stats().raw(), (*loaded)->stats().raw());
  if (d.empty()) {
    auto c = ScoreAll(**loaded, relabelled, seed);
    d = c.ok() ? Diff("score", *a, *c) : c.status().ToString();
  }
  if (!d.empty()) return checks.Fail(name, d + " (grown model saved != loaded)");
  checks.Pass(name);
}

void CheckConcurrentScore(Checks& checks, const Model& m, const std::vector<DocumentBuffer>& docs, uint64_t seed,
                          uint32_t threads) {
  const std::string name = "concurrent-score";
  auto single = ScoreAll(m, docs, seed);
  if (!single.ok()) return checks.Fail(name, single.status().ToString());
  threads = std::max<uint32_t>(threads, 2);
  std::vector<Result<std::vector<double>>> results(threads, Status::Internal("not run"));
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] { results[t] = ScoreAll(m, docs, seed); });
  }
  for (auto& th : pool) th.join();
  for (uint32_t t = 0; t < threads; ++t) {
    if (!results[t].ok())
      return checks.Fail(name, "thread " + std::to_string(t) + ": " + results[t].status().ToString());
    std::string d = Diff("score", *single, *results[t]);
    if (!d.empty()) return checks.Fail(name, "thread " + std::to_string(t) + ": " + d + " (single-threaded)");
  }
  checks.Pass(name);
}

// frozen-score (only for families with ABI 1.6 freeze): the trained model's frozen
// table (built at once through a Predictor) scores every document as
// score() does, to 1e-9 relative to the largest magnitude among the
// document's scores, and -inf exactly where score() gives -inf.
void CheckFrozenScore(Checks& checks, const Model& m, const std::vector<DocumentBuffer>& docs, uint64_t seed) {
  const std::string name = "frozen-score";
  auto reference = ScoreAll(m, docs, seed);
  if (!reference.ok()) return checks.Fail(name, reference.status().ToString());
  auto p = Predictor::Create(&m, seed);
  if (!p.ok()) return checks.Fail(name, p.status().ToString());
  if (Status st = (*p)->Freeze(); !st.ok()) return checks.Fail(name, st.ToString());
  if (!(*p)->frozen()) return checks.Fail(name, "freeze succeeded but no table was built");
  const uint32_t K = m.num_outputs();
  std::vector<double> got(K);
  for (size_t i = 0; i < docs.size(); ++i) {
    Status st = (*p)->Score(ViewFor(m, docs[i]), got.data());
    if (!st.ok()) return checks.Fail(name, st.WithContext(docs[i].Name()).ToString());
    const double* want = reference->data() + i * K;
    double largest = 0;
    for (uint32_t k = 0; k < K; ++k) {
      if (std::isfinite(want[k])) largest = std::max(largest, std::fabs(want[k]));
    }
    for (uint32_t k = 0; k < K; ++k) {
      const bool same = want[k] == got[k] || (std::isfinite(want[k]) && std::isfinite(got[k]) &&
                                              std::fabs(want[k] - got[k]) <= 1e-9 * largest);
      if (!same) {
        return checks.Fail(name, docs[i].Name() + " class " + std::to_string(k) + ": score_frozen " + Num(got[k]) +
                                     " != score " + Num(want[k]) + " (1e-9 relative to " + Num(largest) + ")");
      }
    }
  }
  checks.Pass(name);
}

}  // namespace tributary::plugin_check
