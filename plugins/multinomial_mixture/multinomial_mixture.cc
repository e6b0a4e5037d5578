// Family "multinomial-mixture": a latent-class mixture of multinomials over
// unlabelled bags of words, learned online (sdEM with the nll loss: the class
// weights are the posteriors p(k | x), i.e. online EM; sdEM Table 2, first
// row). It is the multinomial naive Bayes family with the class made latent:
// the same statistics, scores, check-step and caches (plugins/multinomial),
// plus K = option `components` outputs, random symmetry-breaking initial
// counts, p(term | component) for `tributary topics` and document completion.
#define TRIB_MULTINOMIAL_MIXTURE 1
// Online EM never pushes a count below its prior, so the multinomial check-step
// change of 1.1.0 (raw >= -abar instead of >= 0) does not bind here: the
// mixture keeps its version and its snapshots.
#define TRIB_MULTINOMIAL_VERSION "1.0.0"
#include "../multinomial/multinomial.cc"
