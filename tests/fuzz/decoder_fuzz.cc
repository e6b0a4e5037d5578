// Fuzz target: DocumentDecoder (lib/include/tributary/document.h), which maps
// a stream's Document onto a model's schema and validates it, against a few
// fixed schemas: a vocabulary (the stream's in the model's order, or in
// another order with terms the model does not know), hashed term ids, real,
// count and categorical features (with categories in another order and one
// the model does not know), features only, open classes, an open vocabulary.
//
// Input: byte 0 picks the case, the rest is the serialized v1::Document.
//   bits 0..2  the schema pair (mod kCases)
//   bit 3      allow_new_classes
//   bit 4      the stream schema comes from the input too: then bytes 1..2
//              are its length n (little endian), bytes 3..3+n the
//              serialized v1::Schema, and the Document follows
//   bit 5      the Document is not parsed: its id, label and text are the
//              (rest of the) input's thirds, raw bytes (invalid UTF-8 too)
//
// Checks: no crash or sanitizer report, and a decoded document is what the
// decoder promises: term ids strictly increasing and in the model's range,
// counts finite and > 0, as many reals and categoricals as the model has,
// reals finite, categories in range, a finite weight > 0, a label known to
// the model (or a new one only when allowed), new terms listed only for an
// open vocabulary when allowed, each once, unknown to the model, non-empty
// and at most kMaxNewTermBytes long; an accepted document serializes to
// bytes protobuf parses back (so it can be logged and replayed); an error
// carries no control byte. Then SplitForCompletion and a
// DocumentSet copy are made of it, and the copy must equal the original.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_check.h"
#include "tributary/document.h"
#include "tributary/schema.h"
#include "tributary/v1/tributary.pb.h"

