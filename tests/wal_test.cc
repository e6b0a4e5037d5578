// The write-ahead log on its own: a torn tail is told apart from corruption
// inside the log; corruption is refused by default with the lost range named
// and nothing changed on disk, or (skip) the damaged segment is kept
// byte-for-byte with a report while replay goes on past the damage; gaps in
// the sequence are found; write faults take back what was not acknowledged.
#include <gmock/gmock.h>
#include <google/protobuf/stubs/logging.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fault_env.h"
#include "test_util.h"
#include "tributary/wal.h"

namespace tributary {
namespace {

using testing::FaultEnv;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string ReadAll(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

v1::WalRecord Record(uint64_t seq) {
  v1::WalRecord r;
  r.set_sequence(seq);
  auto* d = r.mutable_document();
  d->set_label(seq % 2 ? "odd" : "even");
  for (uint32_t i = 0; i < 4; ++i) {
    d->add_term_ids(static_cast<uint32_t>(seq * 7 + i) % 1000);
    d->add_term_counts(1 + i);
  }
  return r;
}

class WalTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::TempDir("wal") + "/wal"; }

  // Writes records [first, last] into a new segment starting at `first`.
  void WriteSegment(uint64_t first, uint64_t last, Env* env = nullptr) {
    auto w = WriteAheadLog::Open(dir_, env);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->StartSegment(first).ok());
    for (uint64_t s = first; s <= last; ++s) ASSERT_TRUE((*w)->Append(Record(s)).ok());
    ASSERT_TRUE((*w)->Sync().ok());
  }
  std::string Segment(uint64_t first) const {
    char name[40];
    std::snprintf(name, sizeof(name), "wal-%020llu.log", static_cast<unsigned long long>(first));
    return dir_ + "/" + name;
  }
  // Byte offset of record `seq` (1-based within a segment starting at `first`).
  size_t OffsetOf(uint64_t first, uint64_t seq) const {
    size_t off = 0;
    for (uint64_t s = first; s < seq; ++s) {
      std::string payload;
      Record(s).SerializeToString(&payload);
      off += 1 + payload.size() + 4;  // one-byte varint length for these small records
    }
    return off;
  }
  void FlipByte(const std::string& path, size_t offset) {
    std::string data = ReadAll(path);
    ASSERT_LT(offset, data.size());
    data[offset] = static_cast<char>(data[offset] ^ 0x20);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
  }
  Status Replay(uint64_t after, CorruptionPolicy policy, std::vector<uint64_t>* seqs, WalReplayReport* rep) {
    auto w = WriteAheadLog::Open(dir_);
    if (!w.ok()) return w.status();
    return (*w)->Replay(
        after,
        [&](const v1::WalRecord& r) {
          EXPECT_EQ(r.SerializeAsString(), Record(r.sequence()).SerializeAsString());
          seqs->push_back(r.sequence());
          return Status::OK();
        },
        rep, policy);
  }
  static std::vector<uint64_t> Seq(uint64_t a, uint64_t b) {
    std::vector<uint64_t> v;
    for (uint64_t s = a; s <= b; ++s) v.push_back(s);
    return v;
  }

  std::string dir_;
};

TEST_F(WalTest, TornTailIsCutAndItsBytesKept) {
  WriteSegment(1, 10);
  const std::string seg = Segment(1);
  const std::string clean = ReadAll(seg);
  const std::string torn("\x40\x08\x0b\x12\x10garbage", 12);
  std::ofstream(seg, std::ios::binary | std::ios::app) << torn;
  std::vector<uint64_t> seqs;
  WalReplayReport rep;
  ASSERT_TRUE(Replay(0, CorruptionPolicy::kRefuse, &seqs, &rep).ok());
  EXPECT_EQ(seqs, Seq(1, 10));
  EXPECT_EQ(rep.torn_bytes, torn.size());
  EXPECT_TRUE(rep.damage.empty());
  EXPECT_EQ(ReadAll(seg), clean);              // cut back to the last whole record
  EXPECT_EQ(ReadAll(rep.torn_kept_as), torn);  // the evidence is kept
}

