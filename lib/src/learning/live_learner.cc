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

Result<Selection> ParseSelection(std::string_view name) {
  if (name == "auto") return Selection::kAuto;
  if (name == "off") return Selection::kOff;
  return Status::InvalidArgument("select: expected 'auto' or 'off', found '" + std::string(name) + "'");
}

bool LiveLearnerApplies(Selection select, Engine engine, const Model& single) {
  const Result<Engine> resolved = ResolveEngine(engine, single.family());
  return select == Selection::kAuto && resolved.ok() && *resolved == Engine::kSdem && !single.latent_outputs() &&
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
