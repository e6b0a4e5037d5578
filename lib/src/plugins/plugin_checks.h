// The checks behind CheckPlugin (tributary/plugin_check.h, which lists them
// by name), one function per check, and the harness they share: the report
// they write to, the generated schemas and streams, the comparisons and one
// pass of training.
//
//   plugin_check.cc          CheckPlugin: load, then the family's checks in
//                            order (train-<loss> and train-sep pick the
//                            trained model the others use)
//   plugin_check_harness.cc  the harness (below)
//   plugin_check_step.cc     the sdEM step's contracts: rho0-noop,
//                            cache-rebuild, fused-step
//   plugin_check_model.cc    a trained model's contracts: snapshot-roundtrip,
//                            add-class, concurrent-score, frozen-score
//   plugin_check_loss.cc     a loss plugin's checks: train-multinomial,
//                            weights-finite, weights-pure
#ifndef TRIBUTARY_SRC_PLUGIN_CHECKS_H_
#define TRIBUTARY_SRC_PLUGIN_CHECKS_H_

#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tributary/document.h"
#include "tributary/model.h"
#include "tributary/plugin_check.h"
#include "tributary/plugin_registry.h"
#include "tributary/schema.h"
#include "tributary/status.h"

namespace tributary::plugin_check {

// Shortest text that reads back as the same double.
std::string Num(double x);

// Equal as the checks mean it: the same value (NaN equals NaN; +0 equals -0).
inline bool Same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

struct Checks {
  PluginCheckReport* report;
  void Add(const std::string& name, CheckOutcome outcome, std::string message = "") {
    report->checks.push_back(PluginCheckResult{name, outcome, std::move(message)});
  }
  void Pass(const std::string& name) { Add(name, CheckOutcome::kPass); }
  void Fail(const std::string& name, std::string message) { Add(name, CheckOutcome::kFail, std::move(message)); }
  void Skip(const std::string& name, std::string message) { Add(name, CheckOutcome::kSkip, std::move(message)); }
};

// ---- Generated schemas and streams.

struct GeneratedSchema {
  std::string description;
  ModelSchema schema;
};

// Schema `which` (0: text, 1: real, 2: mixed features), 3 classes.
Result<GeneratedSchema> MakeSchema(int which);

// A deterministic labelled stream matching `schema`: class k prefers its own
// slice of the vocabulary, shifts the reals by k and favours category k.
std::vector<DocumentBuffer> MakeStream(const ModelSchema& schema, uint64_t count, uint64_t seed);

// ---- Model helpers.

// The family's exported cache (export_cache).
Result<std::vector<double>> ExportCache(const Model& m);

// True when the family exports a cache.
bool HasCache(const Model& m);

// The first difference between two arrays, "" when equal (exactly, or to
// `rel` relative when rel > 0).
std::string Diff(const std::string& what, std::span<const double> a, std::span<const double> b, double rel = 0);

// The first difference between two block maps, "" when equal.
std::string DiffBlocks(const std::vector<trib_block>& a, const std::vector<trib_block>& b);

// The document as the learner hands it to a family with latent outputs.
trib_document ViewFor(const Model& m, const DocumentBuffer& d);

// Every document's scores with one fresh scoring state (seeded `seed`), in order.
Result<std::vector<double>> ScoreAll(const Model& m, const std::vector<DocumentBuffer>& docs, uint64_t seed);

// "" when every statistic (raw and mu) is finite.
std::string NonFiniteStats(const Model& m);

// "" when every score is finite or -inf (what the ABI allows).
std::string BadScores(const std::vector<double>& scores, uint32_t K, const std::vector<DocumentBuffer>& docs);

// Trains `m` over `docs` once with sdEM. `refused` is set when the engine
// refuses the model's loss, or the family refuses it on the first document
// (an invalid argument), rather than failing while learning.
Status TrainOnePass(Model* m, const std::vector<DocumentBuffer>& docs, uint64_t seed, bool* refused);

// A fresh temporary directory, removed with everything in it on destruction.
struct TempDir {
  std::string path;
  TempDir();
  ~TempDir();
};

// ---- The checks (plugin_check.h says what each one checks).

// rho0-noop on `m` (changed only if the family breaks the contract).
void CheckRho0(Checks& checks, Model* m, const std::vector<DocumentBuffer>& docs, uint64_t seed);
// cache-rebuild on a copy of `trained`.
void CheckCacheRebuild(Checks& checks, const Model& trained);
// fused-step, on models of its own.
void CheckFusedStep(Checks& checks, const PluginRegistry& registry, std::shared_ptr<const Plugin> family,
                    const ModelSchema& schema, const std::vector<DocumentBuffer>& docs, uint64_t seed);

// snapshot-roundtrip.
void CheckSnapshot(Checks& checks, const PluginRegistry& registry, const Model& m,
                   const std::vector<DocumentBuffer>& docs, uint64_t seed);
// add-class, on models of its own trained with `loss_name`.
void CheckAddClass(Checks& checks, const PluginRegistry& registry, const std::shared_ptr<const Plugin>& family,
                   const std::string& loss_name, const ModelSchema& schema, const std::vector<DocumentBuffer>& docs,
                   uint64_t seed);
// concurrent-score.
void CheckConcurrentScore(Checks& checks, const Model& m, const std::vector<DocumentBuffer>& docs, uint64_t seed,
                          uint32_t threads);
// frozen-score.
void CheckFrozenScore(Checks& checks, const Model& m, const std::vector<DocumentBuffer>& docs, uint64_t seed);

// Every check of a loss plugin, in order.
void CheckLoss(const PluginRegistry& registry, std::shared_ptr<const Plugin> loss, const PluginCheckOptions& options,
               PluginCheckReport* report);

}  // namespace tributary::plugin_check

#endif  // TRIBUTARY_SRC_PLUGIN_CHECKS_H_
