/*
 * Tributary plugin ABI (plain C).
 *
 * A plugin is a shared object that exports two symbols:
 *
 *   const trib_plugin_info tributary_plugin_info;      (data, read first)
 *   int tributary_plugin_init(const trib_host_api* host,
 *                             trib_plugin_vtable* out, trib_error* err);
 *
 * and, optionally (ABI 1.3), the description of the options its create()
 * accepts, which the host only reads (see trib_option_table below):
 *
 *   const trib_option_table tributary_plugin_options;  (data)
 *
 * The host dlopen()s the file with RTLD_NOW | RTLD_LOCAL, reads
 * `tributary_plugin_info` and refuses the file before calling any plugin
 * function when the magic, the ABI major version, or the kind is wrong, or
 * when the plugin needs a newer ABI minor version than the host has. Only
 * then it calls `tributary_plugin_init`, which fills the vtable for its kind.
 * A file that loads is initialised once however often it is named (loads
 * are cached by path). `host` stays valid while the plugin is loaded: a
 * plugin may keep the pointer.
 * After init the host refuses the plugin if init failed, if the vtable's
 * struct_size is 0 or larger than the host's, or if a required function is
 * NULL (every family function not marked optional below; the loss's weights).
 *
 * ABI rules:
 *  - The structs that grow across minor versions begin with their own size
 *    (struct_size: trib_host_api, trib_schema, trib_document, the family and
 *    loss vtables, trib_option_table) and only ever grow at their end: a host
 *    or plugin reads a field only if the other side's struct is large enough
 *    to hold it; a missing optional function is NULL. The others
 *    (trib_error, trib_plugin_info, trib_option, trib_block, trib_stats,
 *    trib_delta, trib_step_log, trib_step, trib_option_spec) are fixed: they
 *    change only with a major version (trib_plugin_info is checked by its
 *    magic and versions instead).
 *  - A different major version is refused; an older minor version is
 *    accepted (the host treats fields beyond it as absent).
 *  - No C++ exception and no STL type crosses the boundary. Every fallible
 *    function returns TRIB_OK (0) or an error code and writes a message into
 *    the host-provided trib_error.
 *  - The host never dlclose()s a plugin while objects created by it live.
 *  - Concurrency (family): score() may run on one model from several threads
 *    at once, each with its own state, and state_create()/state_destroy() may
 *    run meanwhile; none of them may write the model, the statistics or
 *    global state. Every other family call on a model is exclusive. Distinct
 *    models (e.g. a model and its clones) are independent. A loss's weights()
 *    is a pure function, callable from any thread.
 *
 * The math behind the calls (sdEM, Masegosa et al. 2014, Algorithm 1 and
 * Tables 1-2): the engine keeps the global expectation parameters mu and per
 * document computes
 *
 *   mu <- (1 - rho_t (c + nu/n)) mu + rho_t (sum_k w_k E_z[s(k, z, x)] + abar/n)
 *
 * then the check-step. The family supplies log p(k, x | theta(mu)) (score),
 * sum_k w_k E_z[s(k, z, x)] (accumulate) and the check-step / caches of
 * theta(mu) (commit). The loss supplies w and c from the scores.
 */
#ifndef TRIBUTARY_PLUGIN_ABI_H_
#define TRIBUTARY_PLUGIN_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** ABI major version of this header: a plugin built for another major version is refused. */
#define TRIB_ABI_MAJOR 1u
/** ABI minor version of this header. What each minor version added is in docs/plugins.md §3 (the
 * fields and functions themselves are marked "ABI 1.N" below); tests/docs_abi_test.cc checks that the
 * documents name this version. */
#define TRIB_ABI_MINOR 9u
#define TRIB_PLUGIN_MAGIC 0x54524942u /**< "TRIB": trib_plugin_info.magic of every plugin */

/** Exports a plugin's symbols (tributary_plugin_info, tributary_plugin_init, tributary_plugin_options) so that
 * the host finds them with dlsym(), also when the plugin is built with hidden visibility. */
#if defined(_WIN32)
#define TRIB_PLUGIN_EXPORT __declspec(dllexport)
#else
#define TRIB_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* ---- Errors ------------------------------------------------------------ */

/* Plain int constants (not an enum) so C++ lambdas returning them deduce int. */
/* The host prefixes the plugin's message with the plugin's name and the call
 * (and the document, for per-document calls). INVALID_DOCUMENT and NUMERIC
 * from a per-document call fail that document only (skipped and counted with
 * --skip-bad); the other codes stop the command. */
/** Success: the only return value that is not an error. */
#define TRIB_OK 0
#define TRIB_ERR_INVALID_ARGUMENT 1 /**< bad option, bad schema for this family */
#define TRIB_ERR_INVALID_DOCUMENT 2 /**< this document cannot be used */
#define TRIB_ERR_NUMERIC 3          /**< NaN/inf or infeasible statistics */
#define TRIB_ERR_INTERNAL 4         /**< a bug in the plugin, e.g. an exception caught by sdk::Guard */
#define TRIB_ERR_NO_MEMORY 5        /**< an allocation failed (including trib_delta / trib_step_log grow()) */

/** Where a fallible plugin function says why it failed. The host passes one to every call that takes it (not
 * necessarily zero-filled); the plugin fills it when it returns an error. */
