#include "tributary/trainer.h"

#include "json_text.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

namespace tributary {

namespace {

// Strictly better: higher accuracy, or equal accuracy and lower NCLL.
bool Better(double acc, double ncll, double best_acc, double best_ncll) {
  return acc > best_acc || (acc == best_acc && ncll < best_ncll);
}

}  // namespace

std::string TrainReport::ToJson() const {
  std::ostringstream os;
  os << "{\"mode\":" << JsonString(mode) << ",\"validation_documents\":" << validation_documents
     << ",\"validation_learned\":" << (validation_learned ? "true" : "false") << ",\"final_epochs\":" << final_epochs
     << ",\"searched_documents\":" << searched_documents << ",\"continued_documents\":" << continued_documents
     << ",\"document_updates\":" << document_updates << ",\"kept\":" << JsonString(kept) << ",\"candidates\":[";
  for (size_t i = 0; i < candidates.size(); ++i) {
    const CandidateResult& c = candidates[i];
    os << (i ? "," : "") << "{\"setting\":" << JsonString(c.label)
       << ",\"validation_accuracy\":" << JsonNumber(c.validation_accuracy)
       << ",\"validation_ncll\":" << JsonNumber(c.validation_ncll) << ",\"epochs\":" << c.epochs
       << ",\"kept\":" << (c.kept ? "true" : "false") << "}";
  }
  os << "]}";
  return os.str();
}

namespace {

// McNemar's rule on paired per-document outcomes: `a` beats `b` beyond noise
// when b' - c' > sqrt(b' + c'), b' documents right only for `a`, c' only for
// `b` (one standard deviation of the paired statistic).
bool BeatsBeyondNoise(const std::vector<char>& a, const std::vector<char>& b) {
  double only_a = 0, only_b = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    only_a += a[i] && !b[i];
    only_b += !a[i] && b[i];
  }
  return only_a - only_b > std::sqrt(only_a + only_b);
}

}  // namespace

size_t ChooseCandidate(const std::vector<double>& acc, const std::vector<double>& ncll,
                       const std::vector<std::vector<char>>& correct, const std::vector<bool>& generative) {
  const size_t C = acc.size();
  size_t best = C, gen = C;
  for (size_t c = 0; c < C; ++c) {
    if (generative[c]) {
      if (gen == C || Better(acc[c], ncll[c], acc[gen], ncll[gen])) gen = c;
    } else if (best == C || Better(acc[c], ncll[c], acc[best], ncll[best])) {
      best = c;
    }
  }
  if (best == C) return gen == C ? 0 : gen;
  if (gen == C) return best;
  return BeatsBeyondNoise(correct[best], correct[gen]) ? best : gen;
}

namespace {

// EvaluateOn over any list of documents: view(i) and name(i) for i < n.
template <typename ViewFn, typename NameFn>
Status Evaluate(const Model& model, size_t n_docs, const ViewFn& view, const NameFn& name, double* accuracy,
                double* mean_ncll, std::vector<char>* correct) {
  if (correct) correct->assign(n_docs, 0);
  auto state = model.NewScoringState();
  if (!state.ok()) return state.status();
  const uint32_t K = model.num_outputs();
  std::vector<double> s(K);
  size_t n = 0, n_correct = 0;
  double ncll = 0;
  for (size_t i = 0; i < n_docs; ++i) {
    const trib_document d = view(i);
    if (d.label < 0 || d.label >= static_cast<int64_t>(K)) continue;
    TRIB_RETURN_IF_ERROR(model.Score(d, state->get(), s.data()).WithContext(name(i)));
    uint32_t best = 0;
    double mx = s[0];
    for (uint32_t k = 1; k < K; ++k) {
      if (s[k] > mx) {
        mx = s[k];
        best = k;
      }
    }
    double z = 0;
    for (uint32_t k = 0; k < K; ++k) z += std::exp(s[k] - mx);
    // -log p(y | x), capped so that one impossible document cannot dominate.
    ncll += std::min(mx + std::log(z) - s[d.label], 50.0);
    const bool right = best == static_cast<uint32_t>(d.label);
    n_correct += right;
    if (correct) (*correct)[i] = right;
    ++n;
  }
  *accuracy = n ? static_cast<double>(n_correct) / static_cast<double>(n) : 0.0;
  *mean_ncll = n ? ncll / static_cast<double>(n) : 0.0;
  return Status::OK();
}

}  // namespace

