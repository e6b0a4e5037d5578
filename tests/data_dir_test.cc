// The data directory's one owner (data_dir.h) and the durable LiveModel that
// opens its directory through it (issue 40): the lock, checkpoints that
// survive a crash at any point, the acknowledgement mark, group commit.
#include "tributary/data_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "fault_env.h"
#include "test_util.h"
#include "tributary/input_document.h"
#include "tributary/learner.h"
#include "tributary/live_model.h"

namespace tributary {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr uint32_t kTerms = 60, kClasses = 3;

std::unique_ptr<Model> NewModel() {
  auto schema = ModelSchema::FromProto(testing::TextSchema(kTerms, kClasses));
  EXPECT_TRUE(schema.ok());
  auto m = Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss("ncll"), *schema, {}, 1);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  (*m)->learner_state().effective_size = 500;
  return std::move(m).value();
}

// Class k prefers terms t[20k, 20k + 20).
std::vector<InputDocument> Docs(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<InputDocument> docs(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t y = static_cast<uint32_t>(rng() % kClasses);
    for (int j = 0; j < 4; ++j)
      docs[i].AddTerm("t" + std::to_string(y * 20 + rng() % 20), static_cast<double>(1 + rng() % 2));
    docs[i].SetLabel("c" + std::to_string(y)).SetId("d" + std::to_string(seed) + "-" + std::to_string(i));
  }
  return docs;
}

LiveModelOptions Durable(const std::string& dir) {
  LiveModelOptions o;
  o.data_dir = dir;
  o.registry = &testing::BuiltinRegistry();
  return o;
}

std::unique_ptr<LiveModel> Open(const LiveModelOptions& o) {
  auto live = LiveModel::Create(NewModel(), o);
  EXPECT_TRUE(live.ok()) << live.status().ToString();
  return live.ok() ? std::move(live).value() : nullptr;
}

// The statistics, for "the same model" comparisons.
std::vector<double> Stats(LiveModel& live) {
  std::vector<double> out;
  EXPECT_TRUE(live.WithModel([&](Model* m) {
                    out.assign(m->stats().raw().data(), m->stats().raw().data() + m->stats().size());
                    return Status::OK();
                  })
                  .ok());
  return out;
}

// The same documents learned by a handle that never stopped.
std::vector<double> Reference(const std::vector<InputDocument>& docs, size_t n) {
  auto live = LiveModel::Create(NewModel(), LiveModelOptions{});
  EXPECT_TRUE(live.ok());
  for (size_t i = 0; i < n; ++i) EXPECT_TRUE((*live)->Learn(docs[i]).ok());
  return Stats(**live);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> Segments(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir + "/wal")) {
    if (e.path().extension() == ".log") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// One process at a time: a second opener is refused with the holder named
// (its pid and what it is), in this process or another; the lock goes with
// the holder.
TEST(DataDirTest, ASecondOpenerIsRefusedNamingTheHolder) {
  const std::string dir = testing::TempDir("data_dir_lock");
  DataDirOptions o;
  o.holder = "the first opener";
  auto first = DataDir::Open(dir, o);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = DataDir::Open(dir);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Status::Code::kIOError);
  EXPECT_THAT(second.status().message(), HasSubstr("data directory '" + dir + "' is in use"));
  EXPECT_THAT(second.status().message(), HasSubstr("process " + std::to_string(::getpid()) + " (the first opener"));
  // A durable LiveModel is refused the same way, naming the holder.
  auto live = LiveModel::Create(NewModel(), Durable(dir));
  ASSERT_FALSE(live.ok());
  EXPECT_THAT(live.status().message(), HasSubstr("the first opener"));
  // Another process (a shell's flock on the same file) is refused too.
  std::string out;
  EXPECT_EQ(testing::RunCommand("flock -n " + dir + "/LOCK true", &out, true), 1) << out;
  first->reset();
  EXPECT_EQ(testing::RunCommand("flock -n " + dir + "/LOCK true", &out, true), 0) << out;
  auto again = LiveModel::Create(NewModel(), Durable(dir));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  // ... and now the LiveModel holds it.
  auto third = DataDir::Open(dir);
  ASSERT_FALSE(third.ok());
  EXPECT_THAT(third.status().message(), HasSubstr("(LiveModel, since unix time"));
}

