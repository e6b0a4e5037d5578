// `tributary client`: learn, predict, stats, snapshot or ping against a
// running server over the framed protobuf protocol; documents are checked
// locally, by the server's rule, before they are sent.
#include <google/protobuf/io/coded_stream.h>
#include <algorithm>
#include <boost/asio.hpp>
#include <cstdint>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands/auth_token.h"
#include "commands/commands.h"
#include "tributary/document.h"
#include "tributary/learner.h"
#include "tributary/stream_io.h"

namespace tributary::cli {

namespace {

struct ClientFlags {
  std::string action, connect, in, auth_token_file;
  uint32_t batch = 100;
  uint32_t max_frame_bytes = kDefaultMaxFrameBytes;
  bool json = false;
  bool ids_as_is = false;
};

class Client {
 public:
  Status Connect(const std::string& hostport) {
    auto colon = hostport.rfind(':');
    if (colon == std::string::npos) return Status::InvalidArgument("--connect '" + hostport + "': expected HOST:PORT");
    boost::system::error_code ec;
    boost::asio::ip::tcp::resolver res(io_);
    auto eps = res.resolve(hostport.substr(0, colon), hostport.substr(colon + 1), ec);
    if (!ec) boost::asio::connect(sock_, eps, ec);
    if (ec) return Status::IOError("cannot connect to " + hostport + ": " + ec.message());
    return Status::OK();
  }
  Status Send(const v1::Request& req) {
    std::string body;
    req.SerializeToString(&body);
    uint8_t hdr[10];
    uint8_t* end =
        google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(body.size()), hdr);
    std::string frame(reinterpret_cast<char*>(hdr), static_cast<size_t>(end - hdr));
    frame += body;
    boost::system::error_code ec;
    boost::asio::write(sock_, boost::asio::buffer(frame), ec);
    if (ec) return Status::IOError("send: " + ec.message());
    return Status::OK();
  }
  Status Receive(v1::Response* resp) {
    uint32_t len = 0;
    int shift = 0;
    for (;;) {
      uint8_t b;
      boost::system::error_code ec;
      boost::asio::read(sock_, boost::asio::buffer(&b, 1), ec);
      if (ec) return Status::IOError("receive: " + ec.message());
      len |= static_cast<uint32_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
      shift += 7;
      if (shift > 28) return Status::Corruption("receive: bad frame length");
    }
    std::string body(len, '\0');
    boost::system::error_code ec;
    boost::asio::read(sock_, boost::asio::buffer(body), ec);
    if (ec) return Status::IOError("receive: " + ec.message());
    if (!resp->ParseFromString(body)) return Status::Corruption("receive: response does not parse");
    return Status::OK();
  }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket sock_{io_};
};

Status CheckResponse(const v1::Response& r) {
  if (r.code() == v1::Response::OK) return Status::OK();
  return Status::InvalidArgument("server answered " + v1::Response::Code_Name(r.code()) + ": " + r.message());
}

// Replaces the term ids of `d` (ids of the stream's `vocab`, checked to be in
// range) by tokens: one per distinct term, after the tokens it has, with its
// count unchanged in token_counts (the counts of a repeated id summed in the
// order the decoder sums them, DocumentBuffer::Canonicalize).
void TermIdsToTokens(const std::vector<std::string>& vocab, v1::Document* d) {
  if (d->term_ids_size() == 0) return;
  std::vector<int> order(static_cast<size_t>(d->term_ids_size()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return d->term_ids(a) < d->term_ids(b); });
  if (d->token_counts_size() == 0) {  // the tokens it has occur once each
    for (int i = 0; i < d->tokens_size(); ++i) d->add_token_counts(1.0);
  }
  for (size_t k = 0; k < order.size();) {
    const uint32_t id = d->term_ids(order[k]);
    double count = 0;
    for (; k < order.size() && d->term_ids(order[k]) == id; ++k) {
      count += d->term_counts_size() ? d->term_counts(order[k]) : 1.0;
    }
    d->add_tokens(vocab[id]);
    d->add_token_counts(count);
  }
  d->clear_term_ids();
  d->clear_term_counts();
}
int RunClient(const ClientFlags& f) {
  using json = nlohmann::json;
  Client c;
  Status st = c.Connect(f.connect);
  if (!st.ok()) return ReportError(st);
  std::string token;
  if (!f.auth_token_file.empty()) {
    // A file that cannot be opened gives no token (the requests carry none).
    (void)ReadAuthToken(f.auth_token_file, &token);
  }
  uint64_t next_id = 1;
  auto base = [&] {
    v1::Request r;
    r.set_request_id(next_id++);
    if (!token.empty()) r.set_auth_token(token);
    return r;
  };
  if (f.action == "stats" || f.action == "snapshot" || f.action == "ping") {
    v1::Request r = base();
    if (f.action == "stats") r.mutable_stats();
    if (f.action == "snapshot") r.mutable_snapshot();
    if (f.action == "ping") r.mutable_ping();
    v1::Response resp;
    if (!(st = c.Send(r)).ok() || !(st = c.Receive(&resp)).ok() || !(st = CheckResponse(resp)).ok()) {
      return ReportError(st);
    }
    if (f.action == "stats") {
      const auto& s = resp.stats();
      const json j{{"documents_learned", s.documents_learned()},
                   {"model_version", s.model_version()},
                   {"predictions", s.predictions()},
                   {"queue_depth", s.queue_depth()},
                   {"wal_sequence", s.wal_sequence()},
                   {"errors", s.errors()},
                   {"learning_enabled", s.learning_enabled()},
                   {"family", s.family()},
                   {"loss", s.loss()}};
      if (f.json) {
        std::cout << j.dump() << std::endl;
      } else {  // one "name: value" line each, by name
        for (const auto& [name, value] : j.items()) std::cout << name << ": " << value.dump() << "\n";
        std::cout << std::flush;
      }
    } else if (f.action == "snapshot") {
      std::cout
          << (f.json ? json{{"path", resp.snapshot().path()}, {"wal_sequence", resp.snapshot().wal_sequence()}}.dump()
                     : resp.snapshot().path())
          << std::endl;
    } else {
      std::cout << "pong" << std::endl;
    }
    return kExitOk;
  }
  if (f.action != "learn" && f.action != "predict") {
    return ReportError(
        Status::InvalidArgument("client action '" + f.action + "': expected learn, predict, stats, snapshot or ping"));
  }
  if (f.in.empty()) return ReportError(Status::InvalidArgument("client " + f.action + ": --in is required"));
  auto reader = DocumentReader::Open(f.in, f.max_frame_bytes);
  if (!reader.ok()) return ReportError(reader.status());
  const DocumentReader& stream = **reader;
  // Each document is checked here, by the rule the server applies to it
  // (DocumentDecoder::DecodeForLearning for learn, Decode for predict), in
  // the stream's own id space, before its batch is sent: a bad document is
  // refused naming the file and the document, and nothing of its batch goes
  // out. Labels are the model's business (it may have classes the stream
  // lacks): the local schema takes any.
  auto local = stream.schema();
  if (!local.ok()) return ReportError(local.status().WithContext("'" + f.in + "'"));
  local->set_open_classes(true);
  auto local_decoder = DocumentDecoder::Create(*local, stream.fields().schema(), stream.vocabulary());
  if (!local_decoder.ok()) return ReportError(local_decoder.status().WithContext("'" + f.in + "'"));
  std::string label_required_by;  // the server's loss, when it needs labels
  if (f.action == "learn") {
    v1::Request r = base();
    r.mutable_stats();
    v1::Response resp;
    if (!(st = c.Send(r)).ok() || !(st = c.Receive(&resp)).ok() || !(st = CheckResponse(resp)).ok()) {
      return ReportError(st);
    }
    // A loss this program cannot load is left to the server to apply.
    auto loss = Registry().Find(resp.stats().loss(), TRIB_KIND_LOSS);
    if (loss.ok()) label_required_by = LabelRequiredBy(loss->get());
  }
  // Term ids of a stream with a vocabulary are the stream's own; the server
  // speaks the model's ids, so send them as tokens unless told otherwise.
  const std::vector<std::string>& vocab = stream.vocabulary();
  const bool to_tokens = !f.ids_as_is && vocab.size() > 0;
  uint64_t acknowledged = 0, predicted = 0, requests = 0;
  v1::Request req = base();
  auto flush = [&]() -> Status {
    auto* docs =
        f.action == "learn" ? req.mutable_learn()->mutable_documents() : req.mutable_predict()->mutable_documents();
    if (docs->empty()) return Status::OK();
    TRIB_RETURN_IF_ERROR(c.Send(req));
    v1::Response resp;
    TRIB_RETURN_IF_ERROR(c.Receive(&resp));
    TRIB_RETURN_IF_ERROR(CheckResponse(resp));
    ++requests;
    if (f.action == "learn") {
      acknowledged += resp.learn().acknowledged();
    } else {
      for (const auto& p : resp.predict().predictions()) {
        if (!p.error().empty()) {
          // Refused alone by the server (the others were answered).
          std::cerr << "tributary client: document '" << p.id() << "' (index " << p.index()
                    << " of its request) refused: " << p.error() << std::endl;
          continue;
        }
        ++predicted;
        if (f.json) {
          json j{{"id", p.id()}, {"predicted", p.predicted()}, {"model_version", resp.predict().model_version()}};
          std::cout << j.dump() << "\n";
        } else {
          std::cout << p.id() << "\t" << p.predicted() << "\t" << resp.predict().model_version() << "\n";
        }
      }
    }
    req = base();
    return Status::OK();
  };
  DocumentBuffer checked;
  std::string new_class;
  for (;;) {
    v1::Document d;
    bool eof = false;
    st = (*reader)->Next(&d, &eof);
    if (!st.ok()) break;
    if (eof) break;
    const uint64_t index = (*reader)->documents_read() - 1;
    st = f.action == "learn"
             ? local_decoder->DecodeForLearning(d, index, *local, label_required_by, &checked, &new_class)
             : local_decoder->Decode(d, index, *local, kGrowClassesAndTerms, &checked, &new_class, nullptr);
    if (!st.ok()) {
      st = st.WithContext("'" + f.in + "'");
      break;
    }
    if (to_tokens) TermIdsToTokens(vocab, &d);
    auto* docs =
        f.action == "learn" ? req.mutable_learn()->mutable_documents() : req.mutable_predict()->mutable_documents();
    *docs->Add() = std::move(d);
    if (static_cast<uint32_t>(docs->size()) >= f.batch) {
      st = flush();
      if (!st.ok()) break;
    }
  }
  if (st.ok()) st = flush();
  if (f.action == "learn") {
    if (f.json) {
      std::cout << json{{"acknowledged", acknowledged}, {"requests", requests}}.dump() << std::endl;
    } else {
      std::cout << "acknowledged " << acknowledged << " documents" << std::endl;
    }
  }
  std::cout.flush();
  if (!st.ok()) return ReportError(st);
  return kExitOk;
}

}  // namespace

Runner SetUpClient(CLI::App* cl) {
  auto c = std::make_shared<ClientFlags>();
  cl->add_option("action", c->action, "learn | predict | stats | snapshot | ping")->required();
  cl->add_option("--connect", c->connect, "HOST:PORT")->required();
  cl->add_option("--in", c->in, "document stream (learn, predict)");
  cl->add_option("--batch", c->batch, "documents per request")->capture_default_str();
  cl->add_option("--auth-token-file", c->auth_token_file, "shared secret");
  cl->add_flag("--json", c->json, "JSON output");
  cl->add_flag("--ids-as-is", c->ids_as_is,
               "send term ids unchanged (the stream already uses the model's ids; they are still checked against "
               "the stream's own header, as every document is before it is sent)");
  return [c] { return RunClient(*c); };
}

}  // namespace tributary::cli