Status EvaluateOn(const Model& model, const std::vector<const DocumentBuffer*>& docs, double* accuracy,
                  double* mean_ncll, std::vector<char>* correct) {
  return Evaluate(
      model, docs.size(), [&](size_t i) { return docs[i]->View(); }, [&](size_t i) { return docs[i]->Name(); },
      accuracy, mean_ncll, correct);
}

// ---- Offline -------------------------------------------------------------------

namespace {

// Runs fn(0) .. fn(n-1) on up to `threads` threads (the calling one among
// them); returns when all are done.
void ParallelFor(size_t n, uint32_t threads, const std::function<void(size_t)>& fn) {
  const size_t t = std::min<size_t>(n, std::max<uint32_t>(1, threads));
  if (t <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) fn(i);
  };
  std::vector<std::thread> pool;
  for (size_t k = 1; k < t; ++k) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
}

}  // namespace

Result<std::unique_ptr<Model>> Trainer::TrainOffline(const ModelFactory& factory, const TrainerConfig& config,
                                                     const std::vector<DocumentBuffer>& docs, TrainReport* report,
                                                     const std::function<void(uint64_t)>& on_progress) {
  DocumentSet set;
  for (const DocumentBuffer& d : docs) set.Add(d);
  return TrainOffline(factory, config, set, report, on_progress);
}