namespace {

using tributary::v1::FeatureSpec;
using tributary::v1::Schema;

void AddTerms(Schema* s, std::initializer_list<const char*> terms) {
  for (const char* t : terms) s->add_vocabulary(t);
}
void AddClasses(Schema* s, std::initializer_list<const char*> classes) {
  for (const char* c : classes) s->add_class_names(c);
}
void AddFeature(Schema* s, const char* name, FeatureSpec::Kind kind, std::initializer_list<const char*> cats = {}) {
  auto* f = s->add_features();
  f->set_name(name);
  f->set_kind(kind);
  for (const char* c : cats) f->add_categories(c);
}

struct Case {
  tributary::ModelSchema model;
  Schema stream;
  tributary::DocumentDecoder decoder;
};

std::vector<Case> MakeCases() {
  std::vector<std::pair<Schema, Schema>> pairs;
  {  // 0: a vocabulary, the stream's the same
    Schema m;
    AddTerms(&m, {"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"});
    AddClasses(&m, {"a", "b"});
    pairs.emplace_back(m, m);
  }
  {  // 1: the stream's vocabulary in another order, with unknown terms; open classes
    Schema m;
    AddTerms(&m, {"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"});
    AddClasses(&m, {"a", "b"});
    m.set_open_classes(true);
    Schema s;
    AddTerms(&s, {"zz", "t3", "t1", "yy", "t7"});
    pairs.emplace_back(m, s);
  }
  {  // 2: hashed term ids
    Schema m;
    m.set_hashed_dim(64);
    AddClasses(&m, {"a", "b", "c"});
    pairs.emplace_back(m, m);
  }
  {  // 3: terms and real, count and categorical features; categories reordered, one unknown
    Schema m;
    AddTerms(&m, {"t0", "t1", "t2", "t3"});
    AddClasses(&m, {"a"});
    AddFeature(&m, "x", FeatureSpec::REAL);
    AddFeature(&m, "n", FeatureSpec::COUNT);
    AddFeature(&m, "c", FeatureSpec::CATEGORICAL, {"red", "green", "blue"});
    Schema s = m;
    s.mutable_features(2)->clear_categories();
    for (const char* c : {"blue", "purple", "red"}) s.mutable_features(2)->add_categories(c);
    pairs.emplace_back(m, s);
  }
  {  // 4: features only, open classes
    Schema m;
    AddClasses(&m, {"a", "b"});
    m.set_open_classes(true);
    AddFeature(&m, "c1", FeatureSpec::CATEGORICAL, {"u", "v"});
    AddFeature(&m, "r", FeatureSpec::REAL);
    AddFeature(&m, "c2", FeatureSpec::CATEGORICAL, {"p", "q", "s"});
    AddFeature(&m, "k", FeatureSpec::COUNT);
    pairs.emplace_back(m, m);
  }
  {  // 5: an open vocabulary (new terms listed when allowed), open classes
    Schema m;
    AddTerms(&m, {"t0", "t1", "t2", "t3"});
    AddClasses(&m, {"a"});
    m.set_open_vocabulary(true);
    m.set_open_classes(true);
    pairs.emplace_back(m, m);
  }
  std::vector<Case> cases;
  for (auto& [m, s] : pairs) {
    auto model = tributary::ModelSchema::FromProto(m);
    FUZZ_CHECK(model.ok(), model.status().ToString());
    auto decoder = tributary::DocumentDecoder::Create(*model, s);
    FUZZ_CHECK(decoder.ok(), decoder.status().ToString());
    cases.push_back(Case{std::move(model).value(), s, std::move(decoder).value()});
  }
  return cases;
}

void CheckDecoded(const tributary::DocumentBuffer& d, const tributary::ModelSchema& model, bool allow_new,
                  const std::string& new_class) {
  for (size_t i = 0; i < d.term_ids.size(); ++i) {
    FUZZ_CHECK(i == 0 || d.term_ids[i - 1] < d.term_ids[i], "term ids not strictly increasing");
    FUZZ_CHECK(d.term_ids[i] < model.vocab_size(), "term id " + std::to_string(d.term_ids[i]) + " out of range");
    FUZZ_CHECK(std::isfinite(d.term_counts[i]) && d.term_counts[i] > 0, "a count not finite and > 0");
  }
  FUZZ_CHECK(d.term_ids.size() == d.term_counts.size(), "as many counts as term ids");
  FUZZ_CHECK(d.reals.size() == model.num_reals(), "number of reals");
  FUZZ_CHECK(d.real_missing.empty() || d.real_missing.size() == d.reals.size(), "real_missing size");
  for (size_t i = 0; i < d.reals.size(); ++i) FUZZ_CHECK(std::isfinite(d.reals[i]), "a real not finite");
  const auto& card = model.categorical_cardinalities();
  FUZZ_CHECK(d.categoricals.size() == card.size(), "number of categoricals");
  FUZZ_CHECK(d.categorical_missing.empty() || d.categorical_missing.size() == d.categoricals.size(),
             "categorical_missing size");
  for (size_t i = 0; i < d.categoricals.size(); ++i) {
    FUZZ_CHECK(d.categoricals[i] < card[i], "category out of range");
  }
  FUZZ_CHECK(std::isfinite(d.weight) && d.weight > 0, "weight not finite and > 0");
  FUZZ_CHECK(d.label >= -1 && d.label < static_cast<int64_t>(model.classes().size()), "label out of range");
  FUZZ_CHECK(d.new_terms.empty() || (allow_new && model.open_vocabulary()), "new terms where none are allowed");
  for (size_t i = 0; i < d.new_terms.size(); ++i) {
    const std::string& t = d.new_terms[i];
    FUZZ_CHECK(!t.empty() && t.size() <= tributary::kMaxNewTermBytes, "a new term empty or too long");
    FUZZ_CHECK(model.TermIndex(t) < 0, "a known term listed as new");
    for (size_t j = 0; j < i; ++j) FUZZ_CHECK(d.new_terms[j] != t, "a new term listed twice");
  }
  if (!new_class.empty()) {
    FUZZ_CHECK(allow_new && model.open_classes() && d.label == -1, "a new class where none is allowed");
    FUZZ_CHECK(model.ClassIndex(new_class) < 0, "a known class reported as new");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tributary::fuzz::QuietProtobuf();
  static std::vector<Case>* cases = new std::vector<Case>(MakeCases());
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const Case& c = (*cases)[(mode & 7) % cases->size()];
  const bool allow_new = (mode & 8) != 0;
  const char* p = reinterpret_cast<const char*>(data + 1);
  size_t n = size - 1;

  const tributary::DocumentDecoder* decoder = &c.decoder;
  std::optional<tributary::DocumentDecoder> own;
  if (mode & 16) {
    if (n < 2) return 0;
    const size_t len = static_cast<size_t>(static_cast<uint8_t>(p[0])) | static_cast<size_t>(static_cast<uint8_t>(p[1]))
                                                                             << 8;
    p += 2;
    n -= 2;
    if (len > n) return 0;
    Schema stream;
    if (!stream.ParseFromArray(p, static_cast<int>(len))) return 0;
    p += len;
    n -= len;
    auto created = tributary::DocumentDecoder::Create(c.model, stream);
    if (!created.ok()) return 0;
    own.emplace(std::move(created).value());
    decoder = &*own;
  }

  tributary::v1::Document doc;
  if (mode & 32) {
    // Raw strings, as a broker's text or an embedding caller hands them over
    // (protobuf's parse never lets invalid UTF-8 through): id, label and text
    // are the input's thirds, byte for byte.
    const size_t third = n / 3;
    doc.set_id(std::string(p, third));
    doc.set_label(std::string(p + third, third));
    doc.set_text(std::string(p + 2 * third, n - 2 * third));
  } else if (!doc.ParseFromArray(p, static_cast<int>(n))) {
    return 0;
  }
  tributary::DocumentBuffer out;
  std::string new_class;
  tributary::DecodeCounters counters;
  tributary::Status st =
      decoder->Decode(doc, 7, c.model, allow_new ? tributary::kGrowClassesAndTerms : tributary::kGrowNothing, &out,
                      &new_class, &counters);
  FUZZ_NOTE("decode: " + (st.ok() ? "ok" : st.ToString()));
  if (!st.ok()) {
    FUZZ_CHECK(st.message().find("document #7") != std::string::npos,
               "the error does not name the document: " + st.ToString());
    // Errors quote the input made printable: no control byte of the input
    // reaches a terminal or a log line.
    for (const char ch : st.message()) {
      const auto b = static_cast<unsigned char>(ch);
      FUZZ_CHECK(b >= 0x20 && b != 0x7f, "a control byte in the error: " + st.ToString());
    }
    return 0;
  }
  // What the decoder accepts can be logged and read back: the write-ahead
  // log's records are parsed by protobuf, which refuses invalid UTF-8.
  {
    tributary::v1::Document back;
    FUZZ_CHECK(back.ParseFromString(doc.SerializeAsString()), "an accepted document does not parse back");
  }
  FUZZ_CHECK(counters.documents == 1, "counters.documents");
  CheckDecoded(out, c.model, allow_new, new_class);

  const trib_document view = out.View();
  tributary::DocumentBuffer observed, heldout;
  tributary::SplitForCompletion(view, &observed, &heldout);
  FUZZ_CHECK(observed.reals == out.reals && heldout.categoricals == out.categoricals, "features kept by the split");

  tributary::DocumentSet set;
  set.Add(out);
  const trib_document copy = set.View(0);
  FUZZ_CHECK(copy.num_terms == view.num_terms && copy.num_reals == view.num_reals &&
                 copy.num_categoricals == view.num_categoricals && copy.label == view.label,
             "a DocumentSet copy differs");
  for (uint32_t i = 0; i < copy.num_terms; ++i) {
    FUZZ_CHECK(copy.term_ids[i] == view.term_ids[i] && copy.term_counts[i] == view.term_counts[i],
               "a DocumentSet copy's terms differ");
  }
  return 0;
}
