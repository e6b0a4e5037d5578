// _tributary: the Python binding of the library's learner API (learner.h,
// model_config.h, trainer.h). The Python package `tributary` (python/tributary)
// wraps it in River-style and scikit-learn-style classes; nothing here trains
// in its own way: documents go through the same DocumentDecoder, the same
// DecodeGrowing (open vocabulary, open classes) and the same Learner as
// `tributary train`, so one stream gives one model whichever front end read it.
//
// Threads and the GIL: every call that touches a model releases the GIL
// first, then takes the handle's mutex (never the other way round, so a
// thread holding the mutex never waits for the GIL). Python objects are
// converted into documents before the GIL is released. Errors: a Status
// becomes a C++ StatusError, translated into the module's exception classes
// (InvalidDocument, PluginError, ...), never a crash of the interpreter.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tributary/convert.h"
#include "tributary/document.h"
#include "tributary/document_source.h"
#include "tributary/input_document.h"
#include "tributary/latent_metrics.h"
#include "tributary/learner.h"
#include "tributary/live_model.h"
#include "tributary/model.h"
#include "tributary/model_config.h"
#include "tributary/plugin_registry.h"
#include "tributary/quality_monitor.h"
#include "tributary/sep_engine.h"
#include "tributary/stream_io.h"
#include "tributary/tokenizer.h"
#include "tributary/trainer.h"
#include "tributary/v1/tributary.pb.h"
#include "tributary/version.h"

namespace py = pybind11;

namespace tributary::python {
namespace {

// A Status on its way to Python.
struct StatusError {
  Status status;
};

[[noreturn]] void Throw(const Status& st) { throw StatusError{st}; }
void Check(const Status& st) {
  if (!st.ok()) Throw(st);
}
template <typename T>
T Take(Result<T> r) {
  if (!r.ok()) Throw(r.status());
  return std::move(r).value();
}

// The plugin registry: the package's own plugin directory (the built-ins,
// set by tributary/__init__.py before the first use), then
// $TRIBUTARY_PLUGIN_PATH, as the program does.
std::string g_builtin_dir;
const PluginRegistry& Registry() {
  static PluginRegistry* reg = [] {
    std::vector<std::string> path;
    path.push_back(g_builtin_dir.empty() ? PluginRegistry::BuiltinPluginDir() : g_builtin_dir);
    auto rest = PluginRegistry::DefaultSearchPath();
    for (size_t i = 1; i < rest.size(); ++i) path.push_back(rest[i]);
    return new PluginRegistry(std::move(path), true);
  }();
  return *reg;
}

Options ToOptions(const py::dict& d) {
  Options out;
  for (auto [k, v] : d) {
    std::string value;
    if (py::isinstance<py::bool_>(v)) {
      value = v.cast<bool>() ? "true" : "false";
    } else if (py::isinstance<py::float_>(v)) {
      // repr: the shortest text that reads back as the same double.
      value = py::repr(v).cast<std::string>();
    } else {
      value = py::str(v).cast<std::string>();
    }
    out.emplace_back(py::str(k).cast<std::string>(), value);
  }
  return out;
}

// ---- Python objects -> documents (GIL held).

// What a Python `x` may be: raw text (tokenized as `convert` does: the
// decoder's text field), a dict term -> count, or, for a model with
// features, a dict feature name -> value (a number; a category name or index
// for a categorical feature; None, or the key left out, for missing). Built
// as an InputDocument (input_document.h), the library's one rule set for a
// document in names; only the Python types are checked here.
constexpr uint64_t kUnnumbered = UINT64_MAX;  // FillInput's index for a document the caller numbers itself

void FillInput(const ModelSchema& schema, const py::handle& x, uint64_t index, InputDocument* in) {
  in->Clear();
  auto where = [&] { return index == kUnnumbered ? std::string("document") : DocumentName(index, ""); };
  auto type_name = [](const py::handle& v) { return py::str(py::type::of(v).attr("__name__")).cast<std::string>(); };
  if (py::isinstance<py::str>(x)) {
    if (!schema.features().empty()) {
      Throw(Status::InvalidDocument(where() + ": the model takes features (" +
                                    std::to_string(schema.features().size()) +
                                    "), not text: pass a dict feature name -> value"));
    }
    in->AddText(x.cast<std::string>());
    return;
  }
  if (!py::isinstance<py::dict>(x)) {
    Throw(Status::InvalidDocument(where() + ": expected text (str) or a dict, found " + type_name(x)));
  }
  auto d = py::reinterpret_borrow<py::dict>(x);
  for (auto [k, v] : d) {
    if (!py::isinstance<py::str>(k)) {
      Throw(Status::InvalidDocument(where() + ": " + (schema.features().empty() ? "terms" : "feature names") +
                                    " must be str, found " + type_name(k) + " " + py::repr(k).cast<std::string>()));
    }
    const std::string name = k.cast<std::string>();
    if (schema.features().empty()) {
      double c;
      try {
        c = v.cast<double>();
      } catch (const py::cast_error&) {
        Throw(Status::InvalidDocument(where() + ": the count of term '" + name + "' must be a number, found " +
                                      py::repr(v).cast<std::string>()));
      }
      in->AddTerm(name, c);
      continue;
    }
    const FeatureSpecInfo* spec = nullptr;
    for (const auto& f : schema.features()) spec = f.name == name ? &f : spec;
    if (v.is_none() || spec == nullptr) {
      in->SetMissing(name);  // (an unknown name is refused by ToProto, naming the features)
      continue;
    }
    if (spec->kind != TRIB_FEATURE_CATEGORICAL) {
      try {
        in->SetReal(name, v.cast<double>());
      } catch (const py::cast_error&) {
        Throw(Status::InvalidDocument(where() + ": feature '" + name + "' must be a number, found " +
                                      py::repr(v).cast<std::string>()));
      }
    } else if (py::isinstance<py::str>(v)) {
      in->SetCategory(name, v.cast<std::string>());
    } else if (py::isinstance<py::int_>(v) && !py::isinstance<py::bool_>(v)) {
      // A category by its index in the schema.
      const int64_t idx = v.cast<int64_t>();
      if (idx < 0 || idx >= static_cast<int64_t>(spec->categories.size())) {
        Throw(Status::InvalidDocument(where() + ": feature '" + name + "': category index " + std::to_string(idx) +
                                      " is not one of its " + std::to_string(spec->categories.size()) +
                                      " categories (0 .. " + std::to_string(spec->categories.size() - 1) + ")"));
      }
      in->SetCategory(name, spec->categories[static_cast<size_t>(idx)]);
    } else {
      Throw(Status::InvalidDocument(where() + ": feature '" + name +
                                    "' is categorical: expected a category name or index, found " +
                                    py::repr(v).cast<std::string>()));
    }
  }
}

// LiveClassifier's schema: text (its documents have no features).
const ModelSchema& TextOnlySchema() {
  static const ModelSchema* schema = [] {
    auto s = ModelSchema::FromProto(TextStreamSchema());
    return new ModelSchema(std::move(s).value());
  }();
  return *schema;
}

// `x` as the wire format's document for a model of `schema` (FillInput, then
// InputDocument::ToProto; errors name the document).
void FillDocument(const ModelSchema& schema, const py::handle& x, uint64_t index, v1::Document* doc) {
  InputDocument in;
  FillInput(schema, x, index, &in);
  Status st = in.ToProto(schema, doc);
  if (!st.ok()) Throw(st.WithContext(DocumentName(index, "")));
}

void SetLabel(const py::handle& y, uint64_t index, v1::Document* doc) {
  if (y.is_none()) return;
  if (!py::isinstance<py::str>(y)) {
    Throw(Status::InvalidDocument(DocumentName(index, "") +
                                  ": a label must be str (the Python classes convert), found " +
                                  py::repr(y).cast<std::string>()));
  }
  doc->set_label(y.cast<std::string>());
}

// ---- The model handle.

class Handle {
 public:
  // A model that holds a live learner (live_learner.h: Classifier's default,
  // or a snapshot serve or prequential wrote) is learned by it.
  Handle(std::unique_ptr<Model> model, LearnerOptions lo) : lo_(std::move(lo)) { Reset(std::move(model)); }

