// The HTTP API's request bodies (http_body.h).
#include "server/http_body.h"

#include <cmath>
#include <limits>
#include <string_view>

#include "tributary/document.h"

namespace tributary::server_internal {

using json = nlohmann::json;

namespace {

bool IsNumber(const json& v) { return v.is_number(); }

// Fills `doc` from element `index` of "documents"; "" or why it cannot,
// naming the document as the decoder's errors do.
std::string DocumentFromJson(const json& j, uint64_t index, v1::Document* doc) {
  if (!j.is_object()) return DocumentName(index, "") + ": expected a JSON object, found " + j.type_name();
  if (auto it = j.find("id"); it != j.end()) {
    if (!it->is_string()) return DocumentName(index, "") + ": \"id\" must be a string, found " + it->type_name();
    doc->set_id(it->get<std::string>());
  }
  auto bad = [&](const std::string& what) { return DocumentName(index, doc->id()) + ": " + what; };
  for (const auto& [key, v] : j.items()) {
    if (key == "id") continue;
    if (key == "label") {
      if (v.is_null()) continue;
      if (!v.is_string()) return bad("\"label\" must be a string, found " + std::string(v.type_name()));
      doc->set_label(v.get<std::string>());
    } else if (key == "text") {
      if (!v.is_string()) return bad("\"text\" must be a string, found " + std::string(v.type_name()));
      doc->set_text(v.get<std::string>());
    } else if (key == "terms") {
      if (!v.is_object())
        return bad("\"terms\" must be an object {\"word\": count}, found " + std::string(v.type_name()));
      for (const auto& [word, count] : v.items()) {
        if (!IsNumber(count)) {
          return bad("\"terms\": the count of '" + word + "' must be a number, found " + count.type_name());
        }
        doc->add_tokens(word);
        doc->add_token_counts(count.get<double>());  // range (finite, > 0) checked by the decoder
      }
    } else if (key == "reals") {
      if (!v.is_array()) return bad("\"reals\" must be an array of numbers, found " + std::string(v.type_name()));
      for (size_t i = 0; i < v.size(); ++i) {
        if (!IsNumber(v[i])) {
          return bad("\"reals\"[" + std::to_string(i) + "] must be a number, found " + v[i].type_name());
        }
        doc->add_reals(v[i].get<double>());
      }
    } else if (key == "categoricals" || key == "missing_features") {
      if (!v.is_array()) return bad("\"" + key + "\" must be an array of integers, found " + v.type_name());
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_number_unsigned() || v[i].get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
          return bad("\"" + key + "\"[" + std::to_string(i) + "] must be an integer in [0, 2^32), found " + Dump(v[i]));
        }
        const auto x = static_cast<uint32_t>(v[i].get<uint64_t>());
        if (key == "categoricals") {
          doc->add_categoricals(x);
        } else {
          doc->add_missing_features(x);
        }
      }
    } else if (key == "weight") {
      if (!IsNumber(v)) return bad("\"weight\" must be a number, found " + std::string(v.type_name()));
      // (document.h CheckGivenWeight: the rule InputDocument applies; a given
      // 0 is refused, not read as 1.)
      if (Status st = CheckGivenWeight(v.get<double>()); !st.ok()) return bad("\"weight\": " + st.message());
      doc->set_weight(v.get<double>());
    } else {
      return bad("unknown field \"" + key +
                 "\" (expected id, label, text, terms, reals, categoricals, missing_features, weight)");
    }
  }
  return "";
}

