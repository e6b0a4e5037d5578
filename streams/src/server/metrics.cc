// The server's metrics (Prometheus text format); http.cc serves them on
// /metrics.
#include "server/server_impl.h"  // first: it configures Asio for TSan builds
#include "server/source_reader.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tributary/top_terms.h"

namespace tributary {

namespace {

// A sample value as the text format spells it: integers in full (a stream's
// default 6 digits would print 1234567 as 1.23457e+06), other numbers in the
// shortest text that reads back the same, NaN, +Inf, -Inf.
std::string PrometheusValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) return std::to_string(static_cast<int64_t>(v));
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace

namespace server_internal {

// ---- Metrics (Prometheus text format) ---------------------------------------

void Histogram::Observe(double seconds) {
  size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  uint64_t ns = static_cast<uint64_t>(seconds * 1e9);
  sum_ns_.fetch_add(ns, std::memory_order_relaxed);
}

void Histogram::Write(std::ostream& os, const std::string& name, const std::string& help) const {
  os << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    cum += buckets_[i].load(std::memory_order_relaxed);
    os << name << "_bucket{le=\"" << kBounds[i] << "\"} " << cum << "\n";
  }
  cum += buckets_[kBounds.size()].load(std::memory_order_relaxed);
  os << name << "_bucket{le=\"+Inf\"} " << cum << "\n";
  os << name << "_sum " << PrometheusValue(static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9) << "\n";
  os << name << "_count " << count_.load(std::memory_order_relaxed) << "\n";
}

std::string PrometheusLabel(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char ch : value) {
    if (ch == '\\' || ch == '"') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else {
      out += ch;
    }
  }
  return out;
}

void CountError(Counters& c, v1::Response::Code code) {
  switch (code) {
    case v1::Response::INVALID_REQUEST:
      c.err_invalid++;
      break;
    case v1::Response::UNAUTHENTICATED:
      c.err_unauthenticated++;
      break;
    case v1::Response::OVERLOADED:
      c.err_overloaded++;
      break;
    case v1::Response::UNAVAILABLE:
      c.err_unavailable++;
      break;
    case v1::Response::INTERNAL:
      c.err_internal++;
      break;
    case v1::Response::PERMISSION_DENIED:
      c.err_permission++;
      break;
    default:
      break;
  }
}

}  // namespace server_internal

