/*
 * Tributary SEP / EP / ADF hooks (plain C, plugin ABI 1.2; move: 1.9).
 *
 * A family that can be trained by expectation propagation points
 * trib_family_vtable.sep at a static `trib_sep_hooks` table. The rules of
 * plugin_abi.h apply: the table starts with its own size and only grows at
 * its end (the host reads a field only if struct_size covers it), no C++
 * exception or STL type crosses, every fallible call returns TRIB_OK or an
 * error code with a message in the host's trib_error.
 *
 * The math (thesis §1.4-1.5; docs/design.md §5). The approximate posterior q(theta)
 * is in an exponential family with natural parameters lambda in R^P. The
 * engine keeps, in the model's statistics entries [0, P) (in mu form,
 * mu[i] = scale * raw[i] + shift * alpha_bar of its block: the family's blocks there have
 * nu = 0; alpha_bar is 0, or 1 for blocks that take block-uniform sites, see
 * trib_sep_outcome), a vector mu such that
 *
 *     lambda = lambda0 + N * mu                                   (eq. 8, 50-54)
 *
 * with lambda0 the prior (a site p_0 that is never removed, i.e. eq. 20
 * read with the prior as site 0) and N the effective data-set size
 * (trib_step.n; LearnerState::effective_size). The three engines differ only
 * in what mu means and in the cavity:
 *   SEP  mu = f_bar, the global average site. Cavity lambda_ = lambda - f_bar
 *        (eq. 9 / 55-59) = lambda0 + (N - 1) mu. After moment matching,
 *        f_i = lambda_new - lambda_ (eq. 65-69) and f_bar <- (1 - eps) f_bar +
 *        eps f_i (eq. 11), eps = 1/N unless configured.
 *   EP   mu = (sum_i f_i) / N with one stored site f_i per document (sites
 *        live in the engine, not in the statistics). Cavity lambda - f_i
 *        (eq. 6 / 23-25), new site lambda_new - lambda_ (eq. 36-39).
 *   ADF  mu = (lambda - lambda0) / N, no site memory: cavity = posterior and
 *        the posterior becomes lambda_new.
 * A family therefore never needs to know which engine runs: it reads the
 * posterior as lambda0 + N mu and moment-matches a cavity the engine hands
 * it.
 *
 * Locality. A document's site is non-zero only on its *support*: the
 * entries whose tilted marginal differs from the cavity (e.g. the mixing
 * weights and the parameters of the document's terms). Everything per
 * document costs O(support); the SEP decay of the other entries is applied
 * lazily through the block scale and shift (the engine re-materialises a block when
 * its scale would underflow). Entries [P, stats size) belong to the family
 * (e.g. a seed fixing the prior); the engine never writes or decays them.
 *
 * Sequence for one document (engine: SepLearner, lib/sep_engine.h):
 *   1. support(doc)            -> (index, lambda0[index]) pairs, distinct, < P
 *   2. the engine computes the cavity at those entries
 *   3. moment_match(doc, cavity) -> lambda_new at the same entries, or a skip
 *   4. the engine forms the new posterior at those entries and asks
 *      feasible(), and block_feasible() for each block a block site moves;
 *      an infeasible one is skipped and counted, never applied
 *   5. the engine writes mu and calls commit() with the touched entries; if
 *      commit fails the engine restores mu and calls rebuild().
 * Steps 1-4 do not modify the model. A skipped or failed document leaves the
 * model exactly as it was.
 *
 * Concurrency: support, moment_match and feasible do not modify the model and
 * may run concurrently with each other and with score() on the same model,
 * each caller with its own state (e.g. workers of a distributed SEP computing
 * sites against one published posterior). commit and summary are exclusive
 * with everything else on that model, as rebuild is.
 */
#ifndef TRIBUTARY_SEP_ABI_H_
#define TRIBUTARY_SEP_ABI_H_

