// The HTTP API's request bodies (docs/http-api.md): {"documents": [...]}
// read into protobuf documents. Apart from the session code (http.cc) so
// that a fuzz target (tests/fuzz/http_body_fuzz.cc) reaches it.
#ifndef TRIBUTARY_STREAMS_SRC_SERVER_HTTP_BODY_H_
#define TRIBUTARY_STREAMS_SRC_SERVER_HTTP_BODY_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tributary/v1/tributary.pb.h"

namespace tributary::server_internal {

// `j` as compact JSON; invalid UTF-8 in its strings replaced (never throws).
std::string Dump(const nlohmann::json& j);

// A request body: {"documents": [...]}. Returns "" or why not; a document
// at fault is named in the message and its position set in `*index`. More
// than `max_documents` documents (0: no limit): *too_many is set and no
// value of the body is built (they are counted by a SAX pass first, which
// stops past the limit: a parsed JSON value and a parsed document cost a
// few hundred bytes each however few bytes they take in the body).
// With `keep` (POST /v1/predict), the body may also hold "keep": true|false
// (docs/http-api.md "Late labels"); *keep gets it (false when absent).
std::string DocumentsFromBody(const std::string& body, google::protobuf::RepeatedPtrField<v1::Document>* docs,
                              int64_t* index, uint64_t max_documents, bool* too_many, bool* keep = nullptr);

// One label for a kept prediction (POST /v1/feedback).
struct Feedback {
  std::string prediction_id;
  std::string label;
};
// A feedback body: {"feedback": [{"prediction_id": "k12", "label": "spam"}, ...]}.
// Returns "" or why not (the item at fault named, its position in *index).
// More than `max_items` (0: no limit): refused, *too_many set.
std::string FeedbackFromBody(const std::string& body, std::vector<Feedback>* items, int64_t* index, uint64_t max_items,
                             bool* too_many);

}  // namespace tributary::server_internal

#endif  // TRIBUTARY_STREAMS_SRC_SERVER_HTTP_BODY_H_