typedef struct trib_error {
  /** The TRIB_ERR_* code (sdk::Fail sets it to the code it returns); the host goes by the function's return
   * value, not by this field. */
  int code;
  char message[512]; /**< NUL-terminated */
} trib_error;

/* ---- Plugin identity ---------------------------------------------------- */

/** What a plugin provides: trib_plugin_info.kind, and which member of trib_plugin_vtable init fills. */
typedef enum trib_plugin_kind {
  TRIB_KIND_FAMILY = 1, /**< a model family: fills trib_plugin_vtable.family */
  TRIB_KIND_LOSS = 2    /**< a loss: fills trib_plugin_vtable.loss */
} trib_plugin_kind;

/** The plugin's identity, exported as data (tributary_plugin_info, see TRIBUTARY_DEFINE_PLUGIN_INFO): the host
 * reads and checks it before running any plugin code. */
typedef struct trib_plugin_info {
  uint32_t magic;          /**< TRIB_PLUGIN_MAGIC */
  uint32_t abi_major;      /**< TRIB_ABI_MAJOR the plugin was built against */
  uint32_t abi_minor;      /**< TRIB_ABI_MINOR the plugin was built against */
  uint32_t kind;           /**< trib_plugin_kind */
  const char* name;        /**< e.g. "multinomial"; [a-z0-9_-]+, else refused */
  const char* version;     /**< plugin version MAJOR.MINOR.PATCH, recorded in
                              snapshots: a snapshot written by another major
                              version, or a newer minor one, is refused */
  const char* description; /**< one line */
} trib_plugin_info;

/** What the host offers the plugin (grows at its end). */
typedef struct trib_host_api {
  uint32_t struct_size; /**< sizeof(trib_host_api) in the host: read a field only if this covers it */
  uint32_t abi_major;   /**< the host's TRIB_ABI_MAJOR */
  uint32_t abi_minor;   /**< the host's TRIB_ABI_MINOR, never below the plugin's own (else it is refused) */
  /** log |Gamma(x)|. Special functions from Boost.Math in double precision (no promotion to
   * long double: a few ulps, several times faster), so plugins need not link
   * it. Domain errors give NaN, poles +-inf; they never throw. Plugins built
   * with the SDK call them as sdk::Lgamma, sdk::Digamma, ... */
  double (*lgamma)(double x);
  double (*digamma)(double x); /**< psi(x), the derivative of log Gamma(x) */
  /* ---- ABI 1.4 ---- */
  /** psi'(x), the derivative of digamma. */
  double (*trigamma)(double x);
  double (*erf_inv)(double x); /**< inverse error function, x in (-1, 1) */
} trib_host_api;

/* ---- Data crossing the boundary ----------------------------------------- */

/** One key=value option given to a plugin's create() (family: --opt, loss: --loss-opt). The strings are the
 * host's, NUL-terminated and valid only during the call: copy what the instance keeps. */
typedef struct trib_option {
  const char* key;   /**< the option's name as the user wrote it (--prior P arrives as "prior") */
  const char* value; /**< its value as text; the plugin parses it (sdk::ParseOptions) */
} trib_option;

/** REAL: a real number (e.g. Gaussian). COUNT (ABI 1.2): a non-negative
 * integer held in the reals array (e.g. Poisson); the host checks it.
 * CATEGORICAL: an index into the feature's categories. */
typedef enum trib_feature_kind {
  TRIB_FEATURE_REAL = 0,        /**< a finite real number */
  TRIB_FEATURE_CATEGORICAL = 1, /**< an index into the feature's categories */
  TRIB_FEATURE_COUNT = 2        /**< an integer >= 0, held in trib_document.reals (ABI 1.2) */
} trib_feature_kind;

/** The model's schema, fixed when the model is created. */
typedef struct trib_schema {
  /** sizeof(trib_schema) in the host: read a field only if this covers it. */
  uint32_t struct_size;
  uint64_t vocab_size;  /**< number of term ids (vocabulary or hash dim) */
  uint32_t num_classes; /**< K; may be 0 for an unlabelled stream, which a classifier refuses */
  uint32_t num_reals;   /**< dense REAL and COUNT features (see real_kinds) */
  /** Number of CATEGORICAL features. */
  uint32_t num_categoricals;
  const uint32_t* categorical_cardinalities; /**< num_categoricals entries */
  /* ---- ABI 1.2 ---- */
  /** num_reals entries: TRIB_FEATURE_REAL or TRIB_FEATURE_COUNT, the declared
   * kind of each entry of trib_document.reals. */
  const uint32_t* real_kinds;
  /* ---- ABI 1.4 ---- */
  /** Room for classes (>= num_classes), set by the host only for families
   * with add_class (0 or num_classes otherwise: no room). Such a family lays
   * its statistics out for class_capacity classes; the entries of the classes
   * num_classes .. class_capacity-1 are padding: raw zero at creation, never
   * scored, never touched by accumulate or commit, until add_class brings the
   * next one into use. Rebuild either keeps them at zero (a new class then
   * starts at raw zero) or, better, gives them the check-step it gives every
   * entry, so that they hold what a class declared from the start and never
   * seen holds (block restarts move them like any untouched entry): then a
   * new class starts exactly there, and grow_classes copies the old model's
   * first padding class into every class it adds (the host grows while one
   * padding class is still spare; multinomial does this). */
  uint32_t class_capacity;
  /* ---- ABI 1.5 ---- */
  /** Room for terms (>= vocab_size), set by the host only for families with
   * add_terms, and only for a model with an open vocabulary (0 otherwise: no
   * room). Such a family lays its statistics out for vocab_capacity terms
   * (and whatever it needs besides, e.g. multinomial's sentinel row of a
   * term that never occurs); the entries of terms vocab_size ..
   * vocab_capacity-1 are padding: never scored, never touched by accumulate
   * or commit, until add_terms brings them into use. With room, vocab_size
   * may be 0 (a live stream whose words come with its documents). */
  uint64_t vocab_capacity;
} trib_schema;

