#include "tributary/wal.h"

#include <google/protobuf/io/coded_stream.h>

#include <algorithm>
#include <cinttypes>
#include <ctime>
#include <filesystem>

#include "tributary/checksum.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

namespace fs = std::filesystem;

namespace {

bool ParseSegmentName(const std::string& name, uint64_t* first) {
  if (name.size() != 4 + 20 + 4 || name.rfind("wal-", 0) != 0 || name.substr(24) != ".log") return false;
  uint64_t v = 0;
  for (size_t i = 4; i < 24; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    v = v * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  *first = v;
  return true;
}

uint64_t SegmentFirst(const std::string& path) {
  uint64_t first = 0;
  ParseSegmentName(fs::path(path).filename().string(), &first);
  return first;
}

// kUnparseable: the frame and its checksum are whole (the bytes are as they
// were written) but the payload does not parse as a WalRecord, e.g. a
// document with invalid UTF-8 that a version before the one UTF-8 rule
// (utf8.h) logged; *size and *sequence are set (the sequence read from the
// payload's first field), *rec is not.
enum class Frame { kOk, kIncomplete, kBadLength, kBadChecksum, kUnparseable };

// Reads the record framed at `off` of `data`; *size gets the frame's bytes.
Frame ReadFrameAt(const std::string& data, size_t off, v1::WalRecord* rec, size_t* size, uint64_t* sequence = nullptr) {
  google::protobuf::io::CodedInputStream cin(reinterpret_cast<const uint8_t*>(data.data() + off),
                                             static_cast<int>(std::min<size_t>(data.size() - off, 10)));
  uint64_t len = 0;  // 64 bits: ReadVarint32 would read 2^32 + n as n
  if (!cin.ReadVarint64(&len)) return data.size() - off < 10 ? Frame::kIncomplete : Frame::kBadLength;
  // A record holds its sequence (>= 1), so its payload is never empty: a
  // zero length is unreadable bytes (zeros a crash left where a file grew but
  // its data never landed read as length 0 with the CRC of nothing, 0).
  if (len == 0 || len > (1u << 30)) return Frame::kBadLength;
  const size_t hdr = static_cast<size_t>(cin.CurrentPosition());
  if (off + hdr + len + 4 > data.size()) return Frame::kIncomplete;
  const char* payload = data.data() + off + hdr;
  uint32_t want = 0;
  for (int i = 0; i < 4; ++i) want |= static_cast<uint32_t>(static_cast<unsigned char>(payload[len + i])) << (8 * i);
  if (Crc32(payload, len) != want) return Frame::kBadChecksum;
  if (!rec->ParseFromArray(payload, static_cast<int>(len)) || rec->sequence() == 0) {
    // Whole but unparseable: a record serializes its sequence first (field
    // 1, a varint); without one the bytes are not a record of this log.
    google::protobuf::io::CodedInputStream pin(reinterpret_cast<const uint8_t*>(payload), static_cast<int>(len));
    uint64_t seq = 0;
    if (sequence == nullptr || pin.ReadTag() != 0x08 || !pin.ReadVarint64(&seq) || seq == 0) {
      return Frame::kBadChecksum;
    }
    *sequence = seq;
    *size = hdr + len + 4;
    return Frame::kUnparseable;
  }
  *size = hdr + len + 4;
  return Frame::kOk;
}

const char* FrameError(Frame f) {
  switch (f) {
    case Frame::kIncomplete:
      return "incomplete record";
    case Frame::kBadLength:
      return "bad record length";
    default:
      return "checksum mismatch";
  }
}

// The first offset after `from` where a whole record starts whose checksum
// holds and whose sequence is above `prev`; npos when there is none. A record
// serializes its sequence first (field 1, tag 0x08), which rules out almost
// every offset before the checksum is computed.
size_t FindNextRecord(const std::string& data, size_t from, uint64_t prev, v1::WalRecord* rec) {
  for (size_t p = from; p < data.size(); ++p) {
    size_t hdr = 0;
    while (hdr < 5 && p + hdr < data.size() && (static_cast<unsigned char>(data[p + hdr]) & 0x80)) ++hdr;
    ++hdr;
    if (p + hdr >= data.size() || data[p + hdr] != 0x08) continue;
    size_t size = 0;
    if (ReadFrameAt(data, p, rec, &size) == Frame::kOk && rec->sequence() > prev) return p;
  }
  return std::string::npos;
}

// The acknowledgement mark's file: magic, sequence (little endian), CRC-32
// of the 16 bytes before it.
constexpr char kMarkMagic[9] = "TRIBACK1";
constexpr size_t kMarkBytes = 8 + 8 + 4;

std::string Range(uint64_t a, uint64_t b) {
  if (a > b) return "none";
  return a == b ? std::to_string(a) : std::to_string(a) + ".." + std::to_string(b);
}

}  // namespace

Result<CorruptionPolicy> ParseCorruptionPolicy(const std::string& name) {
  if (name == "refuse") return CorruptionPolicy::kRefuse;
  if (name == "skip") return CorruptionPolicy::kSkip;
  return Status::InvalidArgument("--on-corruption: expected refuse or skip, found '" + name + "'");
}

std::string WalDamage::Describe() const {
  std::string s = "write-ahead log '" + segment + "': " + reason;
  if (bytes > 0) s += " at byte " + std::to_string(offset) + " (" + std::to_string(bytes) + " unreadable bytes)";
  if (first_lost <= last_lost) {
    s += "; records " + Range(first_lost, last_lost) + " (" + std::to_string(last_lost - first_lost + 1) +
         " acknowledged documents) cannot be read";
  }
  if (covered) s += ", all already in the snapshot: nothing lost";
  return s;
}

Result<std::unique_ptr<WriteAheadLog>> WriteAheadLog::Open(const std::string& dir, Env* env, std::string damaged_dir) {
  if (env == nullptr) env = Env::Default();
  TRIB_RETURN_IF_ERROR(env->CreateDirs(dir).WithContext("write-ahead log"));
  std::unique_ptr<WriteAheadLog> w(new WriteAheadLog());
  w->dir_ = dir;
  w->damaged_dir_ = damaged_dir.empty() ? (fs::path(dir) / "damaged").string() : std::move(damaged_dir);
  w->env_ = env;
  return w;
}

WriteAheadLog::~WriteAheadLog() {
  if (current_) (void)current_->Close();  // (a destructor has nobody to tell; Sync reported what mattered)
}

std::string WriteAheadLog::SegmentPath(uint64_t first) const {
  char name[40];
  std::snprintf(name, sizeof(name), "wal-%020" PRIu64 ".log", first);
  return (fs::path(dir_) / name).string();
}

std::vector<std::string> WriteAheadLog::Segments() const {
  std::vector<std::pair<uint64_t, std::string>> segs;
  std::vector<std::string> names;
  (void)env_->GetChildren(dir_, &names);  // an unreadable directory lists nothing; Replay's reads then fail loudly
  for (const auto& name : names) {
    uint64_t first;
    if (ParseSegmentName(name, &first)) segs.emplace_back(first, (fs::path(dir_) / name).string());
  }
  std::sort(segs.begin(), segs.end());
  std::vector<std::string> out;
  for (auto& s : segs) out.push_back(s.second);
  return out;
}

uint64_t WriteAheadLog::FirstSequence() const {
  auto segs = Segments();
  return segs.empty() ? 0 : SegmentFirst(segs.front());
}

Result<std::string> WriteAheadLog::KeepAside(const std::string& segment, const std::string& suffix,
                                             std::string_view data) {
  TRIB_RETURN_IF_ERROR(env_->CreateDirs(damaged_dir()));
  std::string path = (fs::path(damaged_dir()) / (fs::path(segment).filename().string() + suffix)).string();
  TRIB_RETURN_IF_ERROR(env_->WriteFileAtomically(path, data));
  return path;
}

std::string WriteAheadLog::MarkPath() const { return (fs::path(dir_) / "wal.acked").string(); }

Status WriteAheadLog::MarkAcknowledged(uint64_t sequence) {
  std::string bytes(kMarkMagic, 8);
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((sequence >> (8 * i)) & 0xff));
  const uint32_t crc = Crc32(bytes.data(), bytes.size());
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  return env_->WriteFileAtomically(MarkPath(), bytes).WithContext("write-ahead log acknowledgement mark");
}

