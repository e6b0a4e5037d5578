// The learner thread: applies acknowledged documents in log order, publishes
// copies of the model for the predictions, and writes the snapshots. Also
// the capacity accounting (documents accepted but not yet learned), which
// the learner gives back as it learns.
#include "server/server_impl.h"  // first: it configures Asio for TSan builds

#include <algorithm>
#include <chrono>
#include <mutex>
#include <utility>

#include "tributary/metrics.h"
#include "tributary/sep_engine.h"

namespace tributary {

// ---- Learner: apply in log order, publish, snapshot ------------------------------

void Server::Impl::LearnerLoop() {
  auto last_publish = Clock::now();
  auto last_snapshot = Clock::now();
  auto snapshot_retry_at = last_snapshot;
  uint64_t since_publish = 0, since_snapshot = 0;
  // Versions (ServerOptions::keep_versions): documents since the last one.
  auto last_version = Clock::now();
  uint64_t since_version = 0;
  Status last_snapshot_status;
  for (;;) {
    std::deque<v1::WalRecord> batch;
    std::vector<std::function<void(const Status&, const std::string&, uint64_t)>> snap_waiters;
    std::vector<std::function<void(const Status&, uint64_t)>> ver_waiters;
    bool stop = false;
    {
      std::unique_lock<std::mutex> l(learn_mu);
      learn_cv.wait_for(l, std::chrono::milliseconds(std::max<uint32_t>(1, opt.publish_interval_ms)), [&] {
        return stopping_learn || !learn_queue.empty() || !snapshot_waiters.empty() || !version_waiters.empty();
      });
      batch.swap(learn_queue);
      snap_waiters.swap(snapshot_waiters);
      ver_waiters.swap(version_waiters);
      stop = stopping_learn && batch.empty();
    }
    for (const auto& rec : batch) {
      if (draining && Clock::now() >= drain_deadline.load()) {
        // Shutting down and out of time (ServerOptions::drain_timeout_ms):
        // stop here. The final snapshot covers what was applied; the rest
        // is in the log, replayed at the next start (behind a "not ready"
        // /healthz).
        stop = true;
        break;
      }
      Status st = Apply(rec);
      if (!st.ok()) {
        Fail(st.WithContext("learner"));
        return;
      }
      ++since_publish;
      ++since_snapshot;
      ++since_version;
      if (rec.has_restore()) {
        // Served at once, and a version's point of its own: a snapshot soon
        // (the restored model is then what recovery starts from).
        since_publish = opt.publish_every_updates;
      }
      if (since_publish >= opt.publish_every_updates) {
        Status p = Publish();
        if (!p.ok()) {
          Fail(p);
          return;
        }
        since_publish = 0;
        last_publish = Clock::now();
      }
    }
    if (!batch.empty()) {
      // The marks of labels learned in this batch, durable before a
      // snapshot can cover their learn records (a failure is counted by
      // the store and shown in /v1/status; the log still has the records).
      if (feedback != nullptr) (void)feedback->Sync();
      // Capacity was taken by documents only (not by restore records).
      uint64_t docs = 0;
      for (const auto& rec : batch) docs += rec.has_restore() ? 0 : 1;
      ReleaseCapacity(docs);
    }
    auto now = Clock::now();
    if (since_publish > 0 && now - last_publish >= std::chrono::milliseconds(opt.publish_interval_ms)) {
      Status p = Publish();
      if (!p.ok()) {
        Fail(p);
        return;
      }
      since_publish = 0;
      last_publish = now;
    }
    // After a failed snapshot (a full disk) the periodic ones wait a retry
    // interval instead of rewriting the model every batch; the log keeps
    // everything meanwhile (it is dropped only up to a saved snapshot).
    const bool version_due =
        !ver_waiters.empty() || (opt.keep_versions > 0 && since_version > 0 && now >= snapshot_retry_at &&
                                 (since_version >= opt.version_every_documents ||
                                  now - last_version >= std::chrono::seconds(opt.version_interval_s)));
    bool snapshot_due = !snap_waiters.empty() || version_due ||
                        (since_snapshot > 0 && now >= snapshot_retry_at &&
                         (since_snapshot >= opt.snapshot_every_documents ||
                          now - last_snapshot >= std::chrono::seconds(opt.snapshot_interval_s)));
    if (snapshot_due || stop) {
      Status st =
          since_snapshot > 0 || !snap_waiters.empty() || !ver_waiters.empty() || stop ? SaveSnapshot() : Status::OK();
      last_snapshot_status = st;
      for (auto& w : snap_waiters) w(st, SnapshotPath(), applied_sequence);
      if (st.ok() && version_due) {
        // The snapshot just written, kept as a version (the model.trib at
        // applied_sequence). A failure is the version's, not the snapshot's:
        // told to the asker and counted; the next one is due as before.
        uint64_t version = 0;
        Status vs = KeepVersion(ver_waiters.empty() ? "schedule" : "request", &version);
        for (auto& w : ver_waiters) w(vs, version);
        if (vs.ok()) {
          since_version = 0;
          last_version = now;
        } else {
          counters.version_failures++;
          if (opt.on_event) opt.on_event("keeping a model version failed: " + vs.ToString());
        }
      } else {
        for (auto& w : ver_waiters) w(st, 0);
      }
      if (st.ok()) {
        since_snapshot = 0;
        last_snapshot = now;
      } else {
        counters.snapshot_failures++;
        snapshot_retry_at = now + std::chrono::milliseconds(std::max<uint32_t>(1000, opt.wal_retry_interval_ms));
      }
    }
    if (stop) {
      // The final snapshot (Shutdown() promises one): its failure is the
      // server's exit status, not silence.
      if (!last_snapshot_status.ok()) Fail(last_snapshot_status.WithContext("final snapshot"));
      // Restores logged but not applied (out of drain time) happen at the
      // next start: their requests are answered now.
      std::map<uint64_t, std::function<void(const RestoreOutcome&)>> waiting;
      {
        std::lock_guard<std::mutex> l(learn_mu);
        waiting.swap(restore_waiters);
      }
      for (auto& [seq, answer] : waiting) {
        RestoreOutcome out;
        out.record = seq;
        out.status = Status::IOError("the server is shutting down: the restore (log record " + std::to_string(seq) +
                                     ") is logged and happens at the next start");
        answer(out);
      }
      if (since_publish > 0) {
        Status p = Publish();
        if (!p.ok()) Fail(p);
      }
      return;
    }
  }
}

Status Server::Impl::Apply(const v1::WalRecord& rec) {
  if (rec.has_restore()) {
    // The model becomes a kept version (versions.cc); its answer, if the
    // request is still waiting (not on replay at start).
    RestoreOutcome out;
    TRIB_RETURN_IF_ERROR(ApplyRestore(rec, &out));
    std::function<void(const RestoreOutcome&)> answer;
    {
      std::lock_guard<std::mutex> l(learn_mu);
      if (auto it = restore_waiters.find(rec.sequence()); it != restore_waiters.end()) {
        answer = std::move(it->second);
        restore_waiters.erase(it);
      }
    }
    if (answer) answer(out);
  } else {
    TRIB_RETURN_IF_ERROR(ApplyDocument(rec, /*prequential=*/true));
    // The label of a kept prediction (POST /v1/feedback): counted once, as
    // it was predicted then, in the delayed figures (feedback.h).
    if (rec.has_prediction() && feedback != nullptr && feedback->Labelled(rec.prediction(), rec.document().label())) {
      CountDelayed(rec.prediction(), rec.document().label());
    }
  }
  applied_sequence = rec.sequence();
  return Status::OK();
}

Status Server::Impl::ApplyDocument(const v1::WalRecord& rec, bool prequential) {
  // New classes and terms are added to the model as its schema allows (the
  // log holds the model's own ids: DocumentDecoder::ForModel); a changed
  // layout makes the learner rebuild itself on its next document.
  LearnResult o;
  Status st = live->Learn(rec.document(), rec.sequence(), &o);
  // An infeasible SEP / ADF update is skipped by the engine (the model
  // unchanged); it is counted like a refused document.
  // (A live learner skips an unlabelled document the same way.)
  if (st.ok() && o.skipped) st = Status::Numeric("update skipped: " + o.skip_reason);
  if (!st.ok()) {
    if (!DocumentRefused(st)) return st;
    counters.documents_skipped++;
    TRIB_RETURN_IF_ERROR(live->WithModel([](Model* m) {
      m->learner_state().skipped_documents++;
      return Status::OK();
    }));
  } else {
    counters.documents_learned++;
    // Test-then-train: the scores are the model's before this document's
    // step (sdEM; SEP gives none). Classes only, not latent components.
    if (prequential && o.scores != nullptr && rec.document().has_label()) {
      int64_t y = -1;
      TRIB_RETURN_IF_ERROR(live->WithModel([&](Model* m) {
        if (!m->latent_outputs()) y = m->schema().ClassIndex(rec.document().label());
        return Status::OK();
      }));
      if (y >= 0) {
        std::lock_guard<std::mutex> l(quality_mu);
        quality.Add(o.scores->data(), static_cast<uint32_t>(o.scores->size()), static_cast<uint32_t>(y));
      }
    }
    if (o.drift_alarm || o.switched) {
      // Events: counted for /metrics and /v1/status, and told to the log.
      std::string served, event;
      uint64_t alarm_at = 0;
      TRIB_RETURN_IF_ERROR(live->WithLiveLearner([&](LiveLearner* l) {
        served = l->candidate_stats()[l->served_index()].label;
        if (o.drift_alarm && !l->alarms().empty()) {
          const LiveAlarm& a = l->alarms().back();
          event = "drift alarm after labelled document " + std::to_string(a.document) + " (log sequence " +
                  std::to_string(rec.sequence()) + ", " +
                  (a.new_class ? "a new class in a mixed stream" : "ADWIN: the error rate rose") +
                  "): every candidate's step raised";
          alarm_at = a.document;
        }
        if (o.switched) {
          event += std::string(event.empty() ? "" : "; ") + "serving candidate '" + served +
                   "' from labelled document " + std::to_string(l->labelled());
        }
        return Status::OK();
      }));
      {
        std::lock_guard<std::mutex> l(quality_mu);
        if (o.drift_alarm) live_alarms.push_back(alarm_at);
        if (o.switched) ++live_switches;
        live_served = served;
      }
      if (opt.on_event && !event.empty()) opt.on_event(event);
    }
  }
  return Status::OK();
}

Status Server::Impl::Publish() {
  // A publication is a copy of the learner's model that predictors read
  // while it learns on; a copy no reader holds any more is brought up to
  // date in place by the pages written since (LiveModel, Model::RefreshFrom).
  auto v = live->Publish();
  if (!v.ok()) return v.status();
  if (*v != published_version) {
    published_version = *v;
    published_at.store(Clock::now().time_since_epoch().count());
  }
  return Status::OK();
}

namespace {
// The calling thread's reader slot and the server it belongs to (Read).
struct ThreadReader {
  const Server::Impl* owner = nullptr;
  std::unique_ptr<LiveModel::Reader>* slot = nullptr;
};
thread_local ThreadReader t_reader;
}  // namespace

void Server::Impl::BindReader(std::unique_ptr<LiveModel::Reader>* slot) { t_reader = ThreadReader{this, slot}; }

void Server::Impl::RunIo(size_t i) {
  BindReader(&io_readers[i]);
  io.run();
  t_reader = ThreadReader{};
}

Status Server::Impl::Read(const std::function<Status(const LiveView&)>& fn) {
  if (t_reader.owner == this) {
    std::unique_ptr<LiveModel::Reader>& mine = *t_reader.slot;
    if (mine == nullptr) {
      auto r = live->NewReader();
      if (!r.ok()) return r.status();
      mine = std::move(r).value();
    }
    return mine->Read(fn);
  }
  auto r = live->NewReader();
  if (!r.ok()) return r.status();
  return (*r)->Read(fn);
}

Status Server::Impl::PredictDocuments(const google::protobuf::RepeatedPtrField<v1::Document>& docs,
                                      const AnswerShape& shape,
                                      const std::function<void(const PredictedOutputs&)>& begin,
                                      const std::function<void(int, const std::vector<double>&, uint32_t)>& each,
                                      const std::function<void(int, const Status&)>& refused, int* bad_index) {
  *bad_index = -1;
  return Read([&](const LiveView& pub) {
    const Model& model = *pub.model;
    const uint32_t K = model.num_outputs();
    // The answer's bound, before anything is scored or built: a small
    // request must not make a huge answer (ids and class names repeated per
    // document, K probabilities each).
    uint64_t names = 0, longest = 0;
    for (uint32_t k = 0; k < K; ++k) {
      const uint64_t n = model.OutputName(k).size();
      names += shape.per_string_byte * n + 8;
      longest = std::max(longest, n);
    }
    const uint64_t per_doc = shape.per_document + shape.per_string_byte * longest + shape.per_probability * K;
    uint64_t bound = 1024 + names;
    for (int i = 0; i < docs.size(); ++i) bound += per_doc + shape.per_string_byte * docs.Get(i).id().size();
    if (bound > opt.max_answer_bytes) {
      *bad_index = kAnswerTooLarge;
      counters.answer_refusals++;
      const uint64_t room = opt.max_answer_bytes > 1024 + names ? opt.max_answer_bytes - 1024 - names : 0;
      return Status::InvalidArgument(
          "the answer to " + std::to_string(docs.size()) + " documents would take up to " + std::to_string(bound) +
          " bytes (" + std::to_string(K) + " classes each, the longest name " + std::to_string(longest) +
          " bytes), over the limit of " + std::to_string(opt.max_answer_bytes) +
          " bytes (--max-answer-bytes): send at most " + std::to_string(room / std::max<uint64_t>(1, per_doc)) +
          " documents of short ids per request");
    }
    std::vector<double> scores(K), probs(K);
    // Answers go out in the documents' order. Until one document is scored,
    // the refused ones wait (every one refused: nothing is answered and the
    // request fails naming the first); then `begin`, and each in turn.
    bool begun = false;
    std::vector<std::pair<int, Status>> waiting;
    DocumentBuffer buf;
    for (int i = 0; i < docs.size(); ++i) {
      Status st = pub.decoder->Decode(docs.Get(i), static_cast<uint64_t>(i), model.schema(), kGrowNothing, &buf,
                                      nullptr, nullptr);
      if (st.ok()) st = model.Score(buf.View(), pub.state, scores.data());
      if (!st.ok()) {
        if (!DocumentRefused(st)) {
          *bad_index = i;
          return st;
        }
        if (begun) {
          refused(i, st);
        } else {
          waiting.emplace_back(i, std::move(st));
        }
        continue;
      }
      if (!begun) {
        begin(PredictedOutputs{pub.version, &model});
        begun = true;
        for (const auto& [j, why] : waiting) refused(j, why);
        waiting.clear();
      }
      Posterior(scores.data(), K, probs.data());
      each(i, probs, static_cast<uint32_t>(std::max_element(probs.begin(), probs.end()) - probs.begin()));
    }
    if (!waiting.empty()) {
      *bad_index = waiting.front().first;
      return waiting.front().second;
    }
    if (!begun) begin(PredictedOutputs{pub.version, &model});  // (no document at all)
    return Status::OK();
  });
}

Status Server::Impl::SaveSnapshot() {
  // data_dir.h Checkpoint: the new snapshot whole before the renames, the
  // replaced one kept as model.prev.trib (a live learner whole: every
  // candidate, its windows, detector and sample).
  uint64_t replaced = 0;
  TRIB_RETURN_IF_ERROR(data_dir->Checkpoint(
      [&](const std::string& path, const SnapshotOptions& so) { return live->SaveState(path, so); }, applied_sequence,
      &replaced));
  snapshot_sequence = applied_sequence;
  counters.snapshots++;
  // The log keeps what a kept version may need (DataDir::DroppableThrough).
  covered_sequence.store(data_dir->DroppableThrough(replaced));
  commit_cv.notify_one();
  return Status::OK();
}

// ---- Capacity: documents accepted but not yet learned -----------------------------

void Server::Impl::ReleaseCapacity(uint64_t n) {
  std::deque<std::function<void()>> wake;
  {
    std::lock_guard<std::mutex> l(cap_mu);
    in_queue -= n;
    wake.swap(cap_waiters);
  }
  for (auto& f : wake) f();  // each retries its reservation on its own strand
}

bool Server::Impl::TryReserve(uint64_t n, std::function<void()> retry) {
  std::lock_guard<std::mutex> l(cap_mu);
  // A request larger than the whole queue is admitted alone.
  if (in_queue == 0 || in_queue + n <= opt.queue_capacity) {
    in_queue += n;
    return true;
  }
  cap_waiters.push_back(std::move(retry));
  return false;
}

uint64_t Server::Impl::QueueDepth() {
  std::lock_guard<std::mutex> l(cap_mu);
  return in_queue;
}

}  // namespace tributary