/** One validated document, in the model's id space. The host guarantees:
 * term_ids strictly increasing and < vocab_size; counts finite and > 0;
 * reals finite (num_reals == schema.num_reals); categoricals in range;
 * weight finite and > 0. */
typedef struct trib_document {
  /** sizeof(trib_document) in the host: read a field only if this covers it. */
  uint32_t struct_size;
  uint64_t index; /**< position in its stream, 0-based */
  const char* id; /**< never NULL; may be "" */
  int64_t label;  /**< class index, or -1 when unlabelled */
  /** Number of distinct terms: the entries of term_ids and term_counts. */
  uint32_t num_terms;
  /** Term ids, strictly increasing, each < schema vocab_size. */
  const uint32_t* term_ids;
  /** term_counts[j] is the count of term_ids[j]; finite and > 0. */
  const double* term_counts;
  double total_count; /**< sum of term_counts */
  /** Entries of reals: schema num_reals. */
  uint32_t num_reals;
  /** The values of the REAL and COUNT features, in schema order. */
  const double* reals;
  /** Entries of categoricals: schema num_categoricals. */
  uint32_t num_categoricals;
  /** The CATEGORICAL features' category indices, each < its feature's cardinality. */
  const uint32_t* categoricals;
  /** The document's weight in learning (an importance), finite and > 0. The sdEM engine applies it through the
   * step size, or by scaling the loss's weights when c = 0, so a family need not read it. */
  double weight;
  /* ---- ABI 1.2 ---- */
  /** Missing features: NULL when nothing is missing, else num_reals
   * (num_categoricals) flags, 1 = missing. The value at a missing position is
   * a placeholder (0) and must be ignored. COUNT reals that are present are
   * integers >= 0. A family that cannot handle missing values refuses such a
   * document with TRIB_ERR_INVALID_DOCUMENT; the host refuses them itself for
   * families built against ABI < 1.2. */
  const uint8_t* real_missing;
  const uint8_t* categorical_missing; /**< like real_missing, for the categoricals: NULL or num_categoricals flags */
} trib_document;

/** A block of statistics that share one prior (nu, abar) and one lazy affine
 * map:  mu[i] = scale * raw[i] + shift * alpha_bar   for i in the block.
 * scale > 0 and shift >= 0 at all times. At creation raw = 0 and
 * scale = shift = 1 (mu_0 = alpha_bar). A step with factor
 * f = 1 - rho (c + nu/n) sets scale *= f, shift = f shift + rho/n and then
 * raw[i] += rho delta[i] / scale for the delta's entries, so shift >= rho/n > 0
 * after every step: shift * alpha_bar is the prior mass added so far. When
 * f <= 0 or scale would underflow, the engine re-materialises the block
 * (raw = f mu, scale = 1, shift = rho/n) and calls rebuild() instead of
 * commit() for that step. */
typedef struct trib_block {
  uint64_t offset;  /**< index of the block's first statistic: 0, then the previous block's offset + size */
  uint64_t size;    /**< number of statistics in the block */
  double nu;        /**< prior weight in the decay (1 - rho (c + nu/n)) */
  double alpha_bar; /**< prior pseudo-statistic; mu_0 = alpha_bar */
  double scale;     /**< engine-managed */
  double shift;     /**< engine-managed */
} trib_block;

/** The engine-owned statistics, as seen by a family. `raw` is writable only
 * in the calls that get a non-const trib_stats (init_stats, rebuild, commit,
 * fused_step, add_class, add_terms; the new statistics of grow_classes and
 * grow_terms). */
typedef struct trib_stats {
  double* raw;              /**< size raw values; mu[i] comes from raw[i] through its block's map (trib_block) */
  uint64_t size;            /**< number of statistics: the sum of the blocks' sizes */
  uint32_t num_blocks;      /**< number of entries in blocks */
  const trib_block* blocks; /**< the layout from layout(), with the engine's current scale and shift */
} trib_stats;

/** Expected sufficient statistics of one document: (index, value) pairs.
 * Indices are absolute positions in the statistics array (< trib_stats.size)
 * and must be distinct within one accumulate call; values are the plain
 * statistics (the engine multiplies by rho and applies the block map) and
 * must be finite: the engine refuses the document otherwise. Runs of
 * consecutive indices are applied fastest. The family appends with
 * trib_delta_push (inline below) or reserves with grow() (the host's; 0 on
 * success; it may move index and value) and writes directly. */
typedef struct trib_delta {
  uint64_t* index; /**< capacity entries, the first size of them used: each pair's statistic */
  double* value;   /**< capacity entries, the first size of them used: each pair's value */
  size_t size;     /**< pairs written so far; the family advances it as it appends */
  size_t capacity; /**< room in index and value; grow() raises it */
  void* host;      /**< the host's, for grow(); the family leaves it alone */
  int (*grow)(struct trib_delta* self, size_t min_capacity); /**< 0 on success */
} trib_delta;

