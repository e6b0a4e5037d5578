// Writes the seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/):
// small valid inputs, in each target's input format (its *_fuzz.cc says
// which), plus a few damaged ones next to them. Built in every ordinary
// build; regenerate the checked-in corpus with
//     build/bin/fuzz_make_seeds tests/fuzz/corpus
// (it needs the built-in plugins, found beside the program as the CLI finds
// them). Deterministic: the same program writes the same bytes.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "mem_env.h"
#include "server/frame.h"
#include "tributary/document.h"
#include "tributary/learner.h"
#include "tributary/model.h"
#include "tributary/plugin_registry.h"
#include "tributary/stream_io.h"
#include "tributary/wal.h"

namespace {

namespace fs = std::filesystem;
using tributary::Status;
using tributary::v1::Document;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "fuzz_make_seeds: %s\n", what.c_str());
  std::exit(1);
}
void Check(const Status& st, const std::string& what) {
  if (!st.ok()) Die(what + ": " + st.ToString());
}

class Corpus {
 public:
  explicit Corpus(fs::path root) : root_(std::move(root)) {}
  // Writes <root>/<target>/<name> = mode byte + bytes.
  void Add(const std::string& target, const std::string& name, uint8_t mode, const std::string& bytes) {
    fs::create_directories(root_ / target);
    std::ofstream out(root_ / target / name, std::ios::binary | std::ios::trunc);
    out.put(static_cast<char>(mode));
    out << bytes;
    if (!out) Die("cannot write " + (root_ / target / name).string());
    ++written_;
  }
  int written() const { return written_; }

 private:
  fs::path root_;
  int written_ = 0;
};

Document Doc(const std::string& id, std::vector<uint32_t> ids, std::vector<double> counts, const char* label) {
  Document d;
  d.set_id(id);
  for (uint32_t t : ids) d.add_term_ids(t);
  for (double c : counts) d.add_term_counts(c);
  if (label) d.set_label(label);
  return d;
}

// ---- stream_reader: mode (bit 0 small frame limit, bits 1..3 read size) + stream file

// `checksums`: stream format 2 (a CRC after every frame).
std::string Stream(const std::vector<Document>& docs, const std::string& extra_frame = "", size_t bad_at = 99,
                   bool checksums = false) {
  tributary::fuzz::MemEnv env;
  tributary::v1::StreamHeader h = tributary::NewStreamHeader(checksums);
  for (const char* t : {"t0", "t1", "t2", "t3"}) h.mutable_schema()->add_vocabulary(t);
  for (const char* c : {"a", "b"}) h.mutable_schema()->add_class_names(c);
  h.set_document_count(docs.size());
  auto w = tributary::DocumentWriter::Create("/s", h, &env);
  Check(w.status(), "stream");
  for (size_t i = 0; i < docs.size(); ++i) {
    if (i == bad_at) {
      // A frame that is not a Document (a wrong wire type): recoverable.
      Check((*w)->Close(), "stream");
      env.files()["/s"] += std::string("\x03\x0b\xff\xff", 4);
      w = tributary::DocumentWriter::CreateRaw("/t", &env);
    }
    Check((*w)->Write(docs[i]), "stream");
  }
  Check((*w)->Close(), "stream");
  return env.files()["/s"] + env.files()["/t"] + extra_frame;
}

