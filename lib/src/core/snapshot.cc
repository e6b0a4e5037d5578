// Model snapshots: magic, version, length-prefixed ModelSnapshot, CRC-32.
// Written through Env::WriteFileAtomically (temporary file, fsync, rename,
// directory fsync), so a crash leaves the old file or the new one, never a
// torn one; read through the same Env, so tests inject faults into both.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <sstream>
#include <vector>

#include "tributary/checksum.h"
#include "tributary/document.h"
#include "tributary/env.h"
#include "tributary/model.h"
#include "tributary/model_config.h"
#include "tributary/v1/tributary.pb.h"

#include <google/protobuf/io/coded_stream.h>
#include "tributary/version.h"

namespace tributary {

namespace {

constexpr char kMagic[8] = {'T', 'R', 'I', 'B', 'S', 'N', 'A', 'P'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderSize = 8 + 4 + 8;

uint64_t GetLE(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

void FillPluginRef(const Plugin& p, v1::PluginRef* ref) {
  ref->set_name(p.name);
  ref->set_version(p.version);
  ref->set_abi_major(p.abi_major);
  ref->set_abi_minor(p.abi_minor);
  ref->set_path(p.path);
}

// By name in the registry only. The path recorded at save time is shown in
// the error, never loaded: a model file must not make the host load code of
// its choosing (a user who trained with a plugin named by path puts its
// directory on TRIBUTARY_PLUGIN_PATH, or names the file on the command line).
Result<std::shared_ptr<const Plugin>> FindPlugin(const v1::PluginRef& ref, trib_plugin_kind kind,
                                                 const PluginRegistry& registry) {
  auto r = registry.FindByName(ref.name(), kind);
  if (r.ok() || ref.path().empty()) return r;
  return Status::NotFound(r.status().message() + "; the model was saved with " + ref.path() +
                          ", which is never loaded from a path inside a model file: put its directory on "
                          "TRIBUTARY_PLUGIN_PATH or name the file yourself (tributary --plugin PATH)");
}

// Semantic versions: a plugin reads the snapshots of its own major version
// written by the same or an older minor (and patch) version: a minor
// version may change how the model learns from here on (e.g. multinomial
// 1.1.0's check-step), never what saved statistics mean or where they lie,
// which takes a new major version. Versions that are not MAJOR.MINOR.PATCH
// numbers must match exactly.
constexpr const char* kVersionRule =
    " (a plugin reads snapshots written by its own major version, at the same or an older minor version)";

bool ParseVersion(const std::string& v, uint64_t out[3]) {
  size_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    if (pos >= v.size() || v[pos] < '0' || v[pos] > '9') return false;
    uint64_t x = 0;
    while (pos < v.size() && v[pos] >= '0' && v[pos] <= '9' && x < (uint64_t{1} << 40)) x = x * 10 + (v[pos++] - '0');
    out[i] = x;
    if (i < 2) {
      if (pos >= v.size() || v[pos] != '.') return false;
      ++pos;
    }
  }
  return pos == v.size();
}

bool ReadsVersion(const std::string& plugin, const std::string& saved) {
  uint64_t p[3], s[3];
  if (!ParseVersion(plugin, p) || !ParseVersion(saved, s)) return plugin == saved;
  return p[0] == s[0] && (p[1] > s[1] || (p[1] == s[1] && p[2] >= s[2]));
}

// The number of statistics `family` lays out for `schema` and `options`,
// asked of a throwaway instance of the family (create, layout, destroy):
// Load compares it with the number the snapshot holds before the model
// allocates them. Without it a small file declaring a huge hashed vocabulary
// (hashed_dim: one field of a few bytes, with a valid CRC) made Load allocate
// what it declared (GBs) before finding that the statistics were not there.
Result<uint64_t> LayoutSize(const Plugin& family, const ModelSchema& schema, const Options& options,
                            uint32_t class_capacity, uint64_t vocab_capacity) {
  const auto& fv = family.family();
  std::vector<trib_option> opts;
  for (const auto& [k, v] : options) opts.push_back({k.c_str(), v.c_str()});
  trib_schema cs = schema.CView();
  if (fv.add_class) cs.class_capacity = std::max(class_capacity, cs.num_classes);
  cs.vocab_capacity = vocab_capacity;
  trib_error err{};
  trib_family_model* fm = nullptr;
  int rc = fv.create(&cs, opts.data(), opts.size(), &fm, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, family, "create");
  if (fm == nullptr) return Status::PluginError("family '" + family.name + "' create returned no model");
  uint32_t nb = 0;
  rc = fv.layout(fm, nullptr, &nb, &err);
  std::vector<trib_block> blocks(nb);
  if (rc == TRIB_OK) rc = fv.layout(fm, blocks.data(), &nb, &err);
  fv.destroy(fm);
  if (rc != TRIB_OK) return PluginStatus(rc, err, family, "layout");
  uint64_t total = 0;
  for (uint32_t b = 0; b < std::min<size_t>(nb, blocks.size()); ++b) total += blocks[b].size;
  return total;
}

}  // namespace

// A snapshot file in three pieces: `head` (magic, version, length, the
// message without its bulk, the vocabulary, the key and length of the raw
// statistics), `raw` (their bytes: on a little-endian host the model's own
// array, not a copy) and `tail` (the family's cache, the CRC-32).
struct Model::SnapshotPieces {
  std::string head;
  std::string_view raw;
  std::string raw_copy;  ///< (the bytes `raw` points at on a big-endian host)
  std::string tail;
};

Status Model::Save(const std::string& path, const SnapshotOptions& options) const {
  // The statistics, the bulk of the file, go from the model's array to the
  // file: no copy of the file in memory (for a model of some GB, as much
  // memory again; for a few MB, a huge page zeroed and filled, ~0.5 ms of a
  // short `train` here).
  SnapshotPieces pieces;
  TRIB_RETURN_IF_ERROR(SerializePieces(options, path, &pieces));
  Env* env = options.env ? options.env : Env::Default();
  const std::string_view parts[] = {pieces.head, pieces.raw, pieces.tail};
  return env->WriteFileAtomically(path, parts);
}

Result<std::string> Model::Serialize(const SnapshotOptions& options, const std::string& path) const {
  SnapshotPieces pieces;
  TRIB_RETURN_IF_ERROR(SerializePieces(options, path, &pieces));
  std::string file;
  file.reserve(pieces.head.size() + pieces.raw.size() + pieces.tail.size());
  file.append(pieces.head).append(pieces.raw).append(pieces.tail);
  return file;
}

namespace {

// The wire encoding of a packed repeated double field: its key, the length
// in bytes and the values as little-endian IEEE doubles. Writes nothing for
// no values, as protobuf does.
size_t PackedDoublesSize(int field, size_t n) {
  if (n == 0) return 0;
  using google::protobuf::io::CodedOutputStream;
  return CodedOutputStream::VarintSize32(static_cast<uint32_t>(field) << 3) +
         CodedOutputStream::VarintSize64(uint64_t{n} * 8) + n * 8;
}
// The key and length of a packed repeated double field of n values (none
// for n = 0), whose n * 8 bytes follow.
char* PutPackedDoublesKey(char* out, int field, size_t n) {
  if (n == 0) return out;
  using google::protobuf::io::CodedOutputStream;
  uint8_t* p = reinterpret_cast<uint8_t*>(out);
  p = CodedOutputStream::WriteVarint32ToArray((static_cast<uint32_t>(field) << 3) | 2u, p);
  p = CodedOutputStream::WriteVarint64ToArray(uint64_t{n} * 8, p);
  return reinterpret_cast<char*>(p);
}
// The n values as little-endian IEEE doubles.
char* PutDoubles(char* out, const double* v, size_t n) {
  if constexpr (std::endian::native == std::endian::little) {
    if (n > 0) std::memcpy(out, v, n * 8);
    return out + n * 8;
  } else {
    uint8_t* p = reinterpret_cast<uint8_t*>(out);
    using google::protobuf::io::CodedOutputStream;
    for (size_t i = 0; i < n; ++i) p = CodedOutputStream::WriteLittleEndian64ToArray(std::bit_cast<uint64_t>(v[i]), p);
    return reinterpret_cast<char*>(p);
  }
}

// The schema's vocabulary as a second occurrence of ModelSnapshot.schema
// holding only the terms: a parser merges the two occurrences of a message
// field (repeated fields concatenate, in order), so it reads one Schema
// whose vocabulary is these terms. *body gets the inner message's size.
size_t VocabularyFieldSize(const std::vector<std::string>& terms, size_t* body) {
  using google::protobuf::io::CodedOutputStream;
  *body = 0;
  if (terms.empty()) return 0;
  const size_t tag = CodedOutputStream::VarintSize32(static_cast<uint32_t>(v1::Schema::kVocabularyFieldNumber) << 3);
  for (const std::string& t : terms) *body += tag + CodedOutputStream::VarintSize64(t.size()) + t.size();
  return CodedOutputStream::VarintSize32(static_cast<uint32_t>(v1::ModelSnapshot::kSchemaFieldNumber) << 3) +
         CodedOutputStream::VarintSize64(*body) + *body;
}
char* PutVocabularyField(char* out, const std::vector<std::string>& terms, size_t body) {
  if (terms.empty()) return out;
  using google::protobuf::io::CodedOutputStream;
  uint8_t* p = reinterpret_cast<uint8_t*>(out);
  p = CodedOutputStream::WriteVarint32ToArray((static_cast<uint32_t>(v1::ModelSnapshot::kSchemaFieldNumber) << 3) | 2u,
                                              p);
  p = CodedOutputStream::WriteVarint64ToArray(body, p);
  const uint32_t tag = (static_cast<uint32_t>(v1::Schema::kVocabularyFieldNumber) << 3) | 2u;
  for (const std::string& t : terms) {
    p = CodedOutputStream::WriteVarint32ToArray(tag, p);
    p = CodedOutputStream::WriteVarint64ToArray(t.size(), p);
    std::memcpy(p, t.data(), t.size());
    p += t.size();
  }
  return reinterpret_cast<char*>(p);
}

char* PutLEAt(char* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) *out++ = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

}  // namespace

Status Model::SerializePieces(const SnapshotOptions& options, const std::string& path, SnapshotPieces* out) const {
  v1::ModelSnapshot snap;
  FillPluginRef(*family_, snap.mutable_family());
  if (loss_) FillPluginRef(*loss_, snap.mutable_loss());
  for (const auto& [k, v] : options_) {
    auto* o = snap.add_family_options();
    o->set_key(k);
    o->set_value(v);
  }
  for (const auto& [k, v] : loss_options_) {
    auto* o = snap.add_loss_options();
    o->set_key(k);
    o->set_value(v);
  }
  schema_.ToProto(snap.mutable_schema(), /*with_vocabulary=*/false);  // (the terms follow the message, below)
  auto* ls = snap.mutable_learner();
  ls->set_updates(learner_.updates);
  ls->set_effective_size(learner_.effective_size);
  ls->set_skipped_documents(learner_.skipped_documents);
  ls->set_materializations(learner_.materializations);
  ls->set_wal_sequence(options.log_sequence);
  auto* sch = ls->mutable_schedule();
  sch->set_kind(static_cast<v1::StepSchedule::Kind>(learner_.schedule.kind));
  sch->set_lambda(learner_.schedule.lambda);
  sch->set_tau0(learner_.schedule.tau0);
  sch->set_kappa(learner_.schedule.kappa);
  sch->set_rho(learner_.schedule.rho);
  for (const auto& b : stats_.blocks()) {
    auto* pb = snap.add_blocks();
    pb->set_offset(b.offset);
    pb->set_size(b.size);
    pb->set_nu(b.nu);
    pb->set_alpha_bar(b.alpha_bar);
    pb->set_scale(b.scale);
    pb->set_shift(b.shift);
  }
  std::vector<double> cache;
  if (family_->family().export_cache) {
    trib_error err{};
    size_t n = 0;
    int rc = family_->family().export_cache(fmodel_, nullptr, &n, &err);
    cache.resize(n);
    if (rc == TRIB_OK && n > 0) rc = family_->family().export_cache(fmodel_, cache.data(), &n, &err);
    if (rc != TRIB_OK) return PluginStatus(rc, err, *family_, "export_cache").WithContext("saving '" + path + "'");
    cache.resize(std::min(n, cache.size()));
  }
  snap.set_created_by(std::string("tributary ") + Version());
  snap.set_training_report(training_report_);
  if (!live_state_.empty()) snap.set_live_state(live_state_);
  if (class_capacity_ > num_classes()) snap.set_class_capacity(class_capacity_);
  if (schema_.open_vocabulary()) snap.set_vocab_capacity(vocab_capacity());
  // The statistics (raw), the family's cache and the vocabulary, the bulk
  // of the file, are not copied into the message: their encodings follow
  // the rest of it, written straight from the model's arrays and strings. A
  // field's place in the payload does not matter to a parser (protobuf
  // merges fields in any order, and two occurrences of the schema into
  // one), so the file parses as the same ModelSnapshot.
  const size_t meta = snap.ByteSizeLong();
  size_t vocab_body = 0;
  const size_t vocab = VocabularyFieldSize(schema_.vocabulary(), &vocab_body);
  const size_t payload = meta + vocab + PackedDoublesSize(v1::ModelSnapshot::kRawFieldNumber, stats_.raw().size()) +
                         PackedDoublesSize(v1::ModelSnapshot::kFamilyCacheFieldNumber, cache.size());
  const size_t raw_key =
      PackedDoublesSize(v1::ModelSnapshot::kRawFieldNumber, stats_.raw().size()) - stats_.raw().size() * 8;
  const size_t raw_bytes = stats_.raw().size() * 8;
  // head: everything before the raw values.
  std::string& head = out->head;
  head.resize(kHeaderSize + meta + vocab + raw_key);
  char* p = head.data();
  std::memcpy(p, kMagic, sizeof(kMagic));
  p = PutLEAt(p + sizeof(kMagic), kFormatVersion, 4);
  p = PutLEAt(p, payload, 8);
  if (!snap.SerializeToArray(p, static_cast<int>(meta))) {
    return Status::Internal("cannot serialize snapshot for '" + path + "'");
  }
  p = PutVocabularyField(p + meta, schema_.vocabulary(), vocab_body);
  PutPackedDoublesKey(p, v1::ModelSnapshot::kRawFieldNumber, stats_.raw().size());
  // raw: the model's array itself where its bytes are the file's.
  if constexpr (std::endian::native == std::endian::little) {
    out->raw = std::string_view(reinterpret_cast<const char*>(stats_.raw().data()), raw_bytes);
  } else {
    out->raw_copy.resize(raw_bytes);
    PutDoubles(out->raw_copy.data(), stats_.raw().data(), stats_.raw().size());
    out->raw = out->raw_copy;
  }
  // tail: the cache, then the CRC-32 of the payload (everything after the
  // fixed header), continued piece by piece.
  std::string& tail = out->tail;
  tail.resize(PackedDoublesSize(v1::ModelSnapshot::kFamilyCacheFieldNumber, cache.size()) + 4);
  p = PutPackedDoublesKey(tail.data(), v1::ModelSnapshot::kFamilyCacheFieldNumber, cache.size());
  p = PutDoubles(p, cache.data(), cache.size());
  uint32_t crc = tributary::Crc32(head.data() + kHeaderSize, head.size() - kHeaderSize);
  crc = tributary::Crc32(out->raw.data(), out->raw.size(), crc);
  crc = tributary::Crc32(tail.data(), tail.size() - 4, crc);
  PutLEAt(p, crc, 4);
  return Status::OK();
}

Result<std::unique_ptr<Model>> Model::Load(const std::string& path, const PluginRegistry& registry, Env* env,
                                           uint64_t* log_sequence) {
  if (env == nullptr) env = Env::Default();
  // Read no more than the header says the file holds (and one byte more, to
  // see an extended file): /dev/zero, or a FIFO that never ends, is refused
  // after its first bytes instead of being read into memory until it fails.
  auto f = env->NewSequentialFile(path);
  if (!f.ok()) return f.status().WithContext("snapshot '" + path + "'");
  std::string file;
  auto read_up_to = [&](uint64_t want) -> Status {
    while (file.size() < want) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(want - file.size(), 1u << 20));
      const size_t at = file.size();
      file.resize(at + n);
      size_t got = 0;
      Status st = (*f)->Read(n, file.data() + at, &got);
      file.resize(at + std::min(got, n));
      if (!st.ok()) return st.WithContext("snapshot '" + path + "'");
      if (got == 0) break;
    }
    return Status::OK();
  };
  TRIB_RETURN_IF_ERROR(read_up_to(kHeaderSize));
  if (file.size() == kHeaderSize && std::memcmp(file.data(), kMagic, sizeof(kMagic)) == 0) {
    const uint64_t len = GetLE(file.data() + 12, 8);
    constexpr uint64_t kMaxPayload = uint64_t{1} << 44;  // 16 TiB: larger is a damaged length
    if (len > kMaxPayload) {
      return Status::Corruption("snapshot '" + path + "': header says " + std::to_string(len) +
                                " payload bytes, more than any model (damaged length)");
    }
    TRIB_RETURN_IF_ERROR(read_up_to(kHeaderSize + len + 4 + 1));
  }
  return Parse(file, path, registry, log_sequence);
}

