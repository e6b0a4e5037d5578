// Conformance checks for a family or loss plugin file (`tributary
// plugin-check PATH.so`): loads the file, builds a small generated schema and
// a deterministic stream the plugin accepts, and runs named checks of the
// contracts in plugin_abi.h that the host relies on but cannot see at load:
//
// Every plugin:
//   load                the file loads as a plugin (PluginRegistry::Add, then
//                       LoadPluginFile); on FAIL no other check runs
// Family, in the order reported:
//   schema              (reported only on FAIL) create() accepts one of the
//                       generated schemas (text, real, mixed features); on
//                       FAIL no other check runs
//   rho0-noop           an sdEM step with rho = 0 (score, loss weights,
//                       accumulate, commit) leaves every statistic, the block
//                       maps and the exported cache unchanged
//   cache-rebuild       (families that export a cache; SKIP otherwise) after
//                       one pass the exported cache equals the one after
//                       rebuild(), to 1e-9 relative, and rebuild with rho = 0
//                       leaves raw as is
//                       (SKIP for families trained with SEP, having no sdEM
//                       update: rho0-noop and cache-rebuild; train-sep instead)
//   snapshot-roundtrip  Save + Load keeps raw statistics, block scale/shift
//                       and every document's Score() bit for bit
//   add-class           (families with ABI 1.4 add_class, trained by sdEM) a
//                       class brought into use in place gives the model
//                       grow_classes gives: every document scored the same to
//                       1e-9 relative, and the padded model survives a
//                       snapshot round trip bit for bit
//   train-nll / train-ncll / train-hinge
//                       one pass with each built-in loss: no NaN/inf in the
//                       statistics or scores (SKIP when the family or the
//                       engine refuses the loss, with the reason); the first
//                       that passes trains the model the other checks use
//   train-sep           (only when no loss trains the family by sdEM and it
//                       has SEP hooks) one SEP pass, statistics/scores finite
//   fused-step          (families with ABI 1.7 fused_step) the fused step
//                       and accumulate + apply + commit leave the statistics
//                       and block maps the same bit for bit after every
//                       document, with each built-in loss, and at the end the
//                       exported caches and every score
//   concurrent-score    PluginCheckOptions::threads threads (4; at least 2),
//                       each with its own ScoringState, score every document
//                       exactly as one thread does
//   frozen-score        (families with ABI 1.6 freeze) the frozen table
//                       scores every document as score() does, to 1e-9
//                       relative, -inf exactly where score() gives -inf
// (When nothing trains the family, the checks that need a trained model are
// reported as SKIP, add-class left out.)
// Loss:
//   train-multinomial   one pass of the built-in multinomial family with the
//                       loss: statistics and scores finite (on FAIL the
//                       weights checks do not run)
//   weights-finite      w, c and the loss value finite on every document
//   weights-pure        the same arguments give the same results twice
//
// Nothing here writes outside a temporary directory of its own.
#ifndef TRIBUTARY_PLUGIN_CHECK_H_
#define TRIBUTARY_PLUGIN_CHECK_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tributary/plugin_registry.h"

namespace tributary {

/// The result of one check.
enum class CheckOutcome {
  kPass,  ///< the plugin meets the contract checked
  kFail,  ///< it does not; PluginCheckResult::message says how
  kSkip   ///< the check does not apply to this plugin; the message says why
};

/// "PASS", "FAIL" or "SKIP".
const char* CheckOutcomeName(CheckOutcome outcome);

/// One named check and its outcome.
struct PluginCheckResult {
  std::string name;  ///< e.g. "rho0-noop"
  /// PASS, FAIL or SKIP.
  CheckOutcome outcome = CheckOutcome::kPass;
  std::string message;  ///< why it failed or was skipped; may be empty on PASS
};

/// What CheckPlugin found for one file.
struct PluginCheckReport {
  /// The file, as given to CheckPlugin.
  std::string path;
  /// True when the file loaded as a plugin; else `checks` holds only the failed check "load".
  bool loaded = false;
  std::string kind;  ///< "family" or "loss" once loaded
  /// The plugin's name once loaded.
  std::string name;
  /// The plugin's version once loaded.
  std::string version;
  std::string schema;  ///< the generated schema used, e.g. "text: 50 terms, 3 classes"
  /// Facts reported besides the checks (e.g. requires_label, default_lambda).
  std::vector<std::pair<std::string, std::string>> info;
  std::vector<PluginCheckResult> checks;  ///< every check run, in order, "load" first

  /// Number of checks in `checks` with `outcome`.
  size_t Count(CheckOutcome outcome) const;
  /// True when the file loaded and no check failed.
  bool ok() const { return loaded && Count(CheckOutcome::kFail) == 0; }
};

/// How CheckPlugin exercises a plugin.
struct PluginCheckOptions {
  uint64_t documents = 300;  ///< length of the generated stream
  uint64_t seed = 1;         ///< of the stream, the models and the scoring states
  uint32_t threads = 4;      ///< concurrent-score
};

/// Loads `path` into `registry` (PluginRegistry::Add: the name must be free or
/// the file's own) and runs the checks of its kind. A file that does not load
/// gives a report with loaded = false and a failed check "load" carrying the
/// loader's reason. The losses of a family check (nll, ncll, hinge) and the
/// family of a loss check (multinomial) are looked up by name in `registry`.
/// REQUIRES: the process has one thread when `path` is outside the built-in
/// plugin directory (the registry probes it in a child process).
PluginCheckReport CheckPlugin(const PluginRegistry& registry, const std::string& path,
                              const PluginCheckOptions& options = {});

}  // namespace tributary

#endif  // TRIBUTARY_PLUGIN_CHECK_H_
