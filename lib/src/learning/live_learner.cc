// LiveLearner (live_learner.h): candidates learning one stream test-then-train,
// the served one chosen by windowed prequential error, a per-class sample so
// that no class is forgotten unseen, and ADWIN to restart the long memories.
#include "tributary/live_learner.h"

#include "json_text.h"
#include "tributary/sep_engine.h"
#include "tributary/v1/tributary.pb.h"
#include "tributary/vector_exp.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <utility>

namespace tributary {

namespace {

uint32_t Argmax(const std::vector<double>& s) {
  uint32_t best = 0;
  double top = s[0];  // (the value, not s[best]: no load waits on the last comparison)
  for (uint32_t k = 1; k < s.size(); ++k) {
    if (s[k] > top) {
      top = s[k];
      best = k;
    }
  }
  return best;
}

// What one candidate's scores log p(k, x) say of label y: whether they are
// usable (no NaN, no +inf), the argmax, and -log p(y | x) capped at 50
// (trainer.cc's Evaluate caps the same), its softmax through the library's
// vector exp. One pass over the scores and one vector exp: this runs for
// every candidate on every document.
struct Verdict {
  bool usable = true;
  uint32_t predicted = 0;
  double ncll = 50;
};
Verdict Judge(const std::vector<double>& s, uint32_t y, std::vector<double>* scratch) {
  Verdict v;
  const auto n = static_cast<uint32_t>(s.size());
  double top = s[0];
  for (uint32_t k = 0; k < n; ++k) {
    const double x = s[k];
    v.usable &= !(std::isnan(x) || x == INFINITY);
    if (x > top) {
      top = x;
      v.predicted = k;
    }
  }
  if (!v.usable || !std::isfinite(top)) return v;
  scratch->resize(n);
  vector_exp::ExpShiftedBest(s.data(), top, n, scratch->data());
  double z = 0;
  for (uint32_t k = 0; k < n; ++k) z += (*scratch)[k];
  v.ncll = std::min(top + std::log(z) - s[y], 50.0);
  return v;
}

}  // namespace

Status LiveLearnerOptions::Validate() const {
  if (candidates.empty()) return Status::InvalidArgument("live learner: no candidates");
  if (half_life < 1) return Status::InvalidArgument("live learner half_life: expected at least 1, found 0");
  if (!(switch_margin >= 0 && switch_margin < 1)) {
    return Status::InvalidArgument("live learner switch_margin: expected a number in [0, 1), found " +
                                   std::to_string(switch_margin));
  }
  if (check_every < 1) return Status::InvalidArgument("live learner check_every: expected at least 1, found 0");
  if (switch_checks < 1) return Status::InvalidArgument("live learner switch_checks: expected at least 1, found 0");
  if (hold_every < 1) return Status::InvalidArgument("live learner hold_every: expected at least 1, found 0");
  if (sample_every < 1) return Status::InvalidArgument("live learner sample_every: expected at least 1, found 0");
  if (!(sample_tolerance >= 0 && sample_tolerance <= 1)) {
    return Status::InvalidArgument("live learner sample_tolerance: expected a number in [0, 1], found " +
                                   std::to_string(sample_tolerance));
  }
  if (restart_memory < 1) return Status::InvalidArgument("live learner restart_memory: expected at least 1, found 0");
  return detector.Validate();
}

bool LiveLearnerApplies(const std::string& select, const std::string& engine, const Model& single) {
  const Result<std::string> resolved = ResolveEngine(engine, single.family());
  return select == "auto" && resolved.ok() && *resolved == "sdem" && !single.latent_outputs() &&
         !LabelRequiredBy(single.loss_plugin().get()).empty();
}

Result<std::unique_ptr<LiveLearner>> NewDefaultLiveLearner(
    const ModelConfig& base, const std::function<Result<std::unique_ptr<Model>>(const ModelConfig&)>& build) {
  LiveLearnerOptions lo;
  lo.candidates = DefaultLiveCandidates(base);
  lo.seed = base.seed;
  return LiveLearner::Create(CandidateFactory(base, build), lo);
}

std::vector<LiveCandidate> DefaultLiveCandidates(const ModelConfig& base, uint64_t memory) {
  std::vector<LiveCandidate> out;
  const bool generative = base.loss == "nll";
  auto add = [&](uint64_t m) {
    LiveCandidate c;
    c.spec.loss = base.loss;
    c.spec.generative = generative;
    c.spec.label = base.loss + (m ? " memory=" + std::to_string(m) : std::string());
    c.memory = m;
    out.push_back(std::move(c));
  };
  add(0);
  add(memory);
  if (!generative) {
    LiveCandidate nll;
    nll.spec.loss = "nll";
    nll.spec.generative = true;
    nll.spec.label = "nll (generative)";
    out.push_back(std::move(nll));
  }
  return out;
}

Result<std::unique_ptr<LiveLearner>> LiveLearner::Create(const ModelFactory& factory,
                                                         const LiveLearnerOptions& options) {
  TRIB_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<LiveLearner> l(new LiveLearner());
  l->options_ = options;
  l->decay_ = std::exp2(-1.0 / options.half_life);
  l->detector_ = Adwin(options.detector);
  for (const LiveCandidate& setting : options.candidates) {
    Candidate c;
    c.setting = setting;
    auto m = factory(setting.spec);
    if (!m.ok()) return m.status().WithContext("candidate '" + setting.spec.label + "'");
    c.model = std::move(m).value();
    // (sdEM: test-then-train needs the scores it computes for its step.)
    auto learner = Learner::Create(c.model.get(), LearnerOptions::Sdem(options.seed));
    if (!learner.ok()) return learner.status().WithContext("candidate '" + setting.spec.label + "'");
    c.learner = std::move(learner).value();
    l->candidates_.push_back(std::move(c));
  }
  return l;
}

Status LiveLearner::SyncClasses() {
  const Model& ref = *candidates_[0].model;
  for (size_t c = 1; c < candidates_.size(); ++c) {
    Model& m = *candidates_[c].model;
    // Classes and terms are only ever added, in the reference's order: equal
    // counts are equal schemas (the common case, checked per document).
    if (m.schema().classes().size() == ref.schema().classes().size() &&
        m.schema().vocab_size() == ref.schema().vocab_size()) {
      continue;
    }
    TRIB_RETURN_IF_ERROR(m.GrowTo(ref.schema()));
  }
  return Status::OK();
}

Status LiveLearner::ScoreWith(Candidate* c, const trib_document& doc, std::vector<double>* scores) {
  if (c->state == nullptr || c->state_layout != c->model->layout_version()) {
    auto st = c->model->NewScoringState(options_.seed);
    if (!st.ok()) return st.status();
    c->state = std::move(st).value();
    c->state_layout = c->model->layout_version();
  }
  scores->resize(c->model->num_outputs());
  return c->model->Score(doc, c->state.get(), scores->data());
}

Status LiveLearner::Learn(const DocumentBuffer& doc, LiveStep* step) {
  LiveStep local;
  LiveStep& out = step ? *step : local;
  out = LiveStep();
  const trib_document view = doc.View();
  const uint32_t K = candidates_[0].model->num_outputs();
  if (doc.label < 0 || doc.label >= static_cast<int64_t>(K)) {
    // Nothing to test or learn from (the sdEM learner's words for it).
    const std::string& loss = candidates_[0].setting.spec.loss;
    return Status::InvalidDocument(
        doc.Name() + ": " +
        (doc.label < 0 ? "loss '" + loss +
                             "' needs a label, the document has none (the live learner learns "
                             "labelled documents only)"
                       : "label index " + std::to_string(doc.label) + " >= number of classes " + std::to_string(K)));
  }
  const auto y = static_cast<uint32_t>(doc.label);
  // One labelled document in hold_every goes to the per-class sample instead
  // of being learned now (it is learned when it leaves the sample): the
  // sample checks the candidates on documents none of them learned.
  const bool hold =
      options_.sample_per_class > 0 && candidates_.size() > 1 && (labelled_ + 1) % options_.hold_every == 0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    Candidate& c = candidates_[i];
    const std::vector<double>* scores = nullptr;
    LearnResult r;
    if (hold) {
      TRIB_RETURN_IF_ERROR(ScoreWith(&c, view, &scratch_).WithContext(doc.Name()));
      scores = &scratch_;
    } else {
      Status st = c.learner->Learn(view, &r);
      if (!st.ok()) return candidates_.size() == 1 ? st : st.WithContext("candidate '" + c.setting.spec.label + "'");
      HoldMemory(&c);
      scores = r.scores;
    }
    const std::vector<double>& s = *scores;
    const Verdict v = Judge(s, y, &exp_scratch_);
    if (!v.usable) {
      return Status::Numeric(doc.Name() + ": candidate '" + c.setting.spec.label +
                             "' scored it as NaN or +inf, expected finite log-probabilities");
    }
    const bool right = v.predicted == y;
    const double ncll = v.ncll;
    ++c.labelled;
    c.correct += right;
    c.ncll_sum += ncll;
    c.w_err = decay_ * c.w_err + (right ? 0.0 : 1.0);
    c.w_ncll = decay_ * c.w_ncll + ncll;
    c.w_norm = decay_ * c.w_norm + 1.0;
    if (i == served_) {
      served_scores_ = s;
      out.predicted = v.predicted;
      out.correct = right;
    }
  }
  out.labelled = true;
  out.scores = &served_scores_;
  ++labelled_;
  if (hold) {
    if (sample_.size() <= y) {
      sample_.resize(y + 1);
      sample_next_.resize(y + 1, 0);
    }
    auto& ring = sample_[y];
    // A class's documents from before the last alarm are its old concept:
    // they are learned and leave the sample when its first document after
    // the alarm comes. A class that does not come back (a class-grouped
    // stream) keeps its sample, so the candidates are still checked on it.
    if (!ring.empty() && ring[0].epoch != alarms_.size()) {
      for (SampleSlot& old : ring) TRIB_RETURN_IF_ERROR(LearnHeld(old.doc));
      ring.clear();
      sample_next_[y] = 0;
    }
    SampleSlot slot{doc, std::vector<int8_t>(candidates_.size(), -1), alarms_.size(), labelled_};
    if (ring.size() < options_.sample_per_class) {
      ring.push_back(std::move(slot));
    } else {
      // The oldest leaves the sample and is learned.
      std::swap(ring[sample_next_[y]], slot);
      sample_next_[y] = (sample_next_[y] + 1) % ring.size();
      TRIB_RETURN_IF_ERROR(LearnHeld(slot.doc));
    }
  }
  if (!sample_.empty() && candidates_.size() > 1 && labelled_ % options_.sample_every == 0) {
    TRIB_RETURN_IF_ERROR(ScoreSample());
  }
  // The detector watches documents of classes seen `kSettled` times before:
  // the first documents of a new class are errors whatever the model (a
  // class-grouped stream would raise an alarm at every block).
  if (seen_.size() <= y) seen_.resize(y + 1, 0);
  const bool is_new = seen_[y] == 0;
  classes_seen_ += is_new;
  const bool settled = seen_[y]++ >= kSettled;
  const bool grouped = Grouped(y);
  if (grouped) last_grouped_ = labelled_;
  if (options_.detect_drift && settled && !grouped && detector_.Add(out.correct ? 0.0 : 1.0)) {
    out.alarm = true;
    alarms_.push_back(LiveAlarm{labelled_, candidates_[served_].setting.spec.label, false});
    Restart();
  } else if (options_.detect_drift && is_new && !grouped && labelled_ > options_.restart_memory) {
    // A class that appears in a mixed stream after the learners settled is a
    // change of p(y) the detector cannot see (its first documents are not
    // watched): the steps are raised as for an alarm, so that the new
    // class's statistics catch up in about restart_memory documents instead
    // of the whole stream's length (NLL's class counts: rho_t = 1 / (1 + t)).
    out.alarm = true;
    alarms_.push_back(LiveAlarm{labelled_, candidates_[served_].setting.spec.label, true});
    Restart();
  }
  if (candidates_.size() > 1 && labelled_ % options_.check_every == 0) {
    const size_t before = served_;
    Select();
    out.switched = served_ != before;
  }
  return Status::OK();
}