#include "tributary/plugin_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What moment_match reports besides lambda_new. */
typedef struct trib_sep_outcome {
  uint32_t struct_size; /**< sizeof(trib_sep_outcome) in the host, which fills it: read a field only if it covers it */
  /** Set to 1 (and a reason in trib_error.message) when the document's site
   * cannot be computed safely: the cavity is improper (a precision or a
   * Dirichlet parameter <= 0 after removing the site) or the tilted moments
   * are degenerate. The engine counts the skip and leaves the model as it
   * was; the call itself still returns TRIB_OK. */
  int skip;
  /** log Z_i, the log normaliser of the tilted distribution (the document's
   * contribution to an approximate log evidence: exact for ADF, where
   * log p(X) ~ sum_i log Z_i). NaN if the family does not estimate it. */
  double log_z;
  /** Block-uniform sites, set up by the engine: block_site[b] for each of the
   * num_blocks statistics blocks, zero on entry. A family may set
   * block_site[b] = u for a block whose alpha_bar is 1: the document's site
   * is then u (in natural-parameter units) on every entry of block b outside
   * the support, e.g. the effect of a document on the parameters of all the
   * terms it does not contain, applied in O(1) through the block's lazy
   * shift. Blocks with alpha_bar != 1 must keep 0. The engine cannot check
   * the feasibility of those entries in O(document): use block sites only
   * for parameters whose feasible set is R (e.g. h = tau m of a Gaussian). */
  double* block_site;
  uint32_t num_blocks; /**< entries in block_site: the number of statistics blocks (trib_stats.num_blocks) */
} trib_sep_outcome;

/** Step information for commit(). */
typedef struct trib_sep_step {
  /** sizeof(trib_sep_step) in the host, which fills it: read a field only if it covers it. */
  uint32_t struct_size;
  double n;        /**< N: lambda = lambda0 + n * mu */
  double decay;    /**< factor applied to every mu entry in [0, P) that is not in
                      the touched list (SEP: 1 - eps; EP, ADF: 1) */
  uint64_t t;      /**< updates applied before this one */
  uint32_t engine; /**< TRIB_SEP_ENGINE_* */
  /** num_blocks values: the change of lambda applied to every entry of each
   * block outside the support, besides the decay (the block sites: SEP
   * N eps u, EP u - u_old, ADF u). */
  const double* block_delta;
  uint32_t num_blocks; /**< entries in block_delta: the number of statistics blocks (trib_stats.num_blocks) */
} trib_sep_step;

#define TRIB_SEP_ENGINE_SEP 0u /**< trib_sep_step.engine: stochastic expectation propagation (mu = f_bar) */
#define TRIB_SEP_ENGINE_EP 1u  /**< trib_sep_step.engine: expectation propagation, one site per document */
#define TRIB_SEP_ENGINE_ADF 2u /**< trib_sep_step.engine: assumed density filtering, no site memory */

/** Receives named vectors from summary(): `component` is the component index
 * or UINT32_MAX for a model-wide vector. Returns 0 on success. The names are
 * the family's; the conventional ones for mixtures are "mixing_weights" (K
 * values, E[pi]), and per component "<param>_mean" / "<param>_variance". */
typedef struct trib_sep_summary_sink {
  void* host; /**< the host's; the family leaves it alone */
  /** Passes the vector `name` of `count` values for `component` (see above) to the host; `self` is this sink.
   * The host copies what it keeps before returning. */
  int (*put)(struct trib_sep_summary_sink* self, const char* name, uint32_t component, const double* values,
             size_t count);
} trib_sep_summary_sink;

/** The functions the SEP / EP / ADF engines call (trib_family_vtable.sep): a static table of the family's. All
 * but summary, block_feasible and move are required; the engine refuses a table whose struct_size does not cover
 * commit. */