Result<std::unique_ptr<Model>> Model::Parse(const std::string& file, const std::string& path,
                                            const PluginRegistry& registry, uint64_t* log_sequence) {
  auto corrupt = [&](const std::string& why) { return Status::Corruption("snapshot '" + path + "': " + why); };
  if (file.size() < sizeof(kMagic) || std::memcmp(file.data(), kMagic, sizeof(kMagic)) != 0) {
    return corrupt("not a Tributary snapshot (expected magic \"TRIBSNAP\" at the start)");
  }
  if (file.size() < kHeaderSize) return corrupt("truncated header (" + std::to_string(file.size()) + " bytes)");
  uint32_t version = static_cast<uint32_t>(GetLE(file.data() + 8, 4));
  if (version != kFormatVersion) {
    return corrupt("format version " + std::to_string(version) + " is not supported (expected " +
                   std::to_string(kFormatVersion) + ")");
  }
  uint64_t len = GetLE(file.data() + 12, 8);
  // Compared without adding to `len`: a declared length near 2^64 would
  // wrap around to the file's size (fuzz finding snapshot/wrapping-length).
  if (file.size() < kHeaderSize + 4 || len != file.size() - kHeaderSize - 4) {
    return corrupt("truncated or extended: header says " + std::to_string(len) + " payload bytes, file has " +
                   std::to_string(file.size() >= kHeaderSize + 4 ? file.size() - kHeaderSize - 4 : 0));
  }
  // Checked and parsed where it lies in the file (a copy of a model of a
  // few MB is a page fault per 4 KiB).
  const char* payload = file.data() + kHeaderSize;
  uint32_t want = static_cast<uint32_t>(GetLE(file.data() + kHeaderSize + len, 4));
  uint32_t got = tributary::Crc32(payload, len);
  if (want != got) {
    std::ostringstream os;
    os << "checksum mismatch (stored 0x" << std::hex << want << ", computed 0x" << got << ")";
    return corrupt(os.str());
  }
  v1::ModelSnapshot snap;
  if (len > static_cast<uint64_t>(std::numeric_limits<int>::max()) ||
      !snap.ParseFromArray(payload, static_cast<int>(len))) {
    return corrupt("payload does not parse as tributary.v1.ModelSnapshot");
  }

  auto fam = FindPlugin(snap.family(), TRIB_KIND_FAMILY, registry);
  if (!fam.ok()) return fam.status().WithContext("snapshot '" + path + "'");
  if (!ReadsVersion((*fam)->version, snap.family().version())) {
    return Status::PluginError("snapshot '" + path + "' was written by family '" + snap.family().name() + "' version " +
                               snap.family().version() + ", but the loaded plugin (" + (*fam)->path + ") is version " +
                               (*fam)->version + kVersionRule);
  }
  std::shared_ptr<const Plugin> loss;
  if (!snap.loss().name().empty()) {
    auto l = FindPlugin(snap.loss(), TRIB_KIND_LOSS, registry);
    if (!l.ok()) return l.status().WithContext("snapshot '" + path + "'");
    if (!ReadsVersion((*l)->version, snap.loss().version())) {
      return Status::PluginError("snapshot '" + path + "' was written by loss '" + snap.loss().name() + "' version " +
                                 snap.loss().version() + ", but the loaded plugin (" + (*l)->path + ") is version " +
                                 (*l)->version + kVersionRule);
    }
    loss = *l;
  }
  auto schema = ModelSchema::FromProto(snap.schema());
  if (!schema.ok()) return schema.status().WithContext("snapshot '" + path + "'");
  Options opts;
  for (const auto& o : snap.family_options()) opts.emplace_back(o.key(), o.value());
  const uint32_t capacity = snap.class_capacity();
  const uint32_t classes = static_cast<uint32_t>(schema->classes().size());
  if (capacity != 0 && (capacity < classes || !(*fam)->family().add_class)) {
    return corrupt("class_capacity " + std::to_string(capacity) + " is invalid (the schema has " +
                   std::to_string(classes) + " classes; family '" + (*fam)->name +
                   ((*fam)->family().add_class ? "' needs a capacity >= that)" : "' has no class capacity)"));
  }
  // Checked before the family is asked for its layout: a family may allocate
  // per class of room when created (a fuzzed file with 2^32 made
  // lda-classifier reserve 64 GB in create).
  if (capacity > MaxClassRoom(classes)) {
    return corrupt("class_capacity " + std::to_string(capacity) + " is invalid (a model with " +
                   std::to_string(classes) + " classes has room for at most " + std::to_string(MaxClassRoom(classes)) +
                   ")");
  }
  // Room for terms (an open vocabulary): checked like the class capacity.
  const uint64_t terms = schema->vocab_size();
  if (snap.vocab_capacity() != 0) {
    if (!schema->open_vocabulary() || !(*fam)->family().add_terms) {
      return corrupt("vocab_capacity " + std::to_string(snap.vocab_capacity()) + " is invalid (" +
                     (schema->open_vocabulary() ? "family '" + (*fam)->name + "' cannot add terms"
                                                : std::string("the schema's vocabulary is not open")) +
                     ")");
    }
    if (snap.vocab_capacity() < terms || snap.vocab_capacity() > MaxTermRoom(terms)) {
      return corrupt("vocab_capacity " + std::to_string(snap.vocab_capacity()) + " is invalid (a vocabulary of " +
                     std::to_string(terms) + " terms has room for " + std::to_string(terms) + " to " +
                     std::to_string(MaxTermRoom(terms)) + ")");
    }
  }
  const uint64_t term_room = TermRoom(**fam, *schema, snap.vocab_capacity());
  auto layout = LayoutSize(**fam, *schema, opts, capacity, term_room);
  if (!layout.ok()) return layout.status().WithContext("snapshot '" + path + "'");
  if (*layout != static_cast<uint64_t>(snap.raw_size())) {
    return corrupt("statistics layout (" + std::to_string(snap.raw_size()) + " values) does not match family '" +
                   (*fam)->name + "' (" + std::to_string(*layout) + " values for the snapshot's schema and options)");
  }
  auto r = CreateInternal(*fam, loss, std::move(schema).value(), std::move(opts), capacity, term_room);
  if (!r.ok()) return r.status().WithContext("snapshot '" + path + "'");
  auto m = std::move(r).value();
  if (loss) {
    Options loss_opts;
    for (const auto& o : snap.loss_options()) loss_opts.emplace_back(o.key(), o.value());
    TRIB_RETURN_IF_ERROR(m->SetLoss(loss, std::move(loss_opts)).WithContext("snapshot '" + path + "'"));
  }
  auto& blocks = m->stats_.mutable_blocks();
  if (static_cast<size_t>(snap.blocks_size()) != blocks.size() ||
      static_cast<uint64_t>(snap.raw_size()) != m->stats_.size()) {
    return corrupt("statistics layout (" + std::to_string(snap.blocks_size()) + " blocks, " +
                   std::to_string(snap.raw_size()) + " values) does not match the family's (" +
                   std::to_string(blocks.size()) + " blocks, " + std::to_string(m->stats_.size()) + " values)");
  }
  for (size_t b = 0; b < blocks.size(); ++b) {
    const auto& pb = snap.blocks(static_cast<int>(b));
    if (pb.offset() != blocks[b].offset || pb.size() != blocks[b].size) {
      return corrupt("block " + std::to_string(b) + " layout differs from the family's");
    }
    if (!(pb.scale() > 0) || !std::isfinite(pb.scale()) || !std::isfinite(pb.shift())) {
      return corrupt("block " + std::to_string(b) + " has an invalid scale/shift");
    }
    blocks[b].scale = pb.scale();
    blocks[b].shift = pb.shift();
  }
  // A valid checksum says the bytes are as written, not that they are sane:
  // a model saved with NaN or infinite statistics would score garbage.
  for (int i = 0; i < snap.raw_size(); ++i) {
    if (!std::isfinite(snap.raw(i))) {
      return corrupt("statistic #" + std::to_string(i) + " is " + std::to_string(snap.raw(i)) +
                     " (expected a finite number)");
    }
  }
  std::copy(snap.raw().begin(), snap.raw().end(), m->stats_.raw().begin());
  const auto& ls = snap.learner();
  m->learner_.updates = ls.updates();
  m->learner_.effective_size = ls.effective_size();
  m->learner_.skipped_documents = ls.skipped_documents();
  m->learner_.materializations = ls.materializations();
  m->learner_.schedule.kind = static_cast<StepSchedule::Kind>(ls.schedule().kind());
  m->learner_.schedule.lambda = ls.schedule().lambda();
  m->learner_.schedule.tau0 = ls.schedule().tau0();
  m->learner_.schedule.kappa = ls.schedule().kappa();
  m->learner_.schedule.rho = ls.schedule().rho();
  // A valid checksum says the bytes are as written, not that a learner
  // wrote them: a schedule or an effective size no learner uses would make
  // `train --resume` (and the server) take steps no version would.
  if (Status st = m->learner_.schedule.Validate(); !st.ok()) return corrupt("learner state: " + st.message());
  if (!(m->learner_.effective_size >= 0 && m->learner_.effective_size <= kMaxEffectiveSize)) {
    std::ostringstream v;
    v << m->learner_.effective_size;
    return corrupt("learner state: the effective data-set size n is " + v.str() +
                   ", expected a finite number in [0, 1e12]");
  }
  m->training_report_ = snap.training_report();
  m->live_state_ = snap.live_state();
  // Caches only: the check-step leaves feasible statistics unchanged. It
  // projects them onto what the family allows (counts >= 0, ...), so a value
  // it moves by more than rounding was not written by a learner: such a file
  // (a negative count with a valid checksum) is refused, not quietly clamped
  // into a different model.
  trib_step step{0.0, m->learner_.effective_size, 0.0, m->learner_.updates};
  TRIB_RETURN_IF_ERROR(m->Rebuild(step).WithContext("snapshot '" + path + "'"));
  const auto& checked = m->stats_.raw();
  for (int i = 0; i < snap.raw_size(); ++i) {
    const double was = snap.raw(i), now = checked[static_cast<size_t>(i)];
    if (std::abs(now - was) > 1e-9 * std::max(1.0, std::abs(was))) {
      return corrupt("statistic #" + std::to_string(i) + " is " + std::to_string(was) + ", outside what family '" +
                     m->family_->name + "' allows (its check-step makes it " + std::to_string(now) + ")");
    }
  }
  if (snap.family_cache_size() > 0 && m->family_->family().import_cache) {
    trib_error err{};
    int rc = m->family_->family().import_cache(m->fmodel_, snap.family_cache().data(),
                                               static_cast<size_t>(snap.family_cache_size()), &err);
    if (rc != TRIB_OK) return PluginStatus(rc, err, *m->family_, "import_cache").WithContext("snapshot '" + path + "'");
  }
  // The bytes are as written and the statistics within the family's domain;
  // what the family computes from them (blocks' scale and shift, its cache)
  // must be numbers too. One probe document (the first term once, every real
  // 0, every category 0) is scored: a NaN, +inf, or -inf for every output
  // (no output possible) was written by no learner (a block shift of 1e308
  // made every prediction null). A probe the family refuses says nothing.
  if (m->num_outputs() > 0) {
    DocumentBuffer probe;
    if (m->schema_.vocab_size() > 0) {
      probe.term_ids.push_back(0);
      probe.term_counts.push_back(1.0);
    }
    probe.reals.assign(m->schema_.num_reals(), 0.0);
    probe.categoricals.assign(m->schema_.categorical_cardinalities().size(), 0);
    auto state = m->NewScoringState();
    std::vector<double> scores(m->num_outputs());
    if (state.ok() && (!probe.term_ids.empty() || !probe.reals.empty() || !probe.categoricals.empty()) &&
        m->Score(probe.View(), state->get(), scores.data()).ok()) {
      bool any_possible = false;
      for (size_t k = 0; k < scores.size(); ++k) {
        if (std::isnan(scores[k]) || scores[k] == std::numeric_limits<double>::infinity()) {
          return corrupt("output " + std::to_string(k) + " scores a probe document (the first term once) as " +
                         std::to_string(scores[k]) + ": the model's values (block scale and shift, family cache) " +
                         "were not written by a learner");
        }
        any_possible |= scores[k] > -std::numeric_limits<double>::infinity();
      }
      if (!any_possible) {
        return corrupt(
            "every output scores a probe document (the first term once) as -inf: the model's values "
            "(block scale and shift, family cache) were not written by a learner");
      }
    }
  }
  if (log_sequence) *log_sequence = ls.wal_sequence();
  return m;
}

}  // namespace tributary