// The memory: the step counter held at M (live_learner.h).
void LiveLearner::HoldMemory(Candidate* c) {
  LearnerState& ls = c->model->learner_state();
  if (c->setting.memory > 0 && ls.updates > c->setting.memory) ls.updates = c->setting.memory;
}

// A document that leaves the sample, learned by every candidate (it was
// tested when it came). One a candidate refuses now (it scored finite when
// it came) is counted and left out: it was accepted long ago.
Status LiveLearner::LearnHeld(const DocumentBuffer& doc) {
  const trib_document view = doc.View();
  for (Candidate& c : candidates_) {
    Status st = c.learner->Learn(view);
    if (!st.ok()) {
      if (!DocumentRefused(st)) return st.WithContext("candidate '" + c.setting.spec.label + "'");
      ++dropped_;
      continue;
    }
    HoldMemory(&c);
  }
  return Status::OK();
}

Status LiveLearner::Flush() {
  // In arrival order (their stream positions), not class by class: a
  // discriminative learner fed the held documents grouped by class would
  // drift towards the last classes at the very end of the stream.
  std::vector<const SampleSlot*> held;
  for (const auto& ring : sample_) {
    for (const SampleSlot& slot : ring) held.push_back(&slot);
  }
  std::stable_sort(held.begin(), held.end(),
                   [](const SampleSlot* a, const SampleSlot* b) { return a->order < b->order; });
  for (const SampleSlot* slot : held) TRIB_RETURN_IF_ERROR(LearnHeld(slot->doc));
  for (auto& ring : sample_) ring.clear();
  sample_.clear();
  sample_next_.clear();
  cursor_class_ = cursor_slot_ = 0;
  return Status::OK();
}