typedef struct trib_sep_hooks {
  /** sizeof(trib_sep_hooks) as the plugin was built: the engine reads a field only if this covers it. */
  uint32_t struct_size;

  /** P, the number of natural parameters (the leading statistics entries the
   * engine owns). Depends only on the schema and the options. P <= stats size
   * and P is a block boundary. */
  uint64_t (*num_params)(const trib_family_model* model);

  /** Appends the document's support to `out` as (index, lambda0[index]) pairs:
   * distinct indices < P, prior values finite. Indices in runs of consecutive
   * entries are cheapest. The same document must give the same list (EP keys
   * its stored site on it). INVALID_DOCUMENT refuses the document. `stats`
   * may be read (e.g. a seed stored by init_stats in the family's entries). */
  int (*support)(const trib_family_model* model, const trib_stats* stats, const trib_document* doc, trib_delta* out,
                 trib_error* err);

  /** Moment matching of the tilted distribution cavity x p(x_i | theta): given
   * the cavity's natural parameters at the support entries (`index`,
   * `cavity`, `count`, in the order support() wrote them), writes the natural
   * parameters of the moment-matched q_new at the same entries into
   * lambda_new[count]. Entries outside the support keep the cavity value.
   * `stats` and N (from the last rebuild/commit) give the current posterior
   * for whatever else the family needs (e.g. totals over the vocabulary).
   * Random numbers come from `state` (state_create's seed), so a fixed seed
   * and document order give bit-identical results. Sets out->skip instead of
   * returning an error when the site is infeasible (see trib_sep_outcome). */
  int (*moment_match)(const trib_family_model* model, const trib_stats* stats, trib_family_state* state,
                      const trib_document* doc, const uint64_t* index, const double* cavity, size_t count,
                      double* lambda_new, trib_sep_outcome* out, trib_error* err);

  /** TRIB_OK if every lambda[j] is a valid natural parameter for entry
   * index[j] (e.g. precision > 0, Dirichlet parameter > 0, finite), else
   * TRIB_ERR_NUMERIC naming the first offending entry. The feasible set of
   * each entry must be convex, so that moving towards a feasible prior (the
   * SEP decay of untouched entries) keeps it feasible. */
  int (*feasible)(const trib_family_model* model, const uint64_t* index, const double* lambda, size_t count,
                  trib_error* err);

  /** The engine has written mu: the entries `index` (the support, in
   * support() order) changed from old_mu[j], and every other entry of [0, P)
   * was multiplied by step->decay. The family updates its caches (cost
   * O(count), plus an occasional O(model) refresh it may schedule itself).
   * Not called for a skipped document. When the engine re-materialises a
   * block it calls the family's rebuild() instead (step.rho = 0). */
  int (*commit)(trib_family_model* model, const trib_stats* stats, const uint64_t* index, const double* old_mu,
                size_t count, const trib_sep_step* step, trib_error* err);

  /** Optional: the posterior summary `tributary inspect` prints (mixtures:
   * "mixing_weights", "<param>_mean", "<param>_variance"). O(model). */
  int (*summary)(const trib_family_model* model, const trib_stats* stats, trib_sep_summary_sink* sink, trib_error* err);

  /** Optional (read only if struct_size covers it; required in practice for
   * families that set block sites on parameters with a bounded feasible set,
   * e.g. the -rate of a Gamma). Before a document's update is applied, for
   * each natural-parameter block b whose entries outside the support would
   * move, the engine asks whether every such entry stays feasible when
   *     lambda <- lambda0 + decay * (lambda - lambda0) + delta
   * (decay: the SEP decay 1 - eps, 1 for EP and ADF; delta: the block-site
   * change, step.block_delta[b]). TRIB_OK: feasible; TRIB_ERR_NUMERIC: not
   * (or not provably, e.g. from a cached bound), and the engine skips and
   * counts the document, leaving the model as it was. Must not modify the
   * model; O(1) per block is expected. Why it is needed: with EP a block
   * site can be replaced by a smaller one (u - u_old of either sign), so
   * entries that other documents' explicit sites had moved close to the
   * boundary can be pushed across it; the support-only check of feasible()
   * cannot see them. */
  int (*block_feasible)(const trib_family_model* model, const trib_stats* stats, uint32_t block, double decay,
                        double delta, trib_error* err);

  /** Optional (ABI 1.9; read only if struct_size covers it): a structural move on the posterior, e.g. a mixture
   * reviving a component whose weight has died by splitting the heaviest one in two (the converse of the thesis's
   * Algorithm 1, line 13, "combine or eliminate clusters with very small weights"). The SEP engine calls it after
   * every applied update (`step` as given to commit, with step->t counting this update), on a learner that is not a
   * shard of a parallel or distributed run (those compose the shards' steps as affine maps, which a move is not);
   * EP (whose stored sites must keep summing to mu) and ADF never call it. The family decides when to move (e.g.
   * once every N updates, from its own update count, so that a resumed snapshot moves at the same points) and
   * returns at once with *moved = 0 otherwise: O(1). To move it writes mu at any entries of [0, P) through the
   * block maps (raw[i] = (mu - shift * alpha_bar) / scale of entry i's block), leaves every entry feasible and its
   * caches consistent with the new statistics, and sets *moved = 1 (the engine then counts the move and notes
   * [0, P) written). On an error it must not have written anything: the engine rebuilds the family's caches and
   * reports the error; the document's own update stays applied. */
  int (*move)(trib_family_model* model, trib_stats* stats, const trib_sep_step* step, uint32_t* moved, trib_error* err);
} trib_sep_hooks;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TRIBUTARY_SEP_ABI_H_ */
