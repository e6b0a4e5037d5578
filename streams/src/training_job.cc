#include "tributary/training_job.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>
#include <utility>
#include <vector>

#include "tributary/parallel.h"

namespace tributary {

namespace {

// A learner side by side with the main one while the restart window is open.
struct Replica {
  std::unique_ptr<Model> model;
  std::unique_ptr<Learner> learner;
  uint64_t seed = 0;
  double log_z = 0;     // sum of the finite log Z_i in the window
  uint64_t scored = 0;  // documents with a finite log Z_i
};

Status CheckOptions(const TrainingJobOptions& o, const std::string& path, bool sep) {
  if (o.epochs == 0) return Status::InvalidArgument("training job: epochs must be >= 1");
  if (o.threads == 0) return Status::InvalidArgument("training job: threads must be >= 1");
  if (o.restarts == 0) return Status::InvalidArgument("training job: restarts must be >= 1");
  if (o.restarts > 1 && !sep) {
    return Status::InvalidArgument(
        "training job: restarts need the sep, ep or adf engine (sdEM has no evidence to choose a restart by)");
  }
  if (o.restarts > 1 && o.threads > 1) {
    return Status::InvalidArgument("training job: restarts cannot learn on several threads (each would need its own)");
  }
  if (o.restarts > 1 && !o.new_model) return Status::InvalidArgument("training job: restarts need new_model");
  if (o.epochs > 1 && path == "-" && !o.shuffle) {
    return Status::InvalidArgument("training job: several passes need a file (or shuffling), not standard input");
  }
  return Status::OK();
}

}  // namespace

Status RunTrainingJob(const TrainingJobOptions& o, const std::string& path, std::unique_ptr<DocumentReader>* first,
                      std::unique_ptr<Model>* model_out, TrainingJobResult* result) {
  std::unique_ptr<Model>& model = *model_out;
  TrainingJobResult& res = *result;
  res = TrainingJobResult();
  if (!model) return Status::InvalidArgument("training job: no model");
  auto engine = ResolveEngine(o.learner.engine, model->family());
  if (!engine.ok()) return engine.status();
  const bool sep = *engine != Engine::kSdem;
  TRIB_RETURN_IF_ERROR(CheckOptions(o, path, sep));
  LearnerOptions lo = o.learner;
  lo.engine = *engine;
  if (lo.effective_size <= 0) lo.effective_size = model->learner_state().effective_size;

  std::unique_ptr<Learner> learner;  // sdEM, or SEP / EP / ADF (learner.h)
  std::vector<Replica> replicas;     // [0] is the main model while the window is open
  if (o.restarts > 1) {
    for (uint32_t r = 0; r < o.restarts; ++r) {
      Replica rep;
      rep.seed = lo.seed + r;
      if (r == 0) {
        rep.model = std::move(model);
      } else {
        auto m = o.new_model(rep.seed);
        if (!m.ok()) {
          model = std::move(replicas[0].model);
          return m.status().WithContext("restart with seed " + std::to_string(rep.seed));
        }
        rep.model = std::move(m).value();
      }
      LearnerOptions ro = lo;
      ro.seed = rep.seed;
      ro.effective_size = rep.model->learner_state().effective_size;
      auto l = Learner::Create(rep.model.get(), ro);
      if (!l.ok()) {
        model = std::move(r == 0 ? rep.model : replicas[0].model);
        return l.status();
      }
      rep.learner = std::move(l).value();
      replicas.push_back(std::move(rep));
    }
    model = std::move(replicas[0].model);
    learner = std::move(replicas[0].learner);
  } else {
    auto l = Learner::Create(model.get(), lo);
    if (!l.ok()) return l.status();
    learner = std::move(l).value();
  }
  std::unique_ptr<ParallelLearner> par;
  SkippedDocuments* skip = o.skip_bad ? &res.skipped : nullptr;
  if (o.threads > 1) {
    ParallelOptions po;
    po.threads = o.threads;
    po.sync_every = o.sync_every;  // 0: the library's default for the model's size
    po.learner = lo;
    if (o.skip_bad) {
      po.on_bad = [&res, &model](const Status& st) {
        res.skipped.Record(st);
        model->learner_state().skipped_documents++;
      };
    }
    learner.reset();  // the parallel learner makes its own, on the same model
    auto pr = ParallelLearner::Create(model.get(), po);
    if (!pr.ok()) return pr.status().WithContext(std::to_string(o.threads) + " threads");
    par = std::move(pr).value();
  }
  res.threads = o.threads;
  // A new class (open schema): the learner rebuilds itself for a classifier's
  // new layout (learner.h); latent families only name their classes, and the
  // restart replicas get the names too.
  auto renew = [&]() -> Status {
    for (size_t r = 1; r < replicas.size(); ++r) {
      for (const auto& c : model->schema().classes()) {
        if (replicas[r].model->schema().ClassIndex(c) < 0) TRIB_RETURN_IF_ERROR(replicas[r].model->AddClass(c));
      }
    }
    return Status::OK();
  };
  uint64_t& seen = res.documents;
  bool stopped = false;  // after_document said so: the stream ends here
  auto progress = [&] {
    if (o.on_progress) o.on_progress(seen);
  };
  // Keeps the replica with the highest sum of log Z_i (ties: the lower seed).
  // replicas[0] must hold the main model and learner.
  auto choose = [&]() {
    size_t best = 0;
    for (size_t r = 1; r < replicas.size(); ++r) {
      const Replica &a = replicas[r], &b = replicas[best];
      if (a.scored > b.scored || (a.scored == b.scored && a.log_z > b.log_z)) best = r;
    }
    std::ostringstream msg;
    msg.precision(8);
    msg << "restarts: kept seed " << replicas[best].seed << " of " << replicas.size() << " after " << seen
        << " documents (sum of log Z_i:";
    for (const auto& r : replicas) msg << " seed " << r.seed << " " << r.log_z;
    msg << ")";
    res.restart_report = msg.str();
    model = std::move(replicas[best].model);
    learner = std::move(replicas[best].learner);
    replicas.clear();
  };
  auto close_window = [&]() {
    if (replicas.empty()) return;
    replicas[0].model = std::move(model);
    replicas[0].learner = std::move(learner);
    choose();
  };
  auto learn_one = [&](const trib_document& doc) -> Status {
    LearnResult outcome;
    Status st = learner->Learn(doc, &outcome);
    if (st.ok() && !replicas.empty()) {
      // replicas[0]'s model and learner live in `model` / `learner` meanwhile.
      if (std::isfinite(outcome.log_z) && !outcome.skipped) {
        replicas[0].log_z += outcome.log_z;
        ++replicas[0].scored;
      }
      for (size_t r = 1; r < replicas.size(); ++r) {
        LearnResult ro;
        Status rs = replicas[r].learner->Learn(doc, &ro);
        if (!rs.ok()) return rs.WithContext("restart with seed " + std::to_string(replicas[r].seed));
        if (std::isfinite(ro.log_z) && !ro.skipped) {
          replicas[r].log_z += ro.log_z;
          ++replicas[r].scored;
        }
      }
    }
    if (!st.ok()) {
      if (o.skip_bad && DocumentRefused(st)) {
        res.skipped.Record(st);
        model->learner_state().skipped_documents++;
        return Status::OK();
      }
      return st.WithFile(path);
    }
    ++seen;
    if ((seen & 1023) == 0) progress();
    if (!replicas.empty() && o.restart_window > 0 && seen == o.restart_window) close_window();
    if (o.after_document && !o.after_document(seen, *model)) stopped = true;
    return Status::OK();
  };
  // Threads: documents in rounds of the parallel learner.
  auto learn_batch = [&](const std::vector<trib_document>& views) -> Status {
    const uint64_t skipped_before = res.skipped.skipped;
    TRIB_RETURN_IF_ERROR(par->Learn(views.data(), views.size()));
    seen += views.size() - (res.skipped.skipped - skipped_before);
    progress();
    if (o.after_document && !o.after_document(seen, *model)) stopped = true;
    return Status::OK();
  };
  // On failure the main model is in `model` (a replica's window is closed
  // without choosing: the main model is what was asked for).
  auto fail = [&](const Status& st) {
    if (!replicas.empty() && !model) model = std::move(replicas[0].model);
    return st;
  };
  const size_t round_docs =
      par ? static_cast<size_t>(o.threads) * (o.sync_every > 0 ? o.sync_every : DefaultSyncEvery(model->stats().size()))
          : 0;
  std::vector<trib_document> views;
  std::vector<DocumentBuffer> batch;
  DocumentBuffer doc;
  if (o.shuffle) {
    // Decode once into memory, then shuffle per pass: the order of the
    // documents, which stay where they are (DocumentSet: compact, fetched
    // ahead in the shuffled order).
    DocumentSet docs;
    auto ds = DocumentSource::OpenPass(first, path, o.max_frame_bytes, *model);
    if (!ds.ok()) return fail(ds.status());
    for (;;) {
      bool eof = false, grew = false;
      Status st = (*ds)->Next(model.get(), true, skip, &doc, &eof, &grew);
      if (!st.ok()) return fail(st);
      if (eof) break;
      if (grew) {
        if (Status g = renew(); !g.ok()) return fail(g);
      }
      docs.Add(doc);
    }
    std::vector<uint32_t> order(docs.size());
    std::iota(order.begin(), order.end(), 0u);
    std::mt19937_64 rng(lo.seed);
    const size_t n = order.size();
    for (uint32_t e = 0; e < o.epochs; ++e) {
      std::shuffle(order.begin(), order.end(), rng);
      if (par) {
        views.clear();
        for (uint32_t i : order) views.push_back(docs.View(i));
        if (Status st = learn_batch(views); !st.ok()) return fail(st);
        if (stopped) break;
        continue;
      }
      for (size_t j = 0; j < n && !stopped; ++j) {
        if (j + 8 < n) docs.PrefetchRecord(order[j + 8]);
        if (j + 4 < n) docs.Prefetch(order[j + 4]);
        if (Status st = learn_one(docs.View(order[j])); !st.ok()) return fail(st);
      }
      close_window();  // the end of the first pass closes a window still open
      if (stopped) break;
    }
  } else {
    for (uint32_t e = 0; e < o.epochs && !stopped; ++e) {
      auto ds = DocumentSource::OpenPass(first, path, o.max_frame_bytes, *model);
      if (!ds.ok()) return fail(ds.status());
      while (!stopped) {
        bool eof = false, grew = false;
        // Bad documents are recorded in the first pass only.
        SkippedDocuments again;
        Status st =
            (*ds)->Next(model.get(), true, skip != nullptr ? (e == 0 ? skip : &again) : nullptr, &doc, &eof, &grew);
        if (!st.ok()) return fail(st);
        if (eof) break;
        if (grew) {
          if (Status g = renew(); !g.ok()) return fail(g);
        }
        if (par) {
          // A round's documents are decoded first (the model may grow
          // between rounds, never during one).
          batch.push_back(doc);
          if (batch.size() == round_docs) {
            views.clear();
            for (const auto& d : batch) views.push_back(d.View());
            if (Status b = learn_batch(views); !b.ok()) return fail(b);
            batch.clear();
          }
          continue;
        }
        if (Status l = learn_one(doc.View()); !l.ok()) return fail(l);
      }
      if (par && !batch.empty()) {
        views.clear();
        for (const auto& d : batch) views.push_back(d.View());
        if (Status b = learn_batch(views); !b.ok()) return fail(b);
        batch.clear();
      }
      close_window();
    }
  }
  progress();
  if (seen == 0) return Status::InvalidArgument("'" + path + "': no document was learned (empty stream?)");
  // SEP's counters (summed over the threads' shards).
  const SepLearner* sep_learner = par ? par->shard(0).sep() : learner->sep();
  if (sep_learner != nullptr) {
    res.sep = true;
    res.damping = sep_learner->damping();
    res.effective_size = sep_learner->effective_size();
    res.site_bytes = sep_learner->SiteBytes();
    for (uint32_t r = 0; r < (par ? par->threads() : 1u); ++r) {
      const SepCounters& c = par ? par->shard(r).sep()->counters() : sep_learner->counters();
      res.counters.documents += c.documents;
      res.counters.updates += c.updates;
      res.counters.skipped_infeasible += c.skipped_infeasible;
      res.counters.materializations += c.materializations;
      res.counters.moves += c.moves;
      res.counters.log_evidence += c.log_evidence;
    }
    if (res.counters.updates == 0) {
      // Every update was infeasible (e.g. SEP with a damping above 1/N
      // extrapolates each site by N * damping): the model is still the prior.
      std::string why = "every one of the " + std::to_string(res.counters.skipped_infeasible) +
                        " updates would have left the feasible set and was skipped; the model is still the prior";
      const double over = res.damping * res.effective_size;
      if (lo.engine == Engine::kSep && over > 1.0) {
        std::ostringstream os;
        os.precision(6);
        os << " (--damping " << res.damping << " > 1/N = " << 1.0 / res.effective_size;
        os.precision(4);
        os << ": each site is applied " << over << " times over; use a smaller --damping)";
        why += os.str();
      }
      return Status::Numeric("'" + path + "': " + why);
    }
  }
  return Status::OK();
}

}  // namespace tributary
