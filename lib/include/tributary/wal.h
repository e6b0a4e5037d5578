// The server's write-ahead log: an append-only sequence of WalRecords, one
// per acknowledged document, numbered 1, 2, 3, ... without gaps, in segment
// files <dir>/wal-<first sequence, 20 digits>.log. Each record is framed as varint
// length, payload, CRC-32 (little endian). All I/O goes through an Env.
//
// The acknowledgement mark: <dir>/wal.acked holds a sequence M (magic,
// sequence, CRC-32) such that every record up to M was acknowledged, written
// by MarkAcknowledged after the records' fsync (the server does so at most
// every ack_mark_interval_ms, off the acknowledgement path). M tells replay
// which records must exist.
//
// Damage. Replay tells two kinds apart:
//  - A torn tail: unreadable bytes at the end of the newest segment with no
//    readable record after them, all past the mark (the last readable record
//    is at or above M). That is what a crash during the last (never
//    acknowledged) group-commit write leaves. The bytes are copied to
//    <dir>/damaged/ and cut off the segment, and replay goes on.
//  - Corruption: unreadable bytes followed by readable records (found by
//    scanning for the next frame whose CRC holds and whose sequence fits), a
//    damaged segment that is not the newest, a gap in the sequence, an
//    unreadable tail of the newest segment holding records up to M, or a log
//    that ends before M (the newest segment cut short or deleted). Those
//    records were acknowledged. What happens is the CorruptionPolicy's call;
//    the damaged file is never truncated or rewritten.
// A damaged range whose records are all covered by the snapshot
// (sequence <= `after`) loses nothing and is only reported.
//
// Limit: records acknowledged after the last mark written (at most one mark
// interval, 100 ms by default, before a crash or the damage) are not known
// to have been acknowledged: a flipped bit in them, at the very end of the
// newest segment, reads as a torn tail (dropped, bytes kept in damaged/),
// and the newest segment cut at a record boundary among them loses them
// without a report. A log without a mark file (written before the mark
// existed) is read with M = 0.
//
// Thread safety: none; the server's committer thread owns the log.
#ifndef TRIBUTARY_WAL_H_
#define TRIBUTARY_WAL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tributary/env.h"
#include "tributary/status.h"

namespace tributary {

namespace v1 {
class WalRecord;  // tributary/v1/tributary.pb.h (generated; included by the sources that read records)
}  // namespace v1

/// What WriteAheadLog::Replay does with corruption (damage to acknowledged
/// records; a torn tail is always cut).
enum class CorruptionPolicy {
  /// Replay stops with Corruption naming the segment, the byte offset and the
  /// sequence range that cannot be read; nothing on disk is changed. The
  /// default: no acknowledged document is lost without an operator's say.
  kRefuse,
  /// The damaged segment is copied to WriteAheadLog::damaged_dir() with a .report file
  /// naming the lost range, replay goes on with the readable records after
  /// the damage, and the report says what was lost (the server's /healthz
  /// then fails until the operator removes the .report files).
  kSkip,
};

/// Parses "refuse" / "skip".
Result<CorruptionPolicy> ParseCorruptionPolicy(const std::string& name);

/// One damaged or missing range of the log.
struct WalDamage {
  std::string segment;      ///< the segment file as found
  std::string kept_as;      ///< its copy in damaged/ (empty: not copied)
  std::string report;       ///< the .report file written (empty: none)
  uint64_t offset = 0;      ///< first unreadable byte in `segment`
  uint64_t bytes = 0;       ///< unreadable bytes
  uint64_t first_lost = 0;  ///< first sequence that cannot be read
  uint64_t last_lost = 0;   ///< last one (first_lost > last_lost: none)
  bool covered = false;     ///< every lost sequence is <= `after`: nothing lost
  std::string reason;       ///< "checksum mismatch", "missing records", ...
  /// One line for logs and errors: the segment, the reason, the unreadable
  /// bytes and records, and "nothing lost" when covered.
  std::string Describe() const;
};

/// A record that is whole (its checksum holds) but does not parse as a log
/// record: skipped, kept aside and reported under every policy (a document
/// with invalid UTF-8 logged by a version before the one UTF-8 rule).
struct WalUnreadableRecord {
  uint64_t sequence = 0;    ///< the record's sequence (read from its first field)
  std::string description;  ///< one line: segment, byte, sequence, why
  std::string kept_as;      ///< the record's frame, byte for byte, in damaged/
  std::string report;       ///< the .report file written
};

/// What WriteAheadLog::Replay found and did.
struct WalReplayReport {
  uint64_t acknowledged_mark = 0;  ///< M read from wal.acked (0: none)
  std::string mark_error;          ///< the mark file exists but cannot be read (then M = 0)
  /// No mark file although the log holds records or bytes: a log written
  /// with a mark (the server writes it from its first start) lost it, and a
  /// cut at the log's end could not be told from a torn write.
  bool mark_missing = false;
  uint64_t records = 0;           ///< records handed to the callback
  uint64_t skipped = 0;           ///< records at or below `after`
  uint64_t torn_bytes = 0;        ///< bytes of a torn tail dropped
  std::string torn_kept_as;       ///< where the torn bytes were copied
  uint64_t last_sequence = 0;     ///< highest sequence seen (0 if none); at least M under kSkip
  uint64_t lost_records = 0;      ///< acknowledged records skipped under kSkip
  std::vector<WalDamage> damage;  ///< corruption found, in order, covered ranges included (not a torn tail)
  std::vector<WalUnreadableRecord> unreadable;  ///< whole records that do not parse (above `after`), skipped
};

/// The write-ahead log in one directory (the format, the mark and the damage
/// rules are at the top of this file).
class WriteAheadLog {
 public:
  /// Opens (creating if needed) the log directory through `env` (nullptr:
  /// Env::Default()). Damaged files and reports go to `damaged_dir` (empty:
  /// `<dir>/damaged`), created when first needed. Reads nothing yet.
  static Result<std::unique_ptr<WriteAheadLog>> Open(const std::string& dir, Env* env = nullptr,
                                                     std::string damaged_dir = "");
  ~WriteAheadLog();