  // The model documents are decoded against and grown (a live learner's
  // first candidate: the candidates share its ids).
  Model& model() { return live_ ? *live_->schema_model() : *model_; }
  // The model that predicts (a live learner's served candidate).
  Model& served() {
    if (live_) Check(live_->SyncClasses());  // (classes model() gained since)
    return live_ ? live_->served() : *model_;
  }
  LiveLearner* live() { return live_.get(); }
  std::mutex& mu() { return mu_; }
  // Runs fn() with the GIL released and the model's mutex held, and returns
  // what it returns: the one way into the model from Python (a thread never
  // waits for the mutex while holding the GIL, which the thread holding the
  // mutex may need). fn makes C++ values only; Python objects are made from
  // them after, with the GIL back.
  template <typename Fn>
  auto Locked(Fn&& fn) {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mu_);
    return fn();
  }

  // The bytes of a snapshot (mu held): the model, or the live learner whole.
  Result<std::string> SerializeLocked() { return live_ ? live_->Serialize() : model_->Serialize(); }
  Status SaveLocked(const std::string& path) { return live_ ? live_->Save(path) : model_->Save(path); }

  // Learns one document (mu held). On error nothing learned is lost and the
  // model is as it was before this document (learner.h; a new class or new
  // terms the document brought stay added, at their prior).
  Status LearnLocked(const v1::Document& doc) {
    const uint64_t index = next_index_++;
    bool grew = false;
    TRIB_RETURN_IF_ERROR(
        DecodeGrowing(*decoder_, doc, index, &model(), kGrowClassesAndTerms, &buf_, &counters_, &grew));
    return LearnAndMeasure(buf_);
  }

  // One step on `b`, its label's prequential figures noted (mu held): sdEM
  // scores the document before its step (learner.h LearnResult).
  Status LearnAndMeasure(const DocumentBuffer& b) {
    if (live_) {
      // Test-then-train by every candidate; the served one's scores.
      TRIB_RETURN_IF_ERROR(live_->SyncClasses());
      LiveStep step;
      TRIB_RETURN_IF_ERROR(live_->Learn(b, &step));
      quality_.Add(step.scores->data(), static_cast<uint32_t>(step.scores->size()), static_cast<uint32_t>(b.label));
      return Status::OK();
    }
    TRIB_RETURN_IF_ERROR(EnsureLearner());
    LearnResult o;
    TRIB_RETURN_IF_ERROR(learner_->Learn(b.View(), &o));
    if (o.scores != nullptr && b.label >= 0 && !model_->latent_outputs()) {
      quality_.Add(o.scores->data(), static_cast<uint32_t>(o.scores->size()), static_cast<uint32_t>(b.label));
    }
    return Status::OK();
  }

  // What the learner knows of its predictions so far (mu held).
  const QualityMonitor& quality() const { return quality_; }

  // Test-then-train (mu held): the document is decoded (the model growing
  // with it), scored by the model as it is, then learned. *correct: the
  // argmax was its label; *ncll: -log p(label | x) before learning.
  Status PrequentialLocked(const v1::Document& doc, bool* correct, double* ncll) {
    const uint64_t index = next_index_++;
    TRIB_RETURN_IF_ERROR(
        DecodeGrowing(*decoder_, doc, index, &model(), kGrowClassesAndTerms, &buf_, &counters_, nullptr));
    if (buf_.label < 0) return Status::InvalidDocument(buf_.Name() + ": prequential evaluation needs a label");
    scores_.resize(model().num_outputs());
    TRIB_RETURN_IF_ERROR(ScoreBuffer(buf_, scores_.data()));
    const auto best = std::max_element(scores_.begin(), scores_.end()) - scores_.begin();
    *correct = best == buf_.label;
    double m = *std::max_element(scores_.begin(), scores_.end()), z = 0;
    for (double v : scores_) z += std::exp(v - m);
    *ncll = -(scores_[static_cast<size_t>(buf_.label)] - m - std::log(z));
    return LearnAndMeasure(buf_);
  }

  // Learns a buffer in the model's ids (mu held).
  Status LearnBufferLocked(const DocumentBuffer& b) {
    ++next_index_;
    return LearnAndMeasure(b);
  }

  // log p(k, x) for every output (mu held).
  Status ScoreLocked(const v1::Document& doc, double* out) {
    const uint64_t index = next_predict_++;
    TRIB_RETURN_IF_ERROR(decoder_->Decode(doc, index, model().schema(), kGrowNothing, &buf_, nullptr, nullptr));
    buf_.label = -1;
    return ScoreBuffer(buf_, out);
  }