Result<uint64_t> WriteAheadLog::ReadAcknowledgedMark() const {
  const std::string path = MarkPath();
  if (!env_->FileExists(path)) return uint64_t{0};
  std::string data;
  TRIB_RETURN_IF_ERROR(env_->ReadFileToString(path, &data).WithContext("write-ahead log acknowledgement mark"));
  auto bad = [&](const std::string& why) {
    return Status::Corruption("write-ahead log acknowledgement mark '" + path + "': " + why);
  };
  if (data.size() != kMarkBytes) {
    return bad(std::to_string(data.size()) + " bytes, expected " + std::to_string(kMarkBytes));
  }
  if (data.compare(0, 8, kMarkMagic) != 0) return bad("bad magic (expected \"TRIBACK1\")");
  uint32_t want = 0;
  for (int i = 0; i < 4; ++i) want |= static_cast<uint32_t>(static_cast<unsigned char>(data[16 + i])) << (8 * i);
  if (Crc32(data.data(), 16) != want) return bad("checksum mismatch");
  uint64_t seq = 0;
  for (int i = 0; i < 8; ++i) seq |= static_cast<uint64_t>(static_cast<unsigned char>(data[8 + i])) << (8 * i);
  return seq;
}

Status WriteAheadLog::Replay(uint64_t after, const std::function<Status(const v1::WalRecord&)>& fn,
                             WalReplayReport* report, CorruptionPolicy policy,
                             const std::function<void(const v1::WalRecord&)>& covered) {
  WalReplayReport local;
  if (!report) report = &local;
  const std::string stamp = std::to_string(static_cast<long long>(std::time(nullptr)));
  const auto segs = Segments();
  // M: records up to it were acknowledged and must be there. A damaged mark
  // file proves nothing either way: read the log as if it had none.
  uint64_t mark = 0;
  const bool mark_file = env_->FileExists(MarkPath());
  if (auto m = ReadAcknowledgedMark(); m.ok()) {
    mark = *m;
  } else {
    report->mark_error = m.status().ToString();
  }
  report->acknowledged_mark = mark;
  uint64_t prev = 0;  // the last sequence read; 0 before the first record
  v1::WalRecord rec;
  std::string seg;   // the segment being read (the last one after the loop)
  std::string kept;  // its copy in damaged/, once made

  // Records [first_lost, last_lost] of `seg` cannot be read: decide by the policy.
  auto damaged = [&](const std::string& data, uint64_t offset, uint64_t bytes, uint64_t first_lost, uint64_t last_lost,
                     const std::string& reason) -> Status {
    WalDamage d;
    d.segment = seg;
    d.offset = offset;
    d.bytes = bytes;
    d.first_lost = first_lost;
    d.last_lost = last_lost;
    d.reason = reason;
    d.covered = first_lost > last_lost || last_lost <= after;
    if (!d.covered && policy == CorruptionPolicy::kRefuse) {
      return Status::Corruption(d.Describe() +
                                ". Nothing on disk was changed. Restore the segment from a backup, or start with "
                                "--on-corruption=skip to keep it aside and go on without those documents");
    }
    if (!d.covered) {
      if (kept.empty() && seg != dir_) {
        auto k = KeepAside(seg, "." + stamp, data);
        if (!k.ok()) return k.status().WithContext("keeping the damaged log segment aside");
        kept = *k;
      }
      d.kept_as = kept;
      const uint64_t lo = std::max(first_lost, after + 1);
      report->lost_records += last_lost - lo + 1;
      std::string text = "Tributary write-ahead log damage, found at unix time " + stamp + "\n" + d.Describe() +
                         ".\nPolicy: skip (the server went on without them).\nThe damaged segment is kept as: " +
                         (kept.empty() ? std::string("(no segment is left)") : kept) +
                         "\nRemove this .report file once reviewed: /healthz fails while one exists.\n";
      auto r = KeepAside(seg, "." + stamp + "." + std::to_string(offset) + ".report", text);
      if (!r.ok()) return r.status().WithContext("writing the damage report");
      d.report = *r;
    }
    report->damage.push_back(std::move(d));
    return Status::OK();
  };

  for (size_t s = 0; s < segs.size(); ++s) {
    seg = segs[s];
    kept.clear();
    const bool newest = s + 1 == segs.size();
    std::string data;
    TRIB_RETURN_IF_ERROR(env_->ReadFileToString(seg, &data).WithContext("write-ahead log"));

    const uint64_t first = SegmentFirst(seg);
    // Records missing between segments (a deleted or lost segment).
    const uint64_t expected = prev == 0 ? std::min(first, after + 1) : prev + 1;
    if (first > expected) {
      TRIB_RETURN_IF_ERROR(damaged(data, 0, 0, expected, first - 1, "missing records before this segment"));
      prev = first - 1;
    }
    size_t off = 0;
    while (off < data.size()) {
      size_t size = 0;
      uint64_t unparsed_seq = 0;
      Frame f = ReadFrameAt(data, off, &rec, &size, &unparsed_seq);
      if (f == Frame::kUnparseable) {
        // Whole, as written, but not a record this version can read (see
        // Frame). Not damage: under every policy the record is skipped, kept
        // aside byte for byte and reported (never an abort, never silence).
        const uint64_t want = prev == 0 ? std::max<uint64_t>(first, 1) : prev + 1;
        if (unparsed_seq < want) {
          return Status::Corruption("write-ahead log '" + seg + "': record at byte " + std::to_string(off) +
                                    " has sequence " + std::to_string(unparsed_seq) + ", expected " +
                                    std::to_string(want) + " or above (the log's order is broken)");
        }
        if (unparsed_seq > want) TRIB_RETURN_IF_ERROR(damaged(data, off, 0, want, unparsed_seq - 1, "missing records"));
        prev = unparsed_seq;
        report->last_sequence = std::max(report->last_sequence, unparsed_seq);
        if (unparsed_seq <= after) {
          report->skipped++;
          off += size;
          continue;
        }
        const std::string tag = ".record-" + std::to_string(unparsed_seq) + "." + stamp;
        auto k = KeepAside(seg, tag, std::string_view(data).substr(off, size));
        if (!k.ok()) return k.status().WithContext("keeping an unreadable log record aside");
        const std::string what = "write-ahead log '" + seg + "': record " + std::to_string(unparsed_seq) + " at byte " +
                                 std::to_string(off) +
                                 " is whole (its checksum holds) but does not parse as a log record (a document "
                                 "with invalid UTF-8, logged by an earlier version?)";
        std::string text = "Tributary write-ahead log: a record that cannot be learned, found at unix time " + stamp +
                           "\n" + what + ".\nIt was skipped: the document it holds is not in the model.\n" +
                           "Its bytes (the frame as logged) are kept as: " + *k +
                           "\nRemove this .report file once reviewed: /healthz fails while one exists.\n";
        auto r = KeepAside(seg, tag + ".report", text);
        if (!r.ok()) return r.status().WithContext("writing the report of an unreadable log record");
        report->unreadable.push_back({unparsed_seq, what, *k, *r});
        off += size;
        continue;
      }
      if (f == Frame::kOk) {
        const uint64_t seq = rec.sequence();
        const uint64_t want = prev == 0 ? std::max<uint64_t>(first, 1) : prev + 1;
        if (seq < want) {
          return Status::Corruption("write-ahead log '" + seg + "': record at byte " + std::to_string(off) +
                                    " has sequence " + std::to_string(seq) + ", expected " + std::to_string(want) +
                                    " or above (the log's order is broken)");
        }
        if (seq > want) TRIB_RETURN_IF_ERROR(damaged(data, off, 0, want, seq - 1, "missing records"));
        off += size;
        prev = seq;
        report->last_sequence = std::max(report->last_sequence, seq);
        if (seq <= after) {
          report->skipped++;
          if (covered) covered(rec);
          continue;
        }
        TRIB_RETURN_IF_ERROR(fn(rec));
        report->records++;
        continue;
      }
      const size_t next = FindNextRecord(data, off + 1, prev, &rec);
      if (next == std::string::npos && newest && prev < mark) {
        // Nothing readable follows, but records up to the mark were
        // acknowledged: corruption of the log's end, not a torn write.
        TRIB_RETURN_IF_ERROR(damaged(data, off, data.size() - off, prev + 1, mark,
                                     std::string(FrameError(f)) + " in acknowledged records at the end of the log"));
        prev = mark;
        break;
      }
      if (next == std::string::npos && newest) {
        // A torn tail: the last write never finished, so nothing after it
        // was acknowledged. Keep the bytes, cut them off (the segment must
        // read cleanly once a newer one follows it), go on.
        auto k = KeepAside(seg, ".torn-at-" + std::to_string(off) + "." + stamp, std::string_view(data).substr(off));
        if (!k.ok()) return k.status().WithContext("keeping a torn log tail aside");
        report->torn_kept_as = *k;
        report->torn_bytes += data.size() - off;
        auto file = env_->NewAppendableFile(seg);
        if (!file.ok()) return file.status().WithContext("write-ahead log: dropping a torn tail");
        Status st = (*file)->Truncate(off);
        if (st.ok()) st = (*file)->Sync();
        Status closed = (*file)->Close();
        if (st.ok()) st = closed;
        TRIB_RETURN_IF_ERROR(st.WithContext("write-ahead log: dropping a torn tail"));
        break;
      }
      const uint64_t first_lost = prev == 0 ? std::max<uint64_t>(first, 1) : prev + 1;
      uint64_t last_lost;
      if (next != std::string::npos) {
        last_lost = rec.sequence() - 1;
      } else {
        // Damage to the end of a segment that is not the newest: the next
        // segment's name says where the lost records end.
        last_lost = SegmentFirst(segs[s + 1]) - 1;
      }
      const size_t end = next == std::string::npos ? data.size() : next;
      TRIB_RETURN_IF_ERROR(damaged(data, off, end - off, first_lost, last_lost, FrameError(f)));
      if (last_lost >= first_lost) prev = last_lost;
      off = end;
    }
  }
  // The log ends before the mark: its newest segment was cut short at a
  // record boundary, or deleted (then the one before it, if any, is named).
  const uint64_t read_through = std::max(prev, report->last_sequence);
  if (mark > read_through && mark > after) {
    const uint64_t first_lost = std::max(read_through, after) + 1;
    std::string data;
    if (seg.empty()) {
      seg = dir_;  // no segment at all: the report names the directory
    } else {
      TRIB_RETURN_IF_ERROR(env_->ReadFileToString(seg, &data).WithContext("write-ahead log"));
    }
    TRIB_RETURN_IF_ERROR(damaged(data, data.size(), 0, first_lost, mark,
                                 "acknowledged records missing at the end of the log (its newest segment was cut "
                                 "short or deleted; the acknowledgement mark is at " +
                                     std::to_string(mark) + ")"));
  }
  if (policy == CorruptionPolicy::kSkip) report->last_sequence = std::max(report->last_sequence, mark);
  report->mark_missing = !mark_file && (report->last_sequence > 0 || report->torn_bytes > 0 || !report->damage.empty());
  return Status::OK();
}

