// `tributary serve`: the server (tributary/server.h) over a data directory,
// with a new model made from the flags when the directory has none.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands/auth_token.h"
#include "commands/commands.h"
#include "tributary/learner.h"
#include "tributary/live_learner.h"
#include "tributary/model_config.h"
#include "tributary/schema.h"
#include "tributary/server.h"
#include "tributary/stream_io.h"

namespace tributary::cli {

namespace {

struct ServeFlags {
  LearnFlags learn;
  ServerOptions server;
  std::string engine = "auto";
  std::string model, schema, fsync = "interval", auth_token_file, port_file;
  std::string on_corruption = "refuse";
  bool no_auth = false;            // --no-auth: serve a data directory once served with a token without one
  uint64_t hashed_dim = 0;         // the default schema: 0 = an open vocabulary when the family can grow one
  std::vector<std::string> given;  // the options given on the command line ("--loss", ...)
};

// The file in a data directory that says it is served with a token.
constexpr const char* kAuthMarker = "AUTH";

// The flags of a new model that differ from the model a restart recovered
// (which keeps its own settings): "--loss nll (the model: ncll)", ...
std::vector<std::string> IgnoredModelFlags(const ServeFlags& f, const RecoveryInfo& rec) {
  std::vector<std::string> out;
  auto given = [&](const char* name) { return std::find(f.given.begin(), f.given.end(), name) != f.given.end(); };
  auto option = [&](const std::string& key) -> std::string {
    for (const auto& [k, v] : rec.family_options) {
      if (k == key) return v;
    }
    return "default";
  };
  auto differ = [](double a, double b) { return std::fabs(a - b) > 1e-12 * std::max(std::fabs(a), std::fabs(b)); };
  auto note = [&](const std::string& flag, const std::string& value, const std::string& model) {
    out.push_back(flag + " " + value + " (the model: " + model + ")");
  };
  if (given("--family") && f.learn.family.find('/') == std::string::npos && f.learn.family != rec.family) {
    note("--family", f.learn.family, rec.family);
  }
  if (given("--select") && (f.learn.select == "auto") != rec.live) {
    note("--select", f.learn.select, rec.live ? "a live learner" : "one learner");
  }
  if (given("--loss") && f.learn.loss.find('/') == std::string::npos && f.learn.loss != rec.loss) {
    note("--loss", f.learn.loss, rec.loss);
  }
  if (given("--prior") && f.learn.prior != option("prior")) note("--prior", f.learn.prior, option("prior"));
  if (given("--topics") && std::to_string(f.learn.topics) != option("topics")) {
    note("--topics", std::to_string(f.learn.topics), option("topics"));
  }
  if (given("--components") && std::to_string(f.learn.components) != option("components")) {
    note("--components", std::to_string(f.learn.components), option("components"));
  }
  for (const std::string& kv : f.learn.options) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    if (kv.substr(eq + 1) != option(kv.substr(0, eq)))
      note("--opt", kv, kv.substr(0, eq) + "=" + option(kv.substr(0, eq)));
  }
  static const char* kKinds[] = {"inverse", "poly", "constant"};
  const auto kind = static_cast<size_t>(rec.schedule.kind);
  const std::string model_kind = kind < 3 ? kKinds[kind] : "?";
  if (given("--schedule") && f.learn.schedule != model_kind) note("--schedule", f.learn.schedule, model_kind);
  auto num = [](double x) { return Fmt(x, 6); };
  if (given("--lambda") && differ(f.learn.lambda, rec.schedule.lambda)) {
    note("--lambda", num(f.learn.lambda), num(rec.schedule.lambda));
  }
  if (given("--tau0") && differ(f.learn.tau0, rec.schedule.tau0))
    note("--tau0", num(f.learn.tau0), num(rec.schedule.tau0));
  if (given("--kappa") && differ(f.learn.kappa, rec.schedule.kappa)) {
    note("--kappa", num(f.learn.kappa), num(rec.schedule.kappa));
  }
  if (given("--rho") && differ(f.learn.rho, rec.schedule.rho)) note("--rho", num(f.learn.rho), num(rec.schedule.rho));
  if (given("--n") && differ(f.learn.n, rec.effective_size)) note("--n", num(f.learn.n), num(rec.effective_size));
  return out;
}

// A new model under --select auto (the default): the live learner
// (live_learner.h), its candidates built as `single` was (`build` makes a
// fresh model for a candidate's settings), given back as one model holding
// the learner (LiveLearner::ToModel), which the server resumes. `single` is
// given back as it is under --select off, for a family of latent components,
// a loss that learns unlabelled documents too (nll: a live learner learns
// labelled ones only) or an engine other than sdEM.
Result<std::unique_ptr<Model>> LiveInitial(
    const ServeFlags& f, std::unique_ptr<Model> single,
    const std::function<Result<std::unique_ptr<Model>>(const ModelConfig&)>& build) {
  if (!LiveLearnerApplies(SelectionFlag(f.learn.select), EngineFlag(f.engine), *single)) return single;
  auto base = ConfigFromFlags(f.learn);
  if (!base.ok()) return base.status();
  auto learner = NewDefaultLiveLearner(*base, build);
  if (!learner.ok()) return learner.status().WithContext("serve --select auto");
  return LiveLearner::ToModel(std::move(learner).value());
}

int RunServe(const ServeFlags& f) {
  ServerOptions o = f.server;
  if (!f.auth_token_file.empty()) {
    if (Status st = ReadServeTokens(f.auth_token_file, &o.auth_token, &o.scoped_tokens); !st.ok()) {
      return ReportError(st);
    }
  }
  const bool any_token = !o.auth_token.empty() || !o.scoped_tokens.empty();
  // A data directory served with a token remembers it (kAuthMarker): a
  // restart that forgets --auth-token-file would serve it to anyone.
  const std::string auth_marker = o.data_dir + "/" + kAuthMarker;
  const bool marked = std::filesystem::exists(auth_marker);
  if (marked && !any_token && !f.no_auth) {
    return ReportError(Status::InvalidArgument(
        "'" + o.data_dir + "' was served with --auth-token-file (" + auth_marker +
        " says so), and this start has none: it would answer anyone. Give --auth-token-file again, or --no-auth to "
        "serve it without authentication from now on"));
  }
  if (any_token && f.no_auth) {
    return ReportError(Status::InvalidArgument("--no-auth contradicts --auth-token-file: give one of them"));
  }
  if (f.fsync == "always") {
    o.fsync_every_request = true;
  } else if (f.fsync != "interval") {
    return ReportError(Status::InvalidArgument("--fsync '" + f.fsync + "': expected always or interval"));
  }
  // A setting of a new model that is wrong whatever the data directory holds
  // is refused first (not later, as the default schema's failure).
  if (auto kind = ParseScheduleKind(f.learn.schedule); !kind.ok()) return ReportError(kind.status());
  auto policy = ParseCorruptionPolicy(f.on_corruption);
  if (!policy.ok()) return ReportError(policy.status());
  o.on_corruption = *policy;
  std::unique_ptr<Model> initial;
  // The initial model is built when the data directory has no snapshot, or
  // when the user names one anyway (recovery falls back on it, plus the whole
  // log, if every snapshot in the directory is damaged).
  const bool have_snapshot = DataDir::HasSnapshot(o.data_dir);
  if (!have_snapshot || !f.model.empty() || !f.schema.empty()) {
    if (!f.model.empty()) {
      auto m = Model::Load(f.model, Registry());
      if (!m.ok()) return ReportError(m.status());
      initial = std::move(m).value();
      if (!initial->loss_plugin()) {
        auto loss = Registry().Find(f.learn.loss, TRIB_KIND_LOSS);
        if (!loss.ok()) return ReportError(loss.status());
        if (Status st = initial->SetLoss(*loss); !st.ok()) return ReportError(st);
      }
    } else if (!f.schema.empty()) {
      auto r = DocumentReader::Open(f.schema, f.learn.max_frame_bytes);
      if (!r.ok()) return ReportError(r.status());
      LearnFlags learn = f.learn;
      // SEP / ADF record nll, the likelihood they approximate (learner.h).
      if (auto fam = Registry().Find(learn.family, TRIB_KIND_FAMILY); fam.ok()) {
        learn.loss = RecordedLoss(EngineFlag(f.engine), **fam, learn.loss);
      }
      auto m = NewModelFromFlags(learn, Registry(), **r, 0, f.schema);
      if (!m.ok()) return ReportError(m.status());
      initial = std::move(m).value();
      const Result<ModelSchema> schema = (*r)->schema();
      auto live = LiveInitial(f, std::move(initial),
                              [&](const ModelConfig& c) { return NewModel(c, Registry(), schema, 0, f.schema); });
      if (!live.ok()) return ReportError(live.status());
      initial = std::move(live).value();
    } else {
      // No model, no schema: the schema of live text, so that raw text over
      // HTTP, the binary protocol or a broker is learned with no set-up, with
      // open classes and, for a family that can grow its vocabulary
      // (multinomial, multinomial-mixture), an open vocabulary (the words as
      // they come; statistics and the published copy sized by the words
      // seen), else (or with --hashed-dim) terms hashed into kLiveHashedDim
      // ids. Families of real or categorical features need --schema.
      v1::StreamHeader live = NewStreamHeader();
      auto fam = Registry().Find(f.learn.family, TRIB_KIND_FAMILY);
      *live.mutable_schema() = DefaultTextSchema(fam.ok() ? fam->get() : nullptr, f.hashed_dim);
      auto m = NewModelFromFlags(f.learn, Registry(), live, 0, "<the default schema>");
      if (!m.ok()) {
        return ReportError(m.status().WithContext(
            std::string("serve: no snapshot in --data-dir, no --model and no --schema, and the default schema (") +
            (live.schema().open_vocabulary()
                 ? std::string("text with an open vocabulary")
                 : "text hashed into " + std::to_string(live.schema().hashed_dim()) + " ids") +
            ", open classes) does not suit family '" + f.learn.family +
            "'; pass --model SNAPSHOT or --schema STREAM (whose header gives the schema)"));
      }
      initial = std::move(m).value();
      auto made = LiveInitial(f, std::move(initial), [&](const ModelConfig& c) {
        return NewModel(c, Registry(), live.schema(), 0, "<the default schema>");
      });
      if (!made.ok()) return ReportError(made.status());
      initial = std::move(made).value();
    }
  }
  o.seed = f.learn.seed;
  o.engine = EngineFlag(f.engine);
  // The snapshot's plugins, and a live learner's candidates', are found where
  // the command's are: a model learned with --plugin FILE comes back after a
  // restart given the same --plugin.
  o.registry = &Registry();
  // The live learner's alarms and switches, one line each on stderr.
  o.on_event = [](const std::string& event) { std::cerr << "tributary serve: " << event << std::endl; };
  auto srv = Server::Start(o, std::move(initial));
  if (!srv.ok()) return ReportError(srv.status());
  (*srv)->HandleSignals();
  const auto& rec = (*srv)->recovery();
  std::cerr << "tributary serve: listening on port " << (*srv)->port();
  const bool tls = !o.tls_cert_file.empty();
  if ((*srv)->http_port()) std::cerr << (tls ? ", HTTPS on port " : ", HTTP on port ") << (*srv)->http_port();
  std::cerr << " (recovered: " << (rec.from_snapshot ? "snapshot" : "fresh model") << " at sequence "
            << rec.snapshot_sequence << ", replayed " << rec.replayed << " logged documents";
  if (rec.torn_bytes) std::cerr << ", dropped a torn tail of " << rec.torn_bytes << " bytes";
  std::cerr << ")" << std::endl;
  if ((*srv)->http_port() && !tls) {
    std::cerr << "tributary serve: NOTE: the HTTP port " << (*srv)->http_port()
              << " is plain text (no TLS): tokens, documents and predictions cross the network readable; give "
                 "--tls-cert and --tls-key for HTTPS, or keep --http on localhost"
              << std::endl;
  }
  {
    // What the memory limits allow (docs/http-api.md "Memory limits").
    const ServerOptions& so = o;
    auto mib = [](uint64_t b) { return std::to_string((b + (1u << 20) - 1) >> 20) + " MiB"; };
    std::cerr << "tributary serve: memory limits: model statistics "
              << (so.max_model_bytes ? "at most " + mib(so.max_model_bytes) : std::string("unbounded"))
              << " per copy (--max-model-bytes; the learner's model and each publication hold one"
              << (rec.live ? "; the live learner's candidates share one" : "") << "), classes "
              << (so.max_classes ? std::to_string(so.max_classes) : std::string("unbounded")) << ", terms "
              << (so.max_terms ? std::to_string(so.max_terms) : std::string("unbounded")) << ", answers "
              << mib(so.max_answer_bytes) << ", request bodies " << mib(so.max_frame_bytes) << " ("
              << mib(so.max_buffered_bytes) << " buffered over all connections)" << std::endl;
  }
  if (!rec.snapshot_path.empty()) {
    // A restart keeps the data directory's model, whose settings are its
    // own: flags of a new model that contradict it would be dropped, so the
    // start is refused, saying which and how to go on (issue 42). Nothing
    // is lost: what the log holds is learned and stays.
    const std::vector<std::string> contradict = IgnoredModelFlags(f, rec);
    if (!contradict.empty()) {
      std::string why = "'" + o.data_dir + "' holds a model learned with other settings (" + rec.snapshot_path +
                        "), which a restart keeps; these flags contradict it:";
      for (size_t i = 0; i < contradict.size(); ++i) why += (i ? "; " : " ") + contradict[i];
      why +=
          ". Drop them to serve the stored model as it is, or start a new model with another --data-dir (or move "
          "this one aside)";
      (*srv)->Shutdown();
      (void)(*srv)->Wait();
      return ReportError(Status::InvalidArgument(why));
    }
  }
  // Authentication as the data directory will remember it.
  if (any_token && !marked) {
    std::ofstream(auth_marker) << "This data directory is served with --auth-token-file: tributary serve refuses "
                                  "to start it without one (--no-auth to serve it without authentication).\n";
  } else if (!any_token) {
    if (marked) std::filesystem::remove(auth_marker);  // --no-auth, said above
    std::cerr << "tributary serve: NOTE: no --auth-token-file: every request on both ports is served without "
                 "authentication"
              << (marked ? " (--no-auth: '" + o.data_dir + "' no longer asks for a token)" : std::string())
              << std::endl;
  }
  for (const auto& d : rec.damage) std::cerr << "tributary serve: DAMAGE: " << d << std::endl;
  if (rec.lost_records) {
    std::cerr << "tributary serve: DAMAGE: " << rec.lost_records
              << " acknowledged documents could not be recovered (--on-corruption skip)" << std::endl;
  }
  for (const auto& r : rec.reports) {
    std::cerr << "tributary serve: /healthz fails until this report is reviewed and removed: " << r << std::endl;
  }
  if (!f.port_file.empty()) {
    std::string tmp = f.port_file + ".tmp";
    std::ofstream(tmp) << (*srv)->port() << " " << (*srv)->http_port() << "\n";
    std::rename(tmp.c_str(), f.port_file.c_str());
  }
  Status st = (*srv)->Wait();
  if (!st.ok()) return ReportError(st);
  std::cerr << "tributary serve: stopped cleanly" << std::endl;
  return kExitOk;
}

}  // namespace