void StreamSeeds(Corpus* c) {
  std::vector<Document> docs = {Doc("d0", {0, 2}, {1, 3}, "a"), Doc("d1", {1}, {}, "b"),
                                Doc("", {3, 3}, {1, 1}, nullptr)};
  Document toks;
  toks.add_tokens("t1");
  toks.add_tokens("unknown");
  toks.set_weight(2);
  docs.push_back(toks);
  const std::string ok = Stream(docs);
  c->Add("stream_reader", "valid", 0x00, ok);
  c->Add("stream_reader", "valid_short_reads", 0x02, ok);
  c->Add("stream_reader", "valid_small_frames", 0x0d, ok);
  c->Add("stream_reader", "bad_frame_then_more", 0x06, Stream(docs, "", 2));
  c->Add("stream_reader", "two_streams", 0x08, ok + ok);
  c->Add("stream_reader", "truncated", 0x00, ok.substr(0, ok.size() - 3));
  c->Add("stream_reader", "header_only", 0x00, Stream({}));
  // Format 2: every frame carries a CRC; a flipped bit in a document, a
  // truncated last frame.
  const std::string crc = Stream(docs, "", 99, true);
  c->Add("stream_reader", "crc_valid", 0x00, crc);
  c->Add("stream_reader", "crc_valid_short_reads", 0x04, crc);
  std::string flipped = crc;
  flipped[flipped.size() - 9] = static_cast<char>(flipped[flipped.size() - 9] ^ 0x10);
  c->Add("stream_reader", "crc_flipped_bit", 0x00, flipped);
  c->Add("stream_reader", "crc_truncated", 0x00, crc.substr(0, crc.size() - 2));
}

// ---- decoder: mode (bits 0..2 schema case, bit 3 new classes, bit 4 own schema) + Document

void DecoderSeeds(Corpus* c) {
  c->Add("decoder", "vocab", 0x00, Doc("v", {0, 5, 5, 7}, {1, 2, 0.5, 4}, "a").SerializeAsString());
  Document remap = Doc("r", {0, 1, 2, 4}, {}, "new-class");
  remap.add_tokens("t6");
  c->Add("decoder", "remap_new_class", 0x09, remap.SerializeAsString());
  Document hashed = Doc("h", {3, 63}, {1, 1}, "c");
  hashed.add_tokens("apple");
  hashed.add_tokens("pear");
  c->Add("decoder", "hashed", 0x02, hashed.SerializeAsString());
  Document feats = Doc("f", {1, 3}, {2, 1}, "a");
  feats.add_reals(0.5);
  feats.add_reals(3);
  feats.add_categoricals(2);
  feats.set_weight(1.5);
  c->Add("decoder", "features", 0x03, feats.SerializeAsString());
  feats.add_missing_features(1);
  c->Add("decoder", "features_missing", 0x03, feats.SerializeAsString());
  Document only;
  only.set_id("o");
  only.add_categoricals(1);
  only.add_reals(-2.5);
  only.add_categoricals(2);
  only.add_reals(4);
  only.add_missing_features(2);
  only.set_label("b");
  c->Add("decoder", "features_only", 0x04, only.SerializeAsString());
  // Mode 0x10: the stream schema from the input (case 0's model).
  tributary::v1::Schema s;
  for (const char* t : {"t7", "t0", "x"}) s.add_vocabulary(t);
  const std::string schema = s.SerializeAsString();
  std::string in;
  in += static_cast<char>(schema.size() & 0xff);
  in += static_cast<char>(schema.size() >> 8);
  in += schema + Doc("s", {0, 1, 2}, {1, 1, 1}, "b").SerializeAsString();
  c->Add("decoder", "own_schema", 0x10, in);
  // Raw strings (bit 5): id, label and text as thirds of the input, one with
  // an invalid byte, one valid with a new class on an open schema (case 5).
  c->Add("decoder", "raw_invalid_utf8", 0x20 | 0x08 | 5,
         std::string("id\xff"
                     "dlabel1some words",
                     20));
  c->Add("decoder", "raw_valid", 0x20 | 0x08 | 5, "doc1__newlbwords here");
}

// ---- snapshot: mode (bit 0: the rest is the payload, sealed by the target) + file

