// Header-only C++ helpers for plugin authors, on top of plugin_abi.h.
// Nothing here crosses the ABI boundary: it only makes it easier to write the
// C functions of a vtable without letting an exception escape.
//  - Fail, Guard: error messages, no exception across the boundary;
//  - BeginFamilyVtable<Model, State>, BeginLossVtable[<L>]: the shared part of
//    tributary_plugin_init;
//  - option tables (plugin_options.h): declare the options once, parse them
//    in create() with ParseOptions, export them with
//    TRIBUTARY_DEFINE_PLUGIN_OPTIONS;
//  - Mu / RawFor (the lazy map), LogSumExp, ParseDouble.
// docs/plugins.md documents all of it.
#ifndef TRIBUTARY_PLUGIN_SDK_H_
#define TRIBUTARY_PLUGIN_SDK_H_

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tributary/plugin_abi.h"
#include "tributary/plugin_options.h"

namespace tributary::sdk {

/// Writes a formatted message into `err` and returns `code`.
inline int Fail(trib_error* err, int code, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
inline int Fail(trib_error* err, int code, const char* fmt, ...) {
  if (err) {
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
  }
  return code;
}

/// Runs `body` (returning int) and converts any exception into an error code:
/// no exception may cross the C boundary.
template <typename F>
int Guard(trib_error* err, F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(err, TRIB_ERR_NO_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return Fail(err, TRIB_ERR_INTERNAL, "%s", e.what());
  } catch (...) {
    return Fail(err, TRIB_ERR_INTERNAL, "unknown exception");
  }
}

/// The opaque handles are the family's own C++ objects: these convert them,
/// and provide the vtable's destroy / clone / state_destroy for any copyable
/// model type and any state type.
template <typename T>
T* As(trib_family_model* m) {
  return reinterpret_cast<T*>(m);
}
/// The const form of As.
template <typename T>
const T* As(const trib_family_model* m) {
  return reinterpret_cast<const T*>(m);
}
/// A vtable destroy: deletes the T behind `m`.
template <typename T>
void DestroyModel(trib_family_model* m) {
  delete As<T>(m);
}
/// Deep copy through T's copy constructor.
template <typename T>
int CloneModel(const trib_family_model* m, trib_family_model** out, trib_error* err) {
  return Guard(err, [&] {
    *out = reinterpret_cast<trib_family_model*>(new T(*As<T>(m)));
    return TRIB_OK;
  });
}
/// A vtable state_destroy: deletes the S behind `s`.
template <typename S>
void DestroyState(trib_family_state* s) {
  delete reinterpret_cast<S*>(s);
}

// ---- Special functions ---------------------------------------------------------
//
// The host's (trib_host_api): Boost.Math in double precision, NaN on domain
// errors, +-inf at poles, never throwing; plugins need neither Boost nor
// their own copies. Valid once BeginFamilyVtable (or UseHost) has recorded
// the host, i.e. in every vtable function.
namespace internal {
inline const trib_host_api*& Host() {
  static const trib_host_api* host = nullptr;  // one per plugin (hidden visibility)
  return host;
}
}  // namespace internal
/// Records `host` for the functions below (BeginFamilyVtable calls it).
inline void UseHost(const trib_host_api* host) { internal::Host() = host; }
/// log |Gamma(x)| (trib_host_api.lgamma).
inline double Lgamma(double x) { return internal::Host()->lgamma(x); }
/// psi(x), the derivative of log Gamma(x) (trib_host_api.digamma).
inline double Digamma(double x) { return internal::Host()->digamma(x); }
/// psi'(x) (trib_host_api.trigamma, ABI 1.4).
inline double Trigamma(double x) { return internal::Host()->trigamma(x); }
/// The inverse error function, x in (-1, 1) (trib_host_api.erf_inv, ABI 1.4).
inline double ErfInv(double x) { return internal::Host()->erf_inv(x); }

/// The part of tributary_plugin_init every family shares: refuses a host of
/// another ABI major version, records it for the special functions above,
/// zeroes out->family, sets its struct_size and the destroy / clone /
/// state_destroy of model type M (deep copy through its copy constructor) and
/// state type S. The caller then sets its own functions.
template <typename M, typename S>
int BeginFamilyVtable(const trib_host_api* host, trib_plugin_vtable* out, trib_error* err) {
  if (host == nullptr || host->abi_major != TRIB_ABI_MAJOR) {
    return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "host ABI mismatch");
  }
  UseHost(host);
  trib_family_vtable& v = out->family;
  std::memset(&v, 0, sizeof(v));
  v.struct_size = sizeof(trib_family_vtable);
  v.destroy = DestroyModel<M>;
  v.clone = CloneModel<M>;
  v.state_destroy = DestroyState<S>;
  return TRIB_OK;
}

/// What a loss plugin's vtable holds (see trib_loss_vtable). `create`,
/// `weights_with` (and the destroy BeginLossVtable<L> adds) are for a loss with
/// options; leave them NULL for one without.
struct LossDefinition {
  /// The loss without options (trib_loss_vtable.weights); required, also for a loss with options.
  int (*weights)(const double* log_joint, uint32_t num_classes, int64_t label, double* w, double* c, double* loss_value,
                 trib_error* err) = nullptr;
  bool requires_label = false;  ///< documents must carry a label (trib_loss_vtable.requires_label)
  double default_lambda = 1.0;  ///< step-size parameter lambda when the user gives none
  /// Makes an instance from the options (trib_loss_vtable.create); with BeginLossVtable<L> only.
  int (*create)(const trib_option* options, size_t num_options, trib_loss_model** out, trib_error* err) = nullptr;
  /// weights for an instance (trib_loss_vtable.weights_with); with BeginLossVtable<L> only.
  int (*weights_with)(const trib_loss_model* model, const double* log_joint, uint32_t num_classes, int64_t label,
                      double* w, double* c, double* loss_value, trib_error* err) = nullptr;
};

/// A loss instance's handle is the loss's own C++ object (type L).
template <typename L>
const L* AsLoss(const trib_loss_model* m) {
  return reinterpret_cast<const L*>(m);
}
/// Moves or copies `instance` into a new heap object and returns it as the handle create() hands back.
template <typename L>
trib_loss_model* NewLossModel(L&& instance) {
  return reinterpret_cast<trib_loss_model*>(new std::decay_t<L>(std::forward<L>(instance)));
}
/// The loss vtable's destroy for instances of type L (BeginLossVtable<L> sets it).
template <typename L>
void DestroyLossModel(trib_loss_model* m) {
  delete reinterpret_cast<L*>(m);
}

namespace internal {
inline int FillLossVtable(const trib_host_api* host, trib_plugin_vtable* out, trib_error* err,
                          const LossDefinition& def) {
  if (host == nullptr || host->abi_major != TRIB_ABI_MAJOR) {
    return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "host ABI mismatch");
  }
  if (def.weights == nullptr) return Fail(err, TRIB_ERR_INTERNAL, "loss definition without weights");
  trib_loss_vtable& v = out->loss;
  std::memset(&v, 0, sizeof(v));
  v.struct_size = sizeof(trib_loss_vtable);
  v.requires_label = def.requires_label ? 1 : 0;
  v.default_lambda = def.default_lambda;
  v.weights = def.weights;
  return TRIB_OK;
}
}  // namespace internal