// The probe of issue 13: one flipped bit inside the live segment used to be
// taken for a torn tail, dropping every record after it and truncating the
// file. Now it is corruption: refused by default, nothing changed.
TEST_F(WalTest, FlipInsideTheNewestSegmentIsRefusedAndNothingChanges) {
  WriteSegment(1, 100);
  const std::string seg = Segment(1);
  FlipByte(seg, OffsetOf(1, 31) + 5);
  const std::string damaged = ReadAll(seg);
  std::vector<uint64_t> seqs;
  WalReplayReport rep;
  Status st = Replay(0, CorruptionPolicy::kRefuse, &seqs, &rep);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr(seg));
  EXPECT_THAT(st.message(), HasSubstr("at byte " + std::to_string(OffsetOf(1, 31))));
  EXPECT_THAT(st.message(), HasSubstr("records 31 (1 acknowledged documents)"));
  EXPECT_THAT(st.message(), HasSubstr("--on-corruption=skip"));
  EXPECT_EQ(ReadAll(seg), damaged);
  EXPECT_FALSE(fs::exists(dir_ + "/damaged"));
  EXPECT_EQ(rep.torn_bytes, 0u);
}

TEST_F(WalTest, SkipKeepsTheSegmentAsideWritesAReportAndReadsPastTheDamage) {
  WriteSegment(1, 100);
  const std::string seg = Segment(1);
  FlipByte(seg, OffsetOf(1, 31) + 5);
  const std::string damaged = ReadAll(seg);
  std::vector<uint64_t> seqs;
  WalReplayReport rep;
  ASSERT_TRUE(Replay(0, CorruptionPolicy::kSkip, &seqs, &rep).ok());
  std::vector<uint64_t> want = Seq(1, 30);
  for (uint64_t s = 32; s <= 100; ++s) want.push_back(s);
  EXPECT_EQ(seqs, want);
  EXPECT_EQ(rep.lost_records, 1u);
  ASSERT_EQ(rep.damage.size(), 1u);
  const WalDamage& d = rep.damage[0];
  EXPECT_EQ(d.first_lost, 31u);
  EXPECT_EQ(d.last_lost, 31u);
  EXPECT_FALSE(d.covered);
  EXPECT_EQ(d.offset, OffsetOf(1, 31));
  EXPECT_EQ(d.bytes, OffsetOf(1, 32) - OffsetOf(1, 31));
  EXPECT_EQ(ReadAll(seg), damaged);        // never truncated
  EXPECT_EQ(ReadAll(d.kept_as), damaged);  // and kept aside byte for byte
  const std::string report = ReadAll(d.report);
  EXPECT_THAT(report, HasSubstr("records 31 (1 acknowledged documents) cannot be read"));
  EXPECT_THAT(report, HasSubstr(d.kept_as));
}

TEST_F(WalTest, FlipInTheFirstRecordLosesOnlyThatRecord) {
  WriteSegment(1, 50);
  FlipByte(Segment(1), 3);
  std::vector<uint64_t> seqs;
  WalReplayReport rep;
  Status st = Replay(0, CorruptionPolicy::kRefuse, &seqs, &rep);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("records 1 (1 acknowledged"));
  seqs.clear();
  ASSERT_TRUE(Replay(0, CorruptionPolicy::kSkip, &seqs, &rep).ok());
  EXPECT_EQ(seqs, Seq(2, 50));
}

TEST_F(WalTest, DamageCoveredByTheSnapshotLosesNothing) {
  WriteSegment(1, 100);
  FlipByte(Segment(1), OffsetOf(1, 5) + 4);
  std::vector<uint64_t> seqs;
  WalReplayReport rep;
  ASSERT_TRUE(Replay(50, CorruptionPolicy::kRefuse, &seqs, &rep).ok());
  EXPECT_EQ(seqs, Seq(51, 100));
  ASSERT_EQ(rep.damage.size(), 1u);
  EXPECT_TRUE(rep.damage[0].covered);
  EXPECT_EQ(rep.lost_records, 0u);
  EXPECT_FALSE(fs::exists(dir_ + "/damaged"));
}