// Notes label y among the recent ones; true when the recent labels are
// grouped by class: one class holds more than a quarter of the last kRecent
// labels, and more than twice its share of the whole stream, or more than
// half of them and twice an even share of the classes seen (early in a
// grouped stream the block's class is much of the whole). Errors then
// change with the class of the block, not with the concept: a class-grouped
// stream (a backfill) is no drift.
bool LiveLearner::Grouped(uint32_t y) {
  if (recent_count_.size() <= y) recent_count_.resize(y + 1, 0);
  if (recent_.size() == kRecent) {
    --recent_count_[recent_[recent_pos_]];
    recent_[recent_pos_] = y;
    recent_pos_ = (recent_pos_ + 1) % kRecent;
  } else {
    recent_.push_back(y);
  }
  ++recent_count_[y];
  uint32_t top = 0, most = recent_count_[0];
  for (uint32_t k = 1; k < recent_count_.size(); ++k) {
    if (recent_count_[k] > most) {
      most = recent_count_[k];
      top = k;
    }
  }
  const double share = static_cast<double>(recent_count_[top]) / static_cast<double>(recent_.size());
  const double overall = static_cast<double>(seen_[top]) / static_cast<double>(labelled_);
  return share > 0.25 &&
         (share > 2 * overall || share > std::max(0.5, 2.0 / static_cast<double>(std::max<size_t>(1, classes_seen_))));
}

