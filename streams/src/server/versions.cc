// Model versions and rollback (issue 42; docs/design.md §16). A version is a
// snapshot the learner keeps under the data directory's versions/ (DataDir::
// KeepVersion) with what the server knew of it then. A restore is a record
// of the write-ahead log, ordered with the learn requests around it: the
// model becomes the version's, and the documents logged between the version
// and the restore are either learned again (replay) or not learned and kept
// aside as a document stream (versions/skipped-<first>-<last>.tribs) that
// `tributary client learn --in` can send again. Recovery replays the record
// the same way, so a crash at any point of a restore gives the same model.
#include "server/server_impl.h"  // first: it configures Asio for TSan builds

#include <chrono>
#include <cmath>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "tributary/data_dir.h"
#include "tributary/live_learner.h"
#include "tributary/stream_io.h"

namespace tributary {

namespace {

using json = nlohmann::json;

json Num(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

int64_t UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Status Server::Impl::KeepVersion(const char* trigger, uint64_t* version) {
  // What the version is, said beside it (GET /v1/models): when, why, how
  // much it learned and how well it did on the labelled documents just
  // before it (the windowed prequential figures: test-then-train).
  json info;
  info["version"] = applied_sequence;
  info["created_ms"] = UnixMillis();
  info["trigger"] = trigger;
  info["documents_learned"] = live->learned();
  TRIB_RETURN_IF_ERROR(live->WithModel([&](Model* m) {
    info["model"] = {{"family", m->family().name},
                     {"loss", m->loss_plugin() ? m->loss_plugin()->name : std::string()},
                     {"classes", m->latent_outputs() ? 0 : m->num_classes()}};
    return Status::OK();
  }));
  {
    std::lock_guard<std::mutex> l(quality_mu);
    info["quality"] = {{"labelled", quality.documents()},
                       {"accuracy", Num(quality.window_accuracy())},
                       {"log_loss", Num(quality.window_log_loss())},
                       {"cumulative_accuracy", Num(quality.accuracy())}};
    if (live_learner) info["served"] = live_served;
  }
  TRIB_RETURN_IF_ERROR(data_dir->KeepVersion(applied_sequence, info.dump(), opt.keep_versions));
  counters.versions_kept++;
  *version = applied_sequence;
  return Status::OK();
}

Status Server::Impl::ApplyRestore(const v1::WalRecord& rec, RestoreOutcome* out) {
  const uint64_t version = rec.restore().version();
  out->version = version;
  out->record = rec.sequence();
  out->replay = rec.restore().replay();
  out->first = version + 1;
  out->last = rec.sequence() - 1;
  auto refuse = [&](const Status& why) {
    // Nothing changed; on replay the same happens (a missing or damaged
    // version stays so).
    out->status = why;
    counters.restore_failures++;
    if (opt.on_event) {
      opt.on_event("restore of model version " + std::to_string(version) + " (log record " +
                   std::to_string(rec.sequence()) + ") refused, the model unchanged: " + why.ToString());
    }
    return Status::OK();
  };
  auto found = data_dir->FindVersion(version);
  if (!found.ok()) return refuse(found.status());
  auto model = Model::Load(found->path, *registry, env);
  if (!model.ok()) return refuse(model.status().WithContext("model version " + std::to_string(version)));
  (*model)->SetGrowthLimits(GrowthLimits{opt.max_classes, opt.max_terms, opt.max_label_bytes}, opt.max_model_bytes);
  WriteAheadLog* log = data_dir->wal();
  // The documents after the version, not learned again: kept aside first
  // (before the model changes), as a stream in the ids of the model that
  // learned them. On replay at start the file is there already.
  if (!out->replay && out->first <= out->last) {
    const std::string name = "skipped-" + std::to_string(out->first) + "-" + std::to_string(out->last) + ".tribs";
    const std::string path = (std::filesystem::path(data_dir->VersionsDir()) / name).string();
    out->kept_as = path;
    uint64_t docs = 0;
    Status st = log->ReadRange(out->first, out->last, [&](const v1::WalRecord& r) {
      docs += r.has_restore() ? 0 : 1;
      return Status::OK();
    });
    out->documents = docs;
    if (st.ok() && docs > 0 && !env->FileExists(path)) {
      v1::StreamHeader header = NewStreamHeader(/*frame_checksum=*/true);
      header.set_document_count(docs);
      header.set_source("tributary serve: documents logged " + std::to_string(out->first) + ".." +
                        std::to_string(out->last) + ", not learned by the restore of model version " +
                        std::to_string(version) + " (log record " + std::to_string(rec.sequence()) + ")");
      st = live->WithModel([&](Model* m) {
        m->schema().ToProto(header.mutable_schema());
        return Status::OK();
      });
      const std::string tmp = path + ".tmp";
      std::unique_ptr<DocumentWriter> w;
      if (st.ok()) {
        auto made = DocumentWriter::Create(tmp, header, env);
        if (made.ok()) {
          w = std::move(made).value();
        } else {
          st = made.status();
        }
      }
      if (st.ok()) {
        st = log->ReadRange(out->first, out->last, [&](const v1::WalRecord& r) {
          return r.has_restore() ? Status::OK() : w->Write(r.document());
        });
      }
      if (w != nullptr) {
        Status closed = w->Close();
        if (st.ok()) st = closed;
      }
      if (st.ok()) {
        // Durable before the log may drop its records (fsync through a new
        // handle: it syncs the file, whoever wrote it).
        auto f = env->NewAppendableFile(tmp);
        st = f.ok() ? (*f)->Sync() : f.status();
        if (f.ok() && st.ok()) st = (*f)->Close();
      }
      if (st.ok()) st = env->RenameFile(tmp, path);
      if (st.ok()) st = env->SyncDir(data_dir->VersionsDir());
    }
    if (!st.ok()) {
      // The restore goes on (the documents are in the model no more, but
      // the log still holds them while the version is kept): said, not hidden.
      out->note = "the documents after the version could not be kept aside in '" + path + "': " + st.ToString();
      out->kept_as.clear();
    } else if (docs == 0) {
      out->kept_as.clear();
    }
  }
  TRIB_RETURN_IF_ERROR(live->Restore(std::move(model).value()).WithContext("restore"));
  // Recovery may replay this record while a snapshot older than it is read:
  // the version stays until then.
  data_dir->Pin(version, rec.sequence());
  if (out->replay && out->first <= out->last) {
    uint64_t docs = 0;
    Status st = log->ReadRange(out->first, out->last, [&](const v1::WalRecord& r) {
      if (r.has_restore()) return Status::OK();
      ++docs;
      return ApplyDocument(r, /*prequential=*/false);
    });
    out->documents = docs;
    if (!st.ok()) {
      if (!DocumentRefused(st) && st.code() != Status::Code::kCorruption && !st.IsNotFound()) return st;
      out->note = "learning again the documents after the version stopped after " + std::to_string(docs) +
                  " of them: " + st.ToString();
    }
  }
  counters.restores++;
  {
    std::string served;
    if (live_learner) {
      TRIB_RETURN_IF_ERROR(live->WithLiveLearner([&](LiveLearner* l) {
        served = l->candidate_stats()[l->served_index()].label;
        return Status::OK();
      }));
    }
    std::lock_guard<std::mutex> l(quality_mu);
    if (live_learner) live_served = served;
  }
  TRIB_RETURN_IF_ERROR(Publish());
  out->published = published_version;
  {
    std::lock_guard<std::mutex> l(quality_mu);
    last_restore = *out;
  }
  if (opt.on_event) {
    std::string what =
        "restored model version " + std::to_string(version) + " (log record " + std::to_string(rec.sequence()) + ")";
    if (out->first <= out->last) {
      what += out->replay ? "; the " + std::to_string(out->documents) + " documents logged after it learned again"
                          : "; the " + std::to_string(out->documents) + " documents logged after it (" +
                                std::to_string(out->first) + ".." + std::to_string(out->last) + ") not learned" +
                                (out->kept_as.empty() ? std::string() : ", kept in " + out->kept_as);
    }
    if (!out->note.empty()) what += "; " + out->note;
    opt.on_event(what);
  }
  return Status::OK();
}

Status Server::Impl::SubmitRestore(uint64_t version, bool replay, std::function<void(const RestoreOutcome&)> answer) {
  if (recovery_phase.load() != RecoveryPhase::kReady) {
    return Status::IOError("not ready: recovering the model (see /healthz)");
  }
  if (draining) return Status::IOError("server is shutting down");
  if (!learning_enabled) return Status::IOError("learning is disabled after a write-ahead log failure");
  // Checked here so that a wrong number is a 404 at once; the learner
  // checks again (a version removed meanwhile leaves the model unchanged).
  auto found = data_dir->FindVersion(version);
  if (!found.ok()) return found.status();
  LearnJob job;
  job.restore.emplace();
  job.restore->set_version(version);
  job.restore->set_replay(replay);
  job.start = Clock::now();
  job.restored = answer;
  job.complete = [answer, version](v1::Response r) {
    // Only when the log failed (a logged restore is answered by `restored`).
    RestoreOutcome out;
    out.version = version;
    out.status = Status::IOError(r.message());
    answer(out);
  };
  if (!SubmitLearn(job)) return Status::IOError("server is shutting down");
  return Status::OK();
}

Status Server::Impl::RequestVersion(std::function<void(const Status&, uint64_t)> answer) {
  if (recovery_phase.load() != RecoveryPhase::kReady) {
    return Status::IOError("not ready: recovering the model (see /healthz)");
  }
  if (draining) return Status::IOError("server is shutting down");
  if (opt.keep_versions == 0) {
    return Status::InvalidArgument("the server keeps no versions (--keep-versions 0)");
  }
  {
    std::lock_guard<std::mutex> l(learn_mu);
    if (stopping_learn) return Status::IOError("server is shutting down");
    version_waiters.push_back(std::move(answer));
  }
  learn_cv.notify_one();
  return Status::OK();
}

std::string Server::Impl::ModelsJson() {
  json j;
  json list = json::array();
  for (const ModelVersion& v : data_dir->Versions()) {
    json e = json::parse(v.info, nullptr, /*allow_exceptions=*/false);
    if (!e.is_object()) e = json::object();  // a missing or damaged sidecar: the version is still there
    e["version"] = v.sequence;
    list.push_back(std::move(e));
  }
  j["versions"] = std::move(list);
  j["keep"] = opt.keep_versions;
  j["every_documents"] = opt.version_every_documents;
  j["interval_s"] = opt.version_interval_s;
  {
    std::lock_guard<std::mutex> l(quality_mu);
    if (last_restore) {
      const RestoreOutcome& r = *last_restore;
      json lr = {{"version", r.version}, {"record", r.record}, {"replay", r.replay}, {"documents", r.documents}};
      if (r.first <= r.last) lr["after"] = {r.first, r.last};
      if (!r.kept_as.empty()) lr["kept_as"] = r.kept_as;
      if (!r.note.empty()) lr["note"] = r.note;
      j["last_restore"] = std::move(lr);
    }
  }
  return j.dump();
}

}  // namespace tributary