// LiveModel::Checkpoint used to rename model.trib before saving the new
// one: a crash between the two left only model.prev.trib, which Create
// read without ever writing model.trib again, so every later Checkpoint
// failed ("cannot keep 'model.trib'") and the log was never trimmed. Every
// state a crash can leave now recovers, and the next Checkpoint succeeds.
TEST(DataDirTest, CheckpointSucceedsAfterACrashAtAnyPointOfTheLastOne) {
  const std::vector<InputDocument> docs = Docs(400, 7);
  for (const char* crash :
       {"after the rename, before the save", "between the save and the renames", "between the two renames"}) {
    SCOPED_TRACE(crash);
    const std::string dir = testing::TempDir(std::string("data_dir_crash_") + crash[0] + crash[1] + crash[8]);
    fs::remove_all(dir);
    {
      auto live = Open(Durable(dir));
      for (size_t i = 0; i < 100; ++i) ASSERT_TRUE(live->Learn(docs[i]).ok());
      ASSERT_TRUE(live->Checkpoint().ok());
      for (size_t i = 100; i < 200; ++i) ASSERT_TRUE(live->Learn(docs[i]).ok());
    }
    // What the crash left (model.trib holds 100 documents; the log 1..200).
    const std::string snap = dir + "/model.trib", prev = dir + "/model.prev.trib", next = dir + "/model.next.trib";
    if (std::string(crash).starts_with("after the rename")) {
      fs::rename(snap, prev);  // the old order's crash
    } else if (std::string(crash).starts_with("between the save")) {
      fs::copy_file(snap, next);  // a whole new snapshot, never renamed
    } else {
      fs::rename(snap, prev);
      fs::copy_file(prev, next);
    }
    {
      auto live = Open(Durable(dir));
      ASSERT_NE(live, nullptr);
      EXPECT_EQ(live->acknowledged(), 200u);
      EXPECT_EQ(Stats(*live), Reference(docs, 200));
      EXPECT_FALSE(fs::exists(next)) << "a leftover snapshot in progress is removed";
      for (size_t i = 200; i < 300; ++i) ASSERT_TRUE(live->Learn(docs[i]).ok());
      Status st = live->Checkpoint();
      ASSERT_TRUE(st.ok()) << st.ToString();
      for (size_t i = 300; i < 400; ++i) ASSERT_TRUE(live->Learn(docs[i]).ok());
      ASSERT_TRUE(live->Checkpoint().ok());
    }
    uint64_t seq = 0;
    ASSERT_TRUE(Model::Load(snap, testing::BuiltinRegistry(), nullptr, &seq).ok());
    EXPECT_EQ(seq, 400u);
    ASSERT_TRUE(Model::Load(prev, testing::BuiltinRegistry(), nullptr, &seq).ok());
    EXPECT_EQ(seq, 300u);
    auto live = Open(Durable(dir));
    EXPECT_EQ(Stats(*live), Reference(docs, 400));
  }
}

// A snapshot that cannot be written leaves both snapshots as they were and
// the log whole; the next Checkpoint succeeds once the disk takes data.
TEST(DataDirTest, AFailedCheckpointChangesNothing) {
  const std::string dir = testing::TempDir("data_dir_failed_checkpoint");
  const std::vector<InputDocument> docs = Docs(300, 9);
  testing::FaultEnv files;
  LiveModelOptions o = Durable(dir);
  o.env = &files;
  auto live = Open(o);
  for (size_t i = 0; i < 100; ++i) ASSERT_TRUE(live->Learn(docs[i]).ok());
  ASSERT_TRUE(live->Checkpoint().ok());
  for (size_t i = 100; i < 200; ++i) ASSERT_TRUE(live->Learn(docs[i]).ok());
  ASSERT_TRUE(live->Checkpoint().ok());
  const std::string snap = ReadAll(dir + "/model.trib"), prev = ReadAll(dir + "/model.prev.trib");
  files.Add({testing::FaultEnv::Op::kAppend, "model.next.trib", 0, ENOSPC});
  for (size_t i = 200; i < 300; ++i) ASSERT_TRUE(live->Learn(docs[i]).ok());
  Status st = live->Checkpoint();
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("injected"));
  EXPECT_EQ(ReadAll(dir + "/model.trib"), snap);
  EXPECT_EQ(ReadAll(dir + "/model.prev.trib"), prev);
  files.Clear();
  ASSERT_TRUE(live->Checkpoint().ok());
  live.reset();
  uint64_t seq = 0;
  ASSERT_TRUE(Model::Load(dir + "/model.trib", testing::BuiltinRegistry(), nullptr, &seq).ok());
  EXPECT_EQ(seq, 300u);
  EXPECT_EQ(Stats(*Open(Durable(dir))), Reference(docs, 300));
}

