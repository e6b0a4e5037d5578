// The data directory of a durable model: one owner for its layout, its lock,
// recovery (the newest readable snapshot, the log replayed after it, damage
// moved aside and reported) and checkpoints. The server (server.h) and a
// durable LiveModel (live_model.h) both open their directory through it, so
// both keep the same guarantees. Modelled on LevelDB's filename.h + DB::Open.
//
// Layout of DIR:
//   LOCK                the lock (flock(2)), held while a DataDir is open; it
//                       says who holds it (pid, what, since when)
//   model.trib          the newest snapshot: the model after every log record
//                       up to the sequence it stores
//   model.prev.trib     the snapshot model.trib replaced (recovery reads it when
//                       model.trib is missing or damaged; the log is kept from
//                       its sequence on)
//   model.next.trib     a snapshot being written (a leftover is removed at Open)
//   model.initial.trib  the model the directory started from (sequence 0),
//                       written once: with a log that still starts at 1 it
//                       recovers everything when both snapshots are damaged
//   wal/                the write-ahead log and its acknowledgement mark (wal.h)
//   damaged/            damaged files moved aside, each with a .report file
//   versions/           kept versions of the model (KeepVersion): <seq>.trib, a
//                       copy of the snapshot at log sequence <seq> (20 digits),
//                       and <seq>.json, what the owner said of it; and the
//                       documents a restore did not learn (skipped-*.tribs)
//
// Checkpoint order (Checkpoint): the new snapshot is written whole and synced
// as model.next.trib first; then model.trib becomes model.prev.trib and
// model.next.trib becomes model.trib. A crash at any point leaves a readable
// snapshot and a log that holds everything after it, and the next Checkpoint
// succeeds whatever the crash left.
//
// Errors: Status naming the directory and the file. Thread safety: none; one
// owner calls it (the server's recovery and learner threads hand it over).
#ifndef TRIBUTARY_DATA_DIR_H_
#define TRIBUTARY_DATA_DIR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tributary/env.h"
#include "tributary/status.h"
#include "tributary/wal.h"

namespace tributary {

class Model;
class PluginRegistry;
struct SnapshotOptions;

/// How a DataDir is opened.
struct DataDirOptions {
  Env* env = nullptr;  ///< all file I/O (nullptr: Env::Default())
  /// Who holds the directory, written into LOCK and named to a second opener
  /// ("tributary serve", "LiveModel", ...).
  std::string holder = "a Tributary process";
  /// What the log's damage to acknowledged records does (wal.h).
  CorruptionPolicy on_corruption = CorruptionPolicy::kRefuse;
  /// How a user supplies an initial model, for the error of a directory with
  /// no snapshot and none given ("pass --model or --schema").
  std::string initial_hint = "give an initial model";
};

/// What recovery found and did (DataDir::LoadModel, then DataDir::Replay).
struct DataDirRecovery {
  bool from_snapshot = false;  ///< a snapshot was loaded (false: the initial model)
  std::string snapshot_path;   ///< the snapshot recovered from; for the initial model: empty, or the data directory's
                               ///< model.initial.trib when it was read
  uint64_t snapshot_sequence = 0;                          ///< last log sequence the snapshot holds (0: none)
  uint64_t replayed = 0;                                   ///< log records applied on top of it
  uint64_t torn_bytes = 0;                                 ///< bytes of a torn log tail cut off (kept in damaged/)
  uint64_t lost_records = 0;                               ///< acknowledged documents not recovered (kSkip only)
  std::vector<std::pair<uint64_t, uint64_t>> lost_ranges;  ///< their sequences, first..last inclusive
  std::vector<std::string> damage;                         ///< one line per damaged file or range found
  std::vector<std::string> reports;                        ///< .report files written (each needs an operator's review)
  std::vector<uint64_t> unreadable_sequences;  ///< whole log records that did not parse: skipped like refused documents
};

/// A kept version of the model (DataDir::KeepVersion).
struct ModelVersion {
  uint64_t sequence = 0;  ///< the last log record it holds: the version's name
  std::string path;       ///< versions/SEQUENCE.trib (20 digits)
  std::string info;       ///< its versions/SEQUENCE.json as the owner wrote it (empty when missing)
};

/// An open, locked data directory (see the file comment).
class DataDir {
 public:
  /// Creates `path` if needed, takes its lock and opens its log (reading
  /// nothing yet); removes a leftover model.next.trib. Errors: IOError naming
  /// the directory; IOError "data directory 'DIR' is in use: ...
  /// locked by process <pid> (<holder>, since ...)" when another DataDir (in
  /// this process or another) holds it.
  static Result<std::unique_ptr<DataDir>> Open(const std::string& path, const DataDirOptions& options = {});
  ~DataDir();  ///< releases the lock
  /// Releases the lock early (the owner has stopped writing: a server that
  /// has shut down but is not yet destroyed). Nothing may be written after.
  void Unlock() { lock_.reset(); }
  DataDir(const DataDir&) = delete;
  DataDir& operator=(const DataDir&) = delete;

  /// True when `path` holds a snapshot recovery would read (model.trib or
  /// model.prev.trib), without opening or locking it.
  static bool HasSnapshot(const std::string& path, Env* env = nullptr);

  const std::string& path() const { return path_; }  ///< the directory
  Env* env() const { return env_; }                  ///< the Env all its I/O goes through
  /// Its write-ahead log (owned by the DataDir; the server's committer thread
  /// or the LiveModel's writer uses it once recovered).
  WriteAheadLog* wal() const { return wal_.get(); }
  std::string SnapshotPath() const;         ///< DIR/model.trib
  std::string PrevSnapshotPath() const;     ///< DIR/model.prev.trib
  std::string NextSnapshotPath() const;     ///< DIR/model.next.trib
  std::string InitialSnapshotPath() const;  ///< DIR/model.initial.trib
  std::string DamagedDir() const;           ///< DIR/damaged
  std::string LockPath() const;             ///< DIR/LOCK
  /// The .report files in DamagedDir(), sorted (empty when healthy).
  std::vector<std::string> Reports() const;