Runner SetUpServe(CLI::App* sv) {
  auto s = std::make_shared<ServeFlags>();
  sv->add_option("--family", s->learn.family, "family plugin (new models)")->capture_default_str();
  sv->add_option("--loss", s->learn.loss, "loss plugin (new models)")->capture_default_str();
  sv->add_option("--prior", s->learn.prior, "family prior");
  sv->add_option("--opt", s->learn.options, "family option key=value");
  sv->add_option("--topics", s->learn.topics, "number of topics (family option 'topics')");
  sv->add_option("--components", s->learn.components, "number of mixture components (family option 'components')");
  AddScheduleFlags(sv, &s->learn);
  sv->add_option("--n", s->learn.n,
                 "effective data-set size n of a new model (default 10000: a live stream has no length)")
      ->check(EffectiveSizeCheck());
  sv->add_option("--seed", s->learn.seed, "learner seed")->capture_default_str();
  sv->add_option("--engine", s->engine,
                 "learning engine: auto (SEP for families with SEP hooks, else sdEM), sdem, sep or adf")
      ->check(CLI::IsMember({"auto", "sdem", "sep", "adf"}))
      ->capture_default_str();
  sv->add_option("--select", s->learn.select,
                 "new models: auto (the live learner: candidates with long and short memories and the generative "
                 "NLL learner test-then-train on every labelled document, the best recent one served, drift "
                 "detected by ADWIN; a loss that learns unlabelled documents, nll, learns alone) or off (one "
                 "learner with the given settings)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "off"}));
  sv->add_option("--model", s->model, "start from this snapshot (when the data dir has none)");
  sv->add_option("--schema", s->schema, "start a new model with the schema of this stream's header");
  sv->add_option("--hashed-dim", s->hashed_dim,
                 "a new model without --model or --schema: hash terms into this many ids (default: an open "
                 "vocabulary for families that can grow one, multinomial and multinomial-mixture; 2^18 ids for "
                 "the others)")
      ->check(CLI::Range(uint64_t{1}, kMaxHashedDim));
  sv->add_option("--data-dir", s->server.data_dir, "snapshot and write-ahead log directory")->required();
  sv->add_option("--listen", s->server.listen, "HOST:PORT for the protocol (port 0: any)")->capture_default_str();
  sv->add_option("--http", s->server.http, "HOST:PORT for /healthz, /metrics and the HTTP/JSON API (docs/http-api.md)");
  sv->add_option("--tls-cert", s->server.tls_cert_file,
                 "HTTPS on the HTTP port (TLS 1.2+; plain HTTP refused): this PEM file's certificate, then its "
                 "chain; with --tls-key (docs/http-api.md, TLS)");
  sv->add_option("--tls-key", s->server.tls_key_file,
                 "the private key of --tls-cert's certificate (PEM, not encrypted; readable by the service's user "
                 "only)");
  sv->add_option("--io-threads", s->server.io_threads, "I/O threads")->capture_default_str();
  sv->add_option("--queue-capacity", s->server.queue_capacity, "documents accepted but not yet learned")
      ->capture_default_str();
  sv->add_option("--fsync", s->fsync, "always (every request) or interval (group commit)")->capture_default_str();
  sv->add_option("--fsync-interval-ms", s->server.fsync_interval_ms, "group-commit interval")->capture_default_str();
  sv->add_option("--wal-retry-interval-ms", s->server.wal_retry_interval_ms,
                 "after a write-ahead log failure (full disk): probe the log this often and resume learning when it "
                 "takes data again (0: stay off until restarted)")
      ->capture_default_str();
  sv->add_option("--ack-mark-interval-ms", s->server.ack_mark_interval_ms,
                 "rewrite the write-ahead log's acknowledgement mark at most this often (damage to records "
                 "acknowledged before the last mark is reported, never taken for a torn write; 0: before every "
                 "acknowledgement, no window, two more fsyncs per group commit)")
      ->capture_default_str();
  sv->add_option("--keep-versions", s->server.keep_versions,
                 "keep the newest N snapshots as model versions (GET /v1/models; restore with POST "
                 "/v1/models/VERSION/restore); the log keeps every document after the oldest; 0: none")
      ->capture_default_str();
  sv->add_option("--version-every", s->server.version_every_documents,
                 "keep a version once this many documents were learned since the last one")
      ->capture_default_str();
  sv->add_option("--version-interval-s", s->server.version_interval_s,
                 "... or once this long has passed with any document learned")
      ->capture_default_str();
  sv->add_option("--feedback-max-bytes", s->server.feedback_max_bytes,
                 "predictions kept for a late label (predict with \"keep\": true; POST /v1/feedback): at most this "
                 "many bytes of documents, the oldest expiring first")
      ->capture_default_str();
  sv->add_option("--feedback-max-age-s", s->server.feedback_max_age_s,
                 "... and a kept prediction expires after this long")
      ->capture_default_str();
  sv->add_option("--drain-timeout-ms", s->server.drain_timeout_ms,
                 "on SIGTERM, learn what was acknowledged for at most this long; the rest stays in the log and is "
                 "replayed at the next start")
      ->capture_default_str();
  sv->add_option("--publish-interval-ms", s->server.publish_interval_ms, "publish the model at least this often")
      ->capture_default_str();
  sv->add_option("--publish-every", s->server.publish_every_updates, "... or every this many updates")
      ->capture_default_str();
  sv->add_option("--snapshot-every", s->server.snapshot_every_documents, "snapshot every N documents")
      ->capture_default_str();
  sv->add_option("--snapshot-interval-s", s->server.snapshot_interval_s, "... or every T seconds")
      ->capture_default_str();
  sv->add_option("--max-frame-bytes", s->server.max_frame_bytes, "largest request frame, and HTTP request body")
      ->capture_default_str();
  sv->add_option("--max-answer-bytes", s->server.max_answer_bytes,
                 "largest prediction answer (its bound: class names once, per document its id, the predicted "
                 "class and K probabilities); a request over it is refused whole, naming how many documents fit")
      ->capture_default_str();
  sv->add_option("--max-request-documents", s->server.max_request_documents,
                 "documents one learn or predict request may hold; a request of more is refused whole (0: no limit)")
      ->capture_default_str();
  sv->add_option("--max-classes", s->server.max_classes,
                 "classes an open model may grow to: a label past it is refused (0: no limit)")
      ->capture_default_str();
  sv->add_option("--max-terms", s->server.max_terms,
                 "terms an open vocabulary may grow to: new terms past it are left out and the document learned "
                 "from the others (0: no limit)")
      ->capture_default_str();
  sv->add_option("--max-label-bytes", s->server.max_label_bytes, "longest name of a new class (0: no limit)")
      ->capture_default_str();
  sv->add_option("--max-model-bytes", s->server.max_model_bytes,
                 "the statistics' budget (one copy: the learner's model and each publication hold one); classes "
                 "and terms past it are refused / left out as for --max-classes / --max-terms (0: no limit)")
      ->capture_default_str();
  sv->add_option("--max-connections", s->server.max_connections, "open connections")->capture_default_str();
  sv->add_option("--max-unauthenticated-connections", s->server.max_unauthenticated_connections,
                 "with --auth-token-file: connections (both ports) that have not shown the token; the oldest is "
                 "closed when a newer one needs its slot, so authenticated clients always have room (0: no limit)")
      ->capture_default_str();
  sv->add_option("--idle-timeout-s", s->server.idle_timeout_s, "close idle connections after (0: never)")
      ->capture_default_str();
  sv->add_option("--max-inflight", s->server.max_inflight, "unanswered requests per connection")->capture_default_str();
  sv->add_option("--auth-token-file", s->auth_token_file,
                 "the tokens requests must carry, one per line, alone (every scope) or followed by its scopes "
                 "(predict, learn, admin, comma-separated: 'TOKEN predict'); '#' starts a comment line. The data "
                 "directory remembers it was served with tokens, and a restart without them is refused");
  sv->add_flag("--no-auth", s->no_auth,
               "serve a data directory once served with --auth-token-file without authentication from now on");
  sv->add_option("--port-file", s->port_file, "write '<port> <http port>' here once listening");
  sv->add_option("--source", s->server.sources,
                 "learn from a broker, exactly once (repeatable): "
                 "redis://[:PASSWORD@]HOST[:PORT]/STREAM[?group=G&consumer=C&dead_letter=STREAM&batch=N] or "
                 "kafka://HOST:PORT[,HOST:PORT]/TOPIC[?group=G&dead_letter=TOPIC&batch=N] (docs/sources.md)");
  sv->add_option("--on-corruption", s->on_corruption,
                 "corruption inside the write-ahead log: refuse (do not start; nothing changed) or skip (keep the "
                 "damaged segment in <data-dir>/damaged, go on without its unreadable documents, fail /healthz "
                 "until the .report is removed)")
      ->check(CLI::IsMember({"refuse", "skip"}))
      ->capture_default_str();
  return [sv, s] {
    NoteScheduleGiven(*sv, &s->learn);
    for (const CLI::Option* opt : sv->get_options()) {
      if (opt->count() > 0) s->given.push_back(opt->get_name());
    }
    return RunServe(*s);
  };
}

}  // namespace tributary::cli