Status WriteAheadLog::ReadRange(uint64_t first, uint64_t last,
                                const std::function<Status(const v1::WalRecord&)>& fn) const {
  if (first > last) return Status::OK();
  const std::vector<std::string> segs = Segments();
  // The segment holding `first`: the last one starting at or before it.
  size_t start = segs.size();
  for (size_t i = 0; i < segs.size(); ++i) {
    if (SegmentFirst(segs[i]) <= first) start = i;
  }
  if (start == segs.size()) {
    return Status::NotFound("write-ahead log '" + dir_ + "' no longer holds record " + std::to_string(first) +
                            " (its oldest segment starts at " +
                            (segs.empty() ? std::string("none") : std::to_string(SegmentFirst(segs.front()))) + ")");
  }
  uint64_t next = first;  // the next sequence wanted
  for (size_t i = start; i < segs.size() && next <= last; ++i) {
    std::string data;
    TRIB_RETURN_IF_ERROR(env_->ReadFileToString(segs[i], &data).WithContext("write-ahead log"));
    size_t off = 0;
    while (off < data.size() && next <= last) {
      v1::WalRecord rec;
      size_t size = 0;
      const Frame f = ReadFrameAt(data, off, &rec, &size);
      if (f != Frame::kOk) {
        // Past what was synced in the newest segment: the next segment (if
        // any) goes on; a gap is found below.
        if (f == Frame::kIncomplete) break;
        return Status::Corruption("write-ahead log segment '" + segs[i] + "' at offset " + std::to_string(off) + ": " +
                                  FrameError(f) + " (reading records " + Range(first, last) + ")");
      }
      off += size;
      if (rec.sequence() < next) continue;
      if (rec.sequence() > next) break;  // a gap: reported below
      TRIB_RETURN_IF_ERROR(fn(rec));
      ++next;
    }
  }
  if (next <= last) {
    return Status::Corruption("write-ahead log '" + dir_ + "' does not hold record " + std::to_string(next) +
                              " (reading records " + Range(first, last) + ")");
  }
  return Status::OK();
}

