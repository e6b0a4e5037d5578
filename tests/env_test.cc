// The file-system seam: Env::Default() itself, and faults injected through it
// into snapshots and document streams (the write-ahead log's are in
// wal_test.cc). Each fault must give an error naming the file, and must
// leave what was durable before untouched.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "fault_env.h"
#include "test_util.h"
#include "tributary/stream_io.h"

namespace tributary {
namespace {

using testing::FaultEnv;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::unique_ptr<Model> SmallModel(uint32_t vocab = 20) {
  auto schema = ModelSchema::FromProto(testing::TextSchema(vocab, 2));
  auto m = Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss("nll"), *schema, {});
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

std::vector<std::string> Children(const std::string& dir) {
  std::vector<std::string> names;
  EXPECT_TRUE(Env::Default()->GetChildren(dir, &names).ok());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(EnvTest, DefaultEnvRoundTripsAndNamesMissingFiles) {
  Env* env = Env::Default();
  const std::string dir = testing::TempDir("env") + "/a/b";
  ASSERT_TRUE(env->CreateDirs(dir).ok());
  const std::string path = dir + "/f";
  std::string data(300000, 'x');
  data[123456] = '\0';
  ASSERT_TRUE(env->WriteFileAtomically(path, data).ok());
  std::string back;
  ASSERT_TRUE(env->ReadFileToString(path, &back).ok());
  EXPECT_EQ(back, data);
  EXPECT_EQ(*env->FileSize(path), data.size());
  EXPECT_EQ(Children(dir), std::vector<std::string>{"f"});  // no temporary left behind
  Status missing = env->ReadFileToString(dir + "/nope", &back);
  EXPECT_TRUE(missing.IsNotFound()) << missing.ToString();
  EXPECT_THAT(missing.message(), HasSubstr(dir + "/nope"));
  ASSERT_TRUE(env->RenameFile(path, dir + "/g").ok());
  EXPECT_FALSE(env->FileExists(path));
  EXPECT_TRUE(env->RemoveFile(dir + "/g").ok());
  EXPECT_TRUE(env->RemoveFile(dir + "/g").IsNotFound());
}

// A file written from pieces (a snapshot's head, the model's statistics
// where they lie, its tail) is their concatenation, empty pieces and more
// pieces than one writev takes included; the pieces count as one write.
// WriteFileAtomically renames a new file over its path: anything but a
// regular file or a new path is refused and left as it was (the probe ran
// `train --out /dev/null` as root and /dev/null became a regular file; a
// FIFO of the user's own is replaced the same way without root).
TEST(EnvTest, AtomicWritesRefuseToReplaceAnythingButARegularFile) {
  Env* env = Env::Default();
  const std::string dir = testing::TempDir("env_kinds");
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(env->GetFileKind(fifo), Env::FileKind::kOther);
  EXPECT_EQ(env->GetFileKind("/dev/null"), Env::FileKind::kOther);
  EXPECT_EQ(env->GetFileKind(dir), Env::FileKind::kDirectory);
  EXPECT_EQ(env->GetFileKind(dir + "/none"), Env::FileKind::kNone);
  for (const std::string& path : {fifo, std::string("/dev/null"), dir}) {
    Status st = env->WriteFileAtomically(path, "model bytes");
    ASSERT_EQ(st.code(), Status::Code::kInvalidArgument) << path << ": " << st.ToString();
    EXPECT_THAT(st.message(), HasSubstr("expected a regular file or a new path")) << path;
    EXPECT_THAT(st.message(), HasSubstr(path));
  }
  EXPECT_EQ(env->GetFileKind(fifo), Env::FileKind::kOther);  // still the FIFO
  EXPECT_EQ(env->GetFileKind("/dev/null"), Env::FileKind::kOther);
  std::vector<std::string> names;
  ASSERT_TRUE(env->GetChildren(dir, &names).ok());
  EXPECT_EQ(names, std::vector<std::string>{"fifo"});  // no temporary left
  // A regular file and a new path are written as before.
  ASSERT_TRUE(env->WriteFileAtomically(dir + "/new", "a").ok());
  EXPECT_EQ(env->GetFileKind(dir + "/new"), Env::FileKind::kRegular);
  ASSERT_TRUE(env->WriteFileAtomically(dir + "/new", "b").ok());
  std::string back;
  ASSERT_TRUE(env->ReadFileToString(dir + "/new", &back).ok());
  EXPECT_EQ(back, "b");
}

TEST(EnvTest, PiecesAreWrittenAsTheirConcatenation) {
  Env* env = Env::Default();
  const std::string dir = testing::TempDir("env_pieces");
  for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{16}, size_t{17}, size_t{40}}) {
    std::vector<std::string> data;
    std::vector<std::string_view> pieces;
    std::string all;
    for (size_t i = 0; i < n; ++i) {
      data.push_back(i % 3 == 1 ? std::string() : std::string(1000 * i + 7, static_cast<char>('a' + i % 26)));
    }
    for (const auto& d : data) {
      pieces.push_back(d);
      all += d;
    }
    const std::string path = dir + "/f" + std::to_string(n);
    ASSERT_TRUE(env->WriteFileAtomically(path, pieces).ok()) << n;
    std::string back;
    ASSERT_TRUE(env->ReadFileToString(path, &back).ok());
    EXPECT_EQ(back, all) << n << " pieces";
  }
  // Through a wrapper that fails the second write: the first (all of a
  // file's pieces) succeeds.
  FaultEnv faults;
  faults.Add({FaultEnv::Op::kAppend, "g", /*after=*/1, ENOSPC});
  const std::string a(5000, 'a'), b(3, 'b'), c(70000, 'c');
  const std::string_view three[] = {a, b, c};
  ASSERT_TRUE(faults.WriteFileAtomically(dir + "/g1", three).ok());
  std::string back;
  ASSERT_TRUE(env->ReadFileToString(dir + "/g1", &back).ok());
  EXPECT_EQ(back, a + b + c);
  Status st = faults.WriteFileAtomically(dir + "/g2", three);
  EXPECT_THAT(st.message(), HasSubstr("No space left on device"));
  EXPECT_FALSE(env->FileExists(dir + "/g2"));
}

// A snapshot whose fsync or rename fails: the error names the operation and
// the file, the previous snapshot is still there and loads, and no
// temporary file is left in the directory.
TEST(EnvTest, FailedSnapshotWriteKeepsThePreviousSnapshot) {
  const std::string dir = testing::TempDir("env_snap");
  const std::string path = dir + "/model.trib";
  auto old_model = SmallModel();
  ASSERT_TRUE(old_model->Save(path, SnapshotOptions{nullptr, 7}).ok());
  std::string before;
  ASSERT_TRUE(Env::Default()->ReadFileToString(path, &before).ok());

  auto bigger = SmallModel(40);
  for (auto op : {FaultEnv::Op::kSync, FaultEnv::Op::kRename, FaultEnv::Op::kAppend, FaultEnv::Op::kCreate}) {
    FaultEnv env;
    env.Add({op, "model.trib", 0, ENOSPC, op == FaultEnv::Op::kAppend});
    Status st = bigger->Save(path, SnapshotOptions{&env, 9});
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(env.fired(), 1);
    EXPECT_THAT(st.message(), HasSubstr("No space left on device"));
    EXPECT_THAT(st.message(), HasSubstr(path));
    std::string after;
    ASSERT_TRUE(Env::Default()->ReadFileToString(path, &after).ok());
    EXPECT_EQ(after, before) << "the previous snapshot changed";
    EXPECT_EQ(Children(dir), std::vector<std::string>{"model.trib"});
  }
  uint64_t seq = 0;
  auto loaded = Model::Load(path, testing::BuiltinRegistry(), nullptr, &seq);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ((*loaded)->schema().vocabulary().size(), 20u);
  EXPECT_EQ(seq, 7u);
}

TEST(EnvTest, SnapshotReadErrorIsAnIOErrorNamingTheFile) {
  const std::string path = testing::TempDir("env_snap_read") + "/model.trib";
  ASSERT_TRUE(SmallModel()->Save(path).ok());
  FaultEnv env;
  env.Add({FaultEnv::Op::kRead, "model.trib", 0, EIO});
  auto r = Model::Load(path, testing::BuiltinRegistry(), &env);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kIOError) << r.status().ToString();
  EXPECT_THAT(r.status().message(), HasSubstr(path));
  EXPECT_THAT(r.status().message(), HasSubstr("Input/output error"));
  // The log sequence survives a round trip through the Env as well.
  uint64_t seq = 1;
  ASSERT_TRUE(Model::Load(path, testing::BuiltinRegistry(), Env::Default(), &seq).ok());
  EXPECT_EQ(seq, 0u);
}