/// The whole tributary_plugin_init of a loss without options: refuses a host
/// of another ABI major version, zeroes out->loss and fills it from `def`.
///
///   extern "C" TRIB_PLUGIN_EXPORT int tributary_plugin_init(const trib_host_api* host, trib_plugin_vtable* out,
///                                                           trib_error* err) {
///     return tributary::sdk::BeginLossVtable(host, out, err,
///                                            {.weights = Weights, .requires_label = true, .default_lambda = 1e-4});
///   }
inline int BeginLossVtable(const trib_host_api* host, trib_plugin_vtable* out, trib_error* err,
                           const LossDefinition& def) {
  if (def.create != nullptr || def.weights_with != nullptr) {
    return Fail(err, TRIB_ERR_INTERNAL, "a loss with options needs BeginLossVtable<InstanceType>");
  }
  return internal::FillLossVtable(host, out, err, def);
}

/// The same for a loss with options (ABI 1.2) whose instances are C++ objects
/// of type L: `def.create` makes one (NewLossModel), `def.weights_with` reads it
/// (AsLoss<L>), and destroy deletes it.
template <typename L>
int BeginLossVtable(const trib_host_api* host, trib_plugin_vtable* out, trib_error* err, const LossDefinition& def) {
  if (def.create == nullptr || def.weights_with == nullptr) {
    return Fail(err, TRIB_ERR_INTERNAL, "a loss with options needs create and weights_with");
  }
  if (int rc = internal::FillLossVtable(host, out, err, def); rc != TRIB_OK) return rc;
  out->loss.create = def.create;
  out->loss.destroy = DestroyLossModel<L>;
  out->loss.weights_with = def.weights_with;
  return TRIB_OK;
}

/// mu[i] for entry i of block b (see trib_block).
inline double Mu(const trib_stats& s, uint32_t b, uint64_t i) {
  const trib_block& blk = s.blocks[b];
  return blk.scale * s.raw[i] + blk.shift * blk.alpha_bar;
}

