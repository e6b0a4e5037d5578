// librdkafka, loaded on first use (rdkafka_api.h says why).
#include "rdkafka_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

namespace tributary::kafka_internal {
namespace {

RdKafkaApi g_rdkafka;  // filled once by LoadRdKafka, read-only afterwards

}  // namespace

const RdKafkaApi& Rdk() { return g_rdkafka; }

Status LoadRdKafka() {
  static const Status loaded = [] {
    const char* env = std::getenv("TRIBUTARY_RDKAFKA_LIBRARY");
    const std::string file = env && *env ? env : "librdkafka.so.1";
    void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = dlerror();
      return Status::IOError("kafka source: cannot load " + file + " (" + (e ? e : "dlopen failed") +
                             "); expected librdkafka >= 1.6 (Debian: librdkafka1)");
    }
    RdKafkaApi api;
#define TRIB_RDKAFKA_RESOLVE(name)                                                                              \
  api.rd_kafka_##name = reinterpret_cast<decltype(api.rd_kafka_##name)>(dlsym(handle, "rd_kafka_" #name));      \
  if (api.rd_kafka_##name == nullptr) {                                                                         \
    return Status::IOError("kafka source: " + file + " has no rd_kafka_" #name "; expected librdkafka >= 1.6"); \
  }
    TRIB_RDKAFKA_FUNCTIONS(TRIB_RDKAFKA_RESOLVE)
#undef TRIB_RDKAFKA_RESOLVE
    g_rdkafka = api;  // the handle stays open for the life of the process
    return Status::OK();
  }();
  return loaded;
}

}  // namespace tributary::kafka_internal
