// ModelConfig: the settings a fresh model is made from, and the defaults
// the library chooses for those left unset. Every front end (the `tributary`
// program's train / prequential / serve, the Python module) builds its
// models through NewModel, so one document stream with the same settings
// gives the same model whichever front end learned it.
//
// Defaults (each chosen on training streams, never on a reported split;
// README "Defaults", bench/DEFAULTS_RESULTS.md):
//  - the schedule rho_t = (1 + lambda t)^-1 with the loss's own lambda
//    (sdEM §3.2); a family with latent outputs (LDA, mixtures) starts from a
//    random symmetry-breaking point that rho_0 = 1 would overwrite, so it
//    gets rho_t = (kLatentTau0 + t)^-kLatentKappa unless a schedule is given;
//  - under a loss that never decays the statistics (NCLL, hinge), a family
//    may name its own lambda and prior pseudo-count (ABI 1.6
//    gradient_lambda / gradient_prior: gaussian takes 0.01 and 10, without
//    which one learner predicts at chance on separated blobs); used for
//    what the caller left unset, the prior recorded in the model's options;
//  - n, the effective data-set size of sdEM's objective (eq. 9): the stream's
//    length when known, else kLiveDefaultN.
#ifndef TRIBUTARY_MODEL_CONFIG_H_
#define TRIBUTARY_MODEL_CONFIG_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tributary/model.h"
#include "tributary/plugin_registry.h"
#include "tributary/schema.h"
#include "tributary/status.h"
#include "tributary/step_schedule.h"
#include "tributary/v1/tributary.pb.h"  // v1::Schema: NewModel and TextStreamSchema take and return it

namespace tributary {

namespace v1 {
class Schema;
}

/// The step schedule of latent families when none is given:
/// rho_t = (tau0 + t)^-kappa (online EM, Cappe & Moulines 2009; Hoffman et
/// al. 2010 use the same form).
inline constexpr double kLatentTau0 = 256.0;
/// The exponent kappa of that schedule (see kLatentTau0).
inline constexpr double kLatentKappa = 0.7;
/// The effective data-set size n of a stream whose length nobody knows (a
/// live pipe, the server, a Python learn_one loop) when n is not given.
/// Chosen by prequential accuracy on the training streams of two real
/// corpora converted live (fortunes 12,130 and bible 5,364 documents, NCLL,
/// n in 1e3..1e6: 1e4 is within 1 point of the best on both; README
/// "Streaming in").
inline constexpr double kLiveDefaultN = 10000.0;

/// The settings NewModel makes a fresh model from; a default-constructed config is a valid one (multinomial
/// family, NCLL loss, the library's defaults described above).
struct ModelConfig {
  std::string family = "multinomial";  ///< family plugin name or path (PluginRegistry::Find)
  std::string loss = "ncll";           ///< loss plugin name or path (PluginRegistry::Find)
  Options family_options;              ///< e.g. {"prior", "3"}, {"topics", "20"}
  Options loss_options;                ///< e.g. {"margin", "10"}
  /// (1 + lambda t)^-1 (kInverseLinear), (tau0 + t)^-kappa (kPolynomial) or
  /// rho (kConstant); ParseScheduleKind reads the names flags use.
  StepSchedule::Kind schedule = StepSchedule::Kind::kInverseLinear;
  /// True when the caller chose the schedule (any of the fields below): a
  /// latent family then keeps it instead of its own default.
  bool schedule_given = false;
  double lambda = -1;  ///< < 0: the family's gradient_lambda under a gradient loss, else the loss's default_lambda
  /// kPolynomial: tau0 of (tau0 + t)^-kappa, finite and >= 1 (StepSchedule::tau0).
  double tau0 = 1.0, kappa = 0.7, rho = 0.01;
  /// \var kappa
  /// "poly": the exponent kappa, in (0, 1] (StepSchedule::kappa).
  /// \var rho
  /// "constant": the step, in (0, 1] (StepSchedule::rho).

  /// The effective data-set size n of sdEM: 0 for the stream's length (or
  /// kLiveDefaultN), else finite in [1, kMaxEffectiveSize] (NewModel refuses
  /// anything else: a NaN or a negative was replaced by the default, and an
  /// infinite n made every prediction 0).
  double n = 0;
  uint64_t seed = 1;  ///< seeds the family's random initial statistics (latent families); same seed, same model
};

/// The largest effective data-set size n: far beyond any stream, and small
/// enough that the statistics sdEM scales by n stay finite.
inline constexpr double kMaxEffectiveSize = 1e12;

/// The step schedule a flag or option names ("inverse", "poly", "constant"),
/// for ModelConfig::schedule. Errors: any other name, quoted, with the three
/// expected.
Result<StepSchedule::Kind> ParseScheduleKind(const std::string& name);

/// A fresh model (statistics at the prior; schedule, n and loss set) for
/// `schema` (a stream header's, validated here), from a stream of
/// `stream_documents` documents (0: unknown).
/// `source` (may be empty) names the stream in the errors that may be about
/// it (the schema, a plugin refusing the schema or an option): "'<source>':
/// ...". Errors of the settings alone (an unknown plugin, a bad schedule)
/// name the setting.
Result<std::unique_ptr<Model>> NewModel(const ModelConfig& config, const PluginRegistry& registry,
                                        const v1::Schema& schema, uint64_t stream_documents,
                                        const std::string& source = "");
/// The same for a schema already made (DocumentReader::schema(): the model
/// shares its vocabulary, no term is copied); its error, if it is one, is
/// reported as the schema's above, after the settings'.
Result<std::unique_ptr<Model>> NewModel(const ModelConfig& config, const PluginRegistry& registry,
                                        const Result<ModelSchema>& schema, uint64_t stream_documents,
                                        const std::string& source = "");

/// Hashed ids of raw text when no dimension is given and the vocabulary
/// cannot grow (a live tsv conversion, a family without add_terms): 2^18
/// buckets (a vocabulary of ~20,000 words collides in ~4 % of its terms),
/// 2 MiB of statistics per class for the multinomial family.
inline constexpr uint64_t kLiveHashedDim = uint64_t{1} << 18;

/// The schema of raw text for a new model of `family` when no vocabulary is
/// given: an open vocabulary (terms added as documents bring them) when the
/// family can add terms (ABI add_terms) and `hashed_dim` is 0, else terms
/// hashed into `hashed_dim` ids (0: kLiveHashedDim); the classes `classes`
/// and, when `open_classes`, any class a labelled document names. What
/// `serve` without --schema, Python's text models and LiveClassifier start
/// from. `family` may be null (hashed).
v1::Schema DefaultTextSchema(const Plugin* family, uint64_t hashed_dim = 0,
                             const std::vector<std::string>& classes = {}, bool open_classes = true);

/// The schema of a stream of raw text: an open vocabulary (terms are added as
/// documents bring them), the classes `classes` and, when `open_classes`,
/// any class a labelled document names. What a program that learns from text
/// (InputDocument::AddText, live_model.h) gives NewModel without building the
/// wire format's messages itself.
v1::Schema TextStreamSchema(const std::vector<std::string>& classes = {}, bool open_classes = true);

}  // namespace tributary

#endif  // TRIBUTARY_MODEL_CONFIG_H_
