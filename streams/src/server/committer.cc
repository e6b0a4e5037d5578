// The committer thread: appends learn requests to the write-ahead log,
// fsyncs (every request, or every fsync_interval_ms: group commit), then
// acknowledges them and hands the logged records to the learner.
#include "server/server_impl.h"  // first: it configures Asio for TSan builds

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "server/frame.h"
#include "tributary/utf8.h"

namespace tributary {

// ---- Committer: log, fsync, acknowledge ---------------------------------------

void Server::Impl::CommitterLoop() {
  auto last_sync = Clock::now();
  uint64_t dropped_through = 0;  // DropCovered already done for this sequence
  // The acknowledgement mark (wal.h): acknowledged through `acked`, marked
  // through `marked`; rewritten at most every ack_mark_interval_ms, after
  // the acknowledgements it covers.
  uint64_t acked = next_sequence - 1, marked = acked;
  auto last_mark = Clock::now();
  auto write_mark = [&] {
    Status st = wal->MarkAcknowledged(acked);
    last_mark = Clock::now();
    if (st.ok()) {
      marked = acked;
    } else {
      counters.ack_mark_failures++;
    }
  };
  const auto mark_interval = std::chrono::milliseconds(opt.ack_mark_interval_ms);
  std::vector<LearnJob> group;
  for (;;) {
    if (marked < acked && Clock::now() - last_mark >= mark_interval) write_mark();
    {
      std::unique_lock<std::mutex> l(commit_mu);
      if (marked < acked) {
        // Idle with a mark to write: wake for it when its interval is up.
        if (!commit_cv.wait_until(l, last_mark + mark_interval,
                                  [&] { return stopping_commit || !commit_queue.empty(); })) {
          continue;
        }
      }
      if (!learning_enabled && opt.wal_retry_interval_ms > 0) {
        // The log failed (a full disk, a device error): try it again every
        // interval, and learn again as soon as it takes data (wal.h Recover).
        if (!commit_cv.wait_for(l, std::chrono::milliseconds(opt.wal_retry_interval_ms),
                                [&] { return stopping_commit || !commit_queue.empty(); })) {
          l.unlock();
          TryRecoverLog();
          continue;
        }
      } else {
        commit_cv.wait(l, [&] { return stopping_commit || !commit_queue.empty(); });
      }
      if (commit_queue.empty() && stopping_commit) break;
      if (!opt.fsync_every_request) {
        // Group commit: gather requests until the interval since the last
        // fsync has passed.
        auto deadline = last_sync + std::chrono::milliseconds(opt.fsync_interval_ms);
        commit_cv.wait_until(l, deadline, [&] { return stopping_commit; });
      }
      while (!commit_queue.empty()) {
        group.push_back(std::move(commit_queue.front()));
        commit_queue.pop_front();
        if (opt.fsync_every_request) break;
      }
    }
    if (group.empty()) continue;
    uint64_t covered = covered_sequence.load();
    Status st = learning_enabled ? Status::OK() : Status::IOError("write-ahead log disabled");
    const uint64_t first = next_sequence;
    std::vector<v1::WalRecord> records;
    if (st.ok()) st = wal->MaybeRoll(next_sequence, opt.wal_segment_bytes);
    if (st.ok() && covered > dropped_through) {
      st = wal->DropCovered(covered);
      dropped_through = covered;
    }
    uint64_t seq = first;
    for (auto& job : group) {
      if (job.restore) {
        v1::WalRecord rec;
        rec.set_sequence(seq++);
        *rec.mutable_restore() = *job.restore;
        if (st.ok()) st = wal->Append(rec);
        records.push_back(std::move(rec));
        continue;
      }
      for (size_t i = 0; i < job.docs.size(); ++i) {
        v1::WalRecord rec;
        rec.set_sequence(seq++);
        *rec.mutable_document() = std::move(job.docs[i]);
        if (i < job.positions.size()) *rec.mutable_source() = std::move(job.positions[i]);
        if (i < job.predictions.size()) *rec.mutable_prediction() = std::move(job.predictions[i]);
        if (st.ok()) st = wal->Append(rec);
        records.push_back(std::move(rec));
      }
    }
    if (st.ok()) st = wal->Sync();
    last_sync = Clock::now();
    if (!st.ok()) {
      // Nothing of this group is acknowledged or learned. Learning stays off:
      // the log can no longer promise durability. Predictions go on.
      counters.err_wal++;
      learning_enabled = false;
      {
        std::lock_guard<std::mutex> l(commit_mu);
        wal_error = st.ToString();
      }
      uint64_t n = 0;
      for (auto& job : group) {
        n += job.docs.size();
        v1::Response r;
        r.set_request_id(job.request_id);
        r.set_code(v1::Response::UNAVAILABLE);
        r.set_message("write-ahead log failure, not learned: " + st.ToString());
        job.complete(std::move(r));
      }
      ReleaseCapacity(n);
      group.clear();
      continue;
    }
    next_sequence = seq;
    if (opt.ack_mark_interval_ms == 0) {
      // Strict: the mark covers these records before they are acknowledged.
      // If it cannot be written they are acknowledged all the same (they are
      // in the fsynced log); the mark then lags until a later write works.
      acked = seq - 1;
      write_mark();
    }
    // Counted as acknowledged before the learner can see them, so that
    // documents_learned never runs ahead of documents_acknowledged in what
    // /metrics shows (a reader waiting for "learned >= N" finds them all
    // acknowledged too).
    uint64_t acknowledged_docs = 0;
    for (const auto& r : records) acknowledged_docs += r.has_restore() ? 0 : 1;
    counters.documents_acknowledged += acknowledged_docs;
    {
      std::lock_guard<std::mutex> l(learn_mu);
      // A restore is answered by the learner once applied (Apply).
      uint64_t at = first;
      for (auto& job : group) {
        if (job.restore) restore_waiters.emplace(at, std::move(job.restored));
        at += job.restore ? 1 : job.docs.size();
      }
      for (auto& r : records) learn_queue.push_back(std::move(r));
    }
    learn_cv.notify_one();
    uint64_t s = first;
    for (auto& job : group) {
      if (job.restore) {
        ++s;
        continue;
      }
      counters.learn_latency.Observe(std::chrono::duration<double>(Clock::now() - job.start).count());
      v1::Response r;
      r.set_request_id(job.request_id);
      r.mutable_learn()->set_acknowledged(job.docs.size());
      r.mutable_learn()->set_first_sequence(s);
      job.complete(std::move(r));
      s += job.docs.size();
    }
    acked = next_sequence - 1;
    group.clear();
  }
  if (marked < acked) write_mark();
  // Every group was synced as it was logged; this only matters if a future
  // change buffers across groups. A failed log stays failed: not an error again.
  if (learning_enabled) {
    Status st = wal->Sync();
    if (!st.ok()) counters.err_wal++;
  }
}

// ---- Admission of learn requests (both protocols) ----------------------------------

std::optional<LearnRefusal> Server::Impl::CheckLearn(const v1::LearnRequest& lr) {
  auto refuse = [](v1::Response::Code code, std::string msg, int64_t index = -1) {
    return std::optional<LearnRefusal>(LearnRefusal{code, std::move(msg), index});
  };
  if (recovery_phase.load() != RecoveryPhase::kReady) {
    return refuse(v1::Response::UNAVAILABLE, "not ready: recovering the model (see /healthz)");
  }
  if (draining) return refuse(v1::Response::UNAVAILABLE, "server is shutting down");
  if (!learning_enabled) {
    return refuse(v1::Response::UNAVAILABLE,
                  "learning is disabled after a write-ahead log failure; predictions still served");
  }
  if (const std::string why = server_internal::LearnRequestError(lr); !why.empty()) {
    return refuse(v1::Response::INVALID_REQUEST, why);
  }
  // Validate every document before anything is logged: a request is
  // learned whole or refused whole.
  std::optional<LearnRefusal> refusal;
  Status read = Read([&](const LiveView& pub) {
    const std::string label_required_by = LabelRequiredBy(pub.model->loss_plugin().get());
    DocumentBuffer buf;
    // New classes of the whole request count against the model's limit
    // together (each document alone is checked against the model by Decode).
    std::unordered_set<std::string> new_classes;
    const uint64_t max_classes = pub.model->schema().limits().max_classes;
    for (int i = 0; i < lr.documents_size(); ++i) {
      std::string new_class;
      // The one learning rule, shared with `tributary client learn`.
      Status st = pub.decoder->DecodeForLearning(lr.documents(i), static_cast<uint64_t>(i), pub.model->schema(),
                                                 label_required_by, &buf, &new_class);
      CountLimits(buf);
      if (!st.ok()) {
        refusal =
            refuse(v1::Response::INVALID_REQUEST, "learn (document index within the request): " + st.message(), i);
        break;
      }
      if (!new_class.empty() && new_classes.insert(new_class).second && max_classes != 0 &&
          pub.model->num_classes() + new_classes.size() > max_classes) {
        counters.class_limit_refusals++;
        refusal = refuse(v1::Response::INVALID_REQUEST,
                         "learn (document index within the request): " + buf.Name() + ": label '" +
                             Printable(new_class, 128) + "' would be class " +
                             std::to_string(pub.model->num_classes() + new_classes.size()) +
                             " with the request's other new classes, over the model's limit of " +
                             std::to_string(max_classes) + " classes (--max-classes, or what --max-model-bytes allows)",
                         i);
        break;
      }
    }
    return Status::OK();
  });
  if (!read.ok()) return refuse(v1::Response::INTERNAL, read.ToString());
  return refusal;
}

void Server::Impl::CountLimits(const DocumentBuffer& buf) {
  counters.terms_dropped += buf.terms_over_limit;
  if (buf.limit_refusal == DocumentBuffer::LimitRefusal::kClasses) counters.class_limit_refusals++;
  if (buf.limit_refusal == DocumentBuffer::LimitRefusal::kLabelBytes) counters.label_limit_refusals++;
}

bool Server::Impl::SubmitLearn(LearnJob& job) {
  std::lock_guard<std::mutex> l(commit_mu);
  if (stopping_commit) return false;
  commit_queue.push_back(std::move(job));
  commit_cv.notify_one();
  return true;
}

void Server::Impl::TryRecoverLog() {
  Status st = wal->Recover(next_sequence);
  counters.wal_recovery_attempts++;
  if (!st.ok()) {
    std::lock_guard<std::mutex> l(commit_mu);
    wal_error = st.ToString();
    return;
  }
  {
    std::lock_guard<std::mutex> l(commit_mu);
    wal_error.clear();
  }
  counters.wal_recoveries++;
  learning_enabled = true;
}

}  // namespace tributary