// Scores the next sample document (round robin over classes, then slots) with
// every candidate.
Status LiveLearner::ScoreSample() {
  for (size_t tries = 0; tries < sample_.size(); ++tries) {
    if (cursor_class_ >= sample_.size()) {
      cursor_class_ = 0;
      ++cursor_slot_;
    }
    auto& ring = sample_[cursor_class_];
    if (ring.empty()) {
      ++cursor_class_;
      continue;
    }
    SampleSlot& slot = ring[cursor_slot_ % ring.size()];
    ++cursor_class_;
    const trib_document view = slot.doc.View();
    for (size_t i = 0; i < candidates_.size(); ++i) {
      TRIB_RETURN_IF_ERROR(ScoreWith(&candidates_[i], view, &scratch_).WithContext(slot.doc.Name()));
      slot.correct[i] = Argmax(scratch_) == static_cast<uint32_t>(slot.doc.label) ? 1 : 0;
    }
    return Status::OK();
  }
  return Status::OK();
}

// The served candidate: the lowest windowed error among the eligible ones,
// kept unless a challenger beats it by switch_margin (or it lost its
// eligibility).
void LiveLearner::Select() {
  // Class-balanced sample accuracy per candidate.
  double best_sample = -1;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    double sum = 0;
    size_t classes = 0;
    for (const auto& ring : sample_) {
      double right = 0, scored = 0;
      for (const SampleSlot& s : ring) {
        if (s.correct[i] < 0) continue;
        right += s.correct[i];
        scored += 1;
      }
      if (scored > 0) {
        sum += right / scored;
        ++classes;
      }
    }
    candidates_[i].sample_accuracy = classes >= 2 ? sum / static_cast<double>(classes) : -1;
    best_sample = std::max(best_sample, candidates_[i].sample_accuracy);
  }
  // The class check guards against a learner that forgot the classes the
  // recent stream lacks, which happens while the stream is grouped by class
  // (and shortly after). On a mixed stream the windowed error already
  // measures every class as it comes, and a class-balanced check would only
  // penalise the learner whose errors fall on the small classes (on the
  // Bible's genres, NLL: the most accurate, and the least class-balanced).
  const bool check_classes = last_grouped_ > 0 && labelled_ - last_grouped_ <= 2 * uint64_t{options_.half_life};
  for (Candidate& c : candidates_) {
    c.eligible =
        !check_classes || c.sample_accuracy < 0 || c.sample_accuracy >= best_sample - options_.sample_tolerance;
  }
  auto err = [](const Candidate& c) { return c.w_norm > 0 ? c.w_err / c.w_norm : 1.0; };
  size_t best = served_;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    if (!candidates_[i].eligible) continue;
    if (!candidates_[best].eligible || err(candidates_[i]) < err(candidates_[best])) best = i;
  }
  if (best == served_ || !candidates_[best].eligible) {
    leads_ = 0;
    return;
  }
  if (candidates_[served_].eligible && err(candidates_[best]) > err(candidates_[served_]) - options_.switch_margin) {
    leads_ = 0;
    return;
  }
  // A challenger must lead at `switch_checks` checks in a row (the same one),
  // unless the served candidate lost its eligibility.
  leads_ = best == leader_ ? leads_ + 1 : 1;
  leader_ = best;
  if (candidates_[served_].eligible && leads_ < options_.switch_checks) return;
  served_ = best;
  leads_ = 0;
  ++switches_;
  // The detector's window holds the previous candidate's errors: a switch to
  // a candidate with another error rate is not a drift.
  detector_.Reset();
}

// After an alarm: every step counter at most restart_memory (the steps
// raised).
void LiveLearner::Restart() {
  for (Candidate& c : candidates_) {
    LearnerState& ls = c.model->learner_state();
    ls.updates = std::min<uint64_t>(ls.updates, options_.restart_memory);
    // The windows start again: the next selections compare the candidates
    // on the new concept only, so the one that adapts first is served first.
    c.w_err = c.w_ncll = c.w_norm = 0;
  }
  leads_ = 0;
  // (The sample's old concept goes class by class, in Learn.)
}

std::vector<LiveCandidateStats> LiveLearner::candidate_stats() const {
  std::vector<LiveCandidateStats> out;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const Candidate& c = candidates_[i];
    LiveCandidateStats s;
    s.label = c.setting.spec.label;
    s.memory = c.setting.memory;
    s.labelled = c.labelled;
    const double n = static_cast<double>(std::max<uint64_t>(1, c.labelled));
    s.accuracy = static_cast<double>(c.correct) / n;
    s.ncll = c.ncll_sum / n;
    s.window_accuracy = c.w_norm > 0 ? 1.0 - c.w_err / c.w_norm : 0.0;
    s.window_ncll = c.w_norm > 0 ? c.w_ncll / c.w_norm : 0.0;
    s.sample_accuracy = c.sample_accuracy;
    s.eligible = c.eligible;
    s.served = i == served_;
    out.push_back(std::move(s));
  }
  return out;
}