void SnapshotSeeds(Corpus* c) {
  const tributary::PluginRegistry registry({tributary::PluginRegistry::BuiltinPluginDir()}, true);
  auto family = [&](const char* n) {
    auto p = registry.Find(n, TRIB_KIND_FAMILY);
    Check(p.status(), n);
    return *p;
  };
  auto loss = [&](const char* n) {
    auto p = registry.Find(n, TRIB_KIND_LOSS);
    Check(p.status(), n);
    return *p;
  };
  struct Spec {
    const char* name;
    const char* family;
    const char* loss;
    tributary::Options options;
    bool reals;
    bool grown = false;  // starts with class "a" only and gains "b": room for a third (class_capacity)
  };
  const std::vector<Spec> specs = {
      {"multinomial_nll", "multinomial", "nll", {{"prior", "log"}}, false},
      {"multinomial_hinge", "multinomial", "hinge", {}, false},
      {"multinomial_grown_ncll", "multinomial", "ncll", {}, false, true},
      {"gaussian_ncll", "gaussian", "ncll", {}, true},
      {"gaussian_grown_hinge", "gaussian", "hinge", {}, true, true},
      {"lda_classifier_grown_ncll", "lda-classifier", "ncll", {{"topics", "2"}}, false, true},
      {"lda_nll", "lda", "nll", {{"topics", "2"}}, false},
      {"multinomial_mixture_nll", "multinomial-mixture", "nll", {{"components", "2"}}, false},
      {"emsd_mixture_sep", "emsd-mixture", "nll", {{"components", "2"}}, false},
  };
  for (const Spec& spec : specs) {
    tributary::v1::Schema proto;
    if (spec.reals) {
      for (const char* x : {"x0", "x1"}) {
        auto* f = proto.add_features();
        f->set_name(x);
        f->set_kind(tributary::v1::FeatureSpec::REAL);
      }
    } else {
      for (const char* t : {"t0", "t1", "t2", "t3", "t4"}) proto.add_vocabulary(t);
    }
    proto.add_class_names("a");
    if (!spec.grown) proto.add_class_names("b");
    auto schema = tributary::ModelSchema::FromProto(proto);
    Check(schema.status(), spec.name);
    auto m = tributary::Model::Create(family(spec.family), loss(spec.loss), *schema, spec.options);
    Check(m.status(), spec.name);
    if (spec.grown) Check((*m)->AddClass("b"), spec.name);
    if (std::string(spec.loss) == "hinge") Check((*m)->SetLoss(loss("hinge"), {{"margin", "2"}}), spec.name);
    (*m)->learner_state().effective_size = 20;
    auto learner = tributary::Learner::Create(m->get(), tributary::LearnerOptions{});
    Check(learner.status(), spec.name);
    std::mt19937_64 rng(7);
    for (int i = 0; i < 20; ++i) {
      tributary::DocumentBuffer d;
      d.index = static_cast<uint64_t>(i);
      d.label = static_cast<int64_t>(rng() % 2);
      if (spec.reals) {
        d.reals = {static_cast<double>(rng() % 100) / 10.0, static_cast<double>(rng() % 7) - 3.0};
      } else {
        d.term_ids = {static_cast<uint32_t>(rng() % 2), static_cast<uint32_t>(2 + rng() % 3)};
        d.term_counts = {1.0, static_cast<double>(1 + rng() % 3)};
      }
      Check((*learner)->Learn(d.View()), spec.name);
    }
    tributary::fuzz::MemEnv env;
    tributary::SnapshotOptions opt;
    opt.env = &env;
    opt.log_sequence = 20;
    Check((*m)->Save("/m", opt), spec.name);
    const std::string file = env.files()["/m"];
    const size_t header = 8 + 4 + 8;
    c->Add("snapshot", std::string(spec.name) + "_file", 0x00, file);
    c->Add("snapshot", std::string(spec.name) + "_payload", 0x01, file.substr(header, file.size() - header - 4));
  }
  c->Add("snapshot", "not_a_snapshot", 0x00, "TRIBSNAQ\x01");
}

// ---- wal: mode (bit 0 skip, bits 1..4 after) + segments (first byte: first sequence) joined by "\xf0WAL"

std::string WalInput(const std::vector<std::pair<uint8_t, std::string>>& segs) {
  std::string out;
  for (size_t i = 0; i < segs.size(); ++i) {
    if (i) out += std::string("\xf0WAL", 4);
    out += static_cast<char>(segs[i].first);
    out += segs[i].second;
  }
  return out;
}