/// The raw value that makes mu[i] equal to `mu` in block b.
inline double RawFor(const trib_stats& s, uint32_t b, double mu) {
  const trib_block& blk = s.blocks[b];
  return (mu - blk.shift * blk.alpha_bar) / blk.scale;
}

/// Parses a floating-point option value; returns false if it is not a number.
inline bool ParseDouble(const char* text, double* out) {
  if (!text || !*text) return false;
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

/// For a fused step's (ABI 1.7) not-finite check, as the engine's apply
/// makes it: a double is not finite iff its exponent bits are all ones, so
/// adding one exponent step to them carries into bit 63. OR the results over
/// the step's values and test bit 63 once at the end (no branch per entry):
///   uint64_t bad = 0; for (...) bad |= NonFiniteBit(dv); if (bad >> 63) ...
inline uint64_t NonFiniteBit(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return (bits & 0x7ff0000000000000ull) + 0x0010000000000000ull;
}

/// Numerically stable log(sum(exp(x))).
inline double LogSumExp(const double* x, uint32_t n) {
  double m = -INFINITY;
  for (uint32_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  if (!std::isfinite(m)) return m;
  double s = 0;
  for (uint32_t i = 0; i < n; ++i) s += std::exp(x[i] - m);
  return m + std::log(s);
}

// ---- Caches in snapshots (export_cache / import_cache, ABI 1.1) -----------------
//
// A family's incremental caches are usually a few vectors and scalars (running
// totals). ExportCache and ImportCache write and read them in the order given,
// so a family's two hooks are one line each:
//
//   int ExportCache(const trib_family_model* m, double* out, size_t* size, trib_error*) {
//     return sdk::ExportCache(out, size, M(m)->word_total, M(m)->class_total);
//   }
//   int ImportCache(trib_family_model* m, const double* in, size_t size, trib_error* err) {
//     return sdk::ImportCache(in, size, err, "classes + 1", M(m)->word_total, M(m)->class_total);
//   }
//
// ImportCache refuses a size other than the pieces' total (naming `layout`,
// what the values are) and any non-finite value, before copying anything.
// Values may be slightly negative: a running total of entries clamped to 0
// can end a few ulps below zero.
namespace internal {
inline size_t CachePieceSize(const std::vector<double>& v) { return v.size(); }
inline size_t CachePieceSize(double) { return 1; }
inline void CacheOut(const std::vector<double>& v, double** out) {
  std::copy(v.begin(), v.end(), *out);
  *out += v.size();
}
inline void CacheOut(double x, double** out) { *(*out)++ = x; }
inline void CacheIn(const double** in, std::vector<double>& v) {
  std::copy(*in, *in + v.size(), v.begin());
  *in += v.size();
}
inline void CacheIn(const double** in, double& x) { x = *(*in)++; }
}  // namespace internal

/// export_cache from `pieces` (doubles and std::vector<double>s): sets *size to their total number of values
/// and, when `out` is not NULL, copies them there in the order given. Returns TRIB_OK.
template <typename... Pieces>
int ExportCache(double* out, size_t* size, const Pieces&... pieces) {
  *size = (internal::CachePieceSize(pieces) + ... + size_t{0});
  if (out != nullptr) (internal::CacheOut(pieces, &out), ...);
  return TRIB_OK;
}

/// import_cache into `pieces`, in ExportCache's order; each vector must already have its size. Refuses
/// (TRIB_ERR_INVALID_ARGUMENT, naming `layout`) a size other than the pieces' total and any non-finite value,
/// before copying anything.
template <typename... Pieces>
int ImportCache(const double* in, size_t size, trib_error* err, const char* layout, Pieces&... pieces) {
  const size_t want = (internal::CachePieceSize(pieces) + ... + size_t{0});
  if (size != want)
    return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "cache has %zu values, expected %zu (%s)", size, want, layout);
  for (size_t i = 0; i < size; ++i) {
    if (!std::isfinite(in[i])) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "cache value %zu is %g, expected a finite total", i, in[i]);
    }
  }
  (internal::CacheIn(&in, pieces), ...);
  return TRIB_OK;
}

}  // namespace tributary::sdk

/// Defines the plugin's info symbol (tributary_plugin_info, a trib_plugin_info for this header's ABI version).
/// Use once per plugin, at namespace scope.
#define TRIBUTARY_DEFINE_PLUGIN_INFO(kind, name, version, description)           \
  extern "C" TRIB_PLUGIN_EXPORT const trib_plugin_info tributary_plugin_info = { \
      TRIB_PLUGIN_MAGIC, TRIB_ABI_MAJOR, TRIB_ABI_MINOR, static_cast<uint32_t>(kind), name, version, description}

#endif  // TRIBUTARY_PLUGIN_SDK_H_