// Versions (KeepVersion): copies of model.trib with their sidecar, the
// newest `keep` kept (a pinned one besides them until a checkpoint's
// replaced snapshot holds its restore record), listed oldest first; the log
// may drop nothing after the oldest; a copy that cannot be written leaves
// the versions as they were.
TEST(DataDirTest, VersionsKeepTheNewestAndWhatARestoreStillNeeds) {
  const std::string dir = testing::TempDir("data_dir_versions");
  fs::remove_all(dir);
  testing::FaultEnv files;
  DataDirOptions o;
  o.env = &files;
  auto d = DataDir::Open(dir, o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  auto model = NewModel();
  auto save = [&](const std::string& path, const SnapshotOptions& so) { return model->Save(path, so); };
  uint64_t replaced = 0;
  auto cut = [&](uint64_t seq) {
    ASSERT_TRUE((*d)->Checkpoint(save, seq, &replaced).ok());
    Status st = (*d)->KeepVersion(seq, "{\"n\":" + std::to_string(seq) + "}", 2);
    ASSERT_TRUE(st.ok()) << st.ToString();
  };
  auto sequences = [&] {
    std::vector<uint64_t> out;
    for (const ModelVersion& v : (*d)->Versions()) out.push_back(v.sequence);
    return out;
  };
  cut(10);
  cut(20);
  EXPECT_EQ(sequences(), (std::vector<uint64_t>{10, 20}));
  EXPECT_EQ((*d)->Versions()[1].info, "{\"n\":20}");
  EXPECT_EQ(ReadAll((*d)->VersionPath(20)), ReadAll(dir + "/model.trib"));
  EXPECT_EQ((*d)->DroppableThrough(20), 10u) << "the log keeps what follows the oldest version";
  // Version 10 is restored by the record at 25: it outlives its turn.
  (*d)->Pin(10, 25);
  cut(30);
  EXPECT_EQ(sequences(), (std::vector<uint64_t>{10, 20, 30}));
  cut(40);  // replaced: 30 (< 25? no: 30 >= 25), the pin goes at this checkpoint
  EXPECT_EQ(sequences(), (std::vector<uint64_t>{30, 40})) << "the pin ended with the checkpoint past 25";
  auto missing = (*d)->FindVersion(10);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.status().IsNotFound());
  EXPECT_THAT(missing.status().message(), HasSubstr("kept: 30, 40"));
  ASSERT_TRUE((*d)->FindVersion(40).ok());
  // A full disk while copying: the versions stay as they were, no partial file listed.
  ASSERT_TRUE((*d)->Checkpoint(save, 50, &replaced).ok());
  files.Add({testing::FaultEnv::Op::kAppend, "versions/", 1, ENOSPC});
  Status st = (*d)->KeepVersion(50, "{}", 2);
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.ToString(), HasSubstr("model version 50"));
  EXPECT_EQ(sequences(), (std::vector<uint64_t>{30, 40}));
  files.Clear();
  ASSERT_TRUE((*d)->KeepVersion(50, "{}", 2).ok());
  EXPECT_EQ(sequences(), (std::vector<uint64_t>{40, 50}));
  EXPECT_EQ((*d)->DroppableThrough(60), 40u);
  // An owner that keeps fewer now (serve --keep-versions 0 on this directory).
  ASSERT_TRUE((*d)->PruneVersions(0).ok());
  EXPECT_TRUE(sequences().empty());
  EXPECT_EQ((*d)->DroppableThrough(60), 60u) << "nothing kept: the log goes up to the snapshot";
}

