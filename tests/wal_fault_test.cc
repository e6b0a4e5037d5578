// Fault injection into the write-ahead log and into model snapshots (issue
// 13): a log of kRecords acknowledged records over several segments is
// damaged in a copy of its directory -- a flipped bit (bit 0, then bit 7) at
// every record boundary and at every part of every record (each length byte,
// payload start, second byte, middle and end, each CRC byte), in every
// segment (the newest and the older ones); the segment truncated at each of
// those offsets; each segment deleted; ranges zero-filled -- and replayed
// under both policies.
// For every case the test derives from the log's layout exactly what replay
// must do, and checks it:
//
//  Damage in record r (sequence q) .. record r2 of segment s, r2 not the
//  last record of the newest segment (a readable record follows, or s is
//  older): corruption.
//    refuse: Corruption naming s, the byte offset of r, the number of
//      unreadable bytes and the lost range q..seq(r2) (to the end of s when
//      r2 is its last record); the records before q were handed over in
//      order; no byte of any file in the directory changed, nothing created.
//    skip: every record but q..seq(r2) replayed, in order, each equal to
//      what was written; the report's damage names exactly that range, the
//      offset and the byte count; s is copied byte for byte to damaged/ with
//      a .report naming the range and the copy; no segment file changed.
//  The log is written as the server writes it: its acknowledgement mark
//  (wal.h) is rewritten after every group commit, so it names the last
//  record (M = kRecords) unless a test moves it back.
//  Damage running to the end of the newest segment (nothing readable after
//  it): records up to the mark were acknowledged, so it is corruption of the
//  records q..M ("... in acknowledged records at the end of the log"), as
//  above, and the segment is not cut. Only bytes past the mark (zeros a
//  crash appended after record M) are a torn tail, under both policies:
//  records 1..q-1 replayed, the segment cut at the offset of r and the cut
//  bytes kept byte for byte in damaged/; no other file changed.
//  A segment truncated at a record boundary or deleted: if it is older, the
//  next segment's name reveals a gap (Corruption "missing records before this
//  segment" naming the next segment and exactly the missing range; skip goes
//  on after it). If it is the newest, the log ends before the mark:
//  Corruption "acknowledged records missing at the end of the log" naming the
//  segment that is left and the range q..M. What is still out of reach --
//  records acknowledged after the last mark was written -- is shown in
//  RecordsAfterTheMark below.
//
// Snapshots: a bit flipped at every bit of a small snapshot is refused with
// Corruption naming the file; no damaged snapshot ever loads.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "test_util.h"
#include "tributary/model.h"
#include "tributary/sdem_learner.h"
#include "tributary/wal.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr uint64_t kRecords = 24;
constexpr uint64_t kSegmentBytes = 400;  // MaybeRoll's knob: 4 segments of about 6 records

std::string ReadAll(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
// Replaces the file with a new one: rewriting it in place (truncate to 0,
// write) makes ext4 flush it on close (auto_da_alloc), thousands of times.
void WriteAll(const std::string& p, const std::string& data) {
  std::filesystem::remove(p);
  std::ofstream(p, std::ios::binary) << data;
}

// Record `seq`: a document whose id names it. Every fourth one is long
// enough (over 127 bytes) for a two-byte length varint.
v1::WalRecord Record(uint64_t seq) {
  v1::WalRecord r;
  r.set_sequence(seq);
  auto* d = r.mutable_document();
  d->set_id("doc-" + std::to_string(seq));
  d->set_label(seq % 3 == 0 ? "sports" : "tech");
  for (uint32_t i = 0; i < 5; ++i) {
    d->add_term_ids(static_cast<uint32_t>(seq * 13 + i) % 500);
    d->add_term_counts(1 + i);
  }
  if (seq % 4 == 0) {
    for (int i = 0; i < 12; ++i) d->add_tokens("token-" + std::to_string(seq) + "-" + std::to_string(i));
  }
  return r;
}

std::string Range(uint64_t a, uint64_t b) {
  return a == b ? std::to_string(a) : std::to_string(a) + ".." + std::to_string(b);
}

// The real file system without fsync: the thousands of replays below keep
// damaged segments aside and cut torn tails, each durably, which would spend
// minutes in fsync; what is checked is what lands in the files.
class NoSyncEnv : public EnvWrapper {
 public:
  NoSyncEnv() : EnvWrapper(Env::Default()) {}
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& p) override {
    return Wrap(target()->NewWritableFile(p));
  }
  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& p) override {
    return Wrap(target()->NewAppendableFile(p));
  }
  Status SyncDir(const std::string&) override { return Status::OK(); }

 private:
  class File : public WritableFile {
   public:
    explicit File(std::unique_ptr<WritableFile> inner) : inner_(std::move(inner)) {}
    Status Append(std::string_view data) override { return inner_->Append(data); }
    Status Sync() override { return Status::OK(); }
    Status Truncate(uint64_t size) override { return inner_->Truncate(size); }
    Status Close() override { return inner_->Close(); }
    const std::string& name() const override { return inner_->name(); }

   private:
    std::unique_ptr<WritableFile> inner_;
  };
  static Result<std::unique_ptr<WritableFile>> Wrap(Result<std::unique_ptr<WritableFile>> f) {
    if (!f.ok()) return f.status();
    return std::unique_ptr<WritableFile>(new File(std::move(f).value()));
  }
};

