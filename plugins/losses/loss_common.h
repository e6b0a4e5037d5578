// Shared by the built-in loss plugins: the entry point boilerplate.
#ifndef TRIBUTARY_PLUGINS_LOSS_COMMON_H_
#define TRIBUTARY_PLUGINS_LOSS_COMMON_H_

#include <cstring>

#include "tributary/plugin_sdk.h"

// Defines tributary_plugin_init for a loss with the given weights function.
#define TRIBUTARY_DEFINE_LOSS_ENTRY(weights_fn, requires_label_flag, lambda_default)                          \
  extern "C" TRIB_PLUGIN_EXPORT int tributary_plugin_init(const trib_host_api* host, trib_plugin_vtable* out, \
                                                          trib_error* err) {                                  \
    if (host == nullptr || host->abi_major != TRIB_ABI_MAJOR) {                                               \
      return tributary::sdk::Fail(err, TRIB_ERR_INVALID_ARGUMENT, "host ABI mismatch");                       \
    }                                                                                                         \
    std::memset(&out->loss, 0, sizeof(out->loss));                                                            \
    out->loss.struct_size = sizeof(trib_loss_vtable);                                                         \
    out->loss.requires_label = (requires_label_flag);                                                         \
    out->loss.default_lambda = (lambda_default);                                                              \
    out->loss.weights = (weights_fn);                                                                         \
    return TRIB_OK;                                                                                           \
  }

// The same for a loss with options (ABI 1.2 create / destroy / weights_with).
#define TRIBUTARY_DEFINE_LOSS_ENTRY_WITH_OPTIONS(weights_fn, requires_label_flag, lambda_default, create_fn,  \
                                                 destroy_fn, weights_with_fn)                                 \
  extern "C" TRIB_PLUGIN_EXPORT int tributary_plugin_init(const trib_host_api* host, trib_plugin_vtable* out, \
                                                          trib_error* err) {                                  \
    if (host == nullptr || host->abi_major != TRIB_ABI_MAJOR) {                                               \
      return tributary::sdk::Fail(err, TRIB_ERR_INVALID_ARGUMENT, "host ABI mismatch");                       \
    }                                                                                                         \
    std::memset(&out->loss, 0, sizeof(out->loss));                                                            \
    out->loss.struct_size = sizeof(trib_loss_vtable);                                                         \
    out->loss.requires_label = (requires_label_flag);                                                         \
    out->loss.default_lambda = (lambda_default);                                                              \
    out->loss.weights = (weights_fn);                                                                         \
    out->loss.create = (create_fn);                                                                           \
    out->loss.destroy = (destroy_fn);                                                                         \
    out->loss.weights_with = (weights_with_fn);                                                               \
    return TRIB_OK;                                                                                           \
  }

#endif  // TRIBUTARY_PLUGINS_LOSS_COMMON_H_
