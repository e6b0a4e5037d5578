// Fuzz target: WriteAheadLog::Replay (lib/include/tributary/wal.h) over a
// log directory whose segment files come from the input, under both
// corruption policies, then the recovery a server makes after it: a second
// replay, a new segment, an append, a third replay.
//
// Input: byte 0 picks the replay, the rest is the segments.
//   bit 0      the policy: 0 = refuse, 1 = skip
//   bits 1..4  `after`, the sequence the snapshot covers (0..15)
// The rest is split at each "\xf0WAL" (kSeparator) into segments of at most
// kMaxSegments; a segment's first byte is its first sequence (its file name,
// wal-<first>.log), the other bytes its contents.
//
// Checks: no crash or sanitizer report; records come in increasing sequence
// order, all above `after`, as many as the report says; a replay that
// succeeds leaves a log that replays again to the same records with no torn
// tail; after StartSegment(max(after, last) + 1) and one appended record,
// the log replays to the same records plus that one.
#include <algorithm>
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "mem_env.h"
#include "tributary/v1/tributary.pb.h"
#include "tributary/wal.h"

namespace {

constexpr char kDir[] = "/fuzz/wal";
constexpr std::string_view kSeparator("\xf0WAL", 4);
constexpr size_t kMaxSegments = 8;

std::string Join(const std::vector<uint64_t>& v) {
  std::string s;
  for (uint64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return "[" + s + "]";
}

// Replays the log in `env`; *ok says whether Replay succeeded.
std::vector<uint64_t> Replay(tributary::Env* env, uint64_t after, tributary::CorruptionPolicy policy,
                             tributary::WalReplayReport* report, bool* ok) {
  std::vector<uint64_t> seqs;
  auto wal = tributary::WriteAheadLog::Open(kDir, env);
  FUZZ_CHECK(wal.ok(), wal.status().ToString());
  tributary::Status st = (*wal)->Replay(
      after,
      [&](const tributary::v1::WalRecord& r) {
        FUZZ_CHECK(r.sequence() > after, "record " + std::to_string(r.sequence()) + " at or below after");
        FUZZ_CHECK(seqs.empty() || r.sequence() > seqs.back(), "records out of order");
        seqs.push_back(r.sequence());
        return tributary::Status::OK();
      },
      report, policy);
  *ok = st.ok();
  FUZZ_NOTE("replay: " + (st.ok() ? "ok" : st.ToString()) + ", records " + Join(seqs) + ", damage " +
            std::to_string(report->damage.size()) + ", torn bytes " + std::to_string(report->torn_bytes));
  if (st.ok()) {
    FUZZ_CHECK(report->records == seqs.size(), "report->records " + std::to_string(report->records));
  } else {
    FUZZ_CHECK(!st.message().empty(), "an error without a message");
  }
  return seqs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tributary::fuzz::QuietProtobuf();
  if (size < 1) return 0;
  const auto policy = (data[0] & 1) ? tributary::CorruptionPolicy::kSkip : tributary::CorruptionPolicy::kRefuse;
  const uint64_t after = (data[0] >> 1) & 15;
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);

  tributary::fuzz::MemEnv env;
  (void)env.CreateDirs(kDir);
  for (size_t n = 0; n < kMaxSegments && !rest.empty(); ++n) {
    const size_t cut = rest.find(kSeparator);
    std::string_view seg = rest.substr(0, cut);
    rest = cut == std::string_view::npos ? std::string_view() : rest.substr(cut + kSeparator.size());
    if (seg.empty()) continue;
    char name[64];
    std::snprintf(name, sizeof(name), "%s/wal-%020" PRIu64 ".log", kDir, uint64_t{static_cast<uint8_t>(seg[0])});
    env.files()[name] = std::string(seg.substr(1));
  }

  tributary::WalReplayReport first;
  bool ok = false;
  const std::vector<uint64_t> seqs = Replay(&env, after, policy, &first, &ok);
  if (!ok) return 0;

  // What a replay cut off, or kept aside, is gone from the segments: the log
  // replays the same, without a torn tail.
  tributary::WalReplayReport second;
  const std::vector<uint64_t> seqs2 = Replay(&env, after, policy, &second, &ok);
  FUZZ_CHECK(ok, "a log that replayed does not replay again");
  FUZZ_CHECK(seqs2 == seqs, "second replay " + Join(seqs2) + ", first " + Join(seqs));
  FUZZ_CHECK(second.torn_bytes == 0, "a torn tail left after the first replay cut it");

  // The server goes on with the next sequence in a new segment.
  const uint64_t next = std::max(after, first.last_sequence) + 1;
  {
    auto wal = tributary::WriteAheadLog::Open(kDir, &env);
    FUZZ_CHECK(wal.ok(), wal.status().ToString());
    tributary::WalReplayReport ignored;
    tributary::Status st = (*wal)->Replay(
        after, [](const tributary::v1::WalRecord&) { return tributary::Status::OK(); }, &ignored, policy);
    FUZZ_CHECK(st.ok(), st.ToString());
    st = (*wal)->StartSegment(next);
    FUZZ_CHECK(st.ok(), st.ToString());
    tributary::v1::WalRecord rec;
    rec.set_sequence(next);
    rec.mutable_document()->set_id("appended");
    rec.mutable_document()->add_tokens("x");
    st = (*wal)->Append(rec);
    if (st.ok()) st = (*wal)->Sync();
    FUZZ_CHECK(st.ok(), st.ToString());
  }
  tributary::WalReplayReport third;
  std::vector<uint64_t> want = seqs;
  want.push_back(next);
  const std::vector<uint64_t> seqs3 = Replay(&env, after, policy, &third, &ok);
  FUZZ_CHECK(ok, "the log does not replay after an append");
  FUZZ_CHECK(seqs3 == want, "after an append: " + Join(seqs3) + ", expected " + Join(want));
  return 0;
}