// Durable LiveModel writes the acknowledgement mark (wal.h): damage to a
// record it acknowledged is reported, not taken for a torn write and dropped
// in silence (it used to write no mark: the last records' damage read as a
// torn tail). Under kRefuse Create names it; under kSkip it goes on, the
// loss said in recovery() and a .report file.
TEST(DataDirTest, DamageToAcknowledgedRecordsIsReportedNotDropped) {
  const std::string dir = testing::TempDir("data_dir_acked_tail");
  const std::vector<InputDocument> docs = Docs(50, 11);
  {
    auto live = Open(Durable(dir));
    for (const auto& d : docs) ASSERT_TRUE(live->Learn(d).ok());
  }  // no checkpoint: all 50 in the log only
  const std::vector<std::string> segments = Segments(dir);
  ASSERT_FALSE(segments.empty());
  {
    // A flipped byte in the last record (acknowledged: Learn returned OK).
    std::string bytes = ReadAll(segments.back());
    bytes[bytes.size() - 6] ^= 0x40;
    std::ofstream(segments.back(), std::ios::binary | std::ios::trunc) << bytes;
  }
  auto refused = LiveModel::Create(NewModel(), Durable(dir));
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().IsCorruption()) << refused.status().ToString();
  EXPECT_THAT(refused.status().message(), HasSubstr(fs::path(segments.back()).filename().string()));
  LiveModelOptions skip = Durable(dir);
  skip.on_corruption = CorruptionPolicy::kSkip;
  auto live = Open(skip);
  ASSERT_NE(live, nullptr);
  const DataDirRecovery& rec = live->recovery();
  EXPECT_EQ(rec.lost_records, 1u);
  ASSERT_EQ(rec.lost_ranges.size(), 1u);
  EXPECT_EQ(rec.lost_ranges[0], (std::pair<uint64_t, uint64_t>{50, 50}));
  ASSERT_FALSE(rec.reports.empty());
  for (const auto& r : rec.reports) EXPECT_TRUE(fs::exists(r)) << r;
  EXPECT_EQ(Stats(*live), Reference(docs, 49));
}

// Group commit: a batch is one fsync of the log, learned as the same
// documents one by one would be; a refused document fails the batch with
// nothing logged or learned, naming it.
TEST(DataDirTest, LearnBatchIsOneSyncAndAllOrNothingOnRefusal) {
  const std::string dir = testing::TempDir("data_dir_batch");
  const std::vector<InputDocument> docs = Docs(200, 13);
  testing::FaultEnv files;
  files.Add({testing::FaultEnv::Op::kSync, "/wal-", 0, 0, false, false, /*delay_ms=*/1});  // counts log fsyncs
  LiveModelOptions o = Durable(dir);
  o.env = &files;
  auto live = Open(o);
  std::vector<LearnResult> results;
  const int before = files.fired();
  ASSERT_TRUE(live->LearnBatch(std::span(docs).subspan(0, 100), &results).ok());
  EXPECT_EQ(files.fired() - before, 1) << "one fsync for the batch";
  EXPECT_EQ(results.size(), 100u);
  EXPECT_EQ(live->acknowledged(), 100u);
  // A document of a class the model does not have in the middle: nothing of the batch is taken.
  std::vector<InputDocument> bad(docs.begin() + 100, docs.begin() + 110);
  bad[4].SetLabel("no-such-class");
  Status st = live->LearnBatch(bad);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("document #4 (id 'd13-104')"));
  EXPECT_THAT(st.message(), HasSubstr("no-such-class"));
  EXPECT_EQ(live->acknowledged(), 100u);
  ASSERT_TRUE(live->LearnBatch(std::span(docs).subspan(100, 100)).ok());
  EXPECT_EQ(Stats(*live), Reference(docs, 200));
  live.reset();
  EXPECT_EQ(Stats(*Open(Durable(dir))), Reference(docs, 200));
}

}  // namespace
}  // namespace tributary
