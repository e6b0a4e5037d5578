// Saving and resuming a LiveLearner (live_learner.h EncodeState, Serialize,
// Save, ToModel): the whole learner — every candidate's model, the served
// one, the windows, the per-class sample and the detector — in a snapshot
// (v1::LiveLearnerState), so that a restart resumes the learner, not one model.
#include "tributary/live_learner.h"

#include "json_text.h"
#include "tributary/sep_engine.h"
#include "tributary/v1/tributary.pb.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <utility>

namespace tributary {

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

}  // namespace tributary