Status WriteAheadLog::StartSegment(uint64_t next_sequence) {
  if (current_) {
    TRIB_RETURN_IF_ERROR(Sync());
    TRIB_RETURN_IF_ERROR(current_->Close());
    current_.reset();
  }
  std::string path = SegmentPath(next_sequence);
  // A segment with this name can exist only if it holds no record we keep
  // (all of its records were torn); start it afresh.
  if (env_->FileExists(path)) TRIB_RETURN_IF_ERROR(env_->RemoveFile(path).WithContext("write-ahead log"));
  auto f = env_->NewAppendableFile(path);
  if (!f.ok()) return f.status().WithContext("write-ahead log");
  // Make the new file's directory entry durable too.
  TRIB_RETURN_IF_ERROR(env_->SyncDir(dir_).WithContext("write-ahead log"));
  current_ = std::move(f).value();
  current_first_ = next_sequence;
  current_bytes_ = 0;
  synced_bytes_ = 0;
  return Status::OK();
}

Status WriteAheadLog::Append(const v1::WalRecord& record) {
  if (!failed_.ok()) return failed_;
  if (!current_) return Status::Internal("write-ahead log: Append before StartSegment");
  std::string payload;
  record.SerializeToString(&payload);
  uint8_t hdr[10];
  uint8_t* end =
      google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(payload.size()), hdr);
  buffer_.append(reinterpret_cast<const char*>(hdr), static_cast<size_t>(end - hdr));
  buffer_ += payload;
  uint32_t crc = Crc32(payload.data(), payload.size());
  for (int i = 0; i < 4; ++i) buffer_.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  return Status::OK();
}

