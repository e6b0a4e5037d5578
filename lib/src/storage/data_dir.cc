#include "tributary/data_dir.h"

#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>

#include "tributary/model.h"
#include "tributary/plugin_registry.h"

namespace tributary {

namespace {

std::string Join(const std::string& dir, const char* name) { return (std::filesystem::path(dir) / name).string(); }

}  // namespace

Result<std::unique_ptr<DataDir>> DataDir::Open(const std::string& path, const DataDirOptions& options) {
  if (path.empty()) return Status::InvalidArgument("data directory: the path is empty");
  std::unique_ptr<DataDir> d(new DataDir());
  d->path_ = path;
  d->options_ = options;
  d->env_ = options.env != nullptr ? options.env : Env::Default();
  d->stamp_ = std::to_string(static_cast<long long>(std::time(nullptr)));
  TRIB_RETURN_IF_ERROR(d->env_->CreateDirs(path).WithContext("data directory"));
  // One owner at a time (LevelDB's LOCK): two writers of one log would
  // interleave sequences and each drop the other's segments.
  const std::string holder = "process " + std::to_string(static_cast<long long>(::getpid())) + " (" + options.holder +
                             ", since unix time " + d->stamp_ + ")";
  auto lock = d->env_->LockFile(d->LockPath(), holder + "\n");
  if (!lock.ok()) {
    return Status::IOError("data directory '" + path + "' is in use: " + lock.status().message() +
                           "; one process (one server or one durable LiveModel) may open it at a time");
  }
  d->lock_ = std::move(lock).value();
  // A snapshot being written when the process stopped: model.trib or
  // model.prev.trib and the log hold everything it did.
  if (d->env_->FileExists(d->NextSnapshotPath())) {
    TRIB_RETURN_IF_ERROR(d->env_->RemoveFile(d->NextSnapshotPath()).WithContext("data directory"));
  }
  auto wal = WriteAheadLog::Open(Join(path, "wal"), d->env_, d->DamagedDir());
  if (!wal.ok()) return wal.status();
  d->wal_ = std::move(wal).value();
  return d;
}

DataDir::~DataDir() = default;

bool DataDir::HasSnapshot(const std::string& path, Env* env) {
  if (env == nullptr) env = Env::Default();
  return env->FileExists(Join(path, "model.trib")) || env->FileExists(Join(path, "model.prev.trib"));
}

std::string DataDir::SnapshotPath() const { return Join(path_, "model.trib"); }
std::string DataDir::PrevSnapshotPath() const { return Join(path_, "model.prev.trib"); }
std::string DataDir::NextSnapshotPath() const { return Join(path_, "model.next.trib"); }
std::string DataDir::InitialSnapshotPath() const { return Join(path_, "model.initial.trib"); }
std::string DataDir::DamagedDir() const { return Join(path_, "damaged"); }
std::string DataDir::LockPath() const { return Join(path_, "LOCK"); }

std::vector<std::string> DataDir::Reports() const {
  std::vector<std::string> names, out;
  (void)env_->GetChildren(DamagedDir(), &names);  // no directory: no reports
  for (const auto& n : names) {
    if (n.size() > 7 && n.compare(n.size() - 7, 7, ".report") == 0) out.push_back(DamagedDir() + "/" + n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status DataDir::Report(const std::string& report, const std::string& what, const std::string& line,
                       DataDirRecovery* rec) {
  TRIB_RETURN_IF_ERROR(env_->CreateDirs(DamagedDir()));
  TRIB_RETURN_IF_ERROR(env_->WriteFileAtomically(
      report, "Tributary " + what + " damage, found at unix time " + stamp_ + "\n" + line +
                  ".\nRemove this .report file once reviewed: /healthz fails while one exists.\n"));
  rec->damage.push_back(line);
  rec->reports.push_back(report);
  return Status::OK();
}

Status DataDir::MoveAside(const std::string& path, const std::string& why, const std::string& recovered_from,
                          uint64_t after, DataDirRecovery* rec) {
  TRIB_RETURN_IF_ERROR(env_->CreateDirs(DamagedDir()));
  const std::string kept = DamagedDir() + "/" + std::filesystem::path(path).filename().string() + "." + stamp_;
  TRIB_RETURN_IF_ERROR(env_->RenameFile(path, kept).WithContext("moving a damaged snapshot aside"));
  return Report(kept + ".report", "snapshot",
                why + "; kept as " + kept + "; recovered from " + recovered_from +
                    " and the write-ahead log from sequence " + std::to_string(after + 1) + ": nothing lost",
                rec);
}

Result<std::unique_ptr<Model>> DataDir::LoadModel(const PluginRegistry& registry, std::unique_ptr<Model> initial,
                                                  DataDirRecovery* rec) {
  uint64_t after = 0;
  std::vector<std::pair<std::string, std::string>> damaged;  // path, why
  std::unique_ptr<Model> model;
  for (const std::string& path : {SnapshotPath(), PrevSnapshotPath()}) {
    if (!env_->FileExists(path)) continue;
    uint64_t seq = 0;
    auto m = Model::Load(path, registry, env_, &seq);
    if (m.ok()) {
      model = std::move(m).value();
      after = seq;
      rec->from_snapshot = true;
      rec->snapshot_path = path;
      break;
    }
    // A missing plugin or a version mismatch is not damage: say so and stop.
    if (!m.status().IsCorruption()) return m.status();
    damaged.emplace_back(path, m.status().message());
  }
  // Both damaged (or gone) while the log holds everything from sequence 1:
  // the directory's own initial model, as it started.
  if (!model && wal_->FirstSequence() <= 1 && env_->FileExists(InitialSnapshotPath())) {
    uint64_t seq = 0;
    auto m = Model::Load(InitialSnapshotPath(), registry, env_, &seq);
    if (m.ok() && seq == 0) {
      model = std::move(m).value();
      rec->snapshot_path = InitialSnapshotPath();  // the initial model: not from_snapshot
    } else if (!m.ok() && !m.status().IsCorruption()) {
      return m.status();
    }
  }
  if (!model) {
    std::string why;
    for (const auto& [path, msg] : damaged) why += (why.empty() ? "" : "; ") + msg;
    const uint64_t first = wal_->FirstSequence();
    if (!damaged.empty() && first > 1) {
      return Status::Corruption("no readable snapshot in '" + path_ + "' (" + why +
                                ") and the write-ahead log starts at sequence " + std::to_string(first) +
                                ": documents 1.." + std::to_string(first - 1) +
                                " are in no readable file. Nothing was changed; restore a snapshot from a backup");
    }
    if (!initial) {
      return Status::InvalidArgument(
          "no " + std::string(damaged.empty() ? "" : "readable ") + "snapshot in '" + path_ + "'" +
          (why.empty() ? "" : " (" + why + ")") + " and no initial model (" + options_.initial_hint +
          (damaged.empty() ? "" : ": the whole log is present, it is replayed onto it") + ")");
    }
    model = std::move(initial);
  }
  // A new data directory (or one whose every snapshot is lost) keeps the
  // model it starts from: model.initial.trib, written once.
  if (!rec->from_snapshot && rec->snapshot_path.empty() && !env_->FileExists(InitialSnapshotPath())) {
    TRIB_RETURN_IF_ERROR(
        model->Save(InitialSnapshotPath(), SnapshotOptions{env_, 0}).WithContext("keeping the initial model"));
  }
  const std::string recovered_from = rec->from_snapshot ? rec->snapshot_path : std::string("the initial model");
  for (const auto& [path, msg] : damaged) TRIB_RETURN_IF_ERROR(MoveAside(path, msg, recovered_from, after, rec));
  rec->snapshot_sequence = after;
  snapshot_sequence_ = rec->from_snapshot ? after : 0;
  return model;
}

Status DataDir::Replay(const std::function<Status(const v1::WalRecord&)>& apply,
                       const std::function<void(const v1::WalRecord&)>& covered, DataDirRecovery* rec,
                       uint64_t* next_sequence) {
  const uint64_t after = rec->snapshot_sequence;
  WalReplayReport rep;
  TRIB_RETURN_IF_ERROR(wal_->Replay(after, apply, &rep, options_.on_corruption, covered));
  rec->replayed = rep.records;
  rec->torn_bytes = rep.torn_bytes;
  rec->lost_records = rep.lost_records;
  // Whole records that do not parse are skipped like a refused document
  // (the caller counts them) and reported.
  for (const auto& u : rep.unreadable) {
    rec->damage.push_back(u.description + "; skipped, kept as " + u.kept_as);
    rec->reports.push_back(u.report);
    rec->unreadable_sequences.push_back(u.sequence);
  }
  for (const auto& d : rep.damage) {
    rec->damage.push_back(d.Describe() + (d.kept_as.empty() ? "" : "; kept as " + d.kept_as));
    if (!d.report.empty()) rec->reports.push_back(d.report);
    if (!d.covered) rec->lost_ranges.emplace_back(std::max(d.first_lost, after + 1), d.last_lost);
  }
  *next_sequence = std::max(after, rep.last_sequence) + 1;
  TRIB_RETURN_IF_ERROR(wal_->StartSegment(*next_sequence));
  // Everything before next_sequence is in the snapshot or the log now; the
  // mark says so (and replaces a damaged one, reported below).
  if (!rep.mark_error.empty() || rep.mark_missing) {
    // The mark is written from a data directory's first start on: without
    // it (damaged, or deleted) a cut at the log's end reads as a torn write,
    // so what was cut may have been acknowledged. Reported with a .report
    // file, never silent.
    std::string line = (rep.mark_missing ? "write-ahead log acknowledgement mark '" + wal_->MarkPath() +
                                               "' is missing although the log holds records (deleted?)"
                                         : rep.mark_error) +
                       "; the log was read without it (a torn tail could not be told from damage) and the mark "
                       "is rewritten";
    if (rep.torn_bytes > 0) {
      line += "; " + std::to_string(rep.torn_bytes) + " bytes cut from the end of the log (kept as " +
              rep.torn_kept_as + ") may have held acknowledged documents";
    }
    TRIB_RETURN_IF_ERROR(Report(DamagedDir() + "/wal.acked." + stamp_ + ".report", "write-ahead log", line, rec));
  }
  return wal_->MarkAcknowledged(*next_sequence - 1);
}

Status DataDir::Checkpoint(const std::function<Status(const std::string&, const SnapshotOptions&)>& save,
                           uint64_t sequence, uint64_t* replaced) {
  // Written whole (and synced: Model::Save writes atomically) before any
  // rename: a failed or cut-short save leaves the snapshots as they were.
  TRIB_RETURN_IF_ERROR(save(NextSnapshotPath(), SnapshotOptions{env_, sequence}).WithContext("snapshot"));
  // Keep the snapshot being replaced: if the new one is ever found damaged,
  // recovery starts from it, and the log still holds everything after it. A
  // crash between the renames leaves model.prev.trib, which recovery reads
  // (and model.next.trib, which Open removes).
  const uint64_t before = snapshot_sequence_;
  if (env_->FileExists(SnapshotPath())) {
    TRIB_RETURN_IF_ERROR(env_->RenameFile(SnapshotPath(), PrevSnapshotPath()).WithContext("snapshot"));
  }
  TRIB_RETURN_IF_ERROR(env_->RenameFile(NextSnapshotPath(), SnapshotPath()).WithContext("snapshot"));
  TRIB_RETURN_IF_ERROR(env_->SyncDir(path_).WithContext("snapshot"));
  snapshot_sequence_ = sequence;
  if (replaced != nullptr) *replaced = before;
  // A restore record the replaced snapshot holds is never replayed again:
  // its version may go.
  std::erase_if(pins_, [&](const std::pair<uint64_t, uint64_t>& p) { return p.second <= before; });
  return Status::OK();
}

// ---- Versions -------------------------------------------------------------------

namespace {

constexpr size_t kVersionDigits = 20;

std::string VersionName(uint64_t sequence, const char* ext) {
  std::string digits = std::to_string(sequence);
  return std::string(kVersionDigits - digits.size(), '0') + digits + ext;
}

// "<20 digits>.trib" -> its sequence; false for any other name.
bool ParseVersionName(const std::string& name, uint64_t* sequence) {
  if (name.size() != kVersionDigits + 5 || name.compare(kVersionDigits, 5, ".trib") != 0) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < kVersionDigits; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    v = v * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  *sequence = v;
  return true;
}

// Writes `from`'s bytes (or `text`, when from is empty) to `to` through a
// temporary file, synced before the rename and the directory after it.
Status WriteDurablyTo(Env* env, const std::string& from, const std::string& text, const std::string& tmp,
                      const std::string& to) {
  auto out = env->NewWritableFile(tmp);
  if (!out.ok()) return out.status();
  if (from.empty()) {
    TRIB_RETURN_IF_ERROR((*out)->Append(text));
  } else {
    auto in = env->NewSequentialFile(from);
    if (!in.ok()) return in.status();
    std::string buf(1u << 20, '\0');
    for (;;) {
      size_t got = 0;
      TRIB_RETURN_IF_ERROR((*in)->Read(buf.size(), buf.data(), &got));
      if (got == 0) break;
      TRIB_RETURN_IF_ERROR((*out)->Append(std::string_view(buf.data(), got)));
    }
  }
  TRIB_RETURN_IF_ERROR((*out)->Sync());
  TRIB_RETURN_IF_ERROR((*out)->Close());
  TRIB_RETURN_IF_ERROR(env->RenameFile(tmp, to));
  return env->SyncDir(std::filesystem::path(to).parent_path().string());
}

Status WriteDurably(Env* env, const std::string& from, const std::string& text, const std::string& to) {
  const std::string tmp = to + ".tmp";
  Status st = WriteDurablyTo(env, from, text, tmp, to);
  if (!st.ok() && env->FileExists(tmp)) (void)env->RemoveFile(tmp);  // no litter; the error is st
  return st;
}

}  // namespace

std::string DataDir::VersionsDir() const { return Join(path_, "versions"); }
std::string DataDir::VersionPath(uint64_t sequence) const {
  return (std::filesystem::path(VersionsDir()) / VersionName(sequence, ".trib")).string();
}

Status DataDir::KeepVersion(uint64_t sequence, const std::string& info, size_t keep) {
  TRIB_RETURN_IF_ERROR(env_->CreateDirs(VersionsDir()).WithContext("model versions"));
  const std::string json = VersionInfoPath(sequence);
  // The sidecar first: a version listed (its .trib in place) has its figures.
  TRIB_RETURN_IF_ERROR(WriteDurably(env_, "", info, json).WithContext("model version '" + json + "'"));
  TRIB_RETURN_IF_ERROR(WriteDurably(env_, SnapshotPath(), "", VersionPath(sequence))
                           .WithContext("model version " + std::to_string(sequence)));
  return PruneVersions(keep);
}

Status DataDir::PruneVersions(size_t keep) {
  // The newest `keep` versions stay, and any pinned one besides them (a
  // restore recovery may replay needs it; it goes at a later checkpoint).
  auto pinned = [&](uint64_t seq) {
    return std::any_of(pins_.begin(), pins_.end(), [&](const auto& p) { return p.first == seq; });
  };
  const std::vector<uint64_t> kept = VersionSequences();
  size_t unpinned = 0;
  for (uint64_t seq : kept) unpinned += pinned(seq) ? 0 : 1;
  size_t excess = unpinned > keep ? unpinned - keep : 0;
  for (uint64_t seq : kept) {
    if (excess == 0) break;
    if (pinned(seq)) continue;
    TRIB_RETURN_IF_ERROR(env_->RemoveFile(VersionPath(seq)).WithContext("model versions"));
    const std::string side = VersionInfoPath(seq);
    if (env_->FileExists(side)) TRIB_RETURN_IF_ERROR(env_->RemoveFile(side).WithContext("model versions"));
    --excess;
  }
  return Status::OK();
}

std::string DataDir::VersionInfoPath(uint64_t sequence) const {
  return (std::filesystem::path(VersionsDir()) / VersionName(sequence, ".json")).string();
}

std::vector<uint64_t> DataDir::VersionSequences() const {
  std::vector<uint64_t> out;
  std::vector<std::string> names;
  if (!env_->GetChildren(VersionsDir(), &names).ok()) return out;
  for (const std::string& name : names) {
    uint64_t seq = 0;
    if (ParseVersionName(name, &seq)) out.push_back(seq);
  }
  std::sort(out.begin(), out.end());
  return out;
}

ModelVersion DataDir::ReadVersion(uint64_t sequence) const {
  ModelVersion v;
  v.sequence = sequence;
  v.path = VersionPath(sequence);
  const std::string side = VersionInfoPath(sequence);
  if (env_->FileExists(side) && !env_->ReadFileToString(side, &v.info).ok()) v.info.clear();
  return v;
}

std::vector<ModelVersion> DataDir::Versions() const {
  std::vector<ModelVersion> out;
  for (uint64_t seq : VersionSequences()) out.push_back(ReadVersion(seq));
  return out;
}

Result<ModelVersion> DataDir::FindVersion(uint64_t sequence) const {
  if (env_->FileExists(VersionPath(sequence))) return ReadVersion(sequence);
  std::string kept;
  for (uint64_t seq : VersionSequences()) kept += (kept.empty() ? "" : ", ") + std::to_string(seq);
  return Status::NotFound("model version " + std::to_string(sequence) + " is not kept in '" + VersionsDir() +
                          "' (kept: " + (kept.empty() ? std::string("none") : kept) + ")");
}

void DataDir::Pin(uint64_t version, uint64_t record) { pins_.emplace_back(version, record); }

uint64_t DataDir::DroppableThrough(uint64_t replaced) const {
  uint64_t through = replaced;
  for (uint64_t seq : VersionSequences()) through = std::min(through, seq);
  for (const auto& p : pins_) through = std::min(through, p.first);
  return through;
}

}  // namespace tributary