  /// Recovery, step 1: the newest readable snapshot (model.trib, else
  /// model.prev.trib), else — when both are damaged or gone and the log still
  /// starts at sequence 1 — model.initial.trib, else `initial`. Plugins the
  /// snapshot names are found in `registry` (pass the one user-named plugins
  /// were added to). A damaged snapshot is moved to damaged/ with a .report
  /// once the model is known to lose nothing by it; a new directory keeps
  /// `initial` as model.initial.trib. Fills `rec`'s snapshot fields, damage
  /// and reports. Errors: a snapshot that names a missing plugin or another
  /// version (not damage: nothing moved); Corruption when no readable file
  /// holds documents the log no longer has; InvalidArgument when there is no
  /// snapshot and `initial` is null.
  Result<std::unique_ptr<Model>> LoadModel(const PluginRegistry& registry, std::unique_ptr<Model> initial,
                                           DataDirRecovery* rec);

  /// Recovery, step 2: every log record after `rec->snapshot_sequence`, in
  /// order, handed to `apply` (damage handled by the options' policy, wal.h;
  /// `covered` sees the records at or below it that the log still holds).
  /// Then: the log starts a new segment at *next_sequence, the
  /// acknowledgement mark says everything before it is acknowledged, and a
  /// mark found missing or damaged is reported (its .report written). Fills
  /// `rec`'s log fields. Errors: the log's, or the first error of `apply`.
  Status Replay(const std::function<Status(const v1::WalRecord&)>& apply,
                const std::function<void(const v1::WalRecord&)>& covered, DataDirRecovery* rec,
                uint64_t* next_sequence);

  /// Writes a snapshot holding every record up to `sequence` by the order in
  /// the file comment: `save(path, options)` writes it to model.next.trib
  /// (Model::Save or LiveModel::SaveState), then the renames. On success
  /// *replaced is the sequence of the snapshot now in model.prev.trib (the
  /// log before it may be dropped: WriteAheadLog::DropCovered). On error the
  /// previous snapshots are as they were.
  Status Checkpoint(const std::function<Status(const std::string&, const SnapshotOptions&)>& save, uint64_t sequence,
                    uint64_t* replaced);

  // ---- Versions (issue 42): snapshots kept for a restore ----

  std::string VersionsDir() const;                   ///< DIR/versions
  std::string VersionPath(uint64_t sequence) const;  ///< DIR/versions/SEQUENCE.trib (20 digits)
  /// Keeps the snapshot model.trib, which must hold log sequence `sequence`
  /// (call right after a Checkpoint at it), as version `sequence`: copied to
  /// versions/ and synced before it is renamed into place (a crash leaves it
  /// whole or absent), with `info` (JSON, the owner's) beside it. Then the
  /// oldest versions beyond the newest `keep` are removed; pinned ones (Pin)
  /// stay besides those, and do not count among them. Errors: I/O, naming
  /// the file; the versions before stay.
  Status KeepVersion(uint64_t sequence, const std::string& info, size_t keep);
  /// Removes the oldest versions beyond the newest `keep` (pinned ones stay
  /// besides them), as KeepVersion does after each version: for an owner
  /// started with fewer versions to keep than the directory holds (else the
  /// log would keep everything after a version nobody removes).
  Status PruneVersions(size_t keep);
  /// The kept versions, oldest first (what versions/ holds: a version whose
  /// copy was cut short by a crash is not listed).
  std::vector<ModelVersion> Versions() const;
  /// The version `sequence`, or NotFound naming it and the versions kept.
  Result<ModelVersion> FindVersion(uint64_t sequence) const;
  /// A log record at `record` restores version `version`: it is not removed
  /// while recovery may replay that record (until a Checkpoint's replaced
  /// snapshot holds `record`).
  void Pin(uint64_t version, uint64_t record);
  /// The log records a checkpoint lets the log drop: those at or below
  /// `replaced` (Checkpoint's), and none after the oldest kept version (a
  /// restore with replay learns them again, one without keeps them aside).
  uint64_t DroppableThrough(uint64_t replaced) const;

 private:
  DataDir() = default;
  /// Moves `path` into damaged/ and reports it (`why`, and what recovery
  /// read instead).
  Status MoveAside(const std::string& path, const std::string& why, const std::string& recovered_from, uint64_t after,
                   DataDirRecovery* rec);
  /// Writes the .report file `report` (damage to `what`, the line `line`)
  /// and records both in `rec`.
  Status Report(const std::string& report, const std::string& what, const std::string& line, DataDirRecovery* rec);
  std::string VersionInfoPath(uint64_t sequence) const;  ///< DIR/versions/SEQUENCE.json
  std::vector<uint64_t> VersionSequences() const;        ///< the kept versions' sequences, ascending
  ModelVersion ReadVersion(uint64_t sequence) const;     ///< its paths and sidecar
  std::string path_;
  std::vector<std::pair<uint64_t, uint64_t>> pins_;  ///< (version, restore record): Pin
  DataDirOptions options_;
  Env* env_ = nullptr;
  std::unique_ptr<FileLock> lock_;  ///< released last (declared before the log it guards)
  std::unique_ptr<WriteAheadLog> wal_;
  uint64_t snapshot_sequence_ = 0;  ///< the sequence model.trib holds (after LoadModel / Checkpoint)
  std::string stamp_;               ///< unix time of Open, in report names
};

}  // namespace tributary

#endif  // TRIBUTARY_DATA_DIR_H_