// The server collects broker positions from every record the log still
// holds, also those the snapshot covers: `covered` sees exactly those, the
// damaged one excepted, and `fn` only the rest.
TEST_F(WalTest, CoveredRecordsAreShownToTheirOwnCallback) {
  WriteSegment(1, 40);
  WriteSegment(41, 60);
  FlipByte(Segment(1), OffsetOf(1, 5) + 4);
  auto w = WriteAheadLog::Open(dir_);
  ASSERT_TRUE(w.ok());
  std::vector<uint64_t> applied, covered;
  WalReplayReport rep;
  ASSERT_TRUE((*w)->Replay(
                      45,
                      [&](const v1::WalRecord& r) {
                        applied.push_back(r.sequence());
                        return Status::OK();
                      },
                      &rep, CorruptionPolicy::kRefuse,
                      [&](const v1::WalRecord& r) {
                        EXPECT_EQ(r.SerializeAsString(), Record(r.sequence()).SerializeAsString());
                        covered.push_back(r.sequence());
                      })
                  .ok());
  EXPECT_EQ(applied, Seq(46, 60));
  std::vector<uint64_t> want = Seq(1, 4);
  for (uint64_t s = 6; s <= 45; ++s) want.push_back(s);
  EXPECT_EQ(covered, want);
  EXPECT_EQ(rep.skipped, 44u);
}

TEST_F(WalTest, AMissingSegmentIsAGapNamedByItsRange) {
  WriteSegment(1, 20);
  WriteSegment(21, 40);
  WriteSegment(41, 60);
  fs::remove(Segment(21));
  std::vector<uint64_t> seqs;
  WalReplayReport rep;
  Status st = Replay(0, CorruptionPolicy::kRefuse, &seqs, &rep);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("missing records"));
  EXPECT_THAT(st.message(), HasSubstr("records 21..40 (20 acknowledged documents)"));
  seqs.clear();
  ASSERT_TRUE(Replay(0, CorruptionPolicy::kSkip, &seqs, &rep).ok());
  std::vector<uint64_t> want = Seq(1, 20);
  for (uint64_t s = 41; s <= 60; ++s) want.push_back(s);
  EXPECT_EQ(seqs, want);
  EXPECT_EQ(rep.lost_records, 20u);
}

// Damage running to the end of a segment that is not the newest cannot be a
// torn write: a newer segment was started after it.
TEST_F(WalTest, DamagedTailOfAnOlderSegmentIsCorruption) {
  WriteSegment(1, 20);
  WriteSegment(21, 30);
  const std::string seg = Segment(1);
  std::string data = ReadAll(seg);
  data.resize(OffsetOf(1, 18) + 3);  // records 18..20 cut short
  std::ofstream(seg, std::ios::binary | std::ios::trunc) << data;
  std::vector<uint64_t> seqs;
  WalReplayReport rep;
  Status st = Replay(0, CorruptionPolicy::kRefuse, &seqs, &rep);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("records 18..20 (3 acknowledged documents)"));
  EXPECT_EQ(ReadAll(seg), data);
}

