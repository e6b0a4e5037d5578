// Fuzz target: the HTTP API's body reader (streams/src/server/http_body.h),
// which turns a client's {"documents": [...]} into protobuf documents before
// anything else sees them.
//
// Input: byte 0 is the request's document limit (0: none), the rest the body.
//
// Checks: no crash, no exception escapes; a body read whole holds at most
// the limit's documents (a larger one is refused as too many, before its
// values are built); every document read serializes to bytes protobuf parses
// back (a learn request's documents go into the write-ahead log); a refusal
// that names a document names the last one read.
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "server/http_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tributary::fuzz::QuietProtobuf();
  if (size < 1) return 0;
  const uint64_t limit = data[0];
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  google::protobuf::RepeatedPtrField<tributary::v1::Document> docs;
  int64_t index = -1;
  bool too_many = false;
  const std::string why = tributary::server_internal::DocumentsFromBody(body, &docs, &index, limit, &too_many);
  FUZZ_NOTE("body: " + (why.empty() ? "ok" : why));
  FUZZ_CHECK(!too_many || !why.empty(), "too many documents, yet no refusal");
  if (too_many) {
    FUZZ_CHECK(docs.empty(), "documents built for a body refused as too many");
    return 0;
  }
  if (why.empty()) {
    FUZZ_CHECK(limit == 0 || static_cast<uint64_t>(docs.size()) <= limit,
               std::to_string(docs.size()) + " documents read with a limit of " + std::to_string(limit));
    for (const auto& d : docs) {
      tributary::v1::Document back;
      FUZZ_CHECK(back.ParseFromString(d.SerializeAsString()), "a document read does not parse back");
    }
  } else if (index >= 0) {
    FUZZ_CHECK(static_cast<int64_t>(docs.size()) == index + 1, "the refusal names another document than the last read");
  }
  return 0;
}