std::string Server::Impl::MetricsText() {
  std::ostringstream os;
  // (Before recovery is done there is no model: version 0, no publications.)
  const bool ready = recovery_phase.load() == RecoveryPhase::kReady;
  const LiveModel::Stats live_stats = ready ? live->stats() : LiveModel::Stats{};
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    os << "# HELP " << name << " " << help << "\n# TYPE " << name << " counter\n" << name << " " << v << "\n";
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    os << "# HELP " << name << " " << help << "\n# TYPE " << name << " gauge\n"
       << name << " " << PrometheusValue(v) << "\n";
  };
  counter("tributary_documents_learned_total", "Documents applied to the model.", counters.documents_learned);
  counter("tributary_documents_acknowledged_total", "Documents acknowledged (durable in the log).",
          counters.documents_acknowledged);
  counter("tributary_documents_skipped_total", "Acknowledged documents the learner refused.",
          counters.documents_skipped);
  counter("tributary_predictions_total", "Documents predicted.", counters.predictions);
  counter("tributary_requests_total", "Requests read.", counters.requests);
  counter("tributary_connections_total", "Connections accepted.", counters.connections);
  counter("tributary_snapshots_total", "Snapshots written.", counters.snapshots);
  counter("tributary_publications_total", "Copies of the learner's model published to the predictors.",
          live_stats.publications);
  counter("tributary_publications_refreshed_total",
          "Publications made by refreshing a retired copy (only the statistics written since copied).",
          live_stats.refreshed);
  os << "# HELP tributary_errors_total Errors by kind.\n# TYPE tributary_errors_total counter\n";
  os << "tributary_errors_total{kind=\"invalid_request\"} " << counters.err_invalid << "\n";
  os << "tributary_errors_total{kind=\"unauthenticated\"} " << counters.err_unauthenticated << "\n";
  os << "tributary_errors_total{kind=\"permission_denied\"} " << counters.err_permission << "\n";
  os << "tributary_errors_total{kind=\"overloaded\"} " << counters.err_overloaded << "\n";
  os << "tributary_errors_total{kind=\"unavailable\"} " << counters.err_unavailable << "\n";
  os << "tributary_errors_total{kind=\"internal\"} " << counters.err_internal << "\n";
  os << "tributary_errors_total{kind=\"bad_frame\"} " << counters.err_frame << "\n";
  os << "tributary_errors_total{kind=\"wal\"} " << counters.err_wal << "\n";
  os << "# HELP tributary_limit_refusals_total Requests or documents refused by a memory limit (answer_bytes: "
        "a predict request whose answer would pass --max-answer-bytes; request_documents: a request of more documents "
        "than --max-request-documents; classes: a label past --max-classes or the "
        "--max-model-bytes budget; label_bytes: a new class name over --max-label-bytes).\n"
        "# TYPE tributary_limit_refusals_total counter\n";
  os << "tributary_limit_refusals_total{limit=\"answer_bytes\"} " << counters.answer_refusals << "\n";
  os << "tributary_limit_refusals_total{limit=\"request_documents\"} " << counters.document_limit_refusals << "\n";
  os << "tributary_limit_refusals_total{limit=\"classes\"} " << counters.class_limit_refusals << "\n";
  os << "tributary_limit_refusals_total{limit=\"label_bytes\"} " << counters.label_limit_refusals << "\n";
  counter("tributary_new_terms_dropped_total",
          "New terms of learn requests left out of the open vocabulary: at --max-terms (or the --max-model-bytes "
          "budget), or longer than 256 bytes.",
          counters.terms_dropped);
  std::vector<std::string> class_names;  // the served model's (for the per-class quality)
  if (ready) {
    // The model's size against its limits (the publication's: what answers).
    (void)Read([&](const LiveView& pub) {
      const Model& m = *pub.model;
      if (!m.latent_outputs()) class_names = m.schema().classes();
      const GrowthLimits& lim = m.schema().limits();
      gauge("tributary_model_classes", "Classes of the served model.", m.num_classes());
      gauge("tributary_model_classes_limit", "Classes the model may grow to (0: no limit).",
            static_cast<double>(lim.max_classes));
      gauge("tributary_model_terms", "Terms of the served model's vocabulary (hash buckets if hashed).",
            static_cast<double>(m.schema().vocab_size()));
      gauge("tributary_model_terms_limit", "Terms an open vocabulary may grow to (0: no limit or not open).",
            static_cast<double>(lim.max_terms));
      gauge("tributary_model_statistics_bytes", "Bytes of the served model's statistics (one copy).",
            static_cast<double>(m.statistics_bytes()));
      return Status::OK();
    });
  }
  gauge("tributary_model_statistics_bytes_limit", "--max-model-bytes: the statistics' budget (one copy; 0: none).",
        static_cast<double>(opt.max_model_bytes));
  gauge("tributary_queue_depth", "Documents accepted but not yet learned.", static_cast<double>(QueueDepth()));
  gauge("tributary_model_version", "Version (documents learned) of the published model.",
        ready ? static_cast<double>(live->version()) : 0.0);
  gauge("tributary_open_connections", "Open client connections.", open_connections.load());
  gauge("tributary_unauthenticated_connections",
        "Connections of both ports that have not shown the token (at most --max-unauthenticated-connections).",
        static_cast<double>(StrangerCount()));
  counter("tributary_unauthenticated_evictions_total",
          "Connections without the token closed to make room for a newer one.", counters.strangers_evicted);
  gauge("tributary_buffered_bytes", "Bytes of partly received frames over all connections.",
        static_cast<double>(buffered_bytes.load()));
  gauge("tributary_learning_enabled", "1 while learn requests are accepted.", learning_enabled ? 1.0 : 0.0);
  counter("tributary_wal_recoveries_total", "Times learning resumed after a write-ahead log failure.",
          counters.wal_recoveries);
  counter("tributary_wal_ack_mark_failures_total",
          "Failed writes of the write-ahead log's acknowledgement mark (learning goes on; damage to records "
          "acknowledged since the last mark would read as a torn write).",
          counters.ack_mark_failures);
  counter("tributary_snapshot_failures_total", "Snapshots that could not be written (retried later).",
          counters.snapshot_failures);
  counter("tributary_versions_kept_total", "Snapshots kept as model versions (--keep-versions).",
          counters.versions_kept);
  counter("tributary_version_failures_total", "Model versions that could not be kept (the snapshot itself was).",
          counters.version_failures);
  counter("tributary_restores_total", "Restores of a model version applied (POST /v1/models/VERSION/restore).",
          counters.restores);
  counter("tributary_restore_failures_total",
          "Restores refused when applied, the model unchanged (the version missing or unreadable).",
          counters.restore_failures);
  counter("tributary_wal_recovery_attempts_total", "Attempts to use the write-ahead log again after a failure.",
          counters.wal_recovery_attempts);
  gauge("tributary_damage_reports", "Damage reports in the data directory awaiting review (/healthz fails).",
        static_cast<double>(DamageReports().size()));
  gauge("tributary_ready", "1 once recovery is done and the protocol port is open.", ready ? 1.0 : 0.0);
  gauge("tributary_replayed_documents", "Log records replayed by the recovery (so far, while not ready).",
        static_cast<double>(replay_progress.load()));
  gauge("tributary_recovery_lost_documents", "Acknowledged documents the last recovery could not read.",
        ready ? static_cast<double>(recovery.lost_records) : 0.0);
  os << "# HELP tributary_http_requests_total HTTP requests read, by endpoint (other: /healthz, /metrics, "
        "unknown paths).\n# TYPE tributary_http_requests_total counter\n";
  os << "tributary_http_requests_total{endpoint=\"learn\"} " << counters.http_learn_requests << "\n";
  os << "tributary_http_requests_total{endpoint=\"predict\"} " << counters.http_predict_requests << "\n";
  os << "tributary_http_requests_total{endpoint=\"other\"} " << counters.http_other_requests << "\n";
  os << "# HELP tributary_http_errors_total HTTP API error answers, by status and error code (not in "
        "tributary_errors_total, which counts the binary protocol).\n# TYPE tributary_http_errors_total counter\n";
  for (size_t i = 0; i < server_internal::kHttpErrors.size(); ++i) {
    os << "tributary_http_errors_total{status=\"" << server_internal::kHttpErrors[i].status << "\",code=\""
       << server_internal::kHttpErrors[i].code << "\"} " << counters.http_errors[i] << "\n";
  }
  gauge("tributary_http_open_connections", "Open HTTP connections.", http_connections.load());
  if (feedback != nullptr) {
    const FeedbackStore::Stats fs = feedback->stats();
    gauge("tributary_kept_predictions", "Predictions kept for a late label, waiting for it.",
          static_cast<double>(fs.waiting));
    gauge("tributary_kept_prediction_bytes", "Their documents' bytes (--feedback-max-bytes bounds them).",
          static_cast<double>(fs.bytes));
    counter("tributary_kept_predictions_total", "Predictions kept for a late label (predict with \"keep\").", fs.kept);
    counter("tributary_kept_predictions_expired_total",
            "Kept predictions dropped before their label came (--feedback-max-age-s, --feedback-max-bytes).",
            fs.expired);
    counter("tributary_feedback_refused_total",
            "Labels refused: their prediction id unknown, expired or labelled already.", fs.refused);
  }
  {
    // What the learner knows of its own predictions (quality_monitor.h):
    // every labelled document scored before it is learned.
    std::lock_guard<std::mutex> l(quality_mu);
    counter("tributary_prequential_documents_total",
            "Labelled documents scored before they were learned (since the server started, the log's replayed "
            "tail included).",
            quality.documents());
    if (quality.documents() > 0) {
      os << "# HELP tributary_prequential_accuracy Fraction of labelled documents predicted right before they were "
            "learned: over all of them (cumulative) and recently (recent: a document's weight halves every 500 "
            "later documents).\n# TYPE tributary_prequential_accuracy gauge\n";
      os << "tributary_prequential_accuracy{window=\"cumulative\"} " << PrometheusValue(quality.accuracy()) << "\n";
      os << "tributary_prequential_accuracy{window=\"recent\"} " << PrometheusValue(quality.window_accuracy()) << "\n";
      os << "# HELP tributary_prequential_log_loss Mean -log p(y | x) of labelled documents before they were "
            "learned (each capped at 50).\n# TYPE tributary_prequential_log_loss gauge\n";
      os << "tributary_prequential_log_loss{window=\"cumulative\"} " << PrometheusValue(quality.log_loss()) << "\n";
      os << "tributary_prequential_log_loss{window=\"recent\"} " << PrometheusValue(quality.window_log_loss()) << "\n";
      os << "# HELP tributary_class_recall Per class: fraction of its documents predicted right before they were "
            "learned, over its recent documents (weight halving every 50 of them).\n"
            "# TYPE tributary_class_recall gauge\n";
      const auto& classes = quality.classes();
      for (size_t k = 0; k < classes.size() && k < class_names.size(); ++k) {
        if (classes[k].documents == 0) continue;
        os << "tributary_class_recall{class=\"" << server_internal::PrometheusLabel(class_names[k]) << "\"} "
           << PrometheusValue(classes[k].window_recall) << "\n";
      }
    }
    // Late labels: the kept predictions as they were made, once labelled.
    counter("tributary_delayed_documents_total",
            "Kept predictions whose label came (POST /v1/feedback), counted as they were predicted then (since the "
            "server started, plus the labels the kept-prediction log still holds).",
            delayed.documents());
    if (delayed.documents() > 0) {
      os << "# HELP tributary_delayed_accuracy Fraction of kept predictions that were right when made, judged by "
            "the label that came later: cumulative and recent.\n# TYPE tributary_delayed_accuracy gauge\n";
      os << "tributary_delayed_accuracy{window=\"cumulative\"} " << PrometheusValue(delayed.accuracy()) << "\n";
      os << "tributary_delayed_accuracy{window=\"recent\"} " << PrometheusValue(delayed.window_accuracy()) << "\n";
      os << "# HELP tributary_delayed_log_loss Mean -log p(y | x) of kept predictions, as made, for the label that "
            "came later (each capped at 50).\n# TYPE tributary_delayed_log_loss gauge\n";
      os << "tributary_delayed_log_loss{window=\"cumulative\"} " << PrometheusValue(delayed.log_loss()) << "\n";
      os << "tributary_delayed_log_loss{window=\"recent\"} " << PrometheusValue(delayed.window_log_loss()) << "\n";
    }
    // A live learner's own alarms (the ones that raised its steps), else the
    // monitor's.
    const std::vector<uint64_t>& alarms = live_learner ? live_alarms : quality.alarms();
    counter("tributary_drift_alarms_total",
            "Drift alarms: ADWIN (delta 0.002) found the prequential error rate risen (docs/design.md section 15); "
            "a live learner then raised its candidates' steps.",
            alarms.size());
    gauge("tributary_drift_last_alarm_document",
          "Labelled documents scored (tributary_prequential_documents_total; a live learner: labelled documents "
          "it had learned since it was made) when the last drift alarm fired (0: none).",
          alarms.empty() ? 0.0 : static_cast<double>(alarms.back()));
    if (live_learner) {
      counter("tributary_live_switches_total",
              "Times the live learner's served candidate changed (since the learner was made).", live_switches);
      os << "# HELP tributary_live_served The live learner's candidate serving predictions now (value 1).\n"
            "# TYPE tributary_live_served gauge\ntributary_live_served{candidate=\""
         << server_internal::PrometheusLabel(live_served) << "\"} 1\n";
    }
  }
  SourceReader::WriteMetrics(os, readers);
  counters.learn_latency.Write(os, "tributary_learn_latency_seconds", "Learn request latency (read to acknowledged).");
  counters.predict_latency.Write(os, "tributary_predict_latency_seconds", "Predict request latency.");
  return os.str();
}