// A sync that fails takes back the records written since the last good
// sync (they were never acknowledged), and the log refuses further writes.
TEST_F(WalTest, FailedSyncTakesBackTheUnacknowledgedRecords) {
  for (bool torn : {false, true}) {
    SCOPED_TRACE(torn ? "torn append" : "failed fsync");
    fs::remove_all(dir_);
    FaultEnv env;
    env.Add({torn ? FaultEnv::Op::kAppend : FaultEnv::Op::kSync, "wal-", 1, EIO, torn});
    auto w = WriteAheadLog::Open(dir_, &env);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->StartSegment(1).ok());
    for (uint64_t s = 1; s <= 10; ++s) ASSERT_TRUE((*w)->Append(Record(s)).ok());
    ASSERT_TRUE((*w)->Sync().ok());
    for (uint64_t s = 11; s <= 20; ++s) ASSERT_TRUE((*w)->Append(Record(s)).ok());
    Status st = (*w)->Sync();
    ASSERT_FALSE(st.ok());
    EXPECT_THAT(st.message(), HasSubstr("Input/output error"));
    EXPECT_THAT(st.message(), HasSubstr(Segment(1)));
    EXPECT_FALSE((*w)->Append(Record(21)).ok());  // sticky
    w->reset();
    std::vector<uint64_t> seqs;
    WalReplayReport rep;
    ASSERT_TRUE(Replay(0, CorruptionPolicy::kRefuse, &seqs, &rep).ok());
    EXPECT_EQ(seqs, Seq(1, 10));
    EXPECT_EQ(rep.torn_bytes, 0u);
  }
}

// A record that is whole but does not parse (a document with invalid UTF-8,
// which an earlier version logged: protobuf serializes it with a complaint
// and refuses to parse it back) is skipped under every policy, kept aside
// byte for byte and reported; the records around it are read as usual
// (before: "checksum mismatch", and the server refused to start).
TEST_F(WalTest, AWholeRecordThatDoesNotParseIsSkippedKeptAndReported) {
  {
    google::protobuf::LogSilencer quiet;  // "String field ... contains invalid UTF-8 data when serializing"
    auto w = WriteAheadLog::Open(dir_);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->StartSegment(1).ok());
    for (uint64_t s = 1; s <= 6; ++s) {
      v1::WalRecord r = Record(s);
      if (s == 3 || s == 6) r.mutable_document()->set_label(std::string("bad\xff", 4));
      ASSERT_TRUE((*w)->Append(r).ok());
    }
    ASSERT_TRUE((*w)->Sync().ok());
  }
  for (CorruptionPolicy policy : {CorruptionPolicy::kRefuse, CorruptionPolicy::kSkip}) {
    std::vector<uint64_t> seqs;
    WalReplayReport rep;
    Status st = Replay(0, policy, &seqs, &rep);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 2, 4, 5}));
    ASSERT_EQ(rep.unreadable.size(), 2u);
    EXPECT_EQ(rep.unreadable[0].sequence, 3u);
    EXPECT_EQ(rep.unreadable[1].sequence, 6u);
    EXPECT_EQ(rep.last_sequence, 6u);
    EXPECT_TRUE(rep.damage.empty());
    EXPECT_EQ(rep.torn_bytes, 0u);  // the last record is not a torn tail: nothing cut
    EXPECT_THAT(rep.unreadable[0].description, HasSubstr("record 3"));
    EXPECT_THAT(ReadAll(rep.unreadable[0].report), HasSubstr("does not parse as a log record"));
    const std::string kept = ReadAll(rep.unreadable[0].kept_as);
    EXPECT_NE(ReadAll(Segment(1)).find(kept), std::string::npos);  // the frame, byte for byte
    EXPECT_NE(kept.find(std::string("bad\xff", 4)), std::string::npos);
  }
  // Above `after`: nothing to report.
  std::vector<uint64_t> seqs;
  WalReplayReport rep;
  ASSERT_TRUE(Replay(3, CorruptionPolicy::kRefuse, &seqs, &rep).ok());
  EXPECT_EQ(seqs, (std::vector<uint64_t>{4, 5}));
  EXPECT_EQ(rep.unreadable.size(), 1u);
}

TEST(WalPolicyTest, ParsesTheTwoPoliciesAndNamesTheBadOne) {
  EXPECT_EQ(*ParseCorruptionPolicy("refuse"), CorruptionPolicy::kRefuse);
  EXPECT_EQ(*ParseCorruptionPolicy("skip"), CorruptionPolicy::kSkip);
  auto bad = ParseCorruptionPolicy("ignore");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("expected refuse or skip, found 'ignore'"));
}

}  // namespace
}  // namespace tributary
