// LiveModel's durable mode (live_model.h, LiveModelOptions::data_dir): the
// data directory opened and recovered (data_dir.h: the newest readable
// snapshot, the log replayed after it), every document logged and fsynced
// before it is learned, the acknowledgement mark, checkpoints.
#include <chrono>

#include "tributary/live_model.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

Status LiveModel::OpenDurable(std::unique_ptr<Model> initial) {
  // The data directory's rules (data_dir.h), the server's: locked, the
  // newest readable snapshot (a damaged one moved aside and reported), else
  // the initial model kept as the directory's first; then the log replayed.
  DataDirOptions dopt;
  dopt.env = options_.env;
  dopt.holder = "LiveModel";
  dopt.on_corruption = options_.on_corruption;
  dopt.initial_hint = "pass a model to LiveModel::Create";
  auto dir = DataDir::Open(options_.data_dir, dopt);
  if (!dir.ok()) return dir.status().WithContext("LiveModel");
  dir_ = std::move(dir).value();
  wal_ = dir_->wal();
  auto model = dir_->LoadModel(*options_.registry, std::move(initial), &recovery_);
  if (!model.ok()) return model.status().WithContext("LiveModel");
  TRIB_RETURN_IF_ERROR(AdoptLocked(std::move(model).value()));
  // Everything acknowledged after the snapshot, learned again in log order:
  // the model is the one that learned every acknowledged document.
  uint64_t next = 0;
  TRIB_RETURN_IF_ERROR(dir_->Replay(
      [&](const v1::WalRecord& rec) {
        Status st = LearnProtoLocked(rec.document(), rec.sequence() - 1, nullptr);
        // (A document the learner refused when it was acknowledged is
        // refused again: skipped, as it was then.)
        return st.ok() || DocumentRefused(st) ? Status::OK() : st;
      },
      nullptr, &recovery_, &next));
  if (live_ == nullptr) model_->learner_state().skipped_documents += recovery_.unreadable_sequences.size();
  logged_ = next - 1;
  appended_ = logged_;
  marked_ = logged_;
  marked_at_ = std::chrono::steady_clock::now();
  inputs_ = logged_;
  // A new directory, a replayed log or damage: a snapshot of the recovered
  // state is the next start's starting point (as the server does).
  if (recovery_.replayed > 0 || !recovery_.from_snapshot || !recovery_.damage.empty()) return CheckpointLocked();
  return Status::OK();
}

Status LiveModel::AppendLocked(const v1::Document& doc) {
  constexpr uint64_t kSegmentBytes = uint64_t{64} << 20;
  const uint64_t next = appended_ + 1;
  TRIB_RETURN_IF_ERROR(wal_->MaybeRoll(next, kSegmentBytes));
  v1::WalRecord rec;
  rec.set_sequence(next);
  *rec.mutable_document() = doc;
  TRIB_RETURN_IF_ERROR(wal_->Append(rec));
  appended_ = next;
  return Status::OK();
}

Status LiveModel::SyncLocked() {
  Status st = wal_->Sync();
  if (!st.ok()) {
    appended_ = logged_.load();  // the log dropped what was not durable (wal.h Sync)
    return st;
  }
  logged_ = appended_;
  if (std::chrono::steady_clock::now() - marked_at_ < std::chrono::milliseconds(options_.ack_mark_interval_ms)) {
    return Status::OK();
  }
  return MarkLocked();
}

Status LiveModel::MarkLocked() {
  if (marked_ >= logged_.load()) return Status::OK();
  TRIB_RETURN_IF_ERROR(wal_->MarkAcknowledged(logged_.load()));
  marked_ = logged_.load();
  marked_at_ = std::chrono::steady_clock::now();
  return Status::OK();
}

Status LiveModel::LogLocked(const v1::Document& doc, uint64_t index) {
  TRIB_RETURN_IF_ERROR(CheckLocked(doc, index));
  TRIB_RETURN_IF_ERROR(AppendLocked(doc));
  return SyncLocked();
}

Status LiveModel::Checkpoint() {
  if (wal_ == nullptr) return Status::InvalidArgument("LiveModel::Checkpoint: not durable (no data_dir)");
  std::lock_guard<std::mutex> l(writer_mu_);
  return CheckpointLocked();
}

Status LiveModel::CheckpointLocked() {
  // data_dir.h Checkpoint: the new snapshot whole before the renames; the
  // replaced one kept as model.prev.trib, the log after it kept.
  uint64_t replaced = 0;
  TRIB_RETURN_IF_ERROR(dir_->Checkpoint(
      [&](const std::string& path, const SnapshotOptions& so) {
        return live_ ? live_->Save(path, so) : model_->Save(path, so);
      },
      logged_.load(), &replaced));
  TRIB_RETURN_IF_ERROR(MarkLocked());
  // Segments wholly before the replaced snapshot: no snapshot needs them.
  return wal_->DropCovered(replaced);
}

uint64_t LiveModel::acknowledged() const { return logged_.load(); }

}  // namespace tributary