  /// Calls `fn` for every readable record with sequence > `after`, in order,
  /// handling damage as described at the top of this file and by `policy`;
  /// and `covered` (if set) for every readable record at or below `after`
  /// that the log still holds (the server collects broker positions from
  /// them). Errors: Corruption (kRefuse, or damage it cannot go past),
  /// IOError, or the first error `fn` returns.
  Status Replay(uint64_t after, const std::function<Status(const v1::WalRecord&)>& fn, WalReplayReport* report,
                CorruptionPolicy policy = CorruptionPolicy::kRefuse,
                const std::function<void(const v1::WalRecord&)>& covered = nullptr);

  /// Calls `fn` for every record with sequence in [first, last], in order,
  /// reading the segments without changing anything (no damage handling:
  /// the records asked for must be whole). Safe while another thread
  /// appends after `last`, as long as records up to `last` were synced.
  /// Errors: NotFound when the log no longer holds `first` (its segments
  /// were dropped); Corruption naming the segment and offset when a frame
  /// before `last` does not read; the first error `fn` returns.
  Status ReadRange(uint64_t first, uint64_t last, const std::function<Status(const v1::WalRecord&)>& fn) const;

  /// Starts appending in a new segment whose first record is `next_sequence`.
  /// Must be called once after Replay and before Append.
  Status StartSegment(uint64_t next_sequence);
  /// Buffers a record; durable only after Sync().
  Status Append(const v1::WalRecord& record);
  /// Writes buffered records and fdatasyncs: everything appended is durable.
  /// On failure the records appended since the last successful Sync are
  /// discarded (buffer dropped, file truncated back to its last durable
  /// length) and the log stays failed: every later Append/Sync returns the
  /// first error, since after a failed fsync the file's contents can no
  /// longer be trusted.
  Status Sync();
  /// Makes a failed log usable again once the file system accepts writes
  /// (a full disk freed, a device back): probes the log's directory by
  /// writing and fsyncing kProbeBytes to `<dir>/wal-probe.tmp` (then removes
  /// it); cuts the current segment back to its last durable length through a
  /// fresh file handle and fsyncs that (after a failed fsync the old handle's
  /// state cannot be trusted), then starts a new segment at `next_sequence`.
  /// Records acknowledged before the failure stay where they are; the
  /// refused ones are gone from disk. On error the log stays failed and
  /// Recover may be called again later. OK at once if the log has not failed.
  Status Recover(uint64_t next_sequence);
  static constexpr size_t kProbeBytes = 1u << 20;  ///< size of Recover's probe write (1 MiB)
  /// True after a write or sync failed (until Recover succeeds).
  bool failed() const { return !failed_.ok(); }
  /// Deletes segments whose records all have sequence <= covered (they are in
  /// a snapshot). The current segment is kept.
  Status DropCovered(uint64_t covered);
  /// Starts a new segment if the current one holds more than `max_bytes`.
  Status MaybeRoll(uint64_t next_sequence, uint64_t max_bytes);

  /// Records that every record up to `sequence` was acknowledged (durably:
  /// written to a temporary file, fsynced, renamed over `<dir>/wal.acked`, the
  /// directory fsynced). REQUIRES: those records were synced (Sync returned
  /// OK). It touches only the mark file, so it may run on another thread than
  /// the log's other calls, one call at a time.
  Status MarkAcknowledged(uint64_t sequence);
  /// The mark as stored: 0 when there is no mark file; Corruption naming the
  /// file when it exists but cannot be read.
  Result<uint64_t> ReadAcknowledgedMark() const;
  std::string MarkPath() const;  ///< the mark file, `<dir>/wal.acked`

  const std::string& dir() const { return dir_; }  ///< the log directory, as given to Open
  /// Where damaged segments and their reports are kept.
  const std::string& damaged_dir() const { return damaged_dir_; }
  /// Segment paths, oldest first.
  std::vector<std::string> Segments() const;
  /// The first sequence of the oldest segment (0: no segment).
  uint64_t FirstSequence() const;

 private:
  WriteAheadLog() = default;
  std::string SegmentPath(uint64_t first) const;
  /// Copies `data` (the bytes of `segment`) to damaged/ with `suffix`.
  Result<std::string> KeepAside(const std::string& segment, const std::string& suffix, std::string_view data);
  std::string dir_;
  std::string damaged_dir_;
  Env* env_ = nullptr;
  std::unique_ptr<WritableFile> current_;
  uint64_t current_first_ = 0;
  uint64_t current_bytes_ = 0;
  uint64_t synced_bytes_ = 0;  ///< durable length of the current segment
  std::string buffer_;
  Status failed_;            ///< sticky: the first write/sync error
  std::string pending_cut_;  ///< a segment Recover could not cut back yet
};

}  // namespace tributary

#endif  // TRIBUTARY_WAL_H_