void WalSeeds(Corpus* c) {
  tributary::fuzz::MemEnv env;
  auto wal = tributary::WriteAheadLog::Open("/w", &env);
  Check(wal.status(), "wal");
  auto append = [&](uint64_t seq) {
    tributary::v1::WalRecord r;
    r.set_sequence(seq);
    *r.mutable_document() = Doc("w" + std::to_string(seq), {static_cast<uint32_t>(seq % 4)}, {}, "a");
    Check((*wal)->Append(r), "wal");
  };
  Check((*wal)->StartSegment(1), "wal");
  for (uint64_t s = 1; s <= 3; ++s) append(s);
  Check((*wal)->StartSegment(4), "wal");
  for (uint64_t s = 4; s <= 5; ++s) append(s);
  Check((*wal)->Sync(), "wal");
  const auto segs = (*wal)->Segments();
  if (segs.size() != 2) Die("wal: expected 2 segments");
  const std::string a = env.files()[segs[0]], b = env.files()[segs[1]];
  c->Add("wal", "two_segments", 0x00, WalInput({{1, a}, {4, b}}));
  c->Add("wal", "after_2_skip", 0x05, WalInput({{1, a}, {4, b}}));
  std::string flipped = a;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x20);
  c->Add("wal", "flipped_byte_skip", 0x01, WalInput({{1, flipped}, {4, b}}));
  c->Add("wal", "flipped_byte_refuse", 0x00, WalInput({{1, flipped}, {4, b}}));
  c->Add("wal", "torn_tail", 0x00, WalInput({{1, a}, {4, b.substr(0, b.size() - 5)}}));
  c->Add("wal", "missing_segment_skip", 0x01, WalInput({{1, a}, {9, b}}));
}

// ---- frame: mode (bit 0 token, bit 1 shown, bits 2..3 max frame, bits 4..5 pre-auth max) + bytes sent

void FrameSeeds(Corpus* c) {
  namespace si = tributary::server_internal;
  tributary::v1::Request ping, stats, learn, predict, snapshot, none;
  ping.set_request_id(1);
  ping.mutable_ping();
  stats.set_request_id(2);
  stats.mutable_stats();
  learn.set_request_id(3);
  *learn.mutable_learn()->add_documents() = Doc("l", {0, 1}, {1, 2}, "a");
  predict.set_request_id(4);
  *predict.mutable_predict()->add_documents() = Doc("p", {2}, {}, nullptr);
  snapshot.set_request_id(5);
  snapshot.mutable_snapshot();
  none.set_request_id(6);
  std::string all;
  for (const auto* r : {&ping, &stats, &learn, &predict, &snapshot, &none}) all += si::FrameMessage(*r);
  c->Add("frame", "requests", 0x00, all);
  c->Add("frame", "requests_small_limit", 0x0c, all);
  tributary::v1::Request with_token = learn;
  with_token.set_auth_token("s3cret");
  c->Add("frame", "token", 0x01 | 0x20, si::FrameMessage(with_token) + si::FrameMessage(ping));
  with_token.set_auth_token("wrong");
  c->Add("frame", "wrong_token", 0x01 | 0x20, si::FrameMessage(with_token));
  c->Add("frame", "no_token", 0x01, si::FrameMessage(ping));
  c->Add("frame", "bad_length", 0x00, std::string(11, '\xff'));
  c->Add("frame", "partial", 0x00, si::FrameMessage(learn).substr(0, 7));
}

// ---- http_body: mode (the document limit, 0: none) + the body
void HttpBodySeeds(Corpus* c) {
  c->Add("http_body", "learn", 0x00,
         R"({"documents": [{"id": "a", "text": "The striker scored", "label": "sports", "weight": 2},)"
         R"( {"terms": {"oven": 2, "flour": 1}, "label": "cooking"}, {"id": "t", "tokens": ["x", "y"]}]})");
  c->Add("http_body", "over_the_limit", 0x02, R"({"documents": [{"text": "a"}, {"text": "b"}, {"text": "c"}]})");
  std::string many = R"({"documents": [)";
  for (int i = 0; i < 90; ++i) many += std::string(i ? "," : "") + R"({"text":"w"})";
  c->Add("http_body", "many_over_the_limit", 0x40, many + "]}");
  c->Add("http_body", "bad_weight", 0x00, R"({"documents": [{"text": "a", "weight": -1}]})");
  c->Add("http_body", "unknown_field", 0x00, R"({"documents": [], "extra": 1})");
  c->Add("http_body", "not_json", 0x00, "{\"documents\": [");
  c->Add("http_body", "invalid_utf8", 0x00, std::string("{\"documents\": [{\"text\": \"caf\xc3\"}]}"));
}