std::string LiveLearner::ToJson() const {
  std::ostringstream os;
  os << "{\"mode\":\"live\",\"labelled\":" << labelled_
     << ",\"served\":" << JsonString(candidates_[served_].setting.spec.label) << ",\"switches\":" << switches_
     << ",\"candidates\":[";
  const std::vector<LiveCandidateStats> stats = candidate_stats();
  for (size_t i = 0; i < stats.size(); ++i) {
    const LiveCandidateStats& s = stats[i];
    os << (i ? "," : "") << "{\"label\":" << JsonString(s.label) << ",\"memory\":" << s.memory
       << ",\"accuracy\":" << JsonNumber(s.accuracy) << ",\"ncll\":" << JsonNumber(s.ncll)
       << ",\"window_accuracy\":" << JsonNumber(s.window_accuracy) << ",\"window_ncll\":" << JsonNumber(s.window_ncll)
       << ",\"sample_accuracy\":" << (s.sample_accuracy < 0 ? "null" : JsonNumber(s.sample_accuracy))
       << ",\"eligible\":" << (s.eligible ? "true" : "false") << ",\"served\":" << (s.served ? "true" : "false") << "}";
  }
  os << "],\"alarms\":[";
  for (size_t i = 0; i < alarms_.size(); ++i) {
    os << (i ? "," : "") << "{\"document\":" << alarms_[i].document << ",\"served\":" << JsonString(alarms_[i].served)
       << ",\"new_class\":" << (alarms_[i].new_class ? "true" : "false") << "}";
  }
  os << "]}";
  return os.str();
}

// ---- Saving and resuming (live_learner.h) ----------------------------------

namespace {
constexpr uint32_t kStateFormat = 1;

void PutDocument(const DocumentBuffer& d, v1::LiveSampleDocument* out) {
  out->set_index(d.index);
  out->set_id(d.id);
  out->set_label(d.label);
  out->mutable_term_ids()->Add(d.term_ids.begin(), d.term_ids.end());
  out->mutable_term_counts()->Add(d.term_counts.begin(), d.term_counts.end());
  out->mutable_reals()->Add(d.reals.begin(), d.reals.end());
  out->mutable_categoricals()->Add(d.categoricals.begin(), d.categoricals.end());
  out->set_weight(d.weight);
  out->set_real_missing(std::string(d.real_missing.begin(), d.real_missing.end()));
  out->set_categorical_missing(std::string(d.categorical_missing.begin(), d.categorical_missing.end()));
}

// A held document back, checked against the schema model: a state that
// passed the snapshot's checksum but holds ids the models do not know (a
// file written by hand) must not reach a family's arrays.
Status GetDocument(const v1::LiveSampleDocument& in, const Model& schema, DocumentBuffer* d) {
  d->Clear();
  d->index = in.index();
  d->id = in.id();
  d->label = in.label();
  d->term_ids.assign(in.term_ids().begin(), in.term_ids().end());
  d->term_counts.assign(in.term_counts().begin(), in.term_counts().end());
  d->reals.assign(in.reals().begin(), in.reals().end());
  d->categoricals.assign(in.categoricals().begin(), in.categoricals().end());
  d->weight = in.weight();
  d->real_missing.assign(in.real_missing().begin(), in.real_missing().end());
  d->categorical_missing.assign(in.categorical_missing().begin(), in.categorical_missing().end());
  const ModelSchema& sc = schema.schema();
  const std::string name = "held document #" + std::to_string(d->index);
  if (d->label < 0 || d->label >= static_cast<int64_t>(schema.num_outputs())) {
    return Status::Corruption(name + ": label " + std::to_string(d->label) + ", expected a class index below " +
                              std::to_string(schema.num_outputs()));
  }
  if (d->term_ids.size() != d->term_counts.size()) {
    return Status::Corruption(name + ": " + std::to_string(d->term_ids.size()) + " term ids but " +
                              std::to_string(d->term_counts.size()) + " counts");
  }
  for (size_t j = 0; j < d->term_ids.size(); ++j) {
    if (d->term_ids[j] >= sc.vocab_size() || (j > 0 && d->term_ids[j] <= d->term_ids[j - 1]) ||
        !(d->term_counts[j] > 0 && std::isfinite(d->term_counts[j]))) {
      return Status::Corruption(name + ": term " + std::to_string(j) + " (id " + std::to_string(d->term_ids[j]) +
                                ", count " + std::to_string(d->term_counts[j]) + "): expected increasing ids below " +
                                std::to_string(sc.vocab_size()) + " and positive finite counts");
    }
  }
  const auto& cards = sc.categorical_cardinalities();
  if (d->reals.size() != sc.real_kinds().size() || d->categoricals.size() != cards.size() ||
      (!d->real_missing.empty() && d->real_missing.size() != d->reals.size()) ||
      (!d->categorical_missing.empty() && d->categorical_missing.size() != d->categoricals.size())) {
    return Status::Corruption(name + ": " + std::to_string(d->reals.size()) + " real and " +
                              std::to_string(d->categoricals.size()) + " categorical features, expected " +
                              std::to_string(sc.real_kinds().size()) + " and " + std::to_string(cards.size()));
  }
  for (size_t j = 0; j < cards.size(); ++j) {
    if (d->categoricals[j] >= cards[j]) {
      return Status::Corruption(name + ": categorical feature " + std::to_string(j) + " is " +
                                std::to_string(d->categoricals[j]) + ", expected below " + std::to_string(cards[j]));
    }
  }
  if (!(d->weight > 0 && std::isfinite(d->weight))) {
    return Status::Corruption(name + ": weight " + std::to_string(d->weight) + ", expected a positive number");
  }
  return Status::OK();
}
}  // namespace

