// The option tables of emsd-mixture and edcm-mixture (constexpr, so that
// TRIBUTARY_DEFINE_PLUGIN_OPTIONS can check them at compile time).
#ifndef TRIBUTARY_PLUGINS_COUNT_MIXTURE_OPTIONS_H_
#define TRIBUTARY_PLUGINS_COUNT_MIXTURE_OPTIONS_H_

#include "tributary/plugin_sdk.h"

namespace tributary::count_mixture {

// The options (`tributary plugins --options emsd-mixture`); see the header
// comment. edcm-mixture has the same without the scale's.
namespace option {
inline constexpr trib_option_spec kComponents =
    sdk::Integer("components", "2", "number of mixture components K").AtLeast(1).AtMost(100000);
inline constexpr trib_option_spec kSamples =
    sdk::Integer("samples", "32 (100 with integration=montecarlo)", "quadrature points / Monte Carlo draws for s")
        .AtLeast(2)
        .AtMost(1000000)
        .Derived();
inline constexpr trib_option_spec kPiPrior =
    sdk::Number("pi_prior", "1", "Dirichlet prior of the mixing weights").Above(0).AtMost(1e6);
inline constexpr trib_option_spec kPrior = sdk::Alias("prior", "pi_prior");
inline constexpr trib_option_spec kShapeMean =
    sdk::Number("shape_prior_mean", "0.1", "prior mean of the shapes").Above(0).AtMost(1e6);
inline constexpr trib_option_spec kShapeVariance =
    sdk::Number("shape_prior_variance", "shape_prior_mean", "prior variance of the shapes")
        .Above(0)
        .AtMost(1e6)
        .Derived();
inline constexpr trib_option_spec kJitter =
    sdk::Number("init_jitter", "0.5", "log-uniform jitter of the prior means that breaks symmetry")
        .AtLeast(0)
        .AtMost(1e6);
inline constexpr trib_option_spec kRefresh =
    sdk::Integer("refresh", "1000", "recompute the totals every max(refresh, V) updates; 0: only when needed")
        .AtLeast(0)
        .AtMost(1e12);
inline constexpr trib_option_spec kBurnIn =
    sdk::Integer("burn_in", "auto", "updates with responsibilities 1/K; auto: min(100, floor(N / 10))")
        .AtLeast(0)
        .AtMost(1e12)
        .Words("auto");
inline constexpr trib_option_spec kAbsent =
    sdk::Choice("absent", "propagate|ignore", "propagate", "the evidence of absent terms: propagate or ignore");
inline constexpr trib_option_spec kIntegration =
    sdk::Choice("integration", "quadrature|montecarlo", "quadrature", "how moment matching integrates over s");
// Version 1.3.0 (bench/COUNT_MIXTURE_TABLE3.md): the component likelihood
// (the thesis's exponential-family approximation or the exact DCM, eq. 13)
// and the pruning of Algorithm 1, line 13.
inline constexpr trib_option_spec kEdcmLikelihood = sdk::Choice(
    "likelihood", "edcm|dcm", "edcm", "component likelihood: edcm (eq. 14, the thesis's) or dcm (exact, eq. 13)");
inline constexpr trib_option_spec kEmsdLikelihood =
    sdk::Choice("likelihood", "emsd|dcm", "emsd",
                "component likelihood: emsd (eq. 45, the thesis's) or dcm (exact DCM, eq. 13, times the scale's term)");
inline constexpr trib_option_spec kInit =
    sdk::Choice("init", "tied|kmeans", "tied",
                "burn-in responsibilities: tied (1/K) or kmeans (the cluster of an online spherical K-means)");
inline constexpr trib_option_spec kPrune =
    sdk::Number("prune", "0.1", "score: ignore components with E[pi_k] < prune / K (Algorithm 1, line 13); 0: none")
        .AtLeast(0)
        .AtMost(1);
// Version 1.4.0: the revival of dead components (count_mixture.h, "Revival").
inline constexpr trib_option_spec kRevive =
    sdk::Choice("revive", "split|off", "split",
                "SEP: once a pass, a component with E[pi] < prune / K takes half of the heaviest one (split)");
}  // namespace option

inline constexpr trib_option_spec kEdcmOptions[] = {
    option::kComponents, option::kSamples,       option::kPiPrior,     option::kPrior,
    option::kShapeMean,  option::kShapeVariance, option::kJitter,      option::kRefresh,
    option::kBurnIn,     option::kAbsent,        option::kIntegration, option::kEdcmLikelihood,
    option::kPrune,      option::kInit,          option::kRevive,      {},
};
inline constexpr trib_option_spec kEmsdOptions[] = {
    option::kComponents,
    option::kSamples,
    option::kPiPrior,
    option::kPrior,
    option::kShapeMean,
    option::kShapeVariance,
    option::kJitter,
    option::kRefresh,
    option::kBurnIn,
    option::kAbsent,
    option::kIntegration,
    option::kEmsdLikelihood,
    option::kPrune,
    option::kInit,
    option::kRevive,
    sdk::Choice("scale", "fixed|learn", "fixed", "fixed: b = 1 (EDCM with EMSD's names); learn: Gamma sites on b"),
    sdk::Number("scale_prior_mean", "1", "scale=learn: prior mean of b").Above(0).AtMost(1e6),
    sdk::Number("scale_prior_variance", "0.01", "scale=learn: prior variance of b").Above(0).AtMost(1e6),
    {},
};

}  // namespace tributary::count_mixture

#endif  // TRIBUTARY_PLUGINS_COUNT_MIXTURE_OPTIONS_H_