/** ABI 1.7: what a family's fused_step wrote, for the host to undo the step
 * and to note the pages written: runs of consecutive statistics
 * [start[r], start[r] + length[r]) in the order written, and their raw values
 * before the step, run after run, in old_raw (values entries). Runs must not
 * overlap. The family reserves room with grow() (the host's; 0 on success;
 * it may move the three arrays) and appends. */
typedef struct trib_step_log {
  uint64_t* start;       /**< run_capacity entries, the first runs of them used: each run's first statistic */
  uint64_t* length;      /**< run_capacity entries, the first runs of them used: each run's length */
  size_t runs;           /**< runs logged so far; the family advances it */
  size_t run_capacity;   /**< room in start and length */
  double* old_raw;       /**< value_capacity entries, the first values of them used: raw before the step */
  size_t values;         /**< old values logged so far (the sum of the runs' lengths); the family advances it */
  size_t value_capacity; /**< room in old_raw */
  void* host;            /**< the host's, for grow(); the family leaves it alone */
  /** Makes room for at least min_runs runs and min_values values in all; 0 on success. */
  int (*grow)(struct trib_step_log* self, size_t min_runs, size_t min_values);
} trib_step_log;

/** Appends the pair (index, value) to `d`, growing it through d->grow when it is full. Returns TRIB_OK, or
 * TRIB_ERR_NO_MEMORY when grow() fails (nothing is appended). */
static inline int trib_delta_push(trib_delta* d, uint64_t index, double value) {
  if (d->size == d->capacity && d->grow(d, d->size + 1) != 0) return TRIB_ERR_NO_MEMORY;
  d->index[d->size] = index;
  d->value[d->size] = value;
  d->size++;
  return TRIB_OK;
}

/** Step information handed to the check-step. rho = 0 (and c = 0) when
 * rebuild() runs after model creation, snapshot load or class growth. */
typedef struct trib_step {
  double rho; /**< rho_t */
  double n;   /**< effective data-set size */
  double c;   /**< the loss's self-weight; the document's weight is in rho (c > 0) or in the weights (c = 0) */
  uint64_t t; /**< update counter before this step */
} trib_step;

/* ---- Family ------------------------------------------------------------- */

/** Opaque objects created by a family. A "model" holds the family's
 * configuration and its caches derived from the statistics (e.g. totals); a
 * "state" holds per-thread scratch space and the random generator. */
typedef struct trib_family_model trib_family_model;
/** A family's per-thread scratch space and random generator (see state_create). */
typedef struct trib_family_state trib_family_state;
/** What freeze() builds (ABI 1.6): the family's own type. */
typedef struct trib_frozen trib_frozen;
/** Defined in sep_abi.h (ABI 1.2); families that support SEP include it. */
struct trib_sep_hooks;

/** The functions of a family plugin, filled by tributary_plugin_init (trib_plugin_vtable.family). Every
 * function not marked optional is required; see this file's opening comment for the concurrency rules. */