Status WriteAheadLog::Sync() {
  if (!failed_.ok()) return failed_;
  if (!current_) return Status::OK();
  Status st;
  if (!buffer_.empty()) {
    st = current_->Append(buffer_);
    if (st.ok()) current_bytes_ += buffer_.size();
    buffer_.clear();
  }
  if (st.ok()) st = current_->Sync();
  if (st.ok()) {
    synced_bytes_ = current_bytes_;
    return st;
  }
  st = st.WithContext("write-ahead log");
  // Take back what this Sync may have written: those records are refused,
  // never acknowledged, and must not come back on replay.
  Status cut = current_->Truncate(synced_bytes_);
  current_bytes_ = synced_bytes_;
  if (!cut.ok()) {
    st = Status::IOError(st.message() + " (and the unacknowledged tail could not be cut off: " + cut.message() + ")");
  }
  failed_ = st;
  return st;
}

Status WriteAheadLog::Recover(uint64_t next_sequence) {
  if (failed_.ok() && current_) return Status::OK();
  // 1. Does the file system take data again? A probe of the size of a large
  // group commit, written and fsynced; nothing of the log is touched before.
  const std::string probe = (fs::path(dir_) / "wal-probe.tmp").string();
  {
    auto f = env_->NewWritableFile(probe);
    Status st = f.status();
    if (st.ok()) st = (*f)->Append(std::string(kProbeBytes, '\0'));
    if (st.ok()) st = (*f)->Sync();
    if (st.ok()) st = (*f)->Close();
    if (!st.ok() || f.ok()) (void)env_->RemoveFile(probe);  // best effort: a leftover probe is ignored by Replay
    if (!st.ok()) return st.WithContext("write-ahead log still failing");
  }
  // 2. Cut what the failed write may have left after the last durable
  // record, through a new handle, and make the cut durable: an older segment
  // must end on a record boundary or replay would call it corrupt.
  if (current_) {
    const std::string path = SegmentPath(current_first_);
    current_.reset();
    auto f = env_->NewAppendableFile(path);
    Status st = f.status();
    if (st.ok()) st = (*f)->Truncate(synced_bytes_);
    if (st.ok()) st = (*f)->Sync();
    if (st.ok()) st = (*f)->Close();
    if (!st.ok()) {
      // Keep failing; next time the same segment is cut again.
      current_ = nullptr;
      pending_cut_ = path;
      return st.WithContext("write-ahead log: cannot cut the unacknowledged tail");
    }
  } else if (!pending_cut_.empty()) {
    auto f = env_->NewAppendableFile(pending_cut_);
    Status st = f.status();
    if (st.ok()) st = (*f)->Truncate(synced_bytes_);
    if (st.ok()) st = (*f)->Sync();
    if (st.ok()) st = (*f)->Close();
    if (!st.ok()) return st.WithContext("write-ahead log: cannot cut the unacknowledged tail");
  }
  pending_cut_.clear();
  buffer_.clear();
  failed_ = Status::OK();
  // 3. Go on in a fresh segment (a segment with no durable record is replaced).
  Status st = StartSegment(next_sequence);
  if (!st.ok()) failed_ = st;
  return st;
}

Status WriteAheadLog::DropCovered(uint64_t covered) {
  auto segs = Segments();
  for (size_t i = 0; i + 1 < segs.size(); ++i) {
    const uint64_t next_first = SegmentFirst(segs[i + 1]);
    if (SegmentFirst(segs[i]) == current_first_) break;
    if (next_first == 0 || next_first - 1 > covered) break;
    TRIB_RETURN_IF_ERROR(env_->RemoveFile(segs[i]).WithContext("cannot delete a covered log segment"));
  }
  return Status::OK();
}

Status WriteAheadLog::MaybeRoll(uint64_t next_sequence, uint64_t max_bytes) {
  if (current_ && current_bytes_ + buffer_.size() > max_bytes && next_sequence != current_first_) {
    return StartSegment(next_sequence);
  }
  return Status::OK();
}

}  // namespace tributary
