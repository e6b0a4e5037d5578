// Predictions kept for late labels (feedback.h).
#include "server/feedback.h"

#include <chrono>
#include <utility>

namespace tributary {

namespace {

int64_t NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The labelled ids remembered (for "already labelled" rather than "expired").
constexpr size_t kMaxLabelledIds = 1u << 20;

}  // namespace

bool FeedbackStore::ParseId(const std::string& id, uint64_t* sequence) {
  if (id.size() < 2 || id.size() > 21 || id[0] != 'k') return false;
  uint64_t v = 0;
  for (size_t i = 1; i < id.size(); ++i) {
    if (id[i] < '0' || id[i] > '9') return false;
    v = v * 10 + static_cast<uint64_t>(id[i] - '0');
  }
  *sequence = v;
  return v > 0;
}

Result<std::unique_ptr<FeedbackStore>> FeedbackStore::Open(
    const std::string& dir, const Options& options,
    const std::function<void(const v1::KeptPrediction&, const std::string&)>& counted) {
  std::unique_ptr<FeedbackStore> s(new FeedbackStore());
  s->options_ = options;
  auto log = WriteAheadLog::Open(dir, options.env);
  if (!log.ok()) return log.status().WithContext("kept predictions");
  s->log_ = std::move(log).value();
  WalReplayReport report;
  uint64_t last = 0;
  Status st = s->log_->Replay(
      0,
      [&](const v1::WalRecord& rec) {
        last = rec.sequence();
        if (!rec.has_prediction()) return Status::OK();
        uint64_t seq = 0;
        if (rec.prediction().labelled()) {
          if (!ParseId(rec.prediction().prediction_id(), &seq)) return Status::OK();
          auto it = s->waiting_.find(seq);
          if (it == s->waiting_.end()) return Status::OK();  // expired before its label came
          counted(it->second.prediction, rec.document().label());
          s->labelled_[seq] = it->second.prediction.time_ms();
          s->stats_.bytes -= it->second.bytes;
          s->waiting_.erase(it);
          return Status::OK();
        }
        Entry e;
        e.document = rec.document();
        e.prediction = rec.prediction();
        e.bytes = static_cast<uint64_t>(rec.ByteSizeLong());
        s->stats_.bytes += e.bytes;
        s->waiting_[rec.sequence()] = std::move(e);
        return Status::OK();
      },
      &report, options.on_corruption);
  if (!st.ok()) return st.WithContext("kept predictions");
  s->next_sequence_ = std::max(last, report.last_sequence) + 1;
  TRIB_RETURN_IF_ERROR(s->log_->StartSegment(s->next_sequence_).WithContext("kept predictions"));
  std::lock_guard<std::mutex> l(s->mu_);
  s->ExpireLocked(NowMillis());
  return s;
}

FeedbackStore::~FeedbackStore() = default;

Status FeedbackStore::Keep(std::vector<v1::WalRecord>* kept) {
  std::lock_guard<std::mutex> l(mu_);
  const int64_t now = NowMillis();
  ExpireLocked(now);
  Status st = log_->MaybeRoll(next_sequence_, options_.segment_bytes);
  uint64_t seq = next_sequence_;
  for (v1::WalRecord& rec : *kept) {
    rec.set_sequence(seq);
    rec.mutable_prediction()->set_prediction_id("k" + std::to_string(seq));
    rec.mutable_prediction()->set_time_ms(now);
    ++seq;
    if (st.ok()) st = log_->Append(rec);
  }
  if (st.ok()) st = log_->Sync();
  if (!st.ok()) {
    stats_.error = st.ToString();
    // A failed log stays failed (wal.h); try it again at the next Keep.
    if (log_->failed()) (void)log_->Recover(next_sequence_);
    return st.WithContext("keeping predictions");
  }
  next_sequence_ = seq;
  for (const v1::WalRecord& rec : *kept) {
    Entry e;
    e.document = rec.document();
    e.prediction = rec.prediction();
    e.bytes = static_cast<uint64_t>(rec.ByteSizeLong());
    stats_.bytes += e.bytes;
    waiting_[rec.sequence()] = std::move(e);
  }
  stats_.kept += kept->size();
  ExpireLocked(now);
  return Status::OK();
}

FeedbackStore::Lookup FeedbackStore::Take(const std::string& id, v1::Document* doc, v1::KeptPrediction* pred) {
  std::lock_guard<std::mutex> l(mu_);
  ExpireLocked(NowMillis());
  uint64_t seq = 0;
  if (!ParseId(id, &seq)) {
    stats_.refused++;
    return Lookup::kMalformed;
  }
  auto it = waiting_.find(seq);
  if (it == waiting_.end()) {
    stats_.refused++;
    if (seq >= next_sequence_) return Lookup::kUnknown;
    return labelled_.count(seq) ? Lookup::kLabelled : Lookup::kExpired;
  }
  if (it->second.taken) {
    stats_.refused++;
    return Lookup::kBeingLabelled;
  }
  it->second.taken = true;
  *doc = it->second.document;
  *pred = it->second.prediction;
  return Lookup::kFound;
}

void FeedbackStore::Release(const std::string& id) {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t seq = 0;
  if (!ParseId(id, &seq)) return;
  auto it = waiting_.find(seq);
  if (it != waiting_.end()) it->second.taken = false;
}

bool FeedbackStore::Labelled(const v1::KeptPrediction& pred, const std::string& label) {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t seq = 0;
  if (!ParseId(pred.prediction_id(), &seq)) return false;
  auto it = waiting_.find(seq);
  if (it == waiting_.end()) return false;  // counted already (its mark read at start), or expired
  // The mark: after a restart that lost it, the learn record's replay
  // writes it again (and counts it then, once).
  v1::WalRecord mark;
  mark.set_sequence(next_sequence_);
  mark.mutable_document()->set_label(label);
  mark.mutable_prediction()->set_prediction_id(pred.prediction_id());
  mark.mutable_prediction()->set_labelled(true);
  Status st = log_->MaybeRoll(next_sequence_, options_.segment_bytes);
  if (st.ok()) st = log_->Append(mark);
  if (st.ok()) {
    ++next_sequence_;
    unsynced_ = true;
  } else {
    stats_.error = st.ToString();
    if (log_->failed()) (void)log_->Recover(next_sequence_);
  }
  labelled_[seq] = it->second.prediction.time_ms();
  stats_.bytes -= it->second.bytes;
  stats_.labelled++;
  waiting_.erase(it);
  return true;
}

void FeedbackStore::ExpireLocked(int64_t now_ms) {
  const int64_t oldest = now_ms - static_cast<int64_t>(options_.max_age_s) * 1000;
  while (!waiting_.empty()) {
    auto it = waiting_.begin();
    if (it->second.taken) break;  // its label is on its way
    if (it->second.prediction.time_ms() >= oldest && stats_.bytes <= options_.max_bytes) break;
    stats_.bytes -= it->second.bytes;
    stats_.expired++;
    waiting_.erase(it);
  }
  while (!labelled_.empty() && (labelled_.begin()->second < oldest || labelled_.size() > kMaxLabelledIds)) {
    labelled_.erase(labelled_.begin());
  }
  // Segments holding nothing still waiting or remembered go.
  uint64_t keep_from = next_sequence_;
  if (!waiting_.empty()) keep_from = std::min(keep_from, waiting_.begin()->first);
  if (!labelled_.empty()) keep_from = std::min(keep_from, labelled_.begin()->first);
  if (keep_from > 1 && keep_from - 1 > dropped_through_) {
    dropped_through_ = keep_from - 1;
    (void)log_->DropCovered(dropped_through_);
  }
}

Status FeedbackStore::Sync() {
  std::lock_guard<std::mutex> l(mu_);
  if (!unsynced_) return Status::OK();
  unsynced_ = false;
  Status st = log_->Sync();
  if (!st.ok()) {
    stats_.error = st.ToString();
    if (log_->failed()) (void)log_->Recover(next_sequence_);
  }
  return st;
}

FeedbackStore::Stats FeedbackStore::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  Stats s = stats_;
  s.waiting = waiting_.size();
  return s;
}

}  // namespace tributary