typedef struct trib_family_vtable {
  /** sizeof(trib_family_vtable) as the plugin was built: the host treats the fields beyond it as absent. */
  uint32_t struct_size;

  /** Creates a model for `schema` with the given options. Unknown option keys
   * must be refused (TRIB_ERR_INVALID_ARGUMENT naming the key), as must a
   * schema the family cannot model. The program passes --prior P as the
   * option "prior". The optional option table (ABI 1.3, below) describes the
   * options to the host; create() still decides what it accepts. */
  int (*create)(const trib_schema* schema, const trib_option* options, size_t num_options, trib_family_model** out,
                trib_error* err);
  /** Frees a model made by create() or clone(). The host destroys the model's frozen tables first. */
  void (*destroy)(trib_family_model* model);
  /** Deep copy (caches included; the engine copies the statistics), used to
   * publish a consistent model to readers while one writer keeps learning:
   * the copy must share no mutable data with the original. */
  int (*clone)(const trib_family_model* model, trib_family_model** out, trib_error* err);

  /** The statistics layout: the number of blocks, then each block's offset,
   * size, nu and alpha_bar (scale/shift are ignored). Called with
   * blocks == NULL to ask for the count. Blocks are contiguous and ordered
   * from offset 0, nu >= 0, alpha_bar finite; the layout depends only on the
   * schema and the options (a snapshot's layout is checked against it). */
  int (*layout)(const trib_family_model* model, trib_block* blocks, uint32_t* num_blocks, trib_error* err);

  /** Optional (NULL: raw starts at zero, i.e. mu_0 = alpha_bar as in
   * Algorithm 1 line 1). Writes initial raw values, e.g. random
   * symmetry-breaking for latent-variable families. */
  int (*init_stats)(trib_family_model* model, trib_stats* stats, uint64_t seed, trib_error* err);

  /** Recomputes every cache of theta(mu) from all statistics and applies the
   * check-step to every entry (it may write raw). Called after creation, after
   * loading a snapshot and after class growth (step->rho = 0), and instead of
   * commit() for a step in which the engine re-materialised a block (that
   * step's rho, n, c). With rho = 0 it must leave feasible statistics
   * unchanged bit for bit (a snapshot round trip is exact); only infeasible
   * ones may be repaired. Non-finite statistics: TRIB_ERR_NUMERIC.
   * Cost O(model): the engine calls it rarely. */
  int (*rebuild)(trib_family_model* model, trib_stats* stats, const trib_step* step, trib_error* err);

  /** Per-thread scratch and random generator for score/accumulate. A state is
   * used only with the model it was created for; state_destroy gets no model,
   * so a state must be destroyable on its own. May run while other threads
   * score the model. */
  int (*state_create)(const trib_family_model* model, uint64_t seed, trib_family_state** out, trib_error* err);
  /** Frees a state made by state_create(), without its model (see state_create). */
  void (*state_destroy)(trib_family_state* state);

  /** log p(k, x | theta(mu)) for every class k into log_joint[num_classes].
   * Must not modify the model; may run concurrently with other score calls
   * on the same model, each with its own state. For latent families it may
   * return an estimate and cache local inference results in `state` for the
   * following accumulate call on the same document. Values must be finite or
   * -inf (NaN and +inf are refused as numeric errors). Terms common to all
   * classes change no prediction or loss, only the reported perplexity.
   * Cost proportional to the document (distinct terms x classes), never to
   * the model: per-class sums over the vocabulary belong in caches. */
  int (*score)(const trib_family_model* model, const trib_stats* stats, trib_family_state* state,
               const trib_document* doc, double* log_joint, trib_error* err);

  /** Appends sum_k weights[k] * E_z[s(k, z, x)] to `delta` (Table 1 / 2),
   * skipping classes whose weight is 0. Called right after score() on the
   * same document with the same state and unchanged statistics. */
  int (*accumulate)(const trib_family_model* model, const trib_stats* stats, trib_family_state* state,
                    const trib_document* doc, const double* weights, trib_delta* delta, trib_error* err);

  /** The check-step and the incremental maintenance of cached theta(mu): the
   * engine has just added to raw[index[j]] (old value old_raw[j]) and updated
   * the blocks' scale/shift. The family must project touched entries back
   * into the feasible set (writing raw) and update its caches. Cost must be
   * proportional to `count`. `index` is this step's delta, in the order
   * accumulate wrote it. Entries not in `index` moved only through their
   * block's map; the family's check-step must be such that the map alone
   * keeps them feasible. Not called for a step that re-materialised a block
   * (rebuild is). */
  int (*commit)(trib_family_model* model, trib_stats* stats, const uint64_t* index, const double* old_raw, size_t count,
                const trib_step* step, trib_error* err);

  /** Optional: number of tokens the document contributes to per-word
   * perplexity (NULL: doc->total_count). */
  double (*perplexity_tokens)(const trib_family_model* model, const trib_document* doc);

  /** Optional (NULL: the family cannot gain classes). The host created
   * `new_model` for a schema with one more class (and, for a family with
   * add_class, a larger class_capacity), laid out `new_stats` (raw zero; each
   * block's scale/shift copied from the old block of the same position) and
   * asks the family to copy every old class's raw statistics to their place
   * in the new layout. The new class keeps raw zero, i.e. starts at the
   * current prior level. The host calls rebuild afterwards. O(model). */
  int (*grow_classes)(const trib_family_model* old_model, const trib_stats* old_stats, trib_family_model* new_model,
                      trib_stats* new_stats, trib_error* err);

  /* ---- ABI 1.1 ---- */

  /** Optional (NULL: the family keeps no incremental caches, or accepts that
   * a model resumed from a snapshot may differ from the uninterrupted one in
   * the last bits). Caches maintained incrementally in commit() (e.g. running
   * totals) are not bit-identical to the same caches recomputed by rebuild(),
   * because floating-point sums depend on their order. For a model resumed
   * from a snapshot to continue exactly as the uninterrupted model would, the
   * host saves the family's caches in the snapshot and restores them after
   * loading:
   *   export_cache: called with out == NULL sets *size to the number of
   *     doubles; then again with room for *size doubles to fill them.
   *   import_cache: called after rebuild() on a freshly loaded model with
   *     what export_cache produced; must check `size` and refuse a mismatch. */
  int (*export_cache)(const trib_family_model* model, double* out, size_t* size, trib_error* err);
  /** Restores what export_cache wrote (see export_cache); refuses a `size` it did not export. */
  int (*import_cache)(trib_family_model* model, const double* in, size_t size, trib_error* err);

  /* ---- ABI 1.2: latent outputs, topics, document completion, SEP ---- */

  /** Optional (NULL: TRIB_OUTPUTS_CLASSES with the schema's class count).
   * What score() ranks:
   *  - TRIB_OUTPUTS_CLASSES: *count == schema num_classes; labels are the
   *    training targets (classifiers, including ones with latent variables
   *    inside a class such as a per-class LDA).
   *  - TRIB_OUTPUTS_LATENT: *count = K latent components or topics chosen by
   *    the family's options. Labels are ignored when training: the host hands
   *    the loss and the family label = -1 (only losses that accept unlabelled
   *    documents, e.g. nll, can train such a family), and uses labels only in
   *    evaluation (clusters mapped to labels by the Hungarian method).
   *    score() writes K values whose softmax is the document's posterior over
   *    components (mixtures: log p(z = k, x)) or its topic proportions
   *    (mixed membership: log theta_k + an estimate of log p(x)), and whose
   *    log-sum-exp estimates log p(x). accumulate() gets the loss's weights
   *    (under nll, softmax(scores), sum 1); a mixed-membership family uses
   *    their sum as the document's weight.
   * Depends only on the schema and the options; called once after create(). */
  int (*outputs)(const trib_family_model* model, uint32_t* kind, uint32_t* count, trib_error* err);

  /** Optional, for LATENT families over terms: p(term | component k) for every
   * term id into out[vocab_size] (what `tributary topics` ranks). O(vocab). */
  int (*component_terms)(const trib_family_model* model, const trib_stats* stats, uint32_t k, double* out,
                         trib_error* err);

  /** Optional: document completion. The host splits a document's tokens,
   * ordered by (term id, repetition), into `observed` (even positions) and
   * `heldout` (odd positions); the family estimates the document's latent
   * mixture from `observed` alone and writes
   *   *log_prob = sum over heldout tokens of log p(token | observed, model)
   * (e.g. LDA: sum_w n_w log sum_k theta_k(observed) beta_kw). The host reports
   * exp(-sum log_prob / sum heldout tokens) as `perplexity`. Must not modify
   * the model; runs with the caller's state like score(). */
  int (*completion)(const trib_family_model* model, const trib_stats* stats, trib_family_state* state,
                    const trib_document* observed, const trib_document* heldout, double* log_prob, trib_error* err);

  /** Optional: the hooks the SEP / EP / ADF engines call (see sep_abi.h);
   * NULL when the family can only be trained by sdEM. */
  const struct trib_sep_hooks* sep;

  /* ---- ABI 1.4 ---- */

  /** Optional (NULL: every new class goes through grow_classes, which copies
   * the whole model). Brings the next padded class (index num_classes, see
   * trib_schema.class_capacity) into use in place: the layout does not
   * change, its statistics are raw zero (the current prior level, exactly
   * what grow_classes gives a new class) and the family extends its caches
   * and its class count. Cost O(statistics of one class), never O(model):
   * this is what makes open-class streams cost O(classes + vocabulary) per
   * new class (amortised; the host grows the capacity geometrically through
   * grow_classes when it is exhausted). The host calls it only when
   * num_classes < class_capacity, does not call rebuild afterwards, and
   * refuses a family that has add_class without grow_classes. On error the
   * model must be unchanged. */
  int (*add_class)(trib_family_model* model, trib_stats* stats, trib_error* err);

  /* ---- ABI 1.5: open vocabularies ---- */

  /** Optional (NULL: the family cannot gain terms; a model with an open
   * vocabulary is refused at creation). Brings the next `count` padded terms
   * (ids vocab_size .. vocab_size+count-1, see trib_schema.vocab_capacity)
   * into use in place: the layout does not change; their statistics become
   * what a term present from the start and never seen would hold now (not
   * raw zero in general: the host's block restarts, e.g. sdEM's first NLL
   * step with rho = 1, and rebuild's check-step move never-seen entries; a
   * family can keep a row that never occurs and copy it), and the family
   * extends its caches and its term count. Cost O(count x statistics of one
   * term). Scoring states made before stay valid: a family
   * whose state depends on the vocabulary size must not provide add_terms.
   * The host calls it only when vocab_size + count <= vocab_capacity, does
   * not call rebuild afterwards, and refuses a family that has add_terms
   * without grow_terms. On error the model must be unchanged. */
  int (*add_terms)(trib_family_model* model, trib_stats* stats, uint64_t count, trib_error* err);
  /** Required with add_terms. The host created `new_model` for a schema with
   * more terms and a larger vocab_capacity (same classes and options), laid
   * out `new_stats` (raw zero; each block's scale/shift copied from the old
   * block of the same position) and asks the family to copy every old
   * term's raw statistics (and every statistic that is not per term) to
   * their place in the new layout, and to give the new terms what a term
   * never seen holds (as add_terms does). The host calls rebuild afterwards.
   * O(model). */
  int (*grow_terms)(const trib_family_model* old_model, const trib_stats* old_stats, trib_family_model* new_model,
                    trib_stats* new_stats, trib_error* err);

  /* ---- ABI 1.6: frozen scoring ---- */

  /** Optional, all three or none (the host refuses a family with some of
   * them). For a run of score() calls on statistics that no longer change
   * (eval and predict of a saved model): freeze() builds from the model and
   * statistics as they are now whatever makes scoring cheaper (multinomial:
   * the table of log p(w | k), so that a document costs one addition per
   * (term, class) instead of a product and logs), and score_frozen() then
   * scores with it. score_frozen() must give score()'s values up to
   * rounding (the plugin-check 'frozen-score' check allows 1e-9 relative to
   * the largest magnitude among a document's scores; -inf where score() gives
   * -inf) and may use `state` as scratch like score(); it must not modify
   * the table, and may run concurrently with other score_frozen() calls on
   * the same table, each with its own state. The host builds a table only
   * for a model it will not change while the table lives (learning, class
   * or term growth and snapshot loads make new models or are not done), and
   * destroys it before the model. freeze() costs O(model) time and up to
   * O(model) memory; the host builds one only when the scoring it replaces
   * has cost as much (lib/include/tributary/predictor.h). */
  int (*freeze)(const trib_family_model* model, const trib_stats* stats, trib_frozen** out, trib_error* err);
  /** Frees a table made by freeze(); the host calls it before destroying the model. */
  void (*frozen_destroy)(trib_frozen* frozen);
  /** score() through the table `frozen` that freeze() built from `model` (see freeze). */
  int (*score_frozen)(const trib_family_model* model, const trib_frozen* frozen, trib_family_state* state,
                      const trib_document* doc, double* log_joint, trib_error* err);

  /* ---- ABI 1.6: defaults under a gradient loss ---- */

  /** Optional (0 and NULL: none). A loss whose steps never decay the
   * statistics (self-weight c = 0: NCLL, hinge) moves them by
   * rho_t w_k s(k, x) a document, and its default lambda keeps rho_t near 1
   * for the first 10^4 documents. A family whose statistics are few and on
   * the data's own scale (Gaussian naive Bayes: N, sum x, sum x^2 per class)
   * is then replaced wholesale by its first documents, unless its prior
   * pseudo-count is larger and the steps smaller. Such a family names here
   * the lambda of rho_t = (1 + lambda t)^-1 and the value of its option
   * `prior` that a new model trained by such a loss gets when the user set
   * neither (lib/include/tributary/model_config.h NewModel; the option is
   * recorded in the model's options, so its snapshots keep it). Must be
   * finite and >= 0; gradient_prior a value the family's create accepts. */
  double gradient_lambda;
  /** The text of option `prior` for such a model (see gradient_lambda); NULL: none. A static string. */
  const char* gradient_prior;

  /* ---- ABI 1.7: the fused step ---- */

  /** Optional (NULL: the host calls accumulate, applies the delta and calls
   * commit). accumulate, the engine's apply and commit in one pass over the
   * statistics, for a step that re-materialises no block (the host calls
   * accumulate / rebuild for those): called right after score() on the same
   * document with the same state, after the engine has updated every block's
   * scale and shift for the step. For every entry d_i that accumulate would
   * write with these weights, the family adds block_mult[b] * d_i to raw[i]
   * (b the block of i; block_mult[b] = rho / scale_b, computed as the host
   * computes it, so that raw[i] += d_i * block_mult[b] rounds as the host's
   * apply does), then applies commit's check-step and cache updates, in
   * accumulate's order, logging each run it writes in `log` before writing
   * it. The result (raw, caches, and so every later score) must be bit for
   * bit what accumulate + apply + commit give: plugin-check's 'fused-step'
   * runs both on copies of a model and compares. Errors: an entry d_i not
   * finite is TRIB_ERR_NUMERIC (naming it); on any error the host restores
   * the logged runs and the blocks and calls rebuild (the family's caches are
   * recomputed), so the family may stop anywhere as long as every write so
   * far is logged. Cost proportional to the entries, as accumulate's. */
  int (*fused_step)(trib_family_model* model, trib_stats* stats, trib_family_state* state, const trib_document* doc,
                    const double* weights, const double* block_mult, const trib_step* step, trib_step_log* log,
                    trib_error* err);

  /* ---- ABI 1.8: the default schedule of a random start ---- */

  /** 1 if init_stats starts the statistics from a random, symmetry-breaking
   * point (topics, components) that a first step of rho_0 = 1 would replace
   * by one document's statistics, whatever the family's outputs: a model
   * whose user gave no schedule then gets the polynomial schedule of the
   * latent families (model_config.h kLatentTau0, kLatentKappa), as every
   * family with latent outputs does. 0 (or a plugin built before 1.8): the
   * loss's inverse schedule for a family whose outputs are the classes. */
  uint32_t random_start;

  /* ---- ABI 1.8: latent components of a classifier ---- */

  /** Optional (NULL: a family whose outputs are the classes has no
   * components; a latent family's components are its outputs). A family
   * whose outputs are the classes but whose model also has latent components
   * or topics (slda) sets *count to their number: component_terms then ranges
   * over them, and proportions describes a document by them. */
  int (*components)(const trib_family_model* model, uint32_t* count, trib_error* err);
  /** Optional (requires components): the document's proportions over the
   * components, `count` values >= 0 summing to 1 (slda: its topic proportions,
   * supervised dimensionality reduction). Thread-safety as score(). */
  int (*proportions)(const trib_family_model* model, const trib_stats* stats, trib_family_state* state,
                     const trib_document* doc, double* out, trib_error* err);
} trib_family_vtable;

