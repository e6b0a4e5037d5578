// Fuzz target: Model::Load (lib/include/tributary/model.h) of a snapshot
// file, with the built-in plugins the build has (the fuzz build makes the
// families multinomial, gaussian, lda-classifier, lda, multinomial-mixture
// and emsd-mixture and the losses nll, ncll and hinge; the seeds include
// classifiers grown with room for more classes, ABI 1.4 class_capacity).
//
// Input: byte 0 says what the rest is.
//   bit 0 = 0  the whole snapshot file, as found on disk (magic, version,
//              length, payload, CRC-32): the header and checksum checks
//   bit 0 = 1  the payload only (a serialized v1::ModelSnapshot), sealed
//              here with a correct header and CRC, so that the fuzzer gets
//              past the checksum to the parsing and the checks behind it
//              (plugins by name and version, schema, options, statistics
//              layout, NaN / infinite values, the family's rebuild and cache
//              import)
//
// Checks: no crash or sanitizer report; a snapshot that loads saves and loads
// again, with the same statistics, classes and log sequence.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_check.h"
#include "mem_env.h"
#include "tributary/checksum.h"
#include "tributary/model.h"
#include "tributary/plugin_registry.h"

namespace {

constexpr char kPath[] = "/fuzz/model.snap";
constexpr char kResaved[] = "/fuzz/resaved.snap";

void PutLE(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// The file Model::Save writes around `payload` (lib/src/core/snapshot.cc).
std::string Seal(const std::string& payload) {
  std::string file = "TRIBSNAP";
  PutLE(&file, 1, 4);
  PutLE(&file, payload.size(), 8);
  file += payload;
  PutLE(&file, tributary::Crc32(payload.data(), payload.size()), 4);
  return file;
}

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tributary::fuzz::QuietProtobuf();
  // Only the built-in directory: no probe process, no TRIBUTARY_PLUGIN_PATH.
  static const tributary::PluginRegistry* registry =
      new tributary::PluginRegistry({tributary::PluginRegistry::BuiltinPluginDir()}, true);
  if (size < 1) return 0;
  std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  tributary::fuzz::MemEnv env;
  env.files()[kPath] = (data[0] & 1) ? Seal(rest) : rest;

  uint64_t seq = 0;
  auto loaded = tributary::Model::Load(kPath, *registry, &env, &seq);
  FUZZ_NOTE("load: " + (loaded.ok() ? "ok" : loaded.status().ToString()));
  if (!loaded.ok()) {
    FUZZ_CHECK(!loaded.status().message().empty(), "an error without a message");
    return 0;
  }
  const tributary::Model& m = **loaded;

  tributary::SnapshotOptions opt;
  opt.env = &env;
  opt.log_sequence = seq;
  tributary::Status saved = m.Save(kResaved, opt);
  FUZZ_CHECK(saved.ok(), "a loaded model does not save: " + saved.ToString());
  uint64_t seq2 = 0;
  auto again = tributary::Model::Load(kResaved, *registry, &env, &seq2);
  FUZZ_CHECK(again.ok(), "a saved model does not load: " + again.status().ToString());
  const tributary::Model& m2 = **again;
  FUZZ_CHECK(seq2 == seq, "log sequence");
  FUZZ_CHECK(m2.schema().classes() == m.schema().classes(), "classes");
  FUZZ_CHECK(m2.stats().size() == m.stats().size(), "statistics size");
  for (uint64_t i = 0; i < m.stats().size(); ++i) {
    FUZZ_CHECK(SameBits(m2.stats().raw()[i], m.stats().raw()[i]),
               "statistic #" + std::to_string(i) + " changed by a save and load");
  }
  return 0;
}