std::string Server::Impl::StatusJson() {
  using json = nlohmann::json;
  auto num = [](double x) { return std::isfinite(x) ? json(x) : json(nullptr); };
  json j;
  const bool ready = recovery_phase.load() == RecoveryPhase::kReady;
  j["ready"] = ready;
  std::vector<std::string> class_names;
  if (ready) {
    (void)Read([&](const LiveView& pub) {
      const Model& m = *pub.model;
      j["model"] = {{"family", m.family().name},
                    {"loss", m.loss_plugin() ? m.loss_plugin()->name : std::string()},
                    {"version", pub.version},
                    {"outputs", m.num_outputs()},
                    {"schedule", m.learner_state().schedule.ToString()}};
      if (!m.latent_outputs()) class_names = m.schema().classes();
      // The components' (topics') most probable terms, where the family
      // describes them by terms (Model::ComponentTerms): at most
      // kStatusComponents components, kStatusTerms terms each.
      constexpr uint32_t kStatusComponents = 50, kStatusTerms = 10;
      const uint32_t components = m.num_components();
      if (components > 0 && m.family().family().component_terms != nullptr) {
        json top = json::array();
        std::vector<TermProbability> terms;
        for (uint32_t k = 0; k < components && k < kStatusComponents; ++k) {
          if (!TopComponentTerms(m, k, kStatusTerms, &terms).ok()) break;
          json t = json::array();
          for (const TermProbability& tp : terms) t.push_back({{"term", tp.term}, {"p", tp.p}});
          top.push_back({{"component", k},
                         {"name", m.latent_outputs() ? m.OutputName(k) : std::to_string(k)},
                         {"terms", std::move(t)}});
        }
        j["top_terms"] = std::move(top);
      }
      return Status::OK();
    });
  }
  const auto now = Clock::now();
  const uint64_t learned = counters.documents_learned.load();
  j["documents_learned"] = learned;
  j["documents_skipped"] = counters.documents_skipped.load();
  j["documents_acknowledged"] = counters.documents_acknowledged.load();
  j["uptime_seconds"] = std::chrono::duration<double>(now - created).count();
  // What waits: documents accepted but not learned, bytes of partly
  // received frames, and whether the write-ahead log takes documents.
  const std::string wal_err = WalError();
  j["queue"] = {{"depth", QueueDepth()},
                {"buffered_bytes", buffered_bytes.load()},
                {"learning_enabled", learning_enabled.load()},
                {"log_error", wal_err},
                {"open_connections", open_connections.load()},
                {"http_connections", http_connections.load()},
                {"publications", ready ? live->stats().publications : uint64_t{0}}};
  auto name = [&](uint32_t k) { return k < class_names.size() ? class_names[k] : std::to_string(k); };
  std::lock_guard<std::mutex> l(quality_mu);
  if (ready) {
    // The model's age: since the newest version was published (Publish;
    // at start, since the recovered model was first published).
    const int64_t at = published_at.load();
    const Clock::time_point when = at != 0 ? Clock::time_point(Clock::duration(at)) : created;
    j["model"]["age_seconds"] = std::max(0.0, std::chrono::duration<double>(now - when).count());
  }
  // documents_per_second: over the samples of the last ~10 s (one kept per
  // second), or since the server started on the first call.
  constexpr auto kRateWindow = std::chrono::seconds(10);
  if (status_rate_samples.empty() || now - status_rate_samples.back().first >= std::chrono::seconds(1)) {
    status_rate_samples.emplace_back(now, learned);
  }
  while (status_rate_samples.size() > 2 && now - status_rate_samples[1].first >= kRateWindow) {
    status_rate_samples.pop_front();
  }
  {
    auto [t0, d0] = status_rate_samples.front();
    if (now - t0 < std::chrono::milliseconds(200)) {
      t0 = created;
      d0 = 0;
    }
    const double dt = std::chrono::duration<double>(now - t0).count();
    j["documents_per_second"] = dt > 0 && learned >= d0 ? static_cast<double>(learned - d0) / dt : 0.0;
  }
  json q;
  q["documents"] = quality.documents();
  q["accuracy"] = num(quality.accuracy());
  q["window_accuracy"] = num(quality.window_accuracy());
  q["log_loss"] = num(quality.log_loss());
  q["window_log_loss"] = num(quality.window_log_loss());
  json per_class = json::array();
  const auto& classes = quality.classes();
  for (uint32_t k = 0; k < classes.size(); ++k) {
    if (classes[k].documents == 0) continue;
    per_class.push_back(
        {{"class", name(k)},
         {"documents", classes[k].documents},
         {"recall", static_cast<double>(classes[k].correct) / static_cast<double>(classes[k].documents)},
         {"window_recall", classes[k].window_recall}});
  }
  q["per_class"] = per_class;
  json confused = json::array();
  for (const Confusion& c : quality.MostConfused(10)) {
    confused.push_back({{"class", name(c.truth)}, {"predicted", name(c.predicted)}, {"documents", c.documents}});
  }
  q["most_confused"] = confused;
  q["drift_alarms"] = live_learner ? live_alarms : quality.alarms();
  j["quality"] = q;
  // Late labels (docs/http-api.md): the kept predictions judged by the
  // labels that came for them, as they were made.
  if (feedback != nullptr) {
    const FeedbackStore::Stats fs = feedback->stats();
    j["kept_predictions"] = {{"waiting", fs.waiting},   {"bytes", fs.bytes},     {"kept", fs.kept},
                             {"labelled", fs.labelled}, {"expired", fs.expired}, {"refused", fs.refused}};
    if (!fs.error.empty()) j["kept_predictions"]["error"] = fs.error;
  }
  j["delayed"] = {{"documents", delayed.documents()},
                  {"accuracy", num(delayed.accuracy())},
                  {"window_accuracy", num(delayed.window_accuracy())},
                  {"log_loss", num(delayed.log_loss())},
                  {"window_log_loss", num(delayed.window_log_loss())}};
  json live_json;
  if (live_learner && ready) {
    // The candidates, the one served, the learner's alarms (labelled
    // documents since it was made) and switches (LiveLearner::ToJson).
    live_json = json::parse(live->live_report(), nullptr, false);
    j["live"] = live_json;
  }
  // The recent figures over time (QualityMonitor::history), on the axis of
  // quality.documents, with the drift alarms on the same axis: a live
  // learner counts its alarms in labelled documents since it was made (over
  // restarts), moved here by its count now less the monitor's.
  json points = json::array();
  for (const QualityPoint& p : quality.history()) {
    points.push_back(json::array({p.documents, p.time, num(p.window_accuracy), num(p.window_log_loss)}));
  }
  if (quality.documents() > 0 &&
      (quality.history().empty() || quality.history().back().documents < quality.documents())) {
    // The figures now, after the last sampled point.
    const double t = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    points.push_back(
        json::array({quality.documents(), t, num(quality.window_accuracy()), num(quality.window_log_loss())}));
  }
  json alarms = json::array();
  if (live_learner) {
    const uint64_t labelled = live_json.is_object() ? live_json.value("labelled", uint64_t{0}) : 0;
    const uint64_t offset = labelled > quality.documents() ? labelled - quality.documents() : 0;
    for (uint64_t a : live_alarms) {
      if (a > offset) alarms.push_back(a - offset);
    }
  } else {
    alarms = quality.alarms();
  }
  j["history"] = {{"fields", {"documents", "time", "window_accuracy", "window_log_loss"}},
                  {"every", quality.history_every()},
                  {"points", std::move(points)},
                  {"alarms", std::move(alarms)}};
  return j.dump();
}

}  // namespace tributary