NoSyncEnv* TestEnv() {
  static NoSyncEnv env;
  return &env;
}

// Where each record of a segment lies, found by parsing the file.
struct FrameAt {
  uint64_t seq = 0;
  size_t off = 0;  // first byte (the length varint)
  size_t hdr = 0;  // length varint bytes
  size_t len = 0;  // payload bytes; the 4 CRC bytes follow
  size_t end() const { return off + hdr + len + 4; }
};
struct SegmentLayout {
  std::string name;  // file name
  uint64_t first = 0, last = 0;
  size_t size = 0;
  std::vector<FrameAt> frames;
};

// Every regular file under `dir` (relative path -> bytes).
using DirBytes = std::map<std::string, std::string>;
DirBytes ReadDir(const std::string& dir) {
  DirBytes out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = ReadAll(e.path().string());
  }
  return out;
}

// What replay must do with one damaged copy of the log.
struct Expect {
  enum Kind {
    kCorrupt,     // refused / skipped with a report naming the lost range
    kTorn,        // a torn tail: cut, bytes kept, both policies go on
    kSilentLoss,  // the newest segment cut at a record boundary after the mark
  } kind = kCorrupt;
  bool tail = false;  // corrupt records at the end of the log: the reason gets the suffix below
  uint64_t first_lost = 0, last_lost = 0;
  std::string segment;  // file name of the segment the damage is reported in
  size_t offset = 0;    // corrupt: report offset; torn: where the segment is cut
  size_t bytes = 0;     // corrupt: unreadable bytes (0 for a gap); torn: bytes cut
  std::string reason;
};

class WalFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::TempDir("wal_fault");
    base_ = root_ + "/base";
    dir_ = root_ + "/case";
    // Write the log as the server does: group commits of a few records,
    // rolling to a new segment past kSegmentBytes.
    auto w = WriteAheadLog::Open(base_, TestEnv());
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*w)->StartSegment(1).ok());
    for (uint64_t s = 1; s <= kRecords; ++s) {
      ASSERT_TRUE((*w)->MaybeRoll(s, kSegmentBytes).ok());
      ASSERT_TRUE((*w)->Append(Record(s)).ok());
      if (s % 3 == 0 || s == kRecords) {
        ASSERT_TRUE((*w)->Sync().ok());
        ASSERT_TRUE((*w)->MarkAcknowledged(s).ok());
      }
    }
    w->reset();
    for (const auto& seg : WriteAheadLog::Open(base_, TestEnv()).value()->Segments()) layout_.push_back(Parse(seg));
    ASSERT_GE(layout_.size(), 4u);
    ASSERT_EQ(layout_.front().first, 1u);
    ASSERT_EQ(layout_.back().last, kRecords);
    bool long_varint = false;
    for (size_t s = 0; s < layout_.size(); ++s) {
      ASSERT_GE(layout_[s].frames.size(), 3u);
      if (s > 0) {
        ASSERT_EQ(layout_[s].first, layout_[s - 1].last + 1);
      }
      for (const auto& f : layout_[s].frames) long_varint |= f.hdr > 1;
    }
    ASSERT_TRUE(long_varint);  // two-byte length varints are exercised
    pristine_ = ReadDir(base_);
  }

  SegmentLayout Parse(const std::string& path) {
    SegmentLayout l;
    l.name = fs::path(path).filename().string();
    const std::string data = ReadAll(path);
    l.size = data.size();
    size_t off = 0;
    while (off < data.size()) {
      FrameAt f;
      f.off = off;
      size_t len = 0;
      int shift = 0;
      for (;;) {
        const auto b = static_cast<unsigned char>(data.at(off + f.hdr));
        len |= static_cast<size_t>(b & 0x7f) << shift;
        ++f.hdr;
        shift += 7;
        if (!(b & 0x80)) break;
      }
      f.len = len;
      v1::WalRecord rec;
      EXPECT_TRUE(rec.ParseFromArray(data.data() + off + f.hdr, static_cast<int>(len)));
      f.seq = rec.sequence();
      EXPECT_EQ(rec.SerializeAsString(), Record(f.seq).SerializeAsString());
      l.frames.push_back(f);
      off = f.end();
    }
    EXPECT_EQ(off, data.size());
    if (!l.frames.empty()) {
      l.first = l.frames.front().seq;
      l.last = l.frames.back().seq;
    }
    return l;
  }

  bool Newest(size_t s) const { return s + 1 == layout_.size(); }
  std::string Path(size_t s) const { return dir_ + "/" + layout_[s].name; }
  static std::vector<uint64_t> AllBut(uint64_t a, uint64_t b) {
    std::vector<uint64_t> v;
    for (uint64_t q = 1; q <= kRecords; ++q) {
      if (q < a || q > b) v.push_back(q);
    }
    return v;
  }

  // The rule for damage (changed or missing bytes) to records r..r2 of
  // segment s; see the top of the file.
  Expect ForDamagedRecords(size_t s, size_t r, size_t r2, const std::string& reason) const {
    const SegmentLayout& l = layout_[s];
    Expect e;
    e.segment = l.name;
    e.offset = l.frames[r].off;
    e.first_lost = l.frames[r].seq;
    const bool last = r2 + 1 == l.frames.size();
    if (last && Newest(s) && e.first_lost > mark_) {
      e.kind = Expect::kTorn;
      e.last_lost = kRecords;
      return e;  // bytes: set by the caller (the segment's damaged length)
    }
    e.kind = Expect::kCorrupt;
    e.tail = last && Newest(s);
    e.last_lost = e.tail ? mark_ : l.frames[r2].seq;
    e.bytes = (last ? l.size : l.frames[r2 + 1].off) - e.offset;
    e.reason = reason;
    return e;
  }
  // The rule for segment s losing its records from record r on (cut at a
  // record boundary, or `deleted` with r = 0).
  Expect ForMissingTail(size_t s, size_t r, bool deleted = false) const {
    Expect e;
    e.first_lost = layout_[s].frames[r].seq;
    if (Newest(s) && e.first_lost > mark_) {
      e.kind = Expect::kSilentLoss;
      e.last_lost = kRecords;
      return e;
    }
    if (Newest(s)) {
      // The log ends before the mark; the report names the segment left.
      const size_t at = deleted ? s - 1 : s;
      e.kind = Expect::kCorrupt;
      e.last_lost = mark_;
      e.segment = layout_[at].name;
      e.offset = deleted ? layout_[at].size : layout_[s].frames[r].off;
      e.reason =
          "acknowledged records missing at the end of the log (its newest segment was cut short or deleted; "
          "the acknowledgement mark is at " +
          std::to_string(mark_) + ")";
      return e;
    }
    e.kind = Expect::kCorrupt;
    e.last_lost = layout_[s].last;
    e.segment = layout_[s + 1].name;  // the gap shows at the next segment
    e.reason = "missing records before this segment";
    return e;
  }

  // Records r..r2 of segment s whose bytes differ between `before` and `after`
  // (same length); false when none do.
  bool ChangedRecords(size_t s, const std::string& before, const std::string& after, size_t* r, size_t* r2) const {
    size_t lo = 0;
    while (lo < before.size() && before[lo] == after[lo]) ++lo;
    if (lo == before.size()) return false;
    size_t hi = before.size() - 1;
    while (before[hi] == after[hi]) --hi;
    const auto& frames = layout_[s].frames;
    auto index = [&](size_t byte) {
      for (size_t i = 0; i < frames.size(); ++i) {
        if (byte < frames[i].end()) return i;
      }
      return frames.size() - 1;
    };
    *r = index(lo);
    *r2 = index(hi);
    return true;
  }

  // Copies the pristine log to dir_, applies `damage` there (the directory
  // then is *before*) and replays it under `policy`, collecting the records
  // handed over (each must be the one written) and the report.
  Status ReplayDamaged(const std::function<void()>& damage, CorruptionPolicy policy, DirBytes* before,
                       std::vector<uint64_t>* seqs, WalReplayReport* rep) {
    fs::remove_all(dir_);
    fs::copy(base_, dir_, fs::copy_options::recursive);
    damage();
    *before = ReadDir(dir_);
    auto w = WriteAheadLog::Open(dir_, TestEnv());
    if (!w.ok()) return w.status();
    return (*w)->Replay(
        0,
        [&](const v1::WalRecord& rec) {
          EXPECT_EQ(rec.SerializeAsString(), Record(rec.sequence()).SerializeAsString());
          seqs->push_back(rec.sequence());
          return Status::OK();
        },
        rep, policy);
  }

  // Copies the pristine log to dir_, applies `damage` there, replays it
  // under `policy` and checks the outcome against `e`.
  void Check(const std::function<void()>& damage, const Expect& e, CorruptionPolicy policy) {
    const bool skip = policy == CorruptionPolicy::kSkip;
    SCOPED_TRACE(skip ? "policy skip" : "policy refuse");
    DirBytes before;
    std::vector<uint64_t> seqs;
    WalReplayReport rep;
    Status st = ReplayDamaged(damage, policy, &before, &seqs, &rep);
    const DirBytes after = ReadDir(dir_);
    cases_++;
    const std::string reason =
        e.reason.empty() ? "" : e.reason + (e.tail ? " in acknowledged records at the end of the log" : "");

    if (e.kind == Expect::kCorrupt && !skip) {
      ASSERT_TRUE(st.IsCorruption()) << st.ToString();
      const std::string& m = st.message();
      EXPECT_THAT(m, HasSubstr("write-ahead log '" + dir_ + "/" + e.segment + "': " + reason));
      if (e.bytes > 0) {
        EXPECT_THAT(m, HasSubstr(" at byte " + std::to_string(e.offset) + " (" + std::to_string(e.bytes) +
                                 " unreadable bytes)"));
      }
      EXPECT_THAT(
          m, HasSubstr("; records " + Range(e.first_lost, e.last_lost) + " (" +
                       std::to_string(e.last_lost - e.first_lost + 1) + " acknowledged documents) cannot be read"));
      EXPECT_THAT(m, HasSubstr("Nothing on disk was changed"));
      EXPECT_EQ(seqs, AllBut(e.first_lost,
                             kRecords));  // handed over in order up to the damage
      EXPECT_TRUE(after == before) << "refuse changed the directory";
      return;
    }
    ASSERT_TRUE(st.ok()) << st.ToString();
    if (e.kind == Expect::kCorrupt) {  // skip
      EXPECT_EQ(seqs, AllBut(e.first_lost, e.last_lost));
      EXPECT_EQ(rep.records, seqs.size());
      EXPECT_EQ(rep.lost_records, e.last_lost - e.first_lost + 1);
      EXPECT_EQ(rep.torn_bytes, 0u);
      ASSERT_EQ(rep.damage.size(), 1u);
      const WalDamage& d = rep.damage[0];
      EXPECT_EQ(d.segment, dir_ + "/" + e.segment);
      EXPECT_EQ(d.first_lost, e.first_lost);
      EXPECT_EQ(d.last_lost, e.last_lost);
      EXPECT_EQ(d.offset, e.offset);
      EXPECT_EQ(d.bytes, e.bytes);
      if (!e.reason.empty()) {
        EXPECT_EQ(d.reason, reason);
      } else if (e.tail) {
        EXPECT_THAT(d.reason, HasSubstr(" in acknowledged records at the end of the log"));
      }
      EXPECT_FALSE(d.covered);
      // The damaged segment is kept byte for byte, with a report.
      EXPECT_EQ(ReadAll(d.kept_as), before.at(e.segment));
      const std::string text = ReadAll(d.report);
      EXPECT_THAT(text, HasSubstr("records " + Range(e.first_lost, e.last_lost)));
      EXPECT_THAT(text, HasSubstr(d.kept_as));
      // Nothing that was there changed; only the copy and the report are new.
      size_t added = 0;
      for (const auto& [name, bytes] : after) {
        if (before.count(name)) {
          EXPECT_EQ(bytes, before.at(name)) << name << " changed";
        } else {
          EXPECT_EQ(name.rfind("damaged/", 0), 0u) << name;
          ++added;
        }
      }
      EXPECT_EQ(added, 2u);
      EXPECT_EQ(after.size(), before.size() + 2);
      return;
    }
    // A torn tail or a silently shorter log: the same under both policies.
    EXPECT_EQ(seqs, AllBut(e.first_lost, kRecords));
    EXPECT_TRUE(rep.damage.empty());
    EXPECT_EQ(rep.lost_records, 0u);
    if (e.kind == Expect::kSilentLoss) {
      EXPECT_EQ(rep.torn_bytes, 0u);
      EXPECT_TRUE(after == before);
      return;
    }
    EXPECT_EQ(rep.torn_bytes, e.bytes);
    const std::string& seg = before.at(e.segment);
    ASSERT_EQ(seg.size(), e.offset + e.bytes);
    EXPECT_EQ(ReadAll(rep.torn_kept_as),
              seg.substr(e.offset));                          // the cut bytes, kept
    EXPECT_EQ(after.at(e.segment), seg.substr(0, e.offset));  // cut exactly there, not before
    size_t added = 0;
    for (const auto& [name, bytes] : after) {
      if (name == e.segment) continue;
      if (before.count(name)) {
        EXPECT_EQ(bytes, before.at(name)) << name << " changed";
      } else {
        ++added;
      }
    }
    EXPECT_EQ(added, 1u);
  }
  void CheckBoth(const std::function<void()>& damage, const Expect& e) {
    Check(damage, e, CorruptionPolicy::kRefuse);
    Check(damage, e, CorruptionPolicy::kSkip);
  }

  // Moves the pristine log's acknowledgement mark back to `m` (records after
  // it acknowledged since the last mark was written).
  void SetMark(uint64_t m) {
    auto w = WriteAheadLog::Open(base_, TestEnv());
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->MarkAcknowledged(m).ok());
    mark_ = m;
    pristine_ = ReadDir(base_);
  }

  std::string root_, base_, dir_;
  std::vector<SegmentLayout> layout_;
  DirBytes pristine_;
  uint64_t mark_ = kRecords;
  int cases_ = 0;
};

