// The model handle (tributary.Model): a Model or a live learner, its Learner,
// decoder and scoring state behind one mutex, and what operates on it:
// creating, learning (documents, CSR rows, a stream file), scoring, train's
// defaults on documents in memory, a latent model's evaluation, its info.
#ifndef TRIBUTARY_PYTHON_SRC_HANDLE_H_
#define TRIBUTARY_PYTHON_SRC_HANDLE_H_

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common.h"
#include "documents.h"
#include "tributary/document.h"
#include "tributary/learner.h"
#include "tributary/live_learner.h"
#include "tributary/model.h"
#include "tributary/model_config.h"
#include "tributary/quality_monitor.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary::python {

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
  // Runs fn() with the GIL released and the model's mutex held, and returns
  // what it returns: the one way into the model from Python. A thread never
  // waits for the mutex while holding the GIL, and never touches a Python
  // object while holding the mutex (making one may run Python code, which
  // lets another thread take the GIL and wait for the mutex: a deadlock).
  // fn makes C++ values only; Python objects are made from them after.
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
                     const py::object& vocabulary, uint64_t hashed_dim, const py::object& features);

// select "auto" (learn_one's default): the live learner (live_learner.h),
// its candidates built by `build` as `single` was, as one model holding it;
// `single` itself under "off", for SEP engines, latent families and a loss
// that learns unlabelled documents (nll). As `serve` does.
std::unique_ptr<Model> LiveOrSingle(const std::string& select, const std::string& engine, const ModelConfig& base,
                                    std::unique_ptr<Model> single,
                                    const std::function<Result<std::unique_ptr<Model>>(const ModelConfig&)>& build);

// The learner settings a handle learns with.
LearnerOptions LearnerFrom(const std::string& engine, uint64_t seed, double damping);

// Model(...): a fresh model of the settings given (its schema NewSchema's),
// under select "auto" the live learner holding it (LiveOrSingle).
std::shared_ptr<Handle> Create(const std::string& family, const std::string& loss, const py::dict& options,
                               const py::dict& loss_options, const py::dict& schedule, double n, uint64_t seed,
                               const std::string& engine, double damping, const py::object& classes, bool open_classes,
                               const py::object& vocabulary, uint64_t hashed_dim, const py::object& features,
                               const std::string& select);

// Converts xs (and ys) into documents, GIL held.
std::vector<v1::Document> ToDocuments(Handle& h, const py::sequence& xs, const py::object& ys, uint64_t first);

// Learns docs in order; with skip_bad, a document refused as invalid or
// numerically bad is counted and left out (the stream goes on), else the
// first refusal stops (the documents before it stay learned).
py::dict LearnDocuments(Handle& h, const std::vector<v1::Document>& docs, bool skip_bad);

// log p(k, x) for every document and output: an array documents x outputs.
py::array_t<double> ScoreDocuments(Handle& h, const std::vector<v1::Document>& docs);

// LearnDocuments and ScoreDocuments for the rows of a CSR matrix.
py::dict LearnCsr(Handle& h, const Csr& m, bool skip_bad);
py::array_t<double> ScoreCsr(Handle& h, const Csr& m);

// `tributary train`'s defaults on documents in memory (trainer.h): the
// candidates of DefaultCandidates learn shuffled passes and the one that
// predicts a held-out part of the training documents best is kept. What
// SdemClassifier.fit does, as `train` on a file.
std::pair<std::shared_ptr<Handle>, std::string> TrainOffline(const std::string& family, const std::string& loss,
                                                             const py::dict& options, const py::dict& loss_options,
                                                             const py::dict& schedule, double n, uint64_t seed,
                                                             const v1::Schema& schema,
                                                             const std::vector<v1::Document>& docs, const Csr* csr,
                                                             uint32_t epochs, uint32_t threads, bool skip_bad);

// What `tributary eval` reports for a latent model (latent_metrics.h) over
// the documents: perplexity (document completion where the family has it),
// log p(x) per document, clusters' sizes; for SEP families the approximate
// log evidence.
py::dict EvaluateLatent(Handle& h, const std::vector<v1::Document>& docs);

// Learns a stream file the way `tributary train --select off` does: frames
// decoded against the file's header schema (DocumentDecoder::Create), the
// model growing with its open vocabulary and classes.
py::dict LearnFile(Handle& h, const std::string& path, bool skip_bad, uint32_t max_frame_bytes);

// Model.info(): the served model's family, loss, classes, vocabulary and
// learner state, as a dict.
py::dict Info(Handle& h);

}  // namespace tributary::python

#endif  // TRIBUTARY_PYTHON_SRC_HANDLE_H_