Result<std::unique_ptr<Model>> Trainer::TrainOffline(const ModelFactory& factory, const TrainerConfig& config,
                                                     const DocumentSet& docs, TrainReport* report,
                                                     const std::function<void(uint64_t)>& on_progress) {
  if (config.candidates.empty()) return Status::InvalidArgument("trainer: no candidate settings");
  if (docs.empty()) return Status::InvalidArgument("trainer: no documents");
  TrainReport rep;
  rep.mode = "offline";
  std::mt19937_64 rng(config.seed);
  const size_t C = config.candidates.size();
  const bool choose = C > 1 || config.epochs == 0;
  const uint32_t threads = config.threads ? config.threads : std::max<uint32_t>(1, std::thread::hardware_concurrency());

  // Stratified split, per class, its documents shuffled once: the first
  // round(holdout * n_k) are held out for validation (none for a class with
  // fewer than 2), the rest are trained on. On a large file (epochs = 0) the
  // validation fraction shrinks so that at most max_validation are held out,
  // and the candidates search on a per-class share of about
  // search_documents training documents; the others ("later") are learned
  // once by the kept setting afterwards. Unlabelled documents are never held
  // out or sampled.
  std::vector<size_t> val_idx, search_idx, later_idx;
  if (choose) {
    std::map<int64_t, std::vector<size_t>> by_class;
    for (size_t i = 0; i < docs.size(); ++i) by_class[docs.label(i)].push_back(i);
    auto held = [](int64_t label, size_t n, double frac) -> size_t {
      if (label < 0 || n < 2) return 0;
      return std::min(static_cast<size_t>(std::llround(frac * static_cast<double>(n))), n - 1);
    };
    const bool bounded = config.epochs == 0;
    double val_frac = config.holdout;
    size_t n_val = 0;
    for (const auto& [label, idx] : by_class) n_val += held(label, idx.size(), val_frac);
    if (bounded && config.max_validation > 0 && n_val > config.max_validation) {
      val_frac *= static_cast<double>(config.max_validation) / static_cast<double>(n_val);
    }
    size_t n_train = 0;
    for (const auto& [label, idx] : by_class) n_train += idx.size() - held(label, idx.size(), val_frac);
    const double search_frac = bounded && config.search_documents > 0 && n_train > config.search_documents
                                   ? static_cast<double>(config.search_documents) / static_cast<double>(n_train)
                                   : 1.0;
    for (auto& [label, idx] : by_class) {
      std::shuffle(idx.begin(), idx.end(), rng);
      const size_t v = held(label, idx.size(), val_frac), left = idx.size() - v;
      size_t k = left;
      if (search_frac < 1.0) {
        k = label < 0 ? 0
                      : std::clamp<size_t>(static_cast<size_t>(std::llround(search_frac * static_cast<double>(left))),
                                           std::min<size_t>(1, left), left);
      }
      // Not [&]: clang before 16 cannot capture a structured binding.
      const auto first = idx.begin();
      const auto at = [first](size_t j) { return first + static_cast<std::ptrdiff_t>(j); };
      val_idx.insert(val_idx.end(), idx.begin(), at(v));
      search_idx.insert(search_idx.end(), at(v), at(v + k));
      later_idx.insert(later_idx.end(), at(v + k), idx.end());
    }
    // Arrival order (each pass shuffles it unless asked not to).
    std::sort(search_idx.begin(), search_idx.end());
    if (!config.shuffle) std::sort(later_idx.begin(), later_idx.end());
  }

  // Bad documents: each learner skips what it refused itself (so that no
  // model depends on the threads' timing); each is reported once.
  std::mutex bad_mu;
  std::vector<char> reported(docs.size(), 0);
  auto skippable = [&](const Status& st) { return config.on_bad && DocumentRefused(st); };
  auto report_bad = [&](size_t i, const Status& st) {
    std::lock_guard<std::mutex> lock(bad_mu);
    if (!reported[i]) {
      reported[i] = 1;
      config.on_bad(st);
    }
  };
  if (!val_idx.empty()) {
    // Held-out documents are scored, never learned, before the choice: screen
    // them once so that a bad one is reported (or stops training) up front.
    auto probe = factory(config.candidates[0]);
    if (!probe.ok()) return probe.status().WithContext("candidate '" + config.candidates[0].label + "'");
    auto state = (*probe)->NewScoringState();
    if (!state.ok()) return state.status();
    std::vector<double> s((*probe)->num_outputs());
    std::vector<size_t> kept_val;
    for (size_t i : val_idx) {
      Status st = (*probe)->Score(docs.View(i), state->get(), s.data()).WithContext(docs.Name(i));
      for (double x : s) {
        if (st.ok() && (std::isnan(x) || x == INFINITY)) {
          st = Status::Numeric(docs.Name(i) + ": scored " + std::to_string(x) + " at the prior");
        }
      }
      if (!st.ok()) {
        if (!skippable(st)) return st;
        report_bad(i, st);
        continue;
      }
      kept_val.push_back(i);
    }
    val_idx = std::move(kept_val);
  }
  rep.validation_documents = val_idx.size();
  auto evaluate = [&](const Model& m, double* acc, double* ncll, std::vector<char>* right) {
    return Evaluate(
        m, val_idx.size(), [&](size_t j) { return docs.View(val_idx[j]); },
        [&](size_t j) { return docs.Name(val_idx[j]); }, acc, ncll, right);
  };

  // One pass of `learner` over `order`, skipping (and adding to) `bad`;
  // counts its steps in `*steps`.
  auto learn_pass = [&](Learner* learner, const std::vector<size_t>& order, std::vector<char>* bad, uint64_t* steps,
                        const std::string& who) -> Status {
    const size_t n = order.size();
    for (size_t j = 0; j < n; ++j) {
      // Shuffled order: fetch what the next documents need ahead of time.
      if (j + 8 < n) docs.PrefetchRecord(order[j + 8]);
      if (j + 4 < n) docs.Prefetch(order[j + 4]);
      const size_t i = order[j];
      if ((*bad)[i]) continue;
      Status st = learner->Learn(docs.View(i));
      if (!st.ok()) {
        if (skippable(st)) {
          (*bad)[i] = 1;
          report_bad(i, st);
          continue;
        }
        return who.empty() ? st : st.WithContext("candidate '" + who + "'");
      }
      ++*steps;
    }
    return Status::OK();
  };
  uint64_t updates = 0;

  size_t kept = 0;
  uint32_t kept_epochs = config.epochs == 0 ? 1 : config.epochs;
  std::unique_ptr<Model> kept_model;
  std::vector<char> kept_bad(docs.size(), 0);
  std::vector<char> kept_correct;
  if (choose && !val_idx.empty()) {
    struct Run {
      std::unique_ptr<Model> model;
      std::unique_ptr<Learner> learner;
      std::unique_ptr<Model> best;  // the model at its best validation score
      std::vector<char> best_correct, bad;
      double best_acc = -1, best_ncll = std::numeric_limits<double>::infinity();
      uint32_t best_epoch = 0, stale = 0;
      uint64_t steps = 0;
      bool active = true;
      Status status;
    };
    std::vector<Run> runs(C);
    for (size_t c = 0; c < C; ++c) {
      auto m = factory(config.candidates[c]);
      if (!m.ok()) return m.status().WithContext("candidate '" + config.candidates[c].label + "'");
      runs[c].model = std::move(m).value();
      auto l = Learner::Create(runs[c].model.get(), LearnerOptions::Sdem(config.seed));
      if (!l.ok()) return l.status().WithContext("candidate '" + config.candidates[c].label + "'");
      runs[c].learner = std::move(l).value();
      runs[c].bad.assign(docs.size(), 0);
    }
    const uint32_t max_epochs = config.epochs ? config.epochs : config.max_epochs;
    std::vector<size_t> order = search_idx;
    // With a group, this member learns its own candidates; the others' results
    // arrive after each pass (TrainerGroup).
    const TrainerGroup* group = config.group;
    auto own = [group](size_t c) { return group == nullptr || static_cast<int>(c % group->size()) == group->rank(); };
    for (uint32_t e = 1; e <= max_epochs; ++e) {
      if (config.shuffle) std::shuffle(order.begin(), order.end(), rng);
      std::vector<size_t> live;
      for (size_t c = 0; c < C; ++c) {
        if (runs[c].active && own(c)) live.push_back(c);
      }
      // One pass and one validation per live candidate, in parallel: each
      // touches only its own Run.
      ParallelFor(live.size(), threads, [&](size_t j) {
        Run& r = runs[live[j]];
        const std::string& label = config.candidates[live[j]].label;
        r.status = learn_pass(r.learner.get(), order, &r.bad, &r.steps, label);
        if (!r.status.ok()) return;
        double acc = 0, ncll = 0;
        std::vector<char> right;
        r.status = evaluate(*r.model, &acc, &ncll, &right);
        if (!r.status.ok()) return;
        if (Better(acc, ncll, r.best_acc, r.best_ncll)) {
          r.best_correct = std::move(right);
          r.best_acc = acc;
          r.best_ncll = ncll;
          r.best_epoch = e;
          r.stale = 0;
          auto copy = r.model->Clone();
          if (!copy.ok()) {
            r.status = copy.status();
            return;
          }
          r.best = std::move(copy).value();
        } else {
          ++r.stale;
        }
      });
      if (group != nullptr) {
        // Every member stops if any candidate failed; then each candidate's
        // pass, as its member saw it.
        Status local;
        for (size_t c = 0; c < C && local.ok(); ++c) local = runs[c].status;
        Status agreed;
        if (group->AnyFailed(local, &agreed)) return agreed;
        constexpr size_t kFields = 5;
        std::vector<double> shared(C * kFields, 0.0);
        for (size_t c = 0; c < C; ++c) {
          if (!own(c)) continue;
          const Run& r = runs[c];
          double* f = &shared[c * kFields];
          f[0] = static_cast<double>(r.steps);
          f[1] = r.best_acc;
          f[2] = r.best_ncll;
          f[3] = r.best_epoch;
          f[4] = r.stale;
        }
        TRIB_RETURN_IF_ERROR(group->SumAll(&shared));
        for (size_t c = 0; c < C; ++c) {
          if (own(c)) continue;
          Run& r = runs[c];
          const double* f = &shared[c * kFields];
          r.steps = static_cast<uint64_t>(f[0]);
          r.best_acc = f[1];
          r.best_ncll = f[2];
          r.best_epoch = static_cast<uint32_t>(f[3]);
          r.stale = static_cast<uint32_t>(f[4]);
        }
      }
      bool any = false;
      updates = 0;
      for (size_t c = 0; c < C; ++c) {
        Run& r = runs[c];
        updates += r.steps;
        if (!r.status.ok()) return r.status;
        if (!r.active) continue;
        // NLL with exact averaging is the same model after any number of
        // passes: one is enough.
        if (config.candidates[c].generative || (config.epochs == 0 && r.stale >= config.patience)) r.active = false;
        any |= r.active;
      }
      if (on_progress) on_progress(updates);
      // Successive halving: after four passes only the two best
      // discriminative candidates go on.
      if (e == 4 && config.epochs == 0) {
        live.clear();
        for (size_t c = 0; c < C; ++c) {
          if (runs[c].active) live.push_back(c);
        }
        std::sort(live.begin(), live.end(), [&](size_t a, size_t b) {
          return Better(runs[a].best_acc, runs[a].best_ncll, runs[b].best_acc, runs[b].best_ncll);
        });
        for (size_t i = 2; i < live.size(); ++i) runs[live[i]].active = false;
      }
      if (!any) break;
    }
    if (group != nullptr) {
      // The per-document outcomes ChooseCandidate compares, then the kept
      // candidate's model and refused documents from its member.
      const size_t V = val_idx.size();
      std::vector<double> shared(C * V, 0.0);
      for (size_t c = 0; c < C; ++c) {
        if (!own(c)) continue;
        for (size_t j = 0; j < V && j < runs[c].best_correct.size(); ++j) shared[c * V + j] = runs[c].best_correct[j];
      }
      TRIB_RETURN_IF_ERROR(group->SumAll(&shared));
      for (size_t c = 0; c < C; ++c) {
        if (own(c)) continue;
        runs[c].best_correct.assign(V, 0);
        for (size_t j = 0; j < V; ++j) runs[c].best_correct[j] = shared[c * V + j] > 0.5;
      }
    }
    {
      std::vector<double> acc(C), ncll(C);
      std::vector<std::vector<char>> right(C);
      std::vector<bool> gen(C);
      for (size_t c = 0; c < C; ++c) {
        acc[c] = runs[c].best_acc;
        ncll[c] = runs[c].best_ncll;
        right[c] = runs[c].best_correct;
        gen[c] = config.candidates[c].generative;
      }
      kept = ChooseCandidate(acc, ncll, right, gen);
    }
    if (group != nullptr) {
      const int holder = static_cast<int>(kept % group->size());
      std::string bytes, bad;
      Status local;
      if (own(kept)) {
        auto s = runs[kept].best->Serialize({}, "candidate '" + config.candidates[kept].label + "'");
        if (s.ok()) {
          bytes = std::move(s).value();
        } else {
          local = s.status();
        }
        bad.assign(runs[kept].bad.begin(), runs[kept].bad.end());
      }
      Status agreed;
      if (group->AnyFailed(local, &agreed)) return agreed;
      TRIB_RETURN_IF_ERROR(group->Broadcast(holder, &bytes));
      TRIB_RETURN_IF_ERROR(group->Broadcast(holder, &bad));
      if (!own(kept)) {
        auto m =
            Model::Parse(bytes, "candidate '" + config.candidates[kept].label + "' from rank " + std::to_string(holder),
                         group->registry());
        if (!m.ok()) return m.status();
        runs[kept].best = std::move(m).value();
        runs[kept].bad.assign(bad.begin(), bad.end());
      }
    }
    kept_epochs = config.epochs ? config.epochs : std::max<uint32_t>(1, runs[kept].best_epoch);
    if (config.candidates[kept].generative) kept_epochs = 1;
    kept_model = std::move(runs[kept].best);
    kept_bad = std::move(runs[kept].bad);
    kept_correct = runs[kept].best_correct;
    for (size_t c = 0; c < C; ++c) {
      CandidateResult cr;
      cr.label = config.candidates[c].label;
      cr.validation_accuracy = runs[c].best_acc;
      cr.validation_ncll = runs[c].best_ncll;
      cr.epochs = runs[c].best_epoch;
      cr.kept = c == kept;
      rep.candidates.push_back(cr);
    }
    rep.searched_documents = search_idx.size();
  }

  // A discriminative winner is kept exactly as validated: the held-out
  // documents chose it and are not learned afterwards. (A refit on every
  // document is another random trajectory, and sdEM's last iterate is noisy;
  // learning the held-out documents once more at the last pass's step sizes
  // also moved it: on the Gaussian toy, seed 4, hinge, 93.4% validated became
  // 84.3%; on the Bible 83.5% became 82.6%. bench/DEFAULTS_RESULTS.md.) On a
  // large file it goes on from there through the training documents the
  // search did not use, one shuffled pass, and the result is validated
  // again. The generative winner is order-free exact averaging: it learns
  // every document it has not seen (batch MAP). With nothing to choose, the
  // setting learns every document for the given passes.
  const CandidateSpec& spec = config.candidates[kept];
  std::unique_ptr<Model> model = std::move(kept_model);
  std::vector<size_t> rest;
  if (model && spec.generative) {
    rest = later_idx;
    rest.insert(rest.end(), val_idx.begin(), val_idx.end());
  } else if (model) {
    rest = later_idx;
  }
  std::unique_ptr<Model> validated;
  if (model && !spec.generative && !rest.empty()) {
    auto copy = model->Clone();
    if (!copy.ok()) return copy.status();
    validated = std::move(copy).value();
  }
  if (!model) {
    auto m = factory(spec);
    if (!m.ok()) return m.status();
    model = std::move(m).value();
    rest.resize(docs.size());
    for (size_t i = 0; i < rest.size(); ++i) rest[i] = i;
  }
  auto l = Learner::Create(model.get(), LearnerOptions::Sdem(config.seed));
  if (!l.ok()) return l.status();
  std::mt19937_64 final_rng(config.seed ^ 0x7265666974ULL);
  const uint32_t passes = rest.size() == docs.size() ? kept_epochs : 1;
  for (uint32_t e = 0; e < passes; ++e) {
    if (config.shuffle) std::shuffle(rest.begin(), rest.end(), final_rng);
    TRIB_RETURN_IF_ERROR(learn_pass(l->get(), rest, &kept_bad, &updates, ""));
    if (on_progress) on_progress(updates);
  }
  rep.continued_documents = validated || spec.generative ? rest.size() : 0;
  if (validated) {
    // The continuation has learned many more documents; the validated model
    // is kept instead only if it predicts the held-out documents better
    // beyond noise (the McNemar rule of ChooseCandidate).
    double acc = 0, ncll = 0;
    std::vector<char> right;
    TRIB_RETURN_IF_ERROR(evaluate(*model, &acc, &ncll, &right));
    if (BeatsBeyondNoise(kept_correct, right)) {
      model = std::move(validated);
      rep.continued_documents = 0;
    } else {
      rep.candidates[kept].validation_accuracy = acc;
      rep.candidates[kept].validation_ncll = ncll;
    }
  }
  rep.final_epochs = kept_epochs;
  rep.validation_learned = val_idx.empty() || spec.generative || rest.size() == docs.size();
  rep.kept = spec.label;
  rep.document_updates = updates;
  if (report) *report = rep;
  return model;
}

Result<std::unique_ptr<Model>> Trainer::TrainDefaults(const ModelConfig& base, const ConfigBuilder& build,
                                                      const Model& decoded_by, TrainerConfig config,
                                                      const DocumentSet& docs, TrainReport* report,
                                                      const std::function<void(uint64_t)>& on_progress) {
  if (config.candidates.empty()) config.candidates = DefaultCandidates(base, /*streaming=*/false, &decoded_by.family());
  TrainReport rep;
  auto model = TrainOffline(CandidateFactory(base, build, &decoded_by), config, docs, &rep, on_progress);
  if (!model.ok()) return model.status();
  (*model)->set_training_report(rep.ToJson());
  if (report) *report = std::move(rep);
  return model;
}

}  // namespace tributary