v1::Document Doc(uint32_t term) {
  v1::Document d;
  d.set_label("c0");
  d.add_term_ids(term);
  d.add_term_counts(1);
  return d;
}

// A device that fails in the middle of a stream: the documents before are
// read, then the error names the file; a full disk while writing a stream is
// reported by Write or Close with the file's name, never silently.
TEST(EnvTest, StreamReadAndWriteFaultsNameTheFile) {
  const std::string path = testing::TempDir("env_stream") + "/docs.pb";
  {
    auto w = DocumentWriter::Create(path, NewStreamHeader());
    ASSERT_TRUE(w.ok());
    for (uint32_t i = 0; i < 20000; ++i) ASSERT_TRUE((*w)->Write(Doc(i % 7)).ok());
    ASSERT_TRUE((*w)->Close().ok());
  }
  FaultEnv env;
  env.Add({FaultEnv::Op::kRead, "docs.pb", 1, EIO});  // the first 64 KiB read succeeds
  auto r = DocumentReader::Open(path, kDefaultMaxFrameBytes, &env);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  v1::Document d;
  bool eof = false;
  uint64_t read = 0;
  Status st;
  while ((st = (*r)->Next(&d, &eof)).ok() && !eof) ++read;
  EXPECT_GT(read, 100u);
  EXPECT_LT(read, 20000u);
  EXPECT_EQ(st.code(), Status::Code::kIOError) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr(path));

  FaultEnv full;
  full.Add({FaultEnv::Op::kAppend, "out.pb", 2, ENOSPC});
  const std::string out = testing::TempDir("env_stream_out") + "/out.pb";
  auto w = DocumentWriter::Create(out, NewStreamHeader(), &full);
  ASSERT_TRUE(w.ok());
  Status wst;
  for (uint32_t i = 0; i < 100000 && wst.ok(); ++i) wst = (*w)->Write(Doc(i % 7));
  Status cst = (*w)->Close();
  Status first = wst.ok() ? cst : wst;
  ASSERT_FALSE(first.ok());
  EXPECT_THAT(first.message(), HasSubstr(out));
  EXPECT_THAT(first.message(), HasSubstr("No space left on device"));
}