#define TRIB_OUTPUTS_CLASSES 0u /**< outputs(): score() ranks the schema's classes */
#define TRIB_OUTPUTS_LATENT 1u  /**< outputs(): score() ranks K latent components or topics */

/* ---- Loss --------------------------------------------------------------- */

/** An instance of a loss with options (ABI 1.2), made by trib_loss_vtable.create: the loss's own type. */
typedef struct trib_loss_model trib_loss_model;

/** The functions of a loss plugin, filled by tributary_plugin_init (trib_plugin_vtable.loss). */
typedef struct trib_loss_vtable {
  /** sizeof(trib_loss_vtable) as the plugin was built: the host treats the fields beyond it as absent. */
  uint32_t struct_size;
  /** 1 if documents must carry a label. */
  int requires_label;
  /** Step-size parameter lambda used when the user gives none. */
  double default_lambda;
  /** From log p(k, x) for each class and the label (-1: unlabelled), the class
   * weights w (the negative gradient of the loss w.r.t. the scores) and the
   * self-weight c (the coefficient of mu in the gradient w.r.t. the natural
   * parameters), plus the loss value. w has num_classes entries; the engine
   * applies the document's weight itself (through the step size, or by
   * scaling w when c = 0). Must be a pure function of its arguments with
   * finite results. */
  int (*weights)(const double* log_joint, uint32_t num_classes, int64_t label, double* w, double* c, double* loss_value,
                 trib_error* err);

  /* ---- ABI 1.2: options ---- */
  /** Optional (NULL: the loss takes no options, and the host refuses any).
   * Creates an instance from options (the program's --loss-opt key=value);
   * unknown keys and bad values must be refused naming the key. When set,
   * destroy and weights_with are required and the host calls weights_with
   * instead of weights. The instance is immutable after create: weights_with
   * may run from several threads at once. */
  int (*create)(const trib_option* options, size_t num_options, trib_loss_model** out, trib_error* err);
  /** Frees an instance made by create(). Required with create. */
  void (*destroy)(trib_loss_model* model);
  /** weights() for the instance `model` (same contract). Required with create; may run from several threads
   * at once. */
  int (*weights_with)(const trib_loss_model* model, const double* log_joint, uint32_t num_classes, int64_t label,
                      double* w, double* c, double* loss_value, trib_error* err);
} trib_loss_vtable;