// Counts the values of a body's arrays one level inside its top-level
// object ({"documents": [...]}), without building them, and stops once more
// than `max` are seen: a parsed JSON value and a parsed document cost a few
// hundred bytes each however few bytes they take in the body (a 15.6 MB body
// of 1.2 M tiny documents took 0.7 GB before it could be refused).
class DocumentCounter : public nlohmann::json_sax<json> {
 public:
  explicit DocumentCounter(uint64_t max) : max_(max) {}
  uint64_t count() const { return count_; }
  bool over() const { return count_ > max_; }
  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override { return Open(); }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(); }
  bool end_array() override { return Close(); }
  bool key(string_t&) override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  // An object or array is a value at the current depth, then holds the
  // values one deeper.
  bool Open() {
    const bool more = Value();
    ++depth_;
    return more;
  }
  bool Close() {
    --depth_;
    return true;
  }
  // A value starts at the current depth: the documents are at depth 2.
  bool Value() {
    if (depth_ == 2) ++count_;
    return !over();
  }
  uint64_t max_, count_ = 0;
  int depth_ = 0;
};

}  // namespace

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// A request body: {"documents": [...]}. Returns "" or why not; a document
// at fault is named in the message and its position set in `*index`. More
// than `max_documents` documents (0: no limit): *too_many is set, nothing is
// built.
std::string DocumentsFromBody(const std::string& body, google::protobuf::RepeatedPtrField<v1::Document>* docs,
                              int64_t* index, uint64_t max_documents, bool* too_many, bool* keep) {
  *too_many = false;
  if (keep != nullptr) *keep = false;
  // A body this small cannot hold more ("{}," per document): no count.
  if (max_documents != 0 && body.size() > 3 * max_documents) {
    DocumentCounter counter(max_documents);
    json::sax_parse(body, &counter);  // stops early: past the limit, or at a syntax error (found again below)
    if (counter.over()) {
      *too_many = true;
      return "request holds more than " + std::to_string(max_documents) +
             " documents (--max-request-documents): send them in smaller requests";
    }
  }
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {
    return std::string("body is not JSON: ") + e.what();
  }
  if (!j.is_object()) return std::string("body must be a JSON object {\"documents\": [...]}, found ") + j.type_name();
  for (const auto& [key, v] : j.items()) {
    if (keep != nullptr && key == "keep") {
      if (!v.is_boolean()) return std::string("\"keep\" must be true or false, found ") + v.type_name();
      *keep = v.get<bool>();
      continue;
    }
    if (key != "documents") {
      return "unknown field \"" + key + "\" in the body (expected \"documents\"" +
             (keep != nullptr ? " and \"keep\")" : ")");
    }
  }
  auto it = j.find("documents");
  if (it == j.end() || !it->is_array()) return "body must have \"documents\": an array of documents";
  for (size_t i = 0; i < it->size(); ++i) {
    std::string why = DocumentFromJson((*it)[i], i, docs->Add());
    if (!why.empty()) {
      *index = static_cast<int64_t>(i);
      return why;
    }
  }
  return "";
}

std::string FeedbackFromBody(const std::string& body, std::vector<Feedback>* items, int64_t* index, uint64_t max_items,
                             bool* too_many) {
  *too_many = false;
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return "body is not JSON";
  if (!j.is_object()) {
    return std::string(
               "body must be a JSON object {\"feedback\": [{\"prediction_id\": ..., \"label\": ...}]}, found ") +
           j.type_name();
  }
  for (const auto& [key, v] : j.items()) {
    if (key != "feedback") return "unknown field \"" + key + "\" in the body (expected \"feedback\")";
  }
  auto it = j.find("feedback");
  if (it == j.end() || !it->is_array())
    return "body must have \"feedback\": an array of {\"prediction_id\", \"label\"}";
  if (it->empty()) return "\"feedback\" holds no item";
  if (max_items != 0 && it->size() > max_items) {
    *too_many = true;
    return "request holds " + std::to_string(it->size()) + " labels, over the limit of " + std::to_string(max_items) +
           " (--max-request-documents): send them in smaller requests";
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const json& e = (*it)[i];
    const std::string at = "feedback item " + std::to_string(i);
    *index = static_cast<int64_t>(i);
    if (!e.is_object()) return at + ": expected an object, found " + e.type_name();
    Feedback f;
    for (const auto& [key, v] : e.items()) {
      if (key != "prediction_id" && key != "label") {
        return at + ": unknown field \"" + key + "\" (expected \"prediction_id\" and \"label\")";
      }
      if (!v.is_string()) return at + ": \"" + key + "\" must be a string, found " + v.type_name();
      (key == "label" ? f.label : f.prediction_id) = v.get<std::string>();
    }
    if (f.prediction_id.empty()) return at + ": \"prediction_id\" is missing";
    if (!e.contains("label")) return at + ": \"label\" is missing";
    items->push_back(std::move(f));
  }
  *index = -1;
  return "";
}

}  // namespace tributary::server_internal
