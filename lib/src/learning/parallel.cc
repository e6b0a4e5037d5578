#include "tributary/parallel.h"

#include <algorithm>
#include <barrier>
#include <cmath>
#include <thread>

#include "tributary/document.h"

namespace tributary {

namespace {

// Below this a composed block scale is folded into raw (as the engines do).
constexpr double kMinScale = 1e-100;

bool Folded(double scale) { return !(scale > kMinScale) || !std::isfinite(scale); }

// Calls fn(block index, first, last) for the blocks overlapping [lo, hi),
// clipped to it.
template <typename Fn>
void ForBlocks(const std::vector<trib_block>& blocks, uint64_t lo, uint64_t hi, Fn&& fn) {
  for (size_t b = 0; b < blocks.size(); ++b) {
    const uint64_t first = std::max(lo, blocks[b].offset);
    const uint64_t last = std::min(hi, blocks[b].offset + blocks[b].size);
    if (first < last) fn(b, first, last);
  }
}

}  // namespace

void ShardComposition::Plan(const std::vector<trib_block>& base, const std::vector<const BlockTrace*>& traces) {
  const size_t nb = base.size(), R = traces.size();
  base_ = base;
  decay_.assign(R, std::vector<double>(nb, 1.0));
  offset_.assign(R, std::vector<double>(nb, 0.0));
  coef_.assign(R, std::vector<double>(nb, 1.0));
  for (size_t r = 0; r < R; ++r) {
    std::copy(traces[r]->decay.begin(), traces[r]->decay.end(), decay_[r].begin());
    std::copy(traces[r]->offset.begin(), traces[r]->offset.end(), offset_[r].begin());
  }
  // Gradient steps (a loss with c = 0: NCLL, hinge) are averaged, weighted
  // by the shards' documents; averaging steps (NLL, SEP) are composed in order.
  uint64_t steps = 0;
  average_ = false;
  for (const BlockTrace* t : traces) {
    steps += t->steps;
    average_ |= t->gradient;
  }
  average_ = average_ && steps > 0;
  total_decay_.assign(nb, 1.0);
  blocks_ = base;
  for (size_t b = 0; b < nb; ++b) {
    double p = 1.0;
    double shift_add = 0;  // the offset of the composed map
    if (average_) {
      // mu = sum_r w_r mu_r = (sum w_r A_r) mu0 + (sum w_r beta_r) abar + sum w_r D_r.
      p = 0;
      for (size_t r = 0; r < R; ++r) {
        const double w = static_cast<double>(traces[r]->steps) / static_cast<double>(steps);
        coef_[r][b] = w;
        shift_add += w * offset_[r][b];
        p += w * decay_[r][b];
      }
    } else {
      // P_r = prod_{s > r} A_s, from the last shard backwards.
      for (size_t r = R; r-- > 0;) {
        coef_[r][b] = p;
        shift_add += p * offset_[r][b];
        p *= decay_[r][b];
      }
    }
    total_decay_[b] = p;
    const double scale = base[b].scale * p;
    // shift - scale composes like the statistics: gamma' = A gamma0 + sum P beta.
    const double gamma = p * (base[b].shift - base[b].scale) + shift_add;
    if (Folded(scale)) {
      blocks_[b].scale = 1.0;
      blocks_[b].shift = gamma + 1.0;
    } else {
      blocks_[b].scale = scale;
      blocks_[b].shift = scale + gamma;
    }
  }
}

void ShardComposition::AddContribution(uint32_t r, const SufficientStats& base, const SufficientStats& shard,
                                       uint64_t lo, uint64_t hi, double* acc) const {
  const auto& raw0 = base.raw();
  const auto& raw = shard.raw();
  ForBlocks(base_, lo, hi, [&](size_t b, uint64_t first, uint64_t last) {
    const trib_block& b0 = base.blocks()[b];
    const trib_block& br = shard.blocks()[b];
    const double A = decay_[r][b], P = coef_[r][b];
    // mu_r - A mu0 - beta alpha_bar = (S_r raw_r + H_r abar) - A (S0 raw0 + H0 abar) - beta abar
    const double s_r = br.scale * P, s_0 = A * b0.scale * P;
    const double c = (br.shift - A * b0.shift - offset_[r][b]) * b0.alpha_bar * P;
    const double* __restrict x = raw.data() + first;
    const double* __restrict x0 = raw0.data() + first;
    double* __restrict out = acc + (first - lo);
    const uint64_t len = last - first;
    for (uint64_t i = 0; i < len; ++i) out[i] += s_r * x[i] - s_0 * x0[i] + c;
  });
}

void ShardComposition::Finish(const SufficientStats& base, const double* acc, uint64_t lo, uint64_t hi,
                              double* out_raw) const {
  const auto& raw0 = base.raw();
  ForBlocks(base_, lo, hi, [&](size_t b, uint64_t first, uint64_t last) {
    const trib_block& b0 = base.blocks()[b];
    const double A = total_decay_[b];
    // mu = A mu0 + (sum_r P_r beta_r) abar + acc and raw = (mu - H' abar) / S'.
    // Plan made H' - S' = A (H0 - S0) + sum_r P_r beta_r, so the alpha_bar
    // terms leave (A S0 - S') abar: zero unless the block was folded.
    const trib_block& nb = blocks_[b];
    const double inv = 1.0 / nb.scale;
    const double a0 = A * b0.scale;
    const double c = (a0 - nb.scale) * b0.alpha_bar;
    const double* __restrict x0 = raw0.data() + first;
    const double* __restrict in = acc + (first - lo);
    double* __restrict out = out_raw + (first - lo);
    const uint64_t len = last - first;
    for (uint64_t i = 0; i < len; ++i) out[i] = (a0 * x0[i] + in[i] + c) * inv;
  });
}

// ---- ParallelLearner ---------------------------------------------------------

ParallelLearner::~ParallelLearner() = default;

Result<std::unique_ptr<ParallelLearner>> ParallelLearner::Create(Model* model, const ParallelOptions& options) {
  if (model == nullptr) return Status::InvalidArgument("parallel learner: no model");
  if (options.threads < 1) return Status::InvalidArgument("threads must be >= 1");
  std::unique_ptr<ParallelLearner> p(new ParallelLearner());
  p->model_ = model;
  p->options_ = options;
  p->shards_.resize(options.threads);
  Shard& s0 = p->shards_[0];
  s0.model = model;
  auto l = Learner::Create(model, options.learner);
  if (!l.ok()) return l.status();
  s0.learner = std::move(l).value();
  if (s0.learner->engine() == Engine::kEp || s0.learner->engine() == Engine::kAdf) {
    return Status::InvalidArgument(std::string("engine '") + EngineName(s0.learner->engine()) +
                                   "' cannot learn on several threads or ranks (EP keeps a site per document and "
                                   "ADF has no damped step to compose); use sdem or sep");
  }
  return p;
}

Status ParallelLearner::Resync() {
  for (size_t r = 1; r < shards_.size(); ++r) {
    Shard& s = shards_[r];
    auto c = model_->Clone();
    if (!c.ok()) return c.status();
    s.owned = std::move(c).value();
    s.model = s.owned.get();
    LearnerOptions lo = options_.learner;
    lo.seed = options_.learner.seed + r;
    auto l = Learner::Create(s.model, lo);
    if (!l.ok()) return l.status();
    s.learner = std::move(l).value();
  }
  layout_ = model_->layout_version();
  vocab_ = model_->schema().vocab_size();
  classes_ = model_->num_classes();
  dirty_ = false;
  return Status::OK();
}

Status ParallelLearner::Learn(const trib_document* docs, size_t n) {
  const uint64_t k = options_.sync_every > 0 ? options_.sync_every : DefaultSyncEvery(model_->stats().size());
  const size_t per_round = static_cast<size_t>(k) * shards_.size();
  for (size_t start = 0; start < n; start += per_round) {
    TRIB_RETURN_IF_ERROR(Round(docs + start, std::min(per_round, n - start)));
  }
  return Status::OK();
}

Status ParallelLearner::Round(const trib_document* docs, size_t n) {
  const uint32_t T = static_cast<uint32_t>(shards_.size());
  if (T == 1 || n < 2 * T) {
    // One learner (or too few documents to share): the sequential pass.
    for (size_t i = 0; i < n; ++i) {
      Status st = shards_[0].learner->Learn(docs[i]);
      if (!st.ok()) {
        if (options_.on_bad && DocumentRefused(st)) {
          options_.on_bad(st);
          continue;
        }
        dirty_ = true;
        return st;
      }
    }
    dirty_ = true;  // the other shards' copies are stale
    return Status::OK();
  }
  if (dirty_ || model_->layout_version() != layout_ || model_->schema().vocab_size() != vocab_ ||
      model_->num_classes() != classes_) {
    TRIB_RETURN_IF_ERROR(Resync());
  }
  const uint64_t t0 = model_->learner_state().updates;
  // The round's start: the block maps here, the raw values by every thread,
  // one slice each, before it learns.
  base_.mutable_blocks() = model_->stats().blocks();
  base_.raw().resize(model_->stats().size());
  const size_t nb = base_.blocks().size();
  const uint64_t P = base_.size();
  std::vector<size_t> begin(T + 1);
  for (uint32_t r = 0; r <= T; ++r) begin[r] = n * r / T;
  for (uint32_t r = 0; r < T; ++r) {
    Shard& s = shards_[r];
    s.trace.Reset(nb);
    s.learner->set_trace(&s.trace);
    s.model->learner_state().updates = t0 + begin[r];
    s.status = Status::OK();
    s.bad.clear();
    s.acc.assign((P * (r + 1)) / T - (P * r) / T, 0.0);
  }
  bool failed = false;
  int phase = 0;
  auto plan = [&]() noexcept {
    // Runs when every thread has arrived at a barrier; the composition is
    // planned at the second one (after learning).
    if (phase++ != 1) return;
    for (uint32_t r = 0; r < T; ++r) failed |= !shards_[r].status.ok();
    if (failed) return;
    std::vector<const BlockTrace*> traces;
    for (auto& s : shards_) traces.push_back(&s.trace);
    plan_.Plan(base_.blocks(), traces);
  };
  std::barrier sync(static_cast<std::ptrdiff_t>(T), plan);
  auto work = [&](uint32_t r) {
    Shard& s = shards_[r];
    // This thread's slice of the statistics: [lo, hi).
    const uint64_t lo = P * r / T, hi = P * (r + 1) / T;
    std::copy(model_->stats().raw().begin() + static_cast<std::ptrdiff_t>(lo),
              model_->stats().raw().begin() + static_cast<std::ptrdiff_t>(hi),
              base_.raw().begin() + static_cast<std::ptrdiff_t>(lo));
    sync.arrive_and_wait();  // the round's start is copied before shard 0 changes it
    for (size_t i = begin[r]; i < begin[r + 1]; ++i) {
      // The documents may be anywhere (a shuffled pass): fetch ahead.
      if (i + 4 < begin[r + 1]) {
        __builtin_prefetch(docs[i + 4].term_ids);
        __builtin_prefetch(docs[i + 4].term_counts);
      }
      Status st = s.learner->Learn(docs[i]);
      if (!st.ok()) {
        if (options_.on_bad && DocumentRefused(st)) {
          s.bad.push_back(st);
          continue;
        }
        s.status = st;
        break;
      }
    }
    sync.arrive_and_wait();  // plan() ran: the traces are composed
    if (failed) return;
    // Read every shard's slice, write the composition to every shard (no
    // other thread touches the slice).
    double* acc = s.acc.data();
    for (uint32_t q = 0; q < T; ++q) plan_.AddContribution(q, base_, shards_[q].model->stats(), lo, hi, acc);
    plan_.Finish(base_, acc, lo, hi, model_->stats().raw().data() + lo);
    sync.arrive_and_wait();  // every slice of shard 0's raw is composed
    for (uint32_t q = 1; q < T; ++q) {
      std::copy(model_->stats().raw().begin() + static_cast<std::ptrdiff_t>(lo),
                model_->stats().raw().begin() + static_cast<std::ptrdiff_t>(hi),
                shards_[q].model->stats().raw().begin() + static_cast<std::ptrdiff_t>(lo));
    }
    sync.arrive_and_wait();  // every shard holds the composed raw values
    Model& m = *s.model;
    std::copy(plan_.blocks().begin(), plan_.blocks().end(), m.stats().mutable_blocks().begin());
    LearnerState& ls = m.learner_state();
    size_t refused = 0;
    for (const auto& sh : shards_) refused += sh.bad.size();
    ls.updates = t0 + n - refused;
    // The family's caches (and its check-step) from the composed statistics.
    s.status = m.Rebuild(trib_step{0.0, ls.effective_size, 0.0, ls.updates});
  };
  std::vector<std::thread> pool;
  pool.reserve(T - 1);
  for (uint32_t r = 1; r < T; ++r) pool.emplace_back(work, r);
  work(0);
  for (auto& t : pool) t.join();
  for (auto& s : shards_) s.learner->set_trace(nullptr);
  // Refused documents, in document order (shards are contiguous).
  if (options_.on_bad) {
    for (auto& s : shards_) {
      for (const auto& st : s.bad) options_.on_bad(st);
    }
  }
  Status first;
  for (auto& s : shards_) {
    if (!s.status.ok()) {
      first = s.status;
      break;
    }
  }
  if (!first.ok()) {
    // Nothing of this round is kept: the model as it was before it.
    model_->stats().raw() = base_.raw();  // (values only: the write tracking stays; Rebuild notes it)
    model_->stats().mutable_blocks() = base_.blocks();
    LearnerState& ls = model_->learner_state();
    ls.updates = t0;
    dirty_ = true;
    Status rb = model_->Rebuild(trib_step{0.0, ls.effective_size, 0.0, ls.updates});
    if (!rb.ok()) return Status::Internal(first.ToString() + "; restoring the model failed too: " + rb.ToString());
    return first;
  }
  ++rounds_;
  return Status::OK();
}

}  // namespace tributary