/* ---- Option table (ABI 1.3, optional) ----------------------------------- */

/* What a plugin's create() accepts, as data the host can show without
 * running plugin code (`tributary plugins --options NAME`, `tributary
 * inspect`). A plugin that exports no table still works: it parses its
 * options itself and the host shows what was given. The host reads the
 * symbol only from plugins built for ABI >= 1.3, copies the table at load and
 * refuses the plugin if the table is malformed (unknown type, empty or
 * duplicate name, no terminator within 1024 entries). The table describes;
 * create() still decides: the host never validates options against it.
 * Strings are static, NUL-terminated UTF-8. */

/* Types of an option value. */
#define TRIB_OPTION_NUMBER 1u  /**< a finite decimal number (strtod), in [min, max] */
#define TRIB_OPTION_INTEGER 2u /**< an integral number, in [min, max] */
#define TRIB_OPTION_BOOLEAN 3u /**< 0, 1, false or true */
#define TRIB_OPTION_STRING 4u  /**< any text */
#define TRIB_OPTION_CHOICE 5u  /**< one of `choices` */
#define TRIB_OPTION_ALIAS 6u   /**< another name of the option `alias_of`; other fields unused */

/* trib_option_spec.flags. DERIVED_DEFAULT: default_value describes what the
 * plugin derives when the option is not given (e.g. "1/K"); it is not a value. */
