#include "handle.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "tributary/document_source.h"
#include "tributary/latent_metrics.h"
#include "tributary/plugin_abi.h"
#include "tributary/trainer.h"

namespace tributary::python {

v1::Schema NewSchema(const std::string& family, const py::object& classes, bool open_classes,
                     const py::object& vocabulary, uint64_t hashed_dim, const py::object& features) {
  v1::Schema s;
  if (!classes.is_none()) {
    for (auto c : classes) s.add_class_names(py::str(c).cast<std::string>());
  }
  s.set_open_classes(open_classes);
  if (!features.is_none()) {
    // [(name, "real"|"count"|"categorical", [categories])]
    for (auto f : features) {
      auto t = py::reinterpret_borrow<py::tuple>(f);
      auto* spec = s.add_features();
      spec->set_name(t[0].cast<std::string>());
      const std::string kind = t[1].cast<std::string>();
      if (kind == "real") {
        spec->set_kind(v1::FeatureSpec::REAL);
      } else if (kind == "count") {
        spec->set_kind(v1::FeatureSpec::COUNT);
      } else if (kind == "categorical") {
        spec->set_kind(v1::FeatureSpec::CATEGORICAL);
        for (auto c : t[2]) spec->add_categories(py::str(c).cast<std::string>());
      } else {
        Throw(Status::InvalidArgument("feature '" + spec->name() + "': kind '" + kind +
                                      "' (expected real, count or categorical)"));
      }
    }
    return s;
  }
  if (!vocabulary.is_none()) {
    for (auto t : vocabulary) s.add_vocabulary(py::str(t).cast<std::string>());
    return s;
  }
  auto fam = Registry().Find(family, TRIB_KIND_FAMILY);
  std::vector<std::string> names(s.class_names().begin(), s.class_names().end());
  return DefaultTextSchema(fam.ok() ? fam->get() : nullptr, hashed_dim, names, open_classes);
}

std::unique_ptr<Model> LiveOrSingle(const std::string& select, const std::string& engine, const ModelConfig& base,
                                    std::unique_ptr<Model> single,
                                    const std::function<Result<std::unique_ptr<Model>>(const ModelConfig&)>& build) {
  if (!LiveLearnerApplies(Take(ParseSelection(select)), Take(ParseEngine(engine)), *single)) return single;
  return Take(LiveLearner::ToModel(Take(NewDefaultLiveLearner(base, build))));
}

namespace {

ModelConfig ConfigFrom(const std::string& family, const std::string& loss, const py::dict& options,
                       const py::dict& loss_options, const py::dict& schedule, double n, uint64_t seed) {
  ModelConfig c;
  c.family = family;
  c.loss = loss;
  c.family_options = ToOptions(options);
  c.loss_options = ToOptions(loss_options);
  for (auto [k, v] : schedule) {
    const std::string key = py::str(k).cast<std::string>();
    c.schedule_given = true;
    if (key == "kind") {
      c.schedule = Take(ParseScheduleKind(py::str(v).cast<std::string>()));
    } else if (key == "lambda") {
      c.lambda = v.cast<double>();
    } else if (key == "tau0") {
      c.tau0 = v.cast<double>();
    } else if (key == "kappa") {
      c.kappa = v.cast<double>();
    } else if (key == "rho") {
      c.rho = v.cast<double>();
    } else {
      Throw(Status::InvalidArgument("schedule: unknown setting '" + key +
                                    "' (expected kind, lambda, tau0, kappa or rho)"));
    }
  }
  c.n = n;
  c.seed = seed;
  return c;
}

}  // namespace

LearnerOptions LearnerFrom(const std::string& engine, uint64_t seed, double damping) {
  LearnerOptions lo;
  lo.engine = Take(ParseEngine(engine));
  lo.seed = seed;
  lo.damping = damping;
  return lo;
}

std::shared_ptr<Handle> Create(const std::string& family, const std::string& loss, const py::dict& options,
                               const py::dict& loss_options, const py::dict& schedule, double n, uint64_t seed,
                               const std::string& engine, double damping, const py::object& classes, bool open_classes,
                               const py::object& vocabulary, uint64_t hashed_dim, const py::object& features,
                               const std::string& select) {
  ModelConfig c = ConfigFrom(family, loss, options, loss_options, schedule, n, seed);
  v1::Schema schema = NewSchema(family, classes, open_classes, vocabulary, hashed_dim, features);
  // SEP / EP / ADF learn the likelihood: their snapshots record nll (as
  // `train --engine sep` does; learner.h RecordedLoss).
  if (auto fam = Registry().Find(c.family, TRIB_KIND_FAMILY); fam.ok())
    c.loss = RecordedLoss(Take(ParseEngine(engine)), **fam, c.loss);
  Take(ParseSelection(select));  // (refused before anything is built)
  std::unique_ptr<Model> m;
  {
    py::gil_scoped_release nogil;
    m = Take(NewModel(c, Registry(), schema, 0));
    m = LiveOrSingle(select, engine, c, std::move(m),
                     [&](const ModelConfig& cc) { return NewModel(cc, Registry(), schema, 0); });
  }
  return std::make_shared<Handle>(std::move(m), LearnerFrom(engine, seed, damping));
}

std::vector<v1::Document> ToDocuments(Handle& h, const py::sequence& xs, const py::object& ys, uint64_t first) {
  const ModelSchema& schema = h.model().schema();
  std::vector<v1::Document> docs(xs.size());
  py::sequence ysq;
  if (!ys.is_none()) {
    ysq = py::reinterpret_borrow<py::sequence>(ys);
    if (ysq.size() != xs.size()) {
      Throw(Status::InvalidArgument("learn_many: " + std::to_string(xs.size()) + " documents but " +
                                    std::to_string(ysq.size()) + " labels"));
    }
  }
  for (size_t i = 0; i < docs.size(); ++i) {
    FillDocument(schema, xs[i], first + i, &docs[i]);
    if (!ys.is_none()) SetLabel(ysq[i], first + i, &docs[i]);
  }
  return docs;
}

namespace {

// What a learn_* call did: documents learned, bad ones skipped (with the
// first messages), or the error that stopped it.
struct LearnTally {
  uint64_t learned = 0;
  SkippedDocuments skipped;  // (the program's --skip-bad count)
  Status failed;
  // Counts the outcome of one document; false: stop (`failed` is set). With
  // skip_bad a document refused as invalid or numerically bad is counted
  // and the stream goes on.
  bool Add(const Status& st, bool skip_bad) {
    if (st.ok()) {
      ++learned;
      return true;
    }
    if (skip_bad && DocumentRefused(st)) {
      skipped.Record(st);
      return true;
    }
    failed = st;
    return false;
  }
  // Raises the error that stopped learning (the documents before it stay
  // learned), else {"learned", "skipped", "messages"}. GIL held.
  py::dict Result() const {
    Check(failed);
    py::dict r;
    r["learned"] = learned;
    r["skipped"] = skipped.skipped;
    r["messages"] = skipped.first_messages;
    return r;
  }
};

}  // namespace

py::dict LearnDocuments(Handle& h, const std::vector<v1::Document>& docs, bool skip_bad) {
  LearnTally tally;
  h.Locked([&] {
    for (const auto& d : docs) {
      if (!tally.Add(h.LearnLocked(d), skip_bad)) break;
    }
  });
  return tally.Result();
}

py::array_t<double> ScoreDocuments(Handle& h, const std::vector<v1::Document>& docs) {
  const size_t n = docs.size();
  std::vector<double> out;
  size_t k = 0;
  h.Locked([&] {
    k = h.outputs();
    if (k == 0) Throw(Status::InvalidArgument("the model has no class yet: learn a labelled document first"));
    out.resize(n * k);
    for (size_t i = 0; i < n; ++i) Check(h.ScoreLocked(docs[i], out.data() + i * k));
  });
  py::array_t<double> a({n, k});
  std::copy(out.begin(), out.end(), a.mutable_data());
  return a;
}

py::dict LearnCsr(Handle& h, const Csr& m, bool skip_bad) {
  LearnTally tally;
  h.Locked([&] {
    DocumentBuffer b;
    for (int64_t r = 0; r < m.rows(); ++r) {
      Status st = CsrRow(m, r, h.model().schema().vocab_size(), &b);
      if (st.ok() && !m.labels.empty() && m.labels[static_cast<size_t>(r)]) {
        st = ResolveLabel(&h.model(), b, *m.labels[static_cast<size_t>(r)], &b.label);
      }
      if (st.ok()) st = h.LearnBufferLocked(b);
      if (!tally.Add(st, skip_bad)) break;
    }
  });
  return tally.Result();
}

py::array_t<double> ScoreCsr(Handle& h, const Csr& m) {
  const size_t n = static_cast<size_t>(m.rows());
  std::vector<double> out;
  size_t k = 0;
  h.Locked([&] {
    k = h.outputs();
    if (k == 0) Throw(Status::InvalidArgument("the model has no class yet: learn a labelled document first"));
    out.resize(n * k);
    DocumentBuffer b;
    for (size_t i = 0; i < n; ++i) {
      Check(CsrRow(m, static_cast<int64_t>(i), h.model().schema().vocab_size(), &b));
      Check(h.ScoreBuffer(b, out.data() + i * k));
    }
  });
  py::array_t<double> a({n, k});
  std::copy(out.begin(), out.end(), a.mutable_data());
  return a;
}

std::pair<std::shared_ptr<Handle>, std::string> TrainOffline(const std::string& family, const std::string& loss,
                                                             const py::dict& options, const py::dict& loss_options,
                                                             const py::dict& schedule, double n, uint64_t seed,
                                                             const v1::Schema& schema,
                                                             const std::vector<v1::Document>& docs, const Csr* csr,
                                                             uint32_t epochs, uint32_t threads, bool skip_bad) {
  ModelConfig base = ConfigFrom(family, loss, options, loss_options, schedule, n, seed);
  py::gil_scoped_release nogil;
  const uint64_t length = csr ? static_cast<uint64_t>(csr->rows()) : docs.size();
  std::unique_ptr<Model> schema_model = Take(NewModel(base, Registry(), schema, length));
  auto decoder = Take(DocumentDecoder::ForModel(schema_model->schema()));
  DocumentSet set;
  DocumentBuffer buf;
  DecodeCounters counters;
  uint64_t skipped = 0;
  for (size_t i = 0; i < length; ++i) {
    Status st;
    if (csr) {
      st = CsrRow(*csr, static_cast<int64_t>(i), schema_model->schema().vocab_size(), &buf);
      if (st.ok() && !csr->labels.empty() && csr->labels[i]) {
        st = ResolveLabel(schema_model.get(), buf, *csr->labels[i], &buf.label);
      }
    } else {
      st = DecodeGrowing(decoder, docs[i], i, schema_model.get(), kGrowClassesAndTerms, &buf, &counters);
    }
    if (!st.ok()) {
      if (skip_bad && st.IsInvalidDocument()) {
        ++skipped;
        continue;
      }
      Throw(st);
    }
    set.Add(buf);
  }
  if (set.empty()) Throw(Status::InvalidArgument("fit: no document to learn from"));
  TrainerConfig cfg;
  cfg.epochs = epochs;
  cfg.seed = seed;
  cfg.threads = threads;
  TrainReport report;
  std::unique_ptr<Model> model = Take(Trainer::TrainDefaults(
      base, [&](const ModelConfig& c) { return NewModel(c, Registry(), schema, length); }, *schema_model, cfg, set,
      &report));
  model->learner_state().skipped_documents += skipped;
  std::string json = report.ToJson();
  return {std::make_shared<Handle>(std::move(model), LearnerFrom("sdem", seed, 0)), json};
}

py::dict EvaluateLatent(Handle& h, const std::vector<v1::Document>& docs) {
  struct Figures {
    double perplexity = 0, log_px = 0, log_evidence = 0;
    std::vector<double> mass;
    bool completion = false, sep = false;
    uint64_t evidence_documents = 0;
  };
  const Figures f = h.Locked([&] {
    Model& m = h.model();
    if (!m.latent_outputs()) Throw(Status::InvalidArgument("evaluate: the model's outputs are classes, not latent"));
    auto state = Take(m.NewScoringState(h.learner_options().seed));
    auto decoder = Take(DocumentDecoder::ForModel(m.schema()));
    LatentMetrics lat(m);
    std::vector<double> scores(m.num_outputs());
    DocumentBuffer b;
    for (size_t i = 0; i < docs.size(); ++i) {
      Check(decoder.Decode(docs[i], i, m.schema(), kGrowNothing, &b, nullptr, nullptr));
      b.label = -1;
      Check(m.Score(b.View(), state.get(), scores.data()));
      Check(lat.Add(m, b.View(), scores.data(), state.get()).WithContext(b.Name()));
    }
    Figures out;
    out.perplexity = lat.perplexity();
    out.log_px = lat.log_px;
    out.mass = lat.mass;
    out.completion = m.has_completion();
    out.sep = lat.sep;
    out.evidence_documents = lat.evidence_documents;
    out.log_evidence = lat.log_evidence;
    return out;
  });
  py::dict j;
  j["documents"] = docs.size();
  j["perplexity"] = f.perplexity;
  j["perplexity_kind"] = f.completion ? "document_completion" : "per_word";
  j["log_likelihood_per_document"] = docs.empty() ? std::nan("") : f.log_px / static_cast<double>(docs.size());
  std::vector<double> weights;
  for (double w : f.mass) weights.push_back(docs.empty() ? 0.0 : w / static_cast<double>(docs.size()));
  j["weights"] = weights;
  if (f.sep) {
    j["log_evidence"] = f.evidence_documents ? py::cast(f.log_evidence) : py::none();
    j["log_evidence_documents"] = f.evidence_documents;
  }
  return j;
}

py::dict LearnFile(Handle& h, const std::string& path, bool skip_bad, uint32_t max_frame_bytes) {
  LearnTally tally;
  h.Locked([&] {
    // The program's document source: a damaged frame that keeps the framing
    // and a document the decoder refuses are skipped under skip_bad, as
    // `train --skip-bad` skips them.
    auto source = Take(DocumentSource::Open(path, max_frame_bytes, h.model()));
    DocumentBuffer b;
    for (;;) {
      bool eof = false, grew = false;
      Status st = source->Next(&h.model(), true, skip_bad ? &tally.skipped : nullptr, &b, &eof, &grew);
      if (!st.ok()) {
        tally.failed = st.WithFile(path);
        break;
      }
      if (eof) break;
      st = h.LearnBufferLocked(b);
      if (!tally.Add(st.ok() ? st : st.WithContext("'" + path + "'"), skip_bad)) break;
    }
  });
  return tally.Result();
}

py::dict Info(Handle& h) {
  // Copied under the mutex, then made into Python objects without it (making
  // them may run Python code and let another thread take the GIL and wait
  // for the mutex).
  struct Copy {
    std::string family, family_version, loss, vocabulary, schedule, digest;
    std::vector<std::string> classes;
    uint64_t vocabulary_size = 0, statistics = 0, updates = 0, unseen_terms = 0;
    double effective_size = 0;
    uint32_t outputs = 0;
    bool latent = false;
    Options options;
  };
  const Copy c = h.Locked([&] {
    const Model& m = h.served();
    Copy x;
    x.family = m.family().name;
    x.family_version = m.family().version;
    x.loss = m.loss_plugin() ? m.loss_plugin()->name : "";
    x.classes = m.schema().classes();
    x.vocabulary_size = m.schema().vocab_size();
    x.vocabulary = m.schema().open_vocabulary() ? "open" : m.schema().hashed() ? "hashed" : "closed";
    x.statistics = m.stats().size();
    x.updates = m.learner_state().updates;
    x.effective_size = m.learner_state().effective_size;
    x.schedule = m.learner_state().schedule.ToString();
    x.digest = m.StatsDigest();
    x.outputs = m.num_outputs();
    x.latent = m.latent_outputs();
    x.unseen_terms = h.counters().unseen_terms;
    x.options = m.family_options();
    return x;
  });
  py::dict j;
  j["family"] = c.family;
  j["family_version"] = c.family_version;
  j["loss"] = c.loss;
  j["classes"] = c.classes;
  j["vocabulary_size"] = c.vocabulary_size;
  j["vocabulary"] = c.vocabulary;
  j["statistics"] = c.statistics;
  j["updates"] = c.updates;
  j["effective_size"] = c.effective_size;
  j["schedule"] = c.schedule;
  j["stats_digest"] = c.digest;
  j["outputs"] = c.outputs;
  j["latent"] = c.latent;
  j["unseen_terms"] = c.unseen_terms;
  py::dict opts;
  for (const auto& [k, v] : c.options) opts[py::str(k)] = v;
  j["options"] = opts;
  return j;
}

}  // namespace tributary::python