  Status ScoreBuffer(const DocumentBuffer& b, double* out) {
    if (live_) TRIB_RETURN_IF_ERROR(live_->SyncClasses());
    const Model& m = live_ ? live_->served() : *model_;
    // (A state per model and layout: a live learner may serve another candidate.)
    if (!scoring_ || scoring_layout_ != m.layout_version() || scoring_model_ != &m) {
      auto s = m.NewScoringState(lo_.seed);
      if (!s.ok()) return s.status();
      scoring_ = std::move(s).value();
      scoring_layout_ = m.layout_version();
      scoring_model_ = &m;
    }
    return m.Score(b.View(), scoring_.get(), out);
  }

  uint32_t outputs() { return model().num_outputs(); }
  const DecodeCounters& counters() const { return counters_; }
  uint64_t documents_learned() const { return next_index_.load(); }
  const LearnerOptions& learner_options() const { return lo_; }

  // A model replaced wholesale (load, fit): the learner and scoring states
  // are rebuilt for it.
  void Reset(std::unique_ptr<Model> m) {
    learner_.reset();
    scoring_.reset();
    scoring_model_ = nullptr;
    quality_ = QualityMonitor();
    if (LiveLearner::Holds(*m)) {
      live_ = Take(LiveLearner::FromModel(std::move(m), Registry()));
      model_.reset();
      // Documents are numbered on from those the learner learned (a held
      // one keeps its number in the snapshot: a resumed learner numbers the
      // next ones as the original would).
      next_index_ = live_->labelled();
    } else {
      live_.reset();
      model_ = std::move(m);
    }
    decoder_ = std::make_unique<DocumentDecoder>(Take(DocumentDecoder::ForModel(model().schema())));
  }

 private:
  // The learner, made on the first document (a model only predicted from
  // needs none: a loaded model without a loss, say).
  Status EnsureLearner() {
    if (learner_) return Status::OK();
    auto l = Learner::Create(model_.get(), lo_);
    if (!l.ok()) return l.status();
    learner_ = std::move(l).value();
    return Status::OK();
  }