// The offsets inside one record that the bit flips and cuts aim at: the
// record boundary (first length byte), the last length byte, the payload's
// first byte (the sequence's tag), its second (the sequence), middle and last
// bytes, and each CRC byte.
std::vector<size_t> OffsetsIn(const FrameAt& f) {
  std::vector<size_t> v = {
      f.off, f.off + f.hdr - 1, f.off + f.hdr, f.off + f.hdr + 1, f.off + f.hdr + f.len / 2, f.off + f.hdr + f.len - 1};
  for (size_t i = 0; i < 4; ++i) v.push_back(f.off + f.hdr + f.len + i);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

TEST_F(WalFaultTest, BitFlipAtEveryRecordBoundaryAndInsideEveryRecord) {
  int corrupt = 0, torn = 0;
  for (size_t s = 0; s < layout_.size(); ++s) {
    const SegmentLayout& l = layout_[s];
    for (size_t r = 0; r < l.frames.size(); ++r) {
      for (size_t off : OffsetsIn(l.frames[r])) {
        for (int bit : {0, 7}) {  // bit 7 of a length byte is the varint's continuation
          SCOPED_TRACE(l.name + " record " + std::to_string(l.frames[r].seq) + " byte " + std::to_string(off) +
                       " bit " + std::to_string(bit));
          Expect e = ForDamagedRecords(s, r, r, "checksum mismatch");
          if (e.kind == Expect::kTorn) {
            e.bytes = l.size - e.offset;
            ++torn;
          } else {
            ++corrupt;
            // A flipped length byte can make the frame run past the end of
            // the segment ("incomplete record") instead of failing its CRC.
            const FrameAt& f = l.frames[r];
            if (off < f.off + f.hdr) {
              const std::string& data = pristine_.at(l.name);
              std::string flipped = data;
              flipped[off] = static_cast<char>(flipped[off] ^ (1 << bit));
              size_t len = 0;
              int shift = 0;
              for (size_t i = f.off; i < data.size() && shift < 64; ++i, shift += 7) {
                len |= static_cast<size_t>(static_cast<unsigned char>(flipped[i]) & 0x7f) << shift;
                if (!(static_cast<unsigned char>(flipped[i]) & 0x80)) {
                  if (f.off + (i - f.off + 1) + len + 4 > data.size()) e.reason = "incomplete record";
                  break;
                }
              }
            }
          }
          CheckBoth(
              [&] {
                std::string data = ReadAll(Path(s));
                data[off] = static_cast<char>(data[off] ^ (1 << bit));
                WriteAll(Path(s), data);
              },
              e);
          if (HasFailure()) return;
        }
      }
    }
  }
  // With the mark current, no flipped bit is ever taken for a torn write.
  EXPECT_GT(corrupt, 0);
  EXPECT_EQ(torn, 0);
  std::cerr << "bit flips: " << corrupt << " corruption cases, " << torn << " torn-tail cases, " << cases_
            << " replays\n";
}

TEST_F(WalFaultTest, SegmentTruncatedAtEveryBoundaryAndInsideEveryRecord) {
  int corrupt = 0, torn = 0, silent = 0;
  for (size_t s = 0; s < layout_.size(); ++s) {
    const SegmentLayout& l = layout_[s];
    for (size_t r = 0; r < l.frames.size(); ++r) {
      const FrameAt& f = l.frames[r];
      for (size_t cut : OffsetsIn(f)) {
        SCOPED_TRACE(l.name + " cut at byte " + std::to_string(cut) + " (record " + std::to_string(f.seq) + ")");
        Expect e;
        if (cut == f.off) {
          e = ForMissingTail(s, r);
        } else {
          e = ForDamagedRecords(s, r, l.frames.size() - 1, "incomplete record");
          e.bytes = cut - f.off;  // what is left of record r
        }
        (e.kind == Expect::kCorrupt ? corrupt : e.kind == Expect::kTorn ? torn : silent)++;
        CheckBoth([&] { fs::resize_file(Path(s), cut); }, e);
        if (HasFailure()) return;
      }
    }
  }
  std::cerr << "truncations: " << corrupt << " corruption, " << torn << " torn tail, " << silent
            << " silent (newest segment cut at a record boundary), " << cases_ << " replays\n";
}

TEST_F(WalFaultTest, WholeSegmentDeleted) {
  for (size_t s = 0; s < layout_.size(); ++s) {
    SCOPED_TRACE("deleted " + layout_[s].name);
    CheckBoth([&] { fs::remove(Path(s)); }, ForMissingTail(s, 0, /*deleted=*/true));
  }
}

TEST_F(WalFaultTest, ZeroFilledRanges) {
  int cases = 0;
  for (size_t s = 0; s < layout_.size(); ++s) {
    const SegmentLayout& l = layout_[s];
    for (size_t r = 0; r < l.frames.size(); ++r) {
      const FrameAt& f = l.frames[r];
      const size_t mid = f.off + f.hdr + f.len / 2;
      std::vector<std::pair<size_t, size_t>> ranges = {
          {mid, f.end()},  // the second half of a record, CRC included
          {mid, l.size},   // from inside a record to the end of the segment (a
                           // crash's zeroed blocks)
      };
      if (r + 1 < l.frames.size()) {
        const FrameAt& g = l.frames[r + 1];
        ranges.push_back({mid, g.off + g.hdr + g.len / 2});  // across a record boundary
      }
      for (auto [lo, hi] : ranges) {
        SCOPED_TRACE(l.name + " zeroed [" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
        const std::string& data = pristine_.at(l.name);
        std::string zeroed = data;
        std::fill(zeroed.begin() + static_cast<std::ptrdiff_t>(lo), zeroed.begin() + static_cast<std::ptrdiff_t>(hi),
                  '\0');
        size_t a = 0, b = 0;
        ASSERT_TRUE(ChangedRecords(s, data, zeroed, &a, &b));
        Expect e = ForDamagedRecords(s, a, b, "checksum mismatch");
        if (e.kind == Expect::kTorn) e.bytes = l.size - e.offset;
        CheckBoth([&] { WriteAll(Path(s), zeroed); }, e);
        ++cases;
        if (HasFailure()) return;
      }
    }
  }
  std::cerr << "zero fills: " << cases << " cases, " << cases_ << " replays\n";
}

// Zeros that start exactly at a record boundary: what a crash leaves when
// the file grew but the data blocks never landed (zeros appended to the
// newest segment), and zeroed blocks inside a segment. A zero length byte
// followed by four zero CRC bytes is a frame of 0 bytes whose CRC-32 (of
// nothing) is 0: it must still not be taken for a record.
TEST_F(WalFaultTest, ZerosFromARecordBoundary) {
  // Zeros appended to the newest segment: a torn tail, nothing lost.
  {
    const size_t s = layout_.size() - 1;
    SCOPED_TRACE("32 zero bytes appended to " + layout_[s].name);
    Expect e;
    e.kind = Expect::kTorn;
    e.segment = layout_[s].name;
    e.first_lost = kRecords + 1;  // nothing
    e.offset = layout_[s].size;
    e.bytes = 32;
    CheckBoth([&] { WriteAll(Path(s), pristine_.at(layout_[s].name) + std::string(32, '\0')); }, e);
  }
  for (size_t s = 0; s < layout_.size(); ++s) {
    const SegmentLayout& l = layout_[s];
    for (size_t r = 0; r < l.frames.size(); ++r) {
      std::vector<std::pair<size_t, size_t>> ranges = {{l.frames[r].off, l.size}};            // to the end
      if (r + 2 < l.frames.size()) ranges.push_back({l.frames[r].off, l.frames[r + 2].off});  // two whole records
      for (auto [lo, hi] : ranges) {
        SCOPED_TRACE(l.name + " zeroed [" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
        std::string zeroed = pristine_.at(l.name);
        std::fill(zeroed.begin() + static_cast<std::ptrdiff_t>(lo), zeroed.begin() + static_cast<std::ptrdiff_t>(hi),
                  '\0');
        size_t a = 0, b = 0;
        ASSERT_TRUE(ChangedRecords(s, pristine_.at(l.name), zeroed, &a, &b));
        Expect e = ForDamagedRecords(s, a, b, "");  // the reason is not checked
        if (e.kind == Expect::kTorn) e.bytes = l.size - e.offset;
        CheckBoth([&] { WriteAll(Path(s), zeroed); }, e);
        if (HasFailure()) return;
      }
    }
  }
}

// What the mark cannot cover (documented in wal.h and docs/design.md): the
// records acknowledged after the last mark was written (at most one
// ack_mark_interval_ms before a crash). Here the mark is at kRecords - 2, so
// records kRecords - 1 and kRecords were acknowledged after it:
//  (1) a flipped bit in the last record is taken for a torn write (the
//      record is dropped, its bytes kept aside, its sequence not named);
//  (2) the newest segment cut at the boundary of record kRecords - 1 reads
//      as a shorter log: those two records are gone without a report;
//  (3) but cut one record earlier, at the marked record kRecords - 2, the
//      loss of that record is reported, refused by default (the two after it
//      are lost without a report under skip, as in (2)).
TEST_F(WalFaultTest, RecordsAfterTheMark) {
  SetMark(kRecords - 2);
  const size_t s = layout_.size() - 1;
  const SegmentLayout& l = layout_[s];
  ASSERT_GE(l.frames.size(), 3u);
  const FrameAt& last = l.frames.back();
  Expect torn = ForDamagedRecords(s, l.frames.size() - 1, l.frames.size() - 1, "");
  ASSERT_EQ(torn.kind, Expect::kTorn);
  torn.bytes = l.size - torn.offset;
  CheckBoth(
      [&] {
        std::string data = ReadAll(Path(s));
        data[last.off + last.hdr + 2] = static_cast<char>(data[last.off + last.hdr + 2] ^ 0x01);
        WriteAll(Path(s), data);
      },
      torn);
  const FrameAt& after_mark = l.frames[l.frames.size() - 2];
  ASSERT_EQ(after_mark.seq, kRecords - 1);
  const Expect silent = ForMissingTail(s, l.frames.size() - 2);
  ASSERT_EQ(silent.kind, Expect::kSilentLoss);
  CheckBoth([&] { fs::resize_file(Path(s), after_mark.off); }, silent);

  const FrameAt& marked = l.frames[l.frames.size() - 3];
  ASSERT_EQ(marked.seq, kRecords - 2);
  for (CorruptionPolicy policy : {CorruptionPolicy::kRefuse, CorruptionPolicy::kSkip}) {
    SCOPED_TRACE(policy == CorruptionPolicy::kSkip ? "skip" : "refuse");
    DirBytes before;
    std::vector<uint64_t> seqs;
    WalReplayReport rep;
    Status st = ReplayDamaged([&] { fs::resize_file(Path(s), marked.off); }, policy, &before, &seqs, &rep);
    EXPECT_EQ(rep.acknowledged_mark, kRecords - 2);
    EXPECT_EQ(seqs, AllBut(kRecords - 2, kRecords));
    if (policy == CorruptionPolicy::kRefuse) {
      ASSERT_TRUE(st.IsCorruption()) << st.ToString();
      EXPECT_THAT(st.message(), HasSubstr("acknowledged records missing at the end of the log"));
      EXPECT_THAT(st.message(), HasSubstr("records " + std::to_string(kRecords - 2) + " (1 acknowledged documents)"));
      continue;
    }
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(rep.damage.size(), 1u);
    EXPECT_EQ(rep.damage[0].first_lost, kRecords - 2);
    EXPECT_EQ(rep.damage[0].last_lost, kRecords - 2);
    EXPECT_EQ(rep.lost_records, 1u);
    EXPECT_EQ(rep.last_sequence, kRecords - 2);  // the next record is numbered after the mark
  }
}

// A damaged mark proves nothing: replay reads the log as if it had none (a
// bad tail is then a torn write) and says why.
TEST_F(WalFaultTest, DamagedMarkIsReportedAndIgnored) {
  const std::string mark = base_ + "/wal.acked";
  const std::string good = ReadAll(mark);
  ASSERT_EQ(good.size(), 20u);
  for (const auto& [what, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"checksum mismatch", good.substr(0, 10) + static_cast<char>(good[10] ^ 0x04) + good.substr(11)},
           {"12 bytes, expected 20", good.substr(0, 12)},
           {"bad magic", "XRIBACK1" + good.substr(8)}}) {
    SCOPED_TRACE(what);
    WriteAll(mark, bytes);
    auto w = WriteAheadLog::Open(base_, TestEnv());
    ASSERT_TRUE(w.ok());
    auto m = (*w)->ReadAcknowledgedMark();
    ASSERT_TRUE(m.status().IsCorruption()) << m.status().ToString();
    EXPECT_THAT(m.status().message(), HasSubstr("acknowledgement mark '" + mark + "': " + what));
    mark_ = 0;  // the expectations of a log without a mark
    pristine_ = ReadDir(base_);
    const size_t s = layout_.size() - 1;
    const SegmentLayout& l = layout_[s];
    Expect torn = ForDamagedRecords(s, l.frames.size() - 1, l.frames.size() - 1, "");
    ASSERT_EQ(torn.kind, Expect::kTorn);
    torn.bytes = l.size - 1 - torn.offset;  // what is left of the last record
    CheckBoth([&] { fs::resize_file(Path(s), l.size - 1); }, torn);
    WalReplayReport rep;
    ASSERT_TRUE((*w)->Replay(
                        0, [](const v1::WalRecord&) { return Status::OK(); }, &rep)
                    .ok());
    EXPECT_EQ(rep.acknowledged_mark, 0u);
    EXPECT_THAT(rep.mark_error, HasSubstr(what));
  }
  WriteAll(mark, good);
}

// Damage covered by the snapshot (every lost sequence <= `after`) loses
// nothing: both policies go on, nothing is copied, the damage is reported as
// covered.
TEST_F(WalFaultTest, FlipsCoveredByTheSnapshotLoseNothing) {
  for (size_t s = 0; s + 1 < layout_.size(); ++s) {
    const SegmentLayout& l = layout_[s];
    for (size_t r = 0; r < l.frames.size(); ++r) {
      const FrameAt& f = l.frames[r];
      SCOPED_TRACE(l.name + " record " + std::to_string(f.seq));
      for (CorruptionPolicy policy : {CorruptionPolicy::kRefuse, CorruptionPolicy::kSkip}) {
        fs::remove_all(dir_);
        fs::copy(base_, dir_, fs::copy_options::recursive);
        std::string data = ReadAll(Path(s));
        data[f.off + f.hdr + f.len / 2] ^= 0x10;
        WriteAll(Path(s), data);
        const DirBytes before = ReadDir(dir_);
        std::vector<uint64_t> seqs;
        WalReplayReport rep;
        auto w = WriteAheadLog::Open(dir_, TestEnv());
        ASSERT_TRUE(w.ok());
        Status st = (*w)->Replay(
            f.seq,
            [&](const v1::WalRecord& rec) {
              seqs.push_back(rec.sequence());
              return Status::OK();
            },
            &rep, policy);
        ASSERT_TRUE(st.ok()) << st.ToString();
        std::vector<uint64_t> want;
        for (uint64_t q = f.seq + 1; q <= kRecords; ++q) want.push_back(q);
        EXPECT_EQ(seqs, want);
        ASSERT_EQ(rep.damage.size(), 1u);
        EXPECT_TRUE(rep.damage[0].covered);
        EXPECT_EQ(rep.damage[0].first_lost, f.seq);
        EXPECT_EQ(rep.damage[0].last_lost, f.seq);
        EXPECT_EQ(rep.lost_records, 0u);
        EXPECT_TRUE(ReadDir(dir_) == before);
      }
    }
  }
}

// ---- Snapshots -------------------------------------------------------------

TEST(SnapshotFaultTest, EveryFlippedBitIsRefusedNamingTheFile) {
  const std::string dir = testing::TempDir("snapshot_fault");
  auto schema = ModelSchema::FromProto(testing::TextSchema(6, 2));
  ASSERT_TRUE(schema.ok());
  auto m = Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss("nll"), *schema, {});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto l = SdemLearner::Create(m->get());
  ASSERT_TRUE(l.ok());
  for (int i = 0; i < 20; ++i) {
    auto d = testing::MakeDoc(static_cast<uint64_t>(i), i % 2,
                              {{static_cast<uint32_t>(i % 6), 1.0}, {static_cast<uint32_t>((i * 5) % 6), 2.0}});
    ASSERT_TRUE((*l)->Learn(d.View()).ok());
  }
  const std::string good = dir + "/model.trib";
  SnapshotOptions opts;
  opts.log_sequence = 20;
  ASSERT_TRUE((*m)->Save(good, opts).ok());
  const std::string data = ReadAll(good);
  {
    auto ok = Model::Load(good, testing::BuiltinRegistry());
    ASSERT_TRUE(ok.ok()) << ok.status().ToString();
    ASSERT_EQ((*ok)->stats().raw(), (*m)->stats().raw());
  }
  const std::string bad = dir + "/flipped.trib";
  size_t refused = 0;
  for (size_t byte = 0; byte < data.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = data;
      flipped[byte] = static_cast<char>(flipped[byte] ^ (1 << bit));
      WriteAll(bad, flipped);
      uint64_t seq = 0;
      auto r = Model::Load(bad, testing::BuiltinRegistry(), nullptr, &seq);
      if (r.ok()) {
        ADD_FAILURE() << "byte " << byte << " bit " << bit << " loaded"
                      << ((*r)->stats().raw() == (*m)->stats().raw() ? "" : " with different statistics");
        continue;
      }
      EXPECT_TRUE(r.status().IsCorruption()) << "byte " << byte << " bit " << bit << ": " << r.status().ToString();
      EXPECT_THAT(r.status().message(), HasSubstr("snapshot '" + bad + "'")) << "byte " << byte;
      ++refused;
    }
  }
  EXPECT_EQ(refused, data.size() * 8);
  std::cerr << "snapshot of " << data.size() << " bytes: " << refused << " flipped bits refused\n";
}

}  // namespace
}  // namespace tributary