// ---- broker_entry: mode (bit 0 Kafka, bits 1..2 model, bit 3 label needed,
// bits 4..5 Kafka null key / value) + pieces separated by "\xff|"

std::string Pieces(const std::vector<std::string>& pieces) {
  std::string out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].find("\xff|") != std::string::npos) Die("broker_entry: a piece holds the separator");
    out += (i ? "\xff|" : "") + pieces[i];
  }
  return out;
}

void BrokerEntrySeeds(Corpus* c) {
  // Redis (bit 0 clear): field, value, ...
  c->Add("broker_entry", "redis_text", 0x00,
         Pieces({"text", "The striker scored twice", "label", "sports", "source", "crawler-7"}));
  Document inner = Doc("inner-id", {0, 5, 7}, {1, 2, 1}, "a");
  inner.add_tokens("t3");
  c->Add("broker_entry", "redis_doc", 0x02, Pieces({"doc", inner.SerializeAsString(), "id", "outer-id"}));
  c->Add("broker_entry", "redis_doc_label_needed", 0x0a,
         Pieces({"doc", Doc("", {1}, {}, nullptr).SerializeAsString()}));
  c->Add("broker_entry", "redis_invalid_utf8_label", 0x00,
         Pieces({"text", "words here", "label", std::string("caf\xc3", 4)}));
  c->Add("broker_entry", "redis_empty_text", 0x00, Pieces({"text", "", "label", "a"}));
  c->Add("broker_entry", "redis_neither", 0x00, Pieces({"body", "no text", "Text", "case matters"}));
  c->Add("broker_entry", "redis_twice", 0x00, Pieces({"text", "one", "text", "two"}));
  // Counts adding up to infinity: the learning rule refuses the document.
  c->Add("broker_entry", "redis_huge_count", 0x02,
         Pieces({"doc", Doc("big", {2, 2}, {1e308, 1e308}, "b").SerializeAsString()}));
  Document hashed;
  hashed.add_tokens("apple");
  hashed.add_tokens("pear");
  hashed.set_label("new-class");
  c->Add("broker_entry", "redis_hashed_new_class", 0x04, Pieces({"doc", hashed.SerializeAsString()}));
  // Kafka (bit 0 set): key, value, header, value, ...
  c->Add("broker_entry", "kafka_text", 0x01,
         Pieces({"k1", "Stocks rallied on Tuesday", "label", "business", "content-type", "text/plain; charset=UTF-8"}));
  Document feats = Doc("", {1, 3}, {2, 1}, "a");
  feats.add_reals(0.5);
  feats.add_reals(3);
  feats.add_categoricals(2);
  c->Add("broker_entry", "kafka_doc_features", 0x07 | 0x08,
         Pieces({"key-id", feats.SerializeAsString(), "content-type", "application/x-tributary-document"}));
  c->Add("broker_entry", "kafka_invalid_utf8_key", 0x01, Pieces({std::string("k\xfe", 2), "some text"}));
  c->Add("broker_entry", "kafka_null_key", 0x11, Pieces({"", "text without a key"}));
  c->Add("broker_entry", "kafka_tombstone", 0x21, Pieces({"k", ""}));
  c->Add("broker_entry", "kafka_json", 0x01, Pieces({"k", R"({"text": "a"})", "content-type", "application/json"}));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR   (writes CORPUS_DIR/<target>/...)\n", argv[0]);
    return 2;
  }
  Corpus c(argv[1]);
  StreamSeeds(&c);
  DecoderSeeds(&c);
  SnapshotSeeds(&c);
  WalSeeds(&c);
  FrameSeeds(&c);
  HttpBodySeeds(&c);
  BrokerEntrySeeds(&c);
  std::fprintf(stderr, "fuzz_make_seeds: %d seeds written under %s\n", c.written(), argv[1]);
  return 0;
}