  std::mutex mu_;
  std::unique_ptr<Model> model_;       // one model, or
  std::unique_ptr<LiveLearner> live_;  // a live learner
  LearnerOptions lo_;
  std::unique_ptr<Learner> learner_;
  std::unique_ptr<DocumentDecoder> decoder_;
  std::unique_ptr<ScoringState> scoring_;
  uint64_t scoring_layout_ = 0;
  const Model* scoring_model_ = nullptr;  // the model scoring_ was made for
  DocumentBuffer buf_;
  std::vector<double> scores_;
  DecodeCounters counters_;
  QualityMonitor quality_;  // every labelled document scored before its step
  // Documents offered to learn (their indices name them in errors): read
  // without the mutex (to number a batch before it is learned), so atomic.
  std::atomic<uint64_t> next_index_{0};
  uint64_t next_predict_ = 0;
};

// The schema of a new model: text with an open vocabulary (families that can
// add terms) or hashed terms, open classes; or the features given.
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

// select "auto" (learn_one's default): the live learner (live_learner.h),
// its candidates built by `build` as `single` was, as one model holding it;
// `single` itself under "off", for SEP engines, latent families and a loss
// that learns unlabelled documents (nll). As `serve` does.
std::unique_ptr<Model> LiveOrSingle(const std::string& select, const std::string& engine, const ModelConfig& base,
                                    std::unique_ptr<Model> single,
                                    const std::function<Result<std::unique_ptr<Model>>(const ModelConfig&)>& build) {
  if (!LiveLearnerApplies(select, engine, *single)) return single;
  return Take(LiveLearner::ToModel(Take(NewDefaultLiveLearner(base, build))));
}

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
      c.schedule = py::str(v).cast<std::string>();
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

LearnerOptions LearnerFrom(const std::string& engine, uint64_t seed, double damping) {
  LearnerOptions lo;
  lo.engine = engine;
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
  if (auto fam = Registry().Find(c.family, TRIB_KIND_FAMILY); fam.ok()) c.loss = RecordedLoss(engine, **fam, c.loss);
  if (select != "auto" && select != "off") {
    Throw(Status::InvalidArgument("select: expected 'auto' or 'off', found '" + select + "'"));
  }
  std::unique_ptr<Model> m;
  {
    py::gil_scoped_release nogil;
    m = Take(NewModel(c, Registry(), schema, 0));
    m = LiveOrSingle(select, engine, c, std::move(m),
                     [&](const ModelConfig& cc) { return NewModel(cc, Registry(), schema, 0); });
  }
  return std::make_shared<Handle>(std::move(m), LearnerFrom(engine, seed, damping));
}

// Converts xs (and ys) into documents, GIL held.
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

// Learns docs in order; with skip_bad, a document refused as invalid or
// numerically bad is counted and left out (the stream goes on), else the
// first refusal stops (the documents before it stay learned).
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

// A CSR matrix (scipy.sparse, or a dense array made sparse in Python): row r
// is document r, column j term j of the model. Its rows become buffers
// directly, not wire documents: an all-zero row is a document with no words
// (scored by the class prior, learned as such), which a count matrix
// legitimately holds and the wire format's rule refuses.
using IndexArray = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
using ValueArray = py::array_t<double, py::array::c_style | py::array::forcecast>;
struct Csr {
  IndexArray indptr, indices;
  ValueArray data;
  std::vector<std::optional<std::string>> labels;  // empty, or one per row
  std::vector<double> weights;                     // empty, or one per row (finite, > 0)
  int64_t rows() const { return static_cast<int64_t>(indptr.size()) - 1; }
};

Csr MakeCsr(IndexArray indptr, IndexArray indices, ValueArray data, const py::object& labels,
            const py::object& weights = py::none()) {
  Csr m{std::move(indptr), std::move(indices), std::move(data), {}, {}};
  if (m.rows() < 0) Throw(Status::InvalidArgument("csr: indptr is empty"));
  const int64_t* ip = m.indptr.data();
  if (m.indices.size() != m.data.size() || ip[0] != 0 || ip[m.rows()] != static_cast<int64_t>(m.indices.size())) {
    Throw(Status::InvalidArgument("csr: indptr, indices and data do not agree"));
  }
  for (int64_t r = 0; r < m.rows(); ++r) {
    if (ip[r + 1] < ip[r]) Throw(Status::InvalidArgument("csr: indptr decreases at row " + std::to_string(r)));
  }
  if (!labels.is_none()) {
    auto seq = py::reinterpret_borrow<py::sequence>(labels);
    if (static_cast<int64_t>(seq.size()) != m.rows()) {
      Throw(Status::InvalidArgument("csr: " + std::to_string(m.rows()) + " rows but " + std::to_string(seq.size()) +
                                    " labels"));
    }
    for (size_t r = 0; r < seq.size(); ++r) {
      v1::Document d;
      SetLabel(seq[r], r, &d);
      m.labels.push_back(d.has_label() ? std::optional<std::string>(d.label()) : std::nullopt);
    }
  }
  if (!weights.is_none()) {
    auto w = weights.cast<ValueArray>();
    if (static_cast<int64_t>(w.size()) != m.rows()) {
      Throw(Status::InvalidArgument("csr: " + std::to_string(m.rows()) + " rows but " + std::to_string(w.size()) +
                                    " weights"));
    }
    m.weights.assign(w.data(), w.data() + w.size());
    for (size_t r = 0; r < m.weights.size(); ++r) {
      if (!(std::isfinite(m.weights[r]) && m.weights[r] > 0)) {
        Throw(Status::InvalidDocument(DocumentName(r, "") + ": weight is " + std::to_string(m.weights[r]) +
                                      ", expected a finite number > 0"));
      }
    }
  }
  return m;
}

// Row r as a document of a model with `vocab` terms (label left at -1).
// Errors name the row: a column out of range, a count that is not finite
// and >= 0 (zeros are not terms).
Status CsrRow(const Csr& m, int64_t r, uint64_t vocab, DocumentBuffer* out) {
  out->Clear();
  out->index = static_cast<uint64_t>(r);
  const int64_t* ip = m.indptr.data();
  const int64_t* ix = m.indices.data();
  const double* dv = m.data.data();
  for (int64_t p = ip[r]; p < ip[r + 1]; ++p) {
    if (ix[p] < 0 || static_cast<uint64_t>(ix[p]) >= vocab) {
      return Status::InvalidDocument(out->Name() + ": column " + std::to_string(ix[p]) +
                                     " is out of range (the model has " + std::to_string(vocab) + " terms)");
    }
    if (!(std::isfinite(dv[p]) && dv[p] >= 0)) {
      return Status::InvalidDocument(out->Name() + ": the count in column " + std::to_string(ix[p]) + " is " +
                                     std::to_string(dv[p]) + ", expected a finite count >= 0");
    }
    if (dv[p] == 0.0) continue;
    out->term_ids.push_back(static_cast<uint32_t>(ix[p]));
    out->term_counts.push_back(dv[p]);
  }
  if (!m.weights.empty()) out->weight = m.weights[static_cast<size_t>(r)];
  out->Canonicalize();
  return Status::OK();
}

// The class index of `name` in `model`, adding it where the classes are open.
Status ResolveLabel(Model* model, const DocumentBuffer& b, const std::string& name, int64_t* label) {
  *label = model->schema().ClassIndex(name);
  if (*label >= 0) return Status::OK();
  if (!model->schema().open_classes()) {
    std::string all;
    for (const auto& c : model->schema().classes()) all += (all.empty() ? "'" : ", '") + c + "'";
    return Status::InvalidDocument(b.Name() + ": label '" + name + "' is not a class of the model (" + all + ")");
  }
  TRIB_RETURN_IF_ERROR(model->AddClass(name).WithContext(b.Name()));
  *label = model->schema().ClassIndex(name);
  return Status::OK();
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

// `tributary train`'s defaults on documents in memory (trainer.h): the
// candidates of DefaultCandidates learn shuffled passes and the one that
// predicts a held-out part of the training documents best is kept. What
// SdemClassifier.fit does, as `train` on a file.
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
  cfg.candidates = DefaultCandidates(base, /*streaming=*/false, &schema_model->family());
  cfg.epochs = epochs;
  cfg.seed = seed;
  cfg.threads = threads;
  Model* classes_from = schema_model.get();
  ModelFactory factory = [&](const CandidateSpec& c) -> Result<std::unique_ptr<Model>> {
    auto m = NewModel(CandidateConfig(base, c), Registry(), schema, length);
    if (!m.ok()) return m.status();
    TRIB_RETURN_IF_ERROR((*m)->GrowTo(classes_from->schema()));
    return m;
  };
  TrainReport report;
  std::unique_ptr<Model> model = Take(Trainer::TrainOffline(factory, cfg, set, &report));
  model->learner_state().skipped_documents += skipped;
  model->set_training_report(report.ToJson());
  std::string json = report.ToJson();
  return {std::make_shared<Handle>(std::move(model), LearnerFrom("sdem", seed, 0)), json};
}

// What `tributary eval` reports for a latent model (latent_metrics.h) over
// the documents: perplexity (document completion where the family has it),
// log p(x) per document, clusters' sizes; for SEP families the approximate
// log evidence.
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

// Learns a stream file the way `tributary train --select off` does: frames
// decoded against the file's header schema (DocumentDecoder::Create), the
// model growing with its open vocabulary and classes.
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

// A stream file read back as Python objects: header() and, per document,
// (x, y, id) with x the text, a dict term -> count (term names from the
// header's vocabulary; hashed ids as "#<id>"), or a dict feature -> value.
class StreamIter {
 public:
  StreamIter(const std::string& path, uint32_t max_frame_bytes) : path_(path) {
    reader_ = Take(DocumentReader::Open(path, max_frame_bytes));
  }
  py::dict header() const {
    const auto& h = reader_->fields();
    py::dict d;
    d["document_count"] = h.document_count();
    d["source"] = h.source();
    d["vocabulary_size"] = reader_->vocabulary().size();
    d["hashed_dim"] = h.schema().hashed_dim();
    d["open_vocabulary"] = h.schema().open_vocabulary();
    d["open_classes"] = h.schema().open_classes();
    std::vector<std::string> classes(h.schema().class_names().begin(), h.schema().class_names().end());
    d["classes"] = classes;
    py::list features;
    for (const auto& f : h.schema().features()) {
      features.append(py::make_tuple(f.name(),
                                     f.kind() == v1::FeatureSpec::CATEGORICAL ? "categorical"
                                     : f.kind() == v1::FeatureSpec::COUNT     ? "count"
                                                                              : "real",
                                     std::vector<std::string>(f.categories().begin(), f.categories().end())));
    }
    d["features"] = features;
    return d;
  }
  py::tuple Next() {
    v1::Document doc;
    bool eof = false;
    {
      py::gil_scoped_release nogil;
      Check(reader_->Next(&doc, &eof));
    }
    if (eof) throw py::stop_iteration();
    const auto& schema = reader_->fields().schema();
    const std::vector<std::string>& vocab = reader_->vocabulary();
    py::object x;
    if (!doc.text().empty()) {
      x = py::str(doc.text());
    } else if (schema.features_size() > 0 && doc.term_ids_size() == 0 && doc.tokens_size() == 0) {
      py::dict d;
      int ri = 0, ci = 0;
      for (int f = 0; f < schema.features_size(); ++f) {
        const auto& spec = schema.features(f);
        const bool missing = std::find(doc.missing_features().begin(), doc.missing_features().end(),
                                       static_cast<uint32_t>(f)) != doc.missing_features().end();
        if (spec.kind() == v1::FeatureSpec::CATEGORICAL) {
          const int at = ci++;
          if (missing || at >= doc.categoricals_size()) continue;
          const uint32_t c = doc.categoricals(at);
          d[py::str(spec.name())] = c < static_cast<uint32_t>(spec.categories_size())
                                        ? py::object(py::str(spec.categories(static_cast<int>(c))))
                                        : py::object(py::int_(c));
        } else {
          const int at = ri++;
          if (missing || at >= doc.reals_size()) continue;
          d[py::str(spec.name())] = doc.reals(at);
        }
      }
      x = d;
    } else {
      py::dict d;
      auto add = [&](const std::string& term, double c) {
        py::str k(term);
        d[k] = d.contains(k) ? d[k].cast<double>() + c : c;
      };
      for (int i = 0; i < doc.term_ids_size(); ++i) {
        const uint32_t id = doc.term_ids(i);
        const double c = i < doc.term_counts_size() ? doc.term_counts(i) : 1.0;
        add(id < vocab.size() ? vocab[id] : "#" + std::to_string(id), c);
      }
      for (int i = 0; i < doc.tokens_size(); ++i)
        add(doc.tokens(i), i < doc.token_counts_size() ? doc.token_counts(i) : 1.0);
      x = d;
    }
    py::object y = doc.has_label() ? py::object(py::str(doc.label())) : py::object(py::none());
    return py::make_tuple(x, y, doc.id());
  }