Result<std::string> LiveLearner::EncodeState() const {
  v1::LiveLearnerState st;
  st.set_format(kStateFormat);
  auto* set = st.mutable_settings();
  const LiveLearnerOptions& o = options_;
  set->set_half_life(o.half_life);
  set->set_switch_margin(o.switch_margin);
  set->set_check_every(o.check_every);
  set->set_switch_checks(o.switch_checks);
  set->set_hold_every(o.hold_every);
  set->set_sample_per_class(o.sample_per_class);
  set->set_sample_every(o.sample_every);
  set->set_sample_tolerance(o.sample_tolerance);
  set->set_detect_drift(o.detect_drift);
  set->set_adwin_delta(o.detector.delta);
  set->set_adwin_clock(o.detector.clock);
  set->set_adwin_max_buckets(o.detector.max_buckets);
  set->set_adwin_min_side(o.detector.min_side);
  set->set_restart_memory(o.restart_memory);
  set->set_seed(o.seed);
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const Candidate& c = candidates_[i];
    auto* pc = st.add_candidates();
    pc->set_label(c.setting.spec.label);
    pc->set_loss(c.setting.spec.loss);
    pc->set_generative(c.setting.spec.generative);
    pc->set_memory(c.setting.memory);
    if (i != served_) {
      auto bytes = c.model->Serialize(SnapshotOptions{}, "live candidate '" + c.setting.spec.label + "'");
      if (!bytes.ok()) return bytes.status();
      pc->set_model(std::move(bytes).value());
    }
    pc->set_labelled(c.labelled);
    pc->set_correct(c.correct);
    pc->set_ncll_sum(c.ncll_sum);
    pc->set_w_err(c.w_err);
    pc->set_w_ncll(c.w_ncll);
    pc->set_w_norm(c.w_norm);
    pc->set_sample_accuracy(c.sample_accuracy);
    pc->set_eligible(c.eligible);
  }
  st.set_served(static_cast<uint32_t>(served_));
  const Adwin::State ds = detector_.state();
  auto* pd = st.mutable_detector();
  for (const auto& level : ds.levels) {
    auto* pl = pd->add_levels();
    for (const Adwin::Bucket& b : level) {
      auto* pb = pl->add_buckets();
      pb->set_sum(b.sum);
      pb->set_m2(b.m2);
    }
  }
  pd->set_width(ds.width);
  pd->set_sum(ds.sum);
  pd->set_m2(ds.m2);
  pd->set_alarms(ds.alarms);
  pd->set_added(ds.added);
  for (size_t y = 0; y < sample_.size(); ++y) {
    auto* ring = st.add_sample();
    ring->set_next(sample_next_[y]);
    for (const SampleSlot& slot : sample_[y]) {
      auto* ps = ring->add_slots();
      PutDocument(slot.doc, ps);
      ps->mutable_correct()->Add(slot.correct.begin(), slot.correct.end());
      ps->set_epoch(slot.epoch);
      ps->set_order(slot.order);
    }
  }
  st.mutable_seen()->Add(seen_.begin(), seen_.end());
  st.mutable_recent()->Add(recent_.begin(), recent_.end());
  st.set_recent_pos(recent_pos_);
  st.set_cursor_class(cursor_class_);
  st.set_cursor_slot(cursor_slot_);
  st.set_labelled(labelled_);
  st.set_switches(switches_);
  st.set_dropped(dropped_);
  st.set_leader(leader_);
  st.set_leads(leads_);
  st.set_last_grouped(last_grouped_);
  for (const LiveAlarm& a : alarms_) {
    auto* pa = st.add_alarms();
    pa->set_document(a.document);
    pa->set_served(a.served);
    pa->set_new_class(a.new_class);
  }
  std::string out;
  if (!st.SerializeToString(&out)) return Status::Internal("live learner: cannot serialise its state");
  return out;
}

