// The plugin checks' harness (plugin_checks.h): the generated schemas and
// streams every check runs on, the comparisons their messages come from, one
// pass of sdEM training, and a temporary directory for snapshots.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <random>

#include "plugin_checks.h"
#include "tributary/sdem_learner.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary::plugin_check {

std::string Num(double x) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

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

std::string Diff(const std::string& what, std::span<const double> a, std::span<const double> b, double rel) {
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

trib_document ViewFor(const Model& m, const DocumentBuffer& d) {
  trib_document v = d.View();
  if (m.latent_outputs()) v.label = -1;
  return v;
}

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

std::string BadScores(const std::vector<double>& scores, uint32_t K, const std::vector<DocumentBuffer>& docs) {
  for (size_t i = 0; i < scores.size(); ++i) {
    if (std::isnan(scores[i]) || scores[i] == INFINITY) {
      return docs[i / K].Name() + " output " + std::to_string(i % K) + " scored " + Num(scores[i]);
    }
  }
  return "";
}

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

TempDir::TempDir() {
  static std::atomic<uint64_t> counter{0};
  namespace fs = std::filesystem;
  std::error_code ec;
  path = (fs::temp_directory_path(ec) /
          ("tributary-plugin-check-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
             .string();
  fs::create_directories(path, ec);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

}  // namespace tributary::plugin_check