 private:
  std::string path_;
  std::unique_ptr<DocumentReader> reader_;
};

// Writes documents (text or dict term -> count; labels; ids) as a stream
// whose header has an open vocabulary and open classes, as `convert
// --open-vocabulary` of live text does: `tributary train --in path` learns it.
uint64_t WriteStream(const std::string& path, const py::sequence& xs, const py::object& ys, const py::object& ids,
                     const std::string& source) {
  v1::StreamHeader header = NewStreamHeader(/*frame_checksum=*/true);
  header.mutable_schema()->set_open_vocabulary(true);
  header.mutable_schema()->set_open_classes(true);
  header.set_document_count(xs.size());
  header.set_source(source);
  ModelSchema text_schema = Take(ModelSchema::FromProto(header.schema()));
  std::vector<v1::Document> docs(xs.size());
  py::sequence ysq, idq;
  if (!ys.is_none()) ysq = py::reinterpret_borrow<py::sequence>(ys);
  if (!ids.is_none()) idq = py::reinterpret_borrow<py::sequence>(ids);
  if ((!ys.is_none() && ysq.size() != xs.size()) || (!ids.is_none() && idq.size() != xs.size())) {
    Throw(Status::InvalidArgument("write_stream: xs, ys and ids differ in length"));
  }
  for (size_t i = 0; i < docs.size(); ++i) {
    FillDocument(text_schema, xs[i], i, &docs[i]);
    if (!ys.is_none()) SetLabel(ysq[i], i, &docs[i]);
    if (!ids.is_none()) docs[i].set_id(py::str(idq[i]).cast<std::string>());
  }
  py::gil_scoped_release nogil;
  auto w = Take(DocumentWriter::Create(path, header));
  for (const auto& d : docs) Check(w->Write(d));
  Check(w->Close());
  return docs.size();
}

py::dict Info(Handle& h) {
  // (Read with the GIL held and the mutex taken after it, as stats() does:
  // the mutex's holder never needs the GIL.)
  std::lock_guard<std::mutex> lock(h.mu());
  const Model& m = h.served();
  py::dict j;
  j["family"] = m.family().name;
  j["family_version"] = m.family().version;
  j["loss"] = m.loss_plugin() ? m.loss_plugin()->name : "";
  j["classes"] = m.schema().classes();
  j["vocabulary_size"] = m.schema().vocab_size();
  j["vocabulary"] = m.schema().open_vocabulary() ? "open" : m.schema().hashed() ? "hashed" : "closed";
  j["statistics"] = m.stats().size();
  j["updates"] = m.learner_state().updates;
  j["effective_size"] = m.learner_state().effective_size;
  j["schedule"] = m.learner_state().schedule.ToString();
  j["stats_digest"] = m.StatsDigest();
  j["outputs"] = m.num_outputs();
  j["latent"] = m.latent_outputs();
  j["unseen_terms"] = h.counters().unseen_terms;
  py::dict opts;
  for (const auto& [k, v] : m.family_options()) opts[py::str(k)] = v;
  j["options"] = opts;
  return j;
}

// LiveModel (live_model.h) for Python: one handle learned from any thread,
// a reader per predicting thread (tributary.LiveClassifier keeps one per
// Python thread). A reader holds the handle, so the handle outlives every
// reader whatever order Python frees them in.
struct LiveHolder {
  std::unique_ptr<LiveModel> live;
};
struct LiveReaderBox {
  std::shared_ptr<LiveHolder> owner;  // declared first: destroyed last
  std::unique_ptr<LiveModel::Reader> reader;
};

}  // namespace
}  // namespace tributary::python

