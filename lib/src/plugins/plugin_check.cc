#include "tributary/plugin_check.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <memory>
#include <random>
#include <span>
#include <thread>

#include "tributary/document.h"
#include "tributary/model.h"
#include "tributary/predictor.h"
#include "tributary/schema.h"
#include "tributary/sdem_learner.h"
#include "tributary/sep_engine.h"
#include "tributary/v1/tributary.pb.h"

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

namespace {

// Shortest text that reads back as the same double.
std::string Num(double x) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

// Equal as the checks mean it: the same value (NaN equals NaN; +0 equals -0).
bool Same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

struct Checks {
  PluginCheckReport* report;
  void Add(const std::string& name, CheckOutcome outcome, std::string message = "") {
    report->checks.push_back(PluginCheckResult{name, outcome, std::move(message)});
  }
  void Pass(const std::string& name) { Add(name, CheckOutcome::kPass); }
  void Fail(const std::string& name, std::string message) { Add(name, CheckOutcome::kFail, std::move(message)); }
  void Skip(const std::string& name, std::string message) { Add(name, CheckOutcome::kSkip, std::move(message)); }
};

// ---- Generated schemas and streams.

struct GeneratedSchema {
  std::string description;
  ModelSchema schema;
};

Result<GeneratedSchema> MakeSchema(int which) {
  v1::Schema s;
  std::string description;
  constexpr uint32_t kClasses = 3;
  for (uint32_t k = 0; k < kClasses; ++k) s.add_class_names("c" + std::to_string(k));
  if (which == 0) {
    for (uint32_t i = 0; i < 50; ++i) s.add_vocabulary("t" + std::to_string(i));
    description = "text: 50 terms, 3 classes";
  } else {
    const uint32_t reals = which == 1 ? 4 : 3;
    for (uint32_t i = 0; i < reals; ++i) {
      auto* f = s.add_features();
      f->set_name("x" + std::to_string(i));
      f->set_kind(v1::FeatureSpec::REAL);
    }
    description = "real: " + std::to_string(reals) + " real features, 3 classes";
    if (which == 2) {
      for (uint32_t i = 0; i < 2; ++i) {
        auto* f = s.add_features();
        f->set_name("cat" + std::to_string(i));
        f->set_kind(v1::FeatureSpec::CATEGORICAL);
        for (uint32_t c = 0; c < 3 + i; ++c) f->add_categories("v" + std::to_string(c));
      }
      description = "mixed: 3 real and 2 categorical features (3, 4 categories), 3 classes";
    }
  }
  auto ms = ModelSchema::FromProto(s);
  if (!ms.ok()) return ms.status();
  return GeneratedSchema{description, std::move(ms).value()};
}

// A deterministic labelled stream matching `schema`: class k prefers its own
// slice of the vocabulary, shifts the reals by k and favours category k.
std::vector<DocumentBuffer> MakeStream(const ModelSchema& schema, uint64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uniform = [&rng] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  auto below = [&rng](uint64_t n) { return rng() % n; };
  const uint64_t V = schema.vocab_size();
  const uint64_t K = std::max<uint64_t>(1, schema.classes().size());
  std::vector<DocumentBuffer> docs(count);
  for (uint64_t i = 0; i < count; ++i) {
    DocumentBuffer& d = docs[i];
    d.index = i;
    d.id = "g" + std::to_string(i);
    const uint64_t k = below(K);
    d.label = static_cast<int64_t>(k);
    if (V > 0) {
      const uint64_t lo = k * V / K, hi = std::max(lo + 1, (k + 1) * V / K);
      const uint64_t terms = 3 + below(10);
      for (uint64_t j = 0; j < terms; ++j) {
        const uint64_t t = uniform() < 0.7 ? lo + below(hi - lo) : below(V);
        d.term_ids.push_back(static_cast<uint32_t>(t));
        d.term_counts.push_back(static_cast<double>(1 + below(3)));
      }
      d.Canonicalize();
    }
    for (uint32_t kind : schema.real_kinds()) {
      if (kind == TRIB_FEATURE_COUNT) {
        d.reals.push_back(static_cast<double>(k + below(4)));
      } else {
        const double noise = (uniform() + uniform() + uniform() - 1.5) * 2.0;
        d.reals.push_back(static_cast<double>(k) - 1.0 + noise);
      }
    }
    for (uint32_t card : schema.categorical_cardinalities()) {
      d.categoricals.push_back(static_cast<uint32_t>(uniform() < 0.6 ? k % card : below(card)));
    }
  }
  return docs;
}

// ---- Model helpers.

Result<std::vector<double>> ExportCache(const Model& m) {
  const auto& fv = m.family().family();
  trib_error err{};
  size_t size = 0;
  int rc = fv.export_cache(m.family_model(), nullptr, &size, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, m.family(), "export_cache");
  std::vector<double> out(size);
  rc = fv.export_cache(m.family_model(), out.data(), &size, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, m.family(), "export_cache");
  if (size != out.size()) {
    return Status::PluginError("export_cache reported " + std::to_string(out.size()) + " doubles, then wrote " +
                               std::to_string(size));
  }
  return out;
}

bool HasCache(const Model& m) { return m.family().family().export_cache != nullptr; }

// The first difference between two arrays, "" when equal (exactly, or to
// `rel` relative when rel > 0).
std::string Diff(const std::string& what, std::span<const double> a, std::span<const double> b, double rel = 0) {
  if (a.size() != b.size()) {
    return what + " has " + std::to_string(a.size()) + " entries, then " + std::to_string(b.size());
  }
  for (size_t i = 0; i < a.size(); ++i) {
    bool same = Same(a[i], b[i]);
    if (!same && rel > 0 && std::isfinite(a[i]) && std::isfinite(b[i])) {
      same = std::fabs(a[i] - b[i]) <= rel * std::max(std::fabs(a[i]), std::fabs(b[i]));
    }
    if (!same) return what + "[" + std::to_string(i) + "] " + Num(a[i]) + " != " + Num(b[i]);
  }
  return "";
}

std::string DiffBlocks(const std::vector<trib_block>& a, const std::vector<trib_block>& b) {
  if (a.size() != b.size()) return "block count " + std::to_string(a.size()) + " != " + std::to_string(b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string at = "block " + std::to_string(i) + " ";
    if (a[i].offset != b[i].offset || a[i].size != b[i].size) return at + "layout changed";
    if (!Same(a[i].nu, b[i].nu)) return at + "nu " + Num(a[i].nu) + " != " + Num(b[i].nu);
    if (!Same(a[i].alpha_bar, b[i].alpha_bar)) {
      return at + "alpha_bar " + Num(a[i].alpha_bar) + " != " + Num(b[i].alpha_bar);
    }
    if (!Same(a[i].scale, b[i].scale)) return at + "scale " + Num(a[i].scale) + " != " + Num(b[i].scale);
    if (!Same(a[i].shift, b[i].shift)) return at + "shift " + Num(a[i].shift) + " != " + Num(b[i].shift);
  }
  return "";
}

// The document as the learner hands it to a family with latent outputs.
trib_document ViewFor(const Model& m, const DocumentBuffer& d) {
  trib_document v = d.View();
  if (m.latent_outputs()) v.label = -1;
  return v;
}

// Every document's scores with one fresh scoring state (seeded `seed`), in order.
Result<std::vector<double>> ScoreAll(const Model& m, const std::vector<DocumentBuffer>& docs, uint64_t seed) {
  auto st = m.NewScoringState(seed);
  if (!st.ok()) return st.status();
  const uint32_t K = m.num_outputs();
  std::vector<double> out(docs.size() * K);
  for (size_t i = 0; i < docs.size(); ++i) {
    Status s = m.Score(ViewFor(m, docs[i]), st->get(), out.data() + i * K);
    if (!s.ok()) return s.WithContext(docs[i].Name());
  }
  return out;
}

// "" when every statistic (raw and mu) is finite.
std::string NonFiniteStats(const Model& m) {
  const auto& raw = m.stats().raw();
  for (uint64_t i = 0; i < raw.size(); ++i) {
    if (!std::isfinite(raw[i])) return "raw[" + std::to_string(i) + "] is " + Num(raw[i]);
    const double mu = m.stats().Mu(i);
    if (!std::isfinite(mu)) return "mu[" + std::to_string(i) + "] is " + Num(mu);
  }
  for (size_t b = 0; b < m.stats().blocks().size(); ++b) {
    const trib_block& blk = m.stats().blocks()[b];
    if (!std::isfinite(blk.scale) || !std::isfinite(blk.shift)) {
      return "block " + std::to_string(b) + " scale/shift " + Num(blk.scale) + "/" + Num(blk.shift);
    }
  }
  return "";
}

// "" when every score is finite or -inf (what the ABI allows).
std::string BadScores(const std::vector<double>& scores, uint32_t K, const std::vector<DocumentBuffer>& docs) {
  for (size_t i = 0; i < scores.size(); ++i) {
    if (std::isnan(scores[i]) || scores[i] == INFINITY) {
      return docs[i / K].Name() + " output " + std::to_string(i % K) + " scored " + Num(scores[i]);
    }
  }
  return "";
}

// Trains `m` over `docs` once with sdEM. `refused` is set when the engine
// refuses the model's loss, or the family refuses it on the first document
// (an invalid argument), rather than failing while learning.
Status TrainOnePass(Model* m, const std::vector<DocumentBuffer>& docs, uint64_t seed, bool* refused) {
  *refused = false;
  m->learner_state().effective_size = static_cast<double>(std::max<size_t>(1, docs.size()));
  if (m->latent_outputs()) {  // as `tributary train` does for latent families
    m->learner_state().schedule.kind = StepSchedule::Kind::kPolynomial;
    m->learner_state().schedule.tau0 = 256.0;
    m->learner_state().schedule.kappa = 0.7;
  }
  auto l = SdemLearner::Create(m, seed);
  if (!l.ok()) {
    *refused = true;
    return l.status();
  }
  for (size_t i = 0; i < docs.size(); ++i) {
    Status st = (*l)->Learn(docs[i].View());
    if (!st.ok()) {
      *refused = i == 0 && st.code() == Status::Code::kInvalidArgument;
      return st;
    }
  }
  return Status::OK();
}

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

struct TempDir {
  std::string path;
  TempDir() {
    static std::atomic<uint64_t> counter{0};
    namespace fs = std::filesystem;
    std::error_code ec;
    path = (fs::temp_directory_path(ec) /
            ("tributary-plugin-check-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
               .string();
    fs::create_directories(path, ec);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

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

}  // namespace

PluginCheckReport CheckPlugin(const PluginRegistry& registry, const std::string& path,
                              const PluginCheckOptions& options) {
  PluginCheckReport report;
  report.path = path;
  Checks checks{&report};
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
    CheckFamily(registry, plugin, options, &report);
  } else {
    CheckLoss(registry, plugin, options, &report);
  }
  return report;
}

}  // namespace tributary
