// The implementation shared by the families "multinomial" (multinomial naive
// Bayes over bags of words, Variant::kNaiveBayes) and "multinomial-mixture"
// (the same with the class made latent, Variant::kMixture); compiled into
// each plugin (and into the test fixtures that wrap the family), whose own .cc
// only names the plugin, its version and its option table, and calls Init.
// The implementation is the files multinomial_*.cc of this directory (their
// map: multinomial_model.h).
//
// Statistics (sdEM Appendix A, Algorithms 2-4), two blocks:
//   block 0  C[k]      prior class counts,        nu = 0, abar = 1
//   block 1  N[w][k]   word counts per class,     nu = 0, abar = alpha
// laid out term-major (N[w][0..K-1] contiguous) so a document touches
// |d| runs of K doubles. theta(mu) is plain normalisation:
//   p(k) = C[k] / sum_j C[j],   p(w | k) = N[w][k] / M[k],  M[k] = sum_w N[w][k].
// The totals M[k] are kept incrementally in raw space (R[k] = sum_w raw),
// so M[k] = scale * R[k] + shift * alpha * |W| costs O(1) after any step.
// The Dirichlet prior in this parametrisation has nu = 0 (Appendix A), so
// NCLL and hinge never decay the counts. The check-step is Algorithm 2's
// (lines 15 and 22): N = max(N, 0), where N is the count without the prior
// mass gamma = alpha sum rho/n added by the steps, and Algorithm 3 scores with
// N + gamma. N starts at alpha (line 1), so discriminative steps may take a
// word's initial pseudo-count away entirely; mu = N + gamma alpha stays > 0.
// In the engine's lazy map N = scale * (raw + abar) (model.h), so the clamp is
// raw >= -abar for both blocks (the class block's abar is class_prior: the
// paper adds the word prior's gamma to C too, the same value when both are 1).
// Tests: tests/sdem_paper_reference_test.cc against a literal Algorithm 2-4.
#ifndef TRIBUTARY_PLUGINS_MULTINOMIAL_CORE_H_
#define TRIBUTARY_PLUGINS_MULTINOMIAL_CORE_H_

#include "tributary/plugin_sdk.h"

namespace tributary::multinomial {

// What the two families differ by: where the classes come from (the schema's
// labels, or K = option components latent ones with random initial counts),
// the option table and the vtable entries (grow_classes; or init_stats,
// outputs, component_terms and completion).
enum class Variant { kNaiveBayes, kMixture };

namespace option {
// The options (`tributary plugins --options multinomial`).
inline constexpr trib_option_spec kPrior =
    sdk::Number("prior", "1", "Dirichlet pseudo-count alpha of every word; laplace = 1, log = ln |W| (the paper's P2)")
        .Above(0)
        .Words("laplace|log");
inline constexpr trib_option_spec kClassPrior = sdk::Number("class_prior", "1", "pseudo-count of every class").Above(0);
inline constexpr trib_option_spec kFloor =
    sdk::Choice("floor", "paper|prior", "paper",
                "check-step: paper = Algorithm 2's N >= 0; prior = 1.0.0's, never below the initial pseudo-count");
}  // namespace option

// Option table of "multinomial" (Variant::kNaiveBayes).
inline constexpr trib_option_spec kNaiveBayesOptions[] = {option::kPrior, option::kClassPrior, option::kFloor, {}};

// Option table of "multinomial-mixture" (Variant::kMixture).
inline constexpr trib_option_spec kMixtureOptions[] = {
    sdk::Integer("components", "2", "number of mixture components K").AtLeast(1).AtMost(1e6),
    sdk::Alias("topics", "components"),
    option::kPrior,
    option::kClassPrior,
    sdk::Number("init_scale", "1", "random initial counts per term, in units of alpha").AtLeast(0),
    option::kFloor,
    {},
};

// Fills `out` (after BeginFamilyVtable's ABI check) with the family of the
// given variant. Returns TRIB_OK, or the check's error in `err`.
int Init(Variant variant, const trib_host_api* host, trib_plugin_vtable* out, trib_error* err);

}  // namespace tributary::multinomial

#endif  // TRIBUTARY_PLUGINS_MULTINOMIAL_CORE_H_