PYBIND11_MODULE(_tributary, mod) {
  using namespace tributary;
  using namespace tributary::python;
  mod.doc() = "Tributary's learner API (the C++ library), wrapped by the `tributary` package";

  // Exceptions: one class per Status code, all under tributary.Error, some
  // also under the built-in exception a Python caller would catch.
  static py::exception<StatusError> error(mod, "Error", PyExc_RuntimeError);
  struct ExceptionClass {
    Status::Code code;
    const char* name;
    PyObject* also;  // a second base, or null
  };
  const ExceptionClass table[] = {
      {Status::Code::kInvalidArgument, "InvalidArgument", PyExc_ValueError},
      {Status::Code::kInvalidDocument, "InvalidDocument", PyExc_ValueError},
      {Status::Code::kCorruption, "CorruptionError", nullptr},
      {Status::Code::kNotFound, "NotFoundError", PyExc_LookupError},
      {Status::Code::kPluginError, "PluginError", nullptr},
      {Status::Code::kNumeric, "NumericError", PyExc_ArithmeticError},
      {Status::Code::kIOError, "IOError", PyExc_OSError},
  };
  // Indexed by Status::Code; null: tributary.Error itself.
  static std::vector<py::handle> by_code(static_cast<size_t>(Status::Code::kInternal) + 1);
  for (const auto& c : table) {
    py::object bases = c.also ? py::object(py::make_tuple(error, py::handle(c.also))) : py::object(error);
    py::handle cls = PyErr_NewException((std::string("_tributary.") + c.name).c_str(), bases.ptr(), nullptr);
    mod.attr(c.name) = cls;
    by_code[static_cast<size_t>(c.code)] = cls;
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      const auto code = static_cast<size_t>(e.status.code());
      py::handle cls = code < by_code.size() && by_code[code] ? by_code[code] : py::handle(error);
      PyErr_SetString(cls.ptr(), e.status.message().c_str());
    }
  });

  mod.def("version", [] { return std::string(Version()); });
  mod.def(
      "set_builtin_plugin_dir", [](const std::string& dir) { g_builtin_dir = dir; },
      "The built-in plugin directory (the package's); before the first model only.");
  mod.def(
      "tokenize",
      [](const std::string& text) {
        std::vector<std::string> out;
        Tokenize(text, &out);
        return out;
      },
      "The library's tokenizer: the words `convert` and raw text learn from (docs/tokenizer.md).");
  mod.def(
      "hash_term", [](const std::string& term, uint64_t dim) { return HashToken(term, dim); },
      "The id a hashed vocabulary of `dim` ids gives `term` (as `convert --hashed-dim`).");
  mod.def(
      "plugins",
      [] {
        py::gil_scoped_release nogil;
        const auto& all = Registry().plugins();
        py::gil_scoped_acquire gil;
        py::list out;
        for (const auto& p : all) {
          py::dict d;
          d["kind"] = KindName(p->kind);
          d["name"] = p->name;
          d["version"] = p->version;
          d["description"] = p->description;
          d["path"] = p->path;
          d["builtin"] = p->builtin;
          out.append(d);
        }
        return out;
      },
      "Every plugin found on the search path (the package's built-ins, then $TRIBUTARY_PLUGIN_PATH).");
  mod.def(
      "add_plugin",
      [](const std::string& path) {
        py::gil_scoped_release nogil;
        Check(Registry().Add(path));
      },
      "Loads a plugin file and registers it under its name (as `tributary --plugin PATH`).");

  mod.def(
      "train_offline",
      [](const std::string& family, const std::string& loss, const py::dict& options, const py::dict& loss_options,
         const py::dict& schedule, double n, uint64_t seed, const py::object& classes, const py::object& vocabulary,
         uint64_t hashed_dim, const py::object& features, const py::object& xs, const py::object& ys,
         const py::object& csr, uint32_t epochs, uint32_t threads, bool skip_bad, const py::object& weights) {
        // Classes given: a closed set; none: open, as they come.
        const v1::Schema proto = NewSchema(family, classes, classes.is_none(), vocabulary, hashed_dim, features);
        std::vector<v1::Document> docs;
        std::optional<Csr> matrix;
        if (!csr.is_none()) {
          auto t = py::reinterpret_borrow<py::tuple>(csr);
          matrix = MakeCsr(t[0].cast<IndexArray>(), t[1].cast<IndexArray>(), t[2].cast<ValueArray>(), ys, weights);
        } else {
          // Text or dicts: the schema decides how a dict reads (features or terms).
          ModelSchema schema = Take(ModelSchema::FromProto(proto));
          auto seq = py::reinterpret_borrow<py::sequence>(xs);
          auto ysq = py::reinterpret_borrow<py::sequence>(ys);
          if (seq.size() != ysq.size()) {
            Throw(Status::InvalidArgument("fit: " + std::to_string(seq.size()) + " documents but " +
                                          std::to_string(ysq.size()) + " labels"));
          }
          docs.resize(seq.size());
          for (size_t i = 0; i < docs.size(); ++i) {
            FillDocument(schema, seq[i], i, &docs[i]);
            SetLabel(ysq[i], i, &docs[i]);
          }
        }
        auto [handle, report] = TrainOffline(family, loss, options, loss_options, schedule, n, seed, proto, docs,
                                             matrix ? &*matrix : nullptr, epochs, threads, skip_bad);
        return py::make_tuple(handle, report);
      },
      py::arg("family"), py::arg("loss"), py::arg("options"), py::arg("loss_options"), py::arg("schedule"),
      py::arg("n"), py::arg("seed"), py::arg("classes"), py::arg("vocabulary"), py::arg("hashed_dim"),
      py::arg("features"), py::arg("xs"), py::arg("ys"), py::arg("csr"), py::arg("epochs"), py::arg("threads"),
      py::arg("skip_bad"), py::arg("weights") = py::none(),
      "train's defaults (trainer.h) on documents in memory; returns (model, training report as JSON).");

  py::class_<StreamIter>(mod, "StreamReader")
      .def(py::init<const std::string&, uint32_t>(), py::arg("path"),
           py::arg("max_frame_bytes") = kDefaultMaxFrameBytes)
      .def("header", &StreamIter::header)
      .def("__iter__", [](StreamIter& it) -> StreamIter& { return it; })
      .def("__next__", &StreamIter::Next);
  mod.def("write_stream", &WriteStream, py::arg("path"), py::arg("xs"), py::arg("ys"), py::arg("ids"),
          py::arg("source") = "python",
          "Writes documents as a stream (open vocabulary and classes) that `tributary train` reads.");

  py::class_<LiveReaderBox, std::shared_ptr<LiveReaderBox>>(mod, "LiveReader")
      .def(
          "predict",
          [](LiveReaderBox& r, const py::object& x) {
            InputDocument d;
            FillInput(TextOnlySchema(), x, kUnnumbered, &d);
            LivePrediction p;
            {
              py::gil_scoped_release nogil;
              Check(r.reader->Predict(d, &p));
            }
            return py::make_tuple(p.label, p.version);
          },
          py::arg("x"), "(predicted class, version): no lock, never waits for learning");
  py::class_<LiveHolder, std::shared_ptr<LiveHolder>>(mod, "LiveModel")
      .def(py::init([](const std::string& family, const std::string& loss, const std::vector<std::string>& classes,
                       bool open_classes, double n, uint64_t seed, uint64_t publish_every, const std::string& data_dir,
                       const std::string& select) {
             ModelConfig c;
             c.family = family;
             c.loss = loss;
             c.n = n;
             c.seed = seed;
             if (select != "auto" && select != "off") {
               Throw(Status::InvalidArgument("select: expected 'auto' or 'off', found '" + select + "'"));
             }
             auto h = std::make_shared<LiveHolder>();
             py::gil_scoped_release nogil;
             auto fam = Registry().Find(family, TRIB_KIND_FAMILY);
             const v1::Schema schema = DefaultTextSchema(fam.ok() ? fam->get() : nullptr, 0, classes, open_classes);
             auto m = Take(NewModel(c, Registry(), schema, 0, "LiveClassifier"));
             m = LiveOrSingle(select, "auto", c, std::move(m), [&](const ModelConfig& cc) {
               return NewModel(cc, Registry(), schema, 0, "LiveClassifier");
             });
             LiveModelOptions o;
             o.publish_every = publish_every;
             o.data_dir = data_dir;
             o.registry = &Registry();
             h->live = Take(LiveModel::Create(std::move(m), o));
             return h;
           }),
           py::arg("family"), py::arg("loss"), py::arg("classes"), py::arg("open_classes"), py::arg("n"),
           py::arg("seed"), py::arg("publish_every"), py::arg("data_dir"), py::arg("select") = "off")
      .def(
          "learn_one",
          [](LiveHolder& h, const py::object& x, const py::object& y) {
            InputDocument d;
            FillInput(TextOnlySchema(), x, kUnnumbered, &d);
            if (!y.is_none()) d.SetLabel(y.cast<std::string>());
            py::gil_scoped_release nogil;
            Check(h.live->Learn(d));
          },
          py::arg("x"), py::arg("y"))
      .def(
          "learn_many",
          [](LiveHolder& h, const py::sequence& xs, const py::sequence& ys) {
            if (xs.size() != ys.size()) {
              Throw(Status::InvalidArgument("learn_many: " + std::to_string(xs.size()) + " documents but " +
                                            std::to_string(ys.size()) + " labels"));
            }
            std::vector<InputDocument> docs(xs.size());
            for (size_t i = 0; i < docs.size(); ++i) {
              FillInput(TextOnlySchema(), xs[i], i, &docs[i]);
              if (!ys[i].is_none()) docs[i].SetLabel(py::str(ys[i]).cast<std::string>());
            }
            std::vector<LearnResult> results;
            py::gil_scoped_release nogil;
            Check(h.live->LearnBatch(docs, &results));  // durable: one fsync for the batch
            return static_cast<uint64_t>(
                std::count_if(results.begin(), results.end(), [](const LearnResult& r) { return !r.skipped; }));
          },
          py::arg("xs"), py::arg("ys"))
      .def("publish",
           [](LiveHolder& h) {
             py::gil_scoped_release nogil;
             return Take(h.live->Publish());
           })
      .def("checkpoint",
           [](LiveHolder& h) {
             py::gil_scoped_release nogil;
             Check(h.live->Checkpoint());
           })
      .def("save",
           [](LiveHolder& h, const std::string& path) {
             uint64_t v = 0;
             py::gil_scoped_release nogil;
             Check(h.live->SaveSnapshot(path, &v));
             return v;
           })
      .def("live_report",
           [](LiveHolder& h) {
             py::gil_scoped_release nogil;
             return h.live->live_report();
           })
      .def_property_readonly("version", [](const LiveHolder& h) { return h.live->version(); })
      .def_property_readonly("acknowledged", [](const LiveHolder& h) { return h.live->acknowledged(); })
      .def("reader", [](const std::shared_ptr<LiveHolder>& h) {
        auto box = std::make_shared<LiveReaderBox>();
        box->owner = h;
        box->reader = Take(h->live->NewReader());
        return box;
      });

  py::class_<Handle, std::shared_ptr<Handle>>(mod, "Model")
      .def(py::init(&Create), py::arg("family"), py::arg("loss"), py::arg("options"), py::arg("loss_options"),
           py::arg("schedule"), py::arg("n"), py::arg("seed"), py::arg("engine"), py::arg("damping"),
           py::arg("classes"), py::arg("open_classes"), py::arg("vocabulary"), py::arg("hashed_dim"),
           py::arg("features"), py::arg("select") = "off")
      .def_static(
          "from_bytes",
          [](const py::bytes& b, const std::string& name, const std::string& engine, uint64_t seed) {
            std::string s = b;
            std::unique_ptr<Model> m;
            {
              py::gil_scoped_release nogil;
              m = Take(Model::Parse(s, name, Registry()));
            }
            return std::make_shared<Handle>(std::move(m), LearnerFrom(engine, seed, 0));
          },
          py::arg("data"), py::arg("name") = "<bytes>", py::arg("engine") = "auto", py::arg("seed") = 1)
      .def_static(
          "load",
          [](const std::string& path, const std::string& engine, uint64_t seed) {
            std::unique_ptr<Model> m;
            {
              py::gil_scoped_release nogil;
              m = Take(Model::Load(path, Registry()));
            }
            return std::make_shared<Handle>(std::move(m), LearnerFrom(engine, seed, 0));
          },
          py::arg("path"), py::arg("engine") = "auto", py::arg("seed") = 1)
      .def("save", [](Handle& h, const std::string& path) { h.Locked([&] { Check(h.SaveLocked(path)); }); })
      .def("flush",
           [](Handle& h) {
             // The live learner: the documents held in its per-class sample
             // learned now (at the end of a stream); nothing for one model.
             h.Locked([&] {
               if (h.live()) Check(h.live()->Flush());
             });
           })
      .def("to_bytes",
           [](Handle& h) {
             std::string s;
             h.Locked([&] { s = Take(h.SerializeLocked()); });
             return py::bytes(s);
           })
      .def(
          "learn_many",
          [](Handle& h, const py::sequence& xs, const py::object& ys, bool skip_bad) {
            auto docs = ToDocuments(h, xs, ys, h.documents_learned());
            return LearnDocuments(h, docs, skip_bad);
          },
          py::arg("xs"), py::arg("ys"), py::arg("skip_bad") = false)
      .def(
          "learn_one",
          [](Handle& h, const py::object& x, const py::object& y) {
            std::vector<v1::Document> docs(1);
            FillDocument(h.model().schema(), x, h.documents_learned(), &docs[0]);
            SetLabel(y, h.documents_learned(), &docs[0]);
            LearnDocuments(h, docs, false);
          },
          py::arg("x"), py::arg("y"))
      .def("quality",
           [](Handle& h) {
             // The prequential figures (quality_monitor.h) as a dict; class
             // names from the model's schema.
             py::dict d;
             std::lock_guard<std::mutex> lock(h.mu());
             const QualityMonitor& q = h.quality();
             const std::vector<std::string>& names = h.model().schema().classes();
             auto name = [&](uint32_t k) { return k < names.size() ? names[k] : std::to_string(k); };
             auto num = [](double x) { return std::isnan(x) ? py::object(py::none()) : py::object(py::float_(x)); };
             d["documents"] = q.documents();
             // A live learner: its candidates, the one served, its alarms.
             if (h.live()) d["live"] = py::module_::import("json").attr("loads")(h.live()->ToJson());
             d["accuracy"] = num(q.accuracy());
             d["window_accuracy"] = num(q.window_accuracy());
             d["log_loss"] = num(q.log_loss());
             d["window_log_loss"] = num(q.window_log_loss());
             py::list per_class;
             for (uint32_t k = 0; k < q.classes().size(); ++k) {
               const ClassQuality& c = q.classes()[k];
               if (c.documents == 0) continue;
               py::dict e;
               e["class"] = name(k);
               e["documents"] = c.documents;
               e["recall"] = static_cast<double>(c.correct) / static_cast<double>(c.documents);
               e["window_recall"] = c.window_recall;
               per_class.append(e);
             }
             d["per_class"] = per_class;
             py::list confused;
             for (const Confusion& c : q.MostConfused(10)) {
               py::dict e;
               e["class"] = name(c.truth);
               e["predicted"] = name(c.predicted);
               e["documents"] = c.documents;
               confused.append(e);
             }
             d["most_confused"] = confused;
             if (h.live()) {
               // The live learner's alarms (the ones that raised its steps).
               std::vector<uint64_t> at;
               for (const LiveAlarm& a : h.live()->alarms()) at.push_back(a.document);
               d["drift_alarms"] = at;
             } else {
               d["drift_alarms"] = q.alarms();
             }
             return d;
           })
      .def(
          "learn_csr",
          [](Handle& h, py::array_t<int64_t, py::array::c_style | py::array::forcecast> indptr,
             py::array_t<int64_t, py::array::c_style | py::array::forcecast> indices,
             py::array_t<double, py::array::c_style | py::array::forcecast> data, const py::object& labels,
             bool skip_bad, const py::object& weights) {
            return LearnCsr(h, MakeCsr(indptr, indices, data, labels, weights), skip_bad);
          },
          py::arg("indptr"), py::arg("indices"), py::arg("data"), py::arg("labels"), py::arg("skip_bad") = false,
          py::arg("weights") = py::none())
      .def("scores_many",
           [](Handle& h, const py::sequence& xs) { return ScoreDocuments(h, ToDocuments(h, xs, py::none(), 0)); })
      .def("scores_csr",
           [](Handle& h, py::array_t<int64_t, py::array::c_style | py::array::forcecast> indptr,
              py::array_t<int64_t, py::array::c_style | py::array::forcecast> indices,
              py::array_t<double, py::array::c_style | py::array::forcecast> data) {
             return ScoreCsr(h, MakeCsr(indptr, indices, data, py::none()));
           })
      .def_property_readonly("classes",
                             [](Handle& h) {
                               auto c = h.Locked([&] { return h.model().schema().classes(); });
                               return py::cast(c);
                             })
      .def_property_readonly("output_names",
                             [](Handle& h) {
                               return py::cast(h.Locked([&] {
                                 std::vector<std::string> names;
                                 for (uint32_t k = 0; k < h.model().num_outputs(); ++k)
                                   names.push_back(h.model().OutputName(k));
                                 return names;
                               }));
                             })
      .def("vocabulary",
           [](Handle& h) {
             auto v = h.Locked([&] { return h.model().schema().vocabulary(); });
             return py::cast(v);
           })
      .def("component_terms",
           [](Handle& h, uint32_t k) {
             std::vector<double> out;
             h.Locked([&] { Check(h.model().ComponentTerms(k, &out)); });
             py::array_t<double> a(out.size());
             std::copy(out.begin(), out.end(), a.mutable_data());
             return a;
           })
      .def("info", &Info)
      .def("prequential_many",
           [](Handle& h, const py::sequence& xs, const py::object& ys) {
             auto docs = ToDocuments(h, xs, ys, h.documents_learned());
             std::vector<uint8_t> correct(docs.size());
             std::vector<double> ncll(docs.size());
             h.Locked([&] {
               for (size_t i = 0; i < docs.size(); ++i) {
                 bool c = false;
                 Check(h.PrequentialLocked(docs[i], &c, &ncll[i]));
                 correct[i] = c;
               }
             });
             py::array_t<bool> a(correct.size());
             std::copy(correct.begin(), correct.end(), a.mutable_data());
             py::array_t<double> b(ncll.size());
             std::copy(ncll.begin(), ncll.end(), b.mutable_data());
             return py::make_tuple(a, b);
           })
      .def("evaluate_latent",
           [](Handle& h, const py::sequence& xs) { return EvaluateLatent(h, ToDocuments(h, xs, py::none(), 0)); })
      .def("learn_file", &LearnFile, py::arg("path"), py::arg("skip_bad") = false,
           py::arg("max_frame_bytes") = kDefaultMaxFrameBytes)
      // Pickled as its snapshot (the bytes `save` writes) and learner settings.
      .def(py::pickle(
          [](Handle& h) {
            std::string s;
            h.Locked([&] { s = Take(h.SerializeLocked()); });
            const auto& lo = h.learner_options();
            return py::make_tuple(py::bytes(s), lo.engine, lo.seed, lo.damping);
          },
          [](const py::tuple& t) {
            if (t.size() != 4) Throw(Status::InvalidArgument("unpickling a tributary model: unexpected state"));
            std::string s = t[0].cast<py::bytes>();
            std::unique_ptr<Model> m;
            {
              py::gil_scoped_release nogil;
              m = Take(Model::Parse(s, "<pickle>", Registry()));
            }
            return std::make_shared<Handle>(
                std::move(m), LearnerFrom(t[1].cast<std::string>(), t[2].cast<uint64_t>(), t[3].cast<double>()));
          }))
      .def_property_readonly("stats_digest", [](Handle& h) {
        auto d = h.Locked([&] { return h.served().StatsDigest(); });
        return d;
      });
}