Result<std::string> LiveLearner::Serialize(const SnapshotOptions& options) {
  auto state = EncodeState();
  if (!state.ok()) return state.status();
  Model& m = *candidates_[served_].model;
  m.set_live_state(std::move(state).value());
  auto bytes = m.Serialize(options);
  m.set_live_state(std::string());
  return bytes;
}

Status LiveLearner::Save(const std::string& path, const SnapshotOptions& options) {
  auto state = EncodeState();
  if (!state.ok()) return state.status();
  Model& m = *candidates_[served_].model;
  m.set_live_state(std::move(state).value());
  Status st = m.Save(path, options);
  m.set_live_state(std::string());
  return st;
}

Result<std::unique_ptr<Model>> LiveLearner::ToModel(std::unique_ptr<LiveLearner> learner) {
  auto state = learner->EncodeState();
  if (!state.ok()) return state.status();
  std::unique_ptr<Model> m = learner->TakeServed();
  m->set_live_state(std::move(state).value());
  return m;
}

Result<std::unique_ptr<LiveLearner>> LiveLearner::FromModel(std::unique_ptr<Model> model,
                                                            const PluginRegistry& registry) {
  if (model == nullptr || model->live_state().empty()) {
    return Status::InvalidArgument("live learner: the model holds no live learner state (a single model)");
  }
  v1::LiveLearnerState st;
  if (!st.ParseFromString(model->live_state())) {
    return Status::Corruption("live learner state: does not parse as tributary.v1.LiveLearnerState");
  }
  auto corrupt = [](const std::string& what) { return Status::Corruption("live learner state: " + what); };
  if (st.format() != kStateFormat) {
    return corrupt("format " + std::to_string(st.format()) + ", expected " + std::to_string(kStateFormat) +
                   " (written by another version?)");
  }
  const size_t C = static_cast<size_t>(st.candidates_size());
  if (C == 0 || st.served() >= C) {
    return corrupt(std::to_string(C) + " candidates, served " + std::to_string(st.served()));
  }
  LiveLearnerOptions o;
  const auto& set = st.settings();
  o.half_life = set.half_life();
  o.switch_margin = set.switch_margin();
  o.check_every = set.check_every();
  o.switch_checks = set.switch_checks();
  o.hold_every = set.hold_every();
  o.sample_per_class = set.sample_per_class();
  o.sample_every = set.sample_every();
  o.sample_tolerance = set.sample_tolerance();
  o.detect_drift = set.detect_drift();
  o.detector.delta = set.adwin_delta();
  o.detector.clock = set.adwin_clock();
  o.detector.max_buckets = set.adwin_max_buckets();
  o.detector.min_side = set.adwin_min_side();
  o.restart_memory = set.restart_memory();
  o.seed = set.seed();
  for (const auto& pc : st.candidates()) {
    LiveCandidate c;
    c.spec.label = pc.label();
    c.spec.loss = pc.loss();
    c.spec.generative = pc.generative();
    c.memory = pc.memory();
    o.candidates.push_back(std::move(c));
  }
  if (Status v = o.Validate(); !v.ok()) return corrupt(v.message());
  std::unique_ptr<LiveLearner> l(new LiveLearner());
  l->options_ = o;
  l->decay_ = std::exp2(-1.0 / o.half_life);
  l->detector_ = Adwin(o.detector);
  model->set_live_state(std::string());
  for (size_t i = 0; i < C; ++i) {
    const auto& pc = st.candidates(static_cast<int>(i));
    Candidate c;
    c.setting = o.candidates[i];
    const std::string name = "live candidate '" + pc.label() + "'";
    if (i == st.served()) {
      if (!pc.model().empty()) return corrupt(name + " is served but has a model of its own");
      c.model = std::move(model);
    } else {
      if (pc.model().empty()) return corrupt(name + " has no model");
      auto m = Model::Parse(pc.model(), name, registry);
      if (!m.ok()) return m.status();
      c.model = std::move(m).value();
    }
    auto learner = Learner::Create(c.model.get(), LearnerOptions::Sdem(o.seed));
    if (!learner.ok()) return learner.status().WithContext(name);
    c.learner = std::move(learner).value();
    c.labelled = pc.labelled();
    c.correct = pc.correct();
    c.ncll_sum = pc.ncll_sum();
    c.w_err = pc.w_err();
    c.w_ncll = pc.w_ncll();
    c.w_norm = pc.w_norm();
    c.sample_accuracy = pc.sample_accuracy();
    c.eligible = pc.eligible();
    l->candidates_.push_back(std::move(c));
  }
  const Model& ref = *l->candidates_[0].model;
  for (size_t i = 1; i < C; ++i) {
    const Model& m = *l->candidates_[i].model;
    if (m.num_outputs() != ref.num_outputs() || m.schema().vocab_size() != ref.schema().vocab_size() ||
        m.family().name != ref.family().name) {
      return corrupt("candidate '" + l->candidates_[i].setting.spec.label + "' (" + m.family().name + ", " +
                     std::to_string(m.num_outputs()) + " classes, " + std::to_string(m.schema().vocab_size()) +
                     " terms) does not match candidate '" + l->candidates_[0].setting.spec.label + "' (" +
                     ref.family().name + ", " + std::to_string(ref.num_outputs()) + " classes, " +
                     std::to_string(ref.schema().vocab_size()) + " terms)");
    }
  }
  l->served_ = st.served();
  Adwin::State ds;
  for (const auto& pl : st.detector().levels()) {
    ds.levels.emplace_back();
    for (const auto& pb : pl.buckets()) ds.levels.back().push_back(Adwin::Bucket{pb.sum(), pb.m2()});
  }
  ds.width = st.detector().width();
  ds.sum = st.detector().sum();
  ds.m2 = st.detector().m2();
  ds.alarms = st.detector().alarms();
  ds.added = st.detector().added();
  if (Status d = l->detector_.Restore(ds); !d.ok()) return d;
  const uint64_t K = ref.num_outputs();
  if (static_cast<uint64_t>(st.sample_size()) > K || static_cast<uint64_t>(st.seen_size()) > K) {
    return corrupt("a sample of " + std::to_string(st.sample_size()) + " classes and counts for " +
                   std::to_string(st.seen_size()) + ", the models have " + std::to_string(K));
  }
  for (const auto& ring : st.sample()) {
    if (static_cast<uint64_t>(ring.slots_size()) > o.sample_per_class ||
        (ring.slots_size() > 0 && ring.next() >= static_cast<uint64_t>(ring.slots_size()))) {
      return corrupt("a class's sample holds " + std::to_string(ring.slots_size()) + " documents (at most " +
                     std::to_string(o.sample_per_class) + "), next slot " + std::to_string(ring.next()));
    }
    l->sample_.emplace_back();
    l->sample_next_.push_back(static_cast<size_t>(ring.next()));
    for (const auto& ps : ring.slots()) {
      SampleSlot slot;
      TRIB_RETURN_IF_ERROR(GetDocument(ps, ref, &slot.doc));
      if (static_cast<size_t>(ps.correct_size()) != C) {
        return corrupt("a held document has " + std::to_string(ps.correct_size()) + " scores, expected " +
                       std::to_string(C));
      }
      for (int32_t v : ps.correct()) {
        if (v < -1 || v > 1) return corrupt("a held document's score is " + std::to_string(v));
        slot.correct.push_back(static_cast<int8_t>(v));
      }
      slot.epoch = static_cast<size_t>(ps.epoch());
      slot.order = ps.order();
      l->sample_.back().push_back(std::move(slot));
    }
  }
  l->seen_.assign(st.seen().begin(), st.seen().end());
  for (uint64_t c : l->seen_) l->classes_seen_ += c > 0;
  if (static_cast<size_t>(st.recent_size()) > kRecent ||
      (st.recent_size() > 0 && st.recent_pos() >= static_cast<uint64_t>(st.recent_size()))) {
    return corrupt(std::to_string(st.recent_size()) + " recent labels (at most " + std::to_string(kRecent) +
                   "), oldest at " + std::to_string(st.recent_pos()));
  }
  for (uint32_t y : st.recent()) {
    if (y >= K) return corrupt("a recent label is " + std::to_string(y) + ", expected below " + std::to_string(K));
    l->recent_.push_back(y);
    if (l->recent_count_.size() <= y) l->recent_count_.resize(y + 1, 0);
    ++l->recent_count_[y];
  }
  l->recent_pos_ = static_cast<size_t>(st.recent_pos());
  l->cursor_class_ = static_cast<size_t>(st.cursor_class());
  l->cursor_slot_ = static_cast<size_t>(st.cursor_slot());
  l->labelled_ = st.labelled();
  l->switches_ = st.switches();
  l->dropped_ = st.dropped();
  if (st.leader() >= C) return corrupt("leader " + std::to_string(st.leader()));
  l->leader_ = static_cast<size_t>(st.leader());
  l->leads_ = static_cast<size_t>(st.leads());
  l->last_grouped_ = st.last_grouped();
  for (const auto& pa : st.alarms()) l->alarms_.push_back(LiveAlarm{pa.document(), pa.served(), pa.new_class()});
  return l;
}

void LiveLearner::SetGrowthLimits(const GrowthLimits& limits, uint64_t max_statistics_bytes) {
  const uint64_t share = max_statistics_bytes / candidates_.size();
  for (Candidate& c : candidates_)
    c.model->SetGrowthLimits(limits, max_statistics_bytes ? std::max<uint64_t>(1, share) : 0);
}

uint64_t LiveLearner::memory_bytes() const {
  uint64_t n = 0;
  for (const Candidate& c : candidates_) n += c.model->statistics_bytes();
  for (const auto& ring : sample_) {
    for (const SampleSlot& s : ring) {
      n += sizeof(SampleSlot) + s.doc.term_ids.size() * (sizeof(uint32_t) + sizeof(double)) + s.doc.id.size() +
           s.correct.size();
    }
  }
  return n;
}

}  // namespace tributary
