// The learner thread: applies acknowledged documents in log order, publishes
// copies of the model for the predictions, and writes the snapshots. Also
// the capacity accounting (documents accepted but not yet learned), which
// the learner gives back as it learns.
#include "server/server_impl.h"  // first: it configures Asio for TSan builds

#include <algorithm>
#include <chrono>
#include <mutex>
#include <utility>

#include "tributary/sep_engine.h"

namespace tributary {

// ---- Learner: apply in log order, publish, snapshot ------------------------------

void Server::Impl::LearnerLoop() {
  auto last_publish = Clock::now();
  auto last_snapshot = Clock::now();
  auto snapshot_retry_at = last_snapshot;
  uint64_t since_publish = 0, since_snapshot = 0;
  Status last_snapshot_status;
  for (;;) {
    std::deque<v1::WalRecord> batch;
    std::vector<std::function<void(const Status&, const std::string&, uint64_t)>> snap_waiters;
    bool stop = false;
    {
      std::unique_lock<std::mutex> l(learn_mu);
      learn_cv.wait_for(l, std::chrono::milliseconds(std::max<uint32_t>(1, opt.publish_interval_ms)),
                        [&] { return stopping_learn || !learn_queue.empty() || !snapshot_waiters.empty(); });
      batch.swap(learn_queue);
      snap_waiters.swap(snapshot_waiters);
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
    if (!batch.empty()) ReleaseCapacity(batch.size());
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
    bool snapshot_due =
        !snap_waiters.empty() || (since_snapshot > 0 && now >= snapshot_retry_at &&
                                  (since_snapshot >= opt.snapshot_every_documents ||
                                   now - last_snapshot >= std::chrono::seconds(opt.snapshot_interval_s)));
    if (snapshot_due || stop) {
      Status st = since_snapshot > 0 || !snap_waiters.empty() || stop ? SaveSnapshot() : Status::OK();
      last_snapshot_status = st;
      for (auto& w : snap_waiters) w(st, SnapshotPath(), applied_sequence);
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
      if (since_publish > 0) {
        Status p = Publish();
        if (!p.ok()) Fail(p);
      }
      return;
    }
  }
}

Status Server::Impl::Apply(const v1::WalRecord& rec) {
  DocumentBuffer buf;
  // New classes and terms are added to the model (the decoder looks labels
  // and terms up in the schema passed to it, so it stands); a changed layout
  // makes the learner rebuild itself on its next document.
  Status st =
      DecodeGrowing(*learner_decoder, rec.document(), rec.sequence(), model.get(), kGrowClassesAndTerms, &buf, nullptr);
  if (st.ok()) {
    // An infeasible SEP / ADF update is skipped by the engine (the model
    // unchanged); it is counted like a refused document.
    LearnResult o;
    st = learner->Learn(buf.View(), &o);
    if (st.ok() && o.skipped) st = Status::Numeric("SEP update skipped: " + o.skip_reason);
  }
  if (!st.ok()) {
    if (DocumentRefused(st)) {
      counters.documents_skipped++;
      model->learner_state().skipped_documents++;
    } else {
      return st;
    }
  } else {
    counters.documents_learned++;
  }
  applied_sequence = rec.sequence();
  return Status::OK();
}

Status Server::Impl::Publish() {
  // A publication is a copy of the learner's model that predictors read
  // while it learns on. A copy no predictor holds any more comes back
  // through the recycler (its shared_ptr's deleter; the mutex orders the
  // readers' last reads before the writes here) and is brought up to date
  // by copying only the statistics pages written since it was made
  // (Model::RefreshFrom): publishing no longer copies the model. The first
  // publications, and those after the model grew, are full Clones.
  std::unique_ptr<Published> p;
  {
    std::lock_guard<std::mutex> l(recycler->mu);
    p = std::move(recycler->spare);
  }
  // (The recycled copy is ours alone: nothing else can reach it.)
  if (p && const_cast<Model*>(p->model.get())->RefreshFrom(*model, p->epoch).ok()) {
    counters.publications_refreshed++;
  } else {
    auto clone = model->Clone();
    if (!clone.ok()) return clone.status();
    p = std::make_unique<Published>();
    p->model = std::shared_ptr<const Model>(std::move(clone).value().release());
  }
  p->version = model->learner_state().updates;
  auto dec = DocumentDecoder::ForModel(model->schema());
  if (!dec.ok()) return dec.status();
  p->decoder.emplace(std::move(dec).value());
  p->epoch = model->stats().epoch();
  model->stats().NextEpoch();  // later writes are newer than this copy
  counters.publications++;
  std::shared_ptr<const Published> shared(p.release(), [r = recycler](const Published* q) {
    std::unique_ptr<Published> own(const_cast<Published*>(q));
    std::lock_guard<std::mutex> l(r->mu);
    if (!r->spare) r->spare = std::move(own);  // else the spare stays and this one is deleted
  });
  std::shared_ptr<const Published> previous;
  {
    std::lock_guard<std::mutex> l(pub_mu);
    previous = std::move(published);
    published = std::move(shared);
  }
  return Status::OK();  // `previous` released here: recycled unless a reader still holds it
}

Status Server::Impl::SaveSnapshot() {
  // Keep the snapshot being replaced: if the new one is ever found damaged,
  // recovery starts from this one, and the log still holds everything after
  // it. A crash between the rename and the save leaves only model.prev.trib,
  // which recovery also reads.
  const uint64_t replaced = snapshot_sequence;
  if (env->FileExists(SnapshotPath())) {
    TRIB_RETURN_IF_ERROR(env->RenameFile(SnapshotPath(), PrevSnapshotPath()).WithContext("snapshot"));
  }
  TRIB_RETURN_IF_ERROR(model->Save(SnapshotPath(), SnapshotOptions{env, applied_sequence}));
  snapshot_sequence = applied_sequence;
  counters.snapshots++;
  covered_sequence.store(replaced);
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