#define TRIB_OPTION_MIN_EXCLUSIVE 1u   /**< the value must be > min (else >= min) */
#define TRIB_OPTION_MAX_EXCLUSIVE 2u   /**< the value must be < max (else <= max) */
#define TRIB_OPTION_DERIVED_DEFAULT 4u /**< default_value describes a derived default; it is not a value */

/** One option in a plugin's exported option table (ABI 1.3, see trib_option_table). */
typedef struct trib_option_spec {
  const char* name; /**< as the user writes it: [a-z0-9_-]+; NULL ends the table */
  uint32_t type;    /**< TRIB_OPTION_* */
  uint32_t flags;   /**< TRIB_OPTION_MIN_EXCLUSIVE | ... */
  double min;       /**< NUMBER / INTEGER range; -HUGE_VAL / HUGE_VAL: unbounded */
  /** Upper end of the NUMBER / INTEGER range; HUGE_VAL: unbounded. */
  double max;
  const char* default_value; /**< the value used when not given, as text; NULL: none */
  /** CHOICE: the accepted values, '|'-separated ("cvb0|vi|gibbs"). NUMBER /
   * INTEGER: words accepted besides numbers ("laplace|log", "auto"), or NULL. */
  const char* choices;
  const char* help;     /**< one line */
  const char* alias_of; /**< ALIAS: the name this one stands for; else NULL */
} trib_option_spec;

/** The exported table. Like every struct crossing the boundary it only grows
 * at its end; spec_size is the stride of `specs`, so later minor versions can
 * append fields to trib_option_spec (the host reads a field only if spec_size
 * covers it). */
typedef struct trib_option_table {
  uint32_t struct_size;          /**< sizeof(trib_option_table) */
  uint32_t spec_size;            /**< sizeof(trib_option_spec) the plugin was built with */
  const trib_option_spec* specs; /**< ends with an entry whose name is NULL */
} trib_option_table;

/** What tributary_plugin_init fills: the member of the plugin's kind. The host zeroes it before the call. */
typedef union trib_plugin_vtable {
  trib_family_vtable family; /**< for TRIB_KIND_FAMILY */
  trib_loss_vtable loss;     /**< for TRIB_KIND_LOSS */
} trib_plugin_vtable;

/** Signature of the exported entry point. */
typedef int (*trib_plugin_init_fn)(const trib_host_api* host, trib_plugin_vtable* out, trib_error* err);

#define TRIB_PLUGIN_INFO_SYMBOL "tributary_plugin_info"       /**< name of the trib_plugin_info data symbol */
#define TRIB_PLUGIN_INIT_SYMBOL "tributary_plugin_init"       /**< name of the trib_plugin_init_fn entry point */
#define TRIB_PLUGIN_OPTIONS_SYMBOL "tributary_plugin_options" /**< the trib_option_table; optional, ABI 1.3 */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TRIBUTARY_PLUGIN_ABI_H_ */
