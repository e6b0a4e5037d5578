// The measurement behind bench/COUNT_MIXTURE_TABLE3.md (run by
// bench/count_mixture_table3.sh): Table 3 of the thesis at 50 counts over 3
// terms, SEP with the engine's defaults on 5 seeds. From the environment:
// TABLE3_PER (documents per component), TABLE3_PASSES, TABLE3_FAMILY,
// TABLE3_OPTS (k=v,k=v), TABLE3_RESTARTS (R models side by side, as train
// --restarts R), TABLE3_WINDOW (passes before the best restart is kept;
// default 1), TABLE3_SEEDS (a subset of "1 2 3 4 5"), TABLE3_MODEL_SEED (the
// models' first seed; default: the corpus's), TABLE3_TRACE (print the accuracy every T passes) and TABLE3_SINGLE=1
// (Table 3's first component alone, components=1). A program, not a test:
// built with the tests, not run by ctest. Exits 1 when a step of the
// learning failed (the helpers' EXPECT_*s, reported on stdout).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "count_mixture_table3_util.h"

namespace tributary::table3 {
namespace {

void Measure() {
  auto env = [](const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return std::string(v != nullptr ? v : fallback);
  };
  const uint32_t per = static_cast<uint32_t>(std::stoul(env("TABLE3_PER", "70")));
  const uint32_t passes = static_cast<uint32_t>(std::stoul(env("TABLE3_PASSES", "20")));
  const std::string family = env("TABLE3_FAMILY", "emsd-mixture");
  Options opts;
  const std::string spec = env("TABLE3_OPTS", "");
  for (size_t p = 0; p < spec.size();) {
    size_t q = spec.find(',', p);
    if (q == std::string::npos) q = spec.size();
    const std::string kv = spec.substr(p, q - p);
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) opts.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    p = q + 1;
  }
  const uint32_t restarts = static_cast<uint32_t>(std::stoul(env("TABLE3_RESTARTS", "1")));
  const uint32_t window = static_cast<uint32_t>(std::stoul(env("TABLE3_WINDOW", "1")));  // passes
  const uint64_t model_seed = std::stoull(env("TABLE3_MODEL_SEED", "0"));                // 0: the corpus's seed
  const uint32_t trace = static_cast<uint32_t>(std::stoul(env("TABLE3_TRACE", "0")));    // passes
  const bool single = env("TABLE3_SINGLE", "0") == "1";  // one component (Table 3's first), K = 1
  const Shapes truth = single ? Shapes{kTable3[0]} : kTable3;
  std::vector<uint64_t> seeds;  // TABLE3_SEEDS: a space-separated subset of 1..5 (default all)
  const std::string seed_list = env("TABLE3_SEEDS", "1 2 3 4 5");
  for (size_t p = 0; p < seed_list.size();) {
    const size_t q = std::min(seed_list.find(' ', p), seed_list.size());
    if (q > p) seeds.push_back(std::stoull(seed_list.substr(p, q - p)));
    p = q + 1;
  }
  for (uint64_t seed : seeds) {
    const Corpus c = SampleDcm(truth, per, kLength, 100 + seed);
    const Result r = Learn(c, family.c_str(), opts, seed, passes, truth, restarts, window, model_seed, trace);
    if (restarts > 1) {
      std::printf("restarts %u: kept seed %llu (sum of log Z_i in the window:", restarts,
                  static_cast<unsigned long long>(r.kept_seed));
      for (size_t q = 0; q < r.restart_log_z.size(); ++q)
        std::printf(" seed %llu %.1f", static_cast<unsigned long long>((model_seed > 0 ? model_seed : seed) + q),
                    r.restart_log_z[q]);
      std::printf(")\n");
    }
    Print(family.c_str(), seed, r, BayesAccuracy(c, truth, LogDcm), BayesAccuracy(c, truth, LogEdcm));
  }
}

}  // namespace
}  // namespace tributary::table3

int main() {
  try {
    tributary::table3::Measure();
  } catch (const std::exception& e) {  // e.g. an unknown TABLE3_FAMILY (BuiltinFamily throws)
    std::fprintf(stderr, "count_mixture_table3_measure: %s\n", e.what());
    return 1;
  }
  return ::testing::UnitTest::GetInstance()->ad_hoc_test_result().Failed() ? 1 : 0;
}
