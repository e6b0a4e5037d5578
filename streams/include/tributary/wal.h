// The server's write-ahead log: an append-only sequence of WalRecords in
// segment files <dir>/wal-<first sequence>.log. Each record is framed as
// varint length, payload, CRC-32 (little endian), so a torn write at the
// tail is detected and dropped on replay instead of being misread.
//
// Thread safety: none; the server's committer thread owns the log.
#ifndef TRIBUTARY_WAL_H_
#define TRIBUTARY_WAL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tributary/status.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

// Where the log's bytes go; swapped in tests to inject faults (LevelDB's Env).
class WalFile {
 public:
  virtual ~WalFile() = default;
  virtual Status Append(const std::string& data) = 0;
  virtual Status Sync() = 0;
  virtual Status Close() = 0;
  // Cuts the file back to its first `size` bytes. The log calls it after a
  // failed Append or Sync to take back records it never acknowledged, so that
  // a restart does not replay documents the clients were told were refused.
  virtual Status Truncate(uint64_t size) = 0;
};

class WalFileFactory {
 public:
  virtual ~WalFileFactory() = default;
  virtual Result<std::unique_ptr<WalFile>> Create(const std::string& path) = 0;
  // The default factory: POSIX files, fdatasync.
  static WalFileFactory* Posix();
};

struct WalReplayReport {
  uint64_t records = 0;        // records handed to the callback
  uint64_t skipped = 0;        // records at or below `after`
  uint64_t torn_bytes = 0;     // bytes of an incomplete/corrupt tail dropped
  uint64_t last_sequence = 0;  // highest sequence seen (0 if none)
};

class WriteAheadLog {
 public:
  // Opens (creating if needed) the log directory. Reads nothing yet.
  static Result<std::unique_ptr<WriteAheadLog>> Open(const std::string& dir, WalFileFactory* files = nullptr);
  ~WriteAheadLog();

  // Calls `fn` for every record with sequence > `after`, in order. A damaged
  // record at the end of the newest segment is a torn write (the record was
  // never acknowledged): it and the rest of that segment are dropped, counted,
  // and cut off the file (so that the segment stays valid once a newer one
  // follows it). Damage anywhere else is Corruption naming the segment and
  // offset.
  Status Replay(uint64_t after, const std::function<Status(const v1::WalRecord&)>& fn, WalReplayReport* report);

  // Starts appending in a new segment whose first record is `next_sequence`.
  // Must be called once after Replay and before Append.
  Status StartSegment(uint64_t next_sequence);
  // Buffers a record; durable only after Sync().
  Status Append(const v1::WalRecord& record);
  // Writes buffered records and fdatasyncs: everything appended is durable.
  // On failure the records appended since the last successful Sync are
  // discarded (buffer dropped, file truncated back to its last durable
  // length) and the log stays failed: every later Append/Sync returns the
  // first error, since after a failed fsync the file's contents can no
  // longer be trusted.
  Status Sync();
  // Deletes segments whose records all have sequence <= covered (they are in
  // a snapshot). The current segment is kept.
  Status DropCovered(uint64_t covered);
  // Starts a new segment if the current one holds more than `max_bytes`.
  Status MaybeRoll(uint64_t next_sequence, uint64_t max_bytes);

  const std::string& dir() const { return dir_; }
  std::vector<std::string> Segments() const;

 private:
  WriteAheadLog() = default;
  std::string SegmentPath(uint64_t first) const;
  std::string dir_;
  WalFileFactory* files_ = nullptr;
  std::unique_ptr<WalFile> current_;
  uint64_t current_first_ = 0;
  uint64_t current_bytes_ = 0;
  uint64_t synced_bytes_ = 0;  // durable length of the current segment
  std::string buffer_;
  Status failed_;  // sticky: the first write/sync error
};

}  // namespace tributary

#endif  // TRIBUTARY_WAL_H_