// Two streams concatenated: the second header is not a document (it used to
// parse as one, its magic read as the id). And a frame length of 2^32 + n is
// not n: protobuf's 32-bit varint reader drops the high bits.
TEST(StreamIoTest, ASecondHeaderAndWrappedFrameLengthsAreRefused) {
  const std::string dir = testing::TempDir("stream_bad");
  const std::string one = dir + "/one.pb";
  {
    auto w = DocumentWriter::Create(one, NewStreamHeader());
    ASSERT_TRUE(w.ok());
    for (uint32_t i = 0; i < 3; ++i) ASSERT_TRUE((*w)->Write(Doc(i)).ok());
    ASSERT_TRUE((*w)->Close().ok());
  }
  std::string bytes;
  ASSERT_TRUE(Env::Default()->ReadFileToString(one, &bytes).ok());
  const std::string two = dir + "/two.pb";
  ASSERT_TRUE(Env::Default()->WriteFileAtomically(two, bytes + bytes).ok());
  auto r = DocumentReader::Open(two);
  ASSERT_TRUE(r.ok());
  v1::Document d;
  bool eof = false;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*r)->Next(&d, &eof).ok());
  Status st = (*r)->Next(&d, &eof);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("document #3"));
  EXPECT_THAT(st.message(), HasSubstr("second stream header"));
  EXPECT_TRUE((*r)->last_error_recoverable());
  // The stream goes on after it (what --skip-bad does).
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE((*r)->Next(&d, &eof).ok());
    ASSERT_FALSE(eof);
  }

  // A header frame, then a frame whose length varint says 2^32 + 5 followed
  // by 5 bytes: must be refused as over the limit, not read as 5 bytes.
  std::string header;
  NewStreamHeader().SerializeToString(&header);
  std::string wrapped(1, static_cast<char>(header.size()));
  wrapped += header;
  wrapped += std::string("\x85\x80\x80\x80\x10", 5);  // varint of 2^32 + 5
  wrapped += std::string("\x0a\x01\x78\x12\x00", 5);
  const std::string wp = dir + "/wrapped.pb";
  ASSERT_TRUE(Env::Default()->WriteFileAtomically(wp, wrapped).ok());
  auto rw = DocumentReader::Open(wp);
  ASSERT_TRUE(rw.ok()) << rw.status().ToString();
  st = (*rw)->Next(&d, &eof);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("declares 4294967301 bytes, over the limit"));
}

}  // namespace
}  // namespace tributary
