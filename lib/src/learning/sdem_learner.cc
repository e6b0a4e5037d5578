#include "tributary/sdem_learner.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tributary/document.h"

namespace tributary {

namespace {

// The step size of a document of weight dw (its importance, the proto's
// Document.weight) whose loss has self-weight c > 0 (NLL: the step also
// decays the statistics by 1 - rho c): the rho' of one step that moves them
// as dw copies of the document learned one after the other would,
// 1 - rho' c = prod_{i < dw} (1 - rho_{t+i} c) (a fractional dw raises the
// last factor to the fraction). Exact for NLL, whose target is the same for
// every copy (with rho_t = 1/(1+t), a document of weight k after t documents
// gets k/(t+k): exact averaging), and the decay stays in [0, 1]: scaling the
// step by dw made a weight-10 document at rho_0 = 1 decay the statistics by
// -9 (negative statistics, NaN scores; found by scikit-learn's sample_weight
// checks). A gradient step (c = 0: NCLL, hinge) scales w by dw instead, as
// an importance weight scales a stochastic gradient.
double WeightedRho(const LearnerState& ls, double c, double dw) {
  constexpr double kMaxCopies = 1e6;  // beyond: the remaining factors as one power
  const double whole = std::floor(dw);
  double keep = 1.0;
  uint64_t i = 0;
  for (; i < static_cast<uint64_t>(std::min(whole, kMaxCopies)); ++i) {
    keep *= std::max(0.0, 1.0 - ls.schedule.Rho(ls.updates + i) * c);
    if (keep == 0) break;
  }
  const double last = std::max(0.0, 1.0 - ls.schedule.Rho(ls.updates + i) * c);
  if (keep > 0 && whole > kMaxCopies) keep *= std::pow(last, whole - kMaxCopies);
  if (keep > 0) keep *= std::pow(last, dw - whole);
  return (1.0 - keep) / c;
}

// Below this a block's scale is folded back into raw (O(block), rare): keeps
// raw = (mu - shift abar) / scale well inside double range.
constexpr double kMinScale = 1e-100;

// A double is not finite iff its exponent bits are all ones, i.e. adding one
// to the exponent field carries into the sign bit: OR-ed over a delta's
// values, ((bits & kExpBits) + kExpOne) >> 63 says whether any is not finite,
// without a branch per entry (the apply loop in Learn). Plugins' fused steps
// make the same test with sdk::NonFiniteBit (plugin_sdk.h).
constexpr uint64_t kExpBits = 0x7ff0000000000000ull, kExpOne = 0x0010000000000000ull;

// Length of the run idx[0], idx[0] + 1, ... (at most max_len >= 1 entries),
// checked eight entries at a time without a branch per entry.
size_t RunLength(const uint64_t* idx, size_t max_len) {
  const uint64_t i = idx[0];
  size_t len = 1;
  while (len + 8 <= max_len) {
    uint64_t diff = 0;
    for (size_t t = 0; t < 8; ++t) diff |= idx[len + t] ^ (i + len + t);
    if (diff != 0) break;
    len += 8;
  }
  while (len < max_len && idx[len] == i + len) ++len;
  return len;
}

// True if idx[0 .. len) is the run idx[0], idx[0] + 1, ...: one pass without
// a branch (no early exit), for a guessed length.
bool IsRun(const uint64_t* idx, size_t len) {
  const uint64_t i = idx[0];
  uint64_t diff = 0;
  for (size_t t = 0; t < len; ++t) diff |= idx[t] ^ (i + t);
  return diff == 0;
}
}  // namespace

Result<std::unique_ptr<SdemLearner>> SdemLearner::Create(Model* model, uint64_t seed) {
  if (model == nullptr) return Status::InvalidArgument("SdemLearner: no model");
  if (!model->loss_plugin()) return Status::InvalidArgument("SdemLearner: the model has no loss");
  if (model->latent_outputs() && model->loss_plugin()->loss().requires_label) {
    return Status::InvalidArgument("loss '" + model->loss_plugin()->name + "' needs labels, but family '" +
                                   model->family().name +
                                   "' learns latent components from unlabelled documents (labels are ignored); use "
                                   "--loss nll");
  }
  TRIB_RETURN_IF_ERROR(model->learner_state().schedule.Validate());
  if (!(model->learner_state().effective_size > 0)) {
    return Status::InvalidArgument("effective data-set size n must be > 0");
  }
  std::unique_ptr<SdemLearner> l(new SdemLearner());
  l->model_ = model;
  auto st = model->NewScoringState(seed);
  if (!st.ok()) return st.status();
  l->state_ = std::move(st).value();
  l->delta_index_.resize(1024);
  l->delta_value_.resize(1024);
  return l;
}

int SdemLearner::GrowDelta(trib_delta* d, size_t min_capacity) {
  auto* self = static_cast<SdemLearner*>(d->host);
  size_t cap = std::max(min_capacity, d->capacity * 2);
  try {
    self->delta_index_.resize(cap);
    self->delta_value_.resize(cap);
  } catch (...) {
    return TRIB_ERR_NO_MEMORY;
  }
  d->index = self->delta_index_.data();
  d->value = self->delta_value_.data();
  d->capacity = cap;
  return TRIB_OK;
}

int SdemLearner::GrowLog(trib_step_log* log, size_t min_runs, size_t min_values) {
  auto* self = static_cast<SdemLearner*>(log->host);
  try {
    if (min_runs > log->run_capacity) {
      const size_t cap = std::max(min_runs, log->run_capacity * 2);
      self->log_start_.resize(cap);
      self->log_length_.resize(cap);
      log->run_capacity = cap;
    }
    if (min_values > log->value_capacity) {
      const size_t cap = std::max(min_values, log->value_capacity * 2);
      self->old_raw_.resize(cap);
      log->value_capacity = cap;
    }
  } catch (...) {
    return TRIB_ERR_NO_MEMORY;
  }
  log->start = self->log_start_.data();
  log->length = self->log_length_.data();
  log->old_raw = self->old_raw_.data();
  return TRIB_OK;
}

Status SdemLearner::Undo(const trib_delta& delta, const Status& cause) {
  auto& raw = model_->stats().raw();
  for (size_t j = 0; j < delta.size; ++j) raw[delta.index[j]] = old_raw_[j];
  return RestoreBlocksAndRebuild(cause);
}

Status SdemLearner::UndoLog(const trib_step_log& log, const Status& cause) {
  auto& raw = model_->stats().raw();
  const uint64_t size = raw.size();
  size_t v = 0;
  for (size_t r = 0; r < log.runs && v < log.values; ++r) {
    // (A run past the statistics or the values logged is a family's bug:
    // what lies inside is restored, the rest cannot have been written.)
    const uint64_t first = log.start[r];
    const uint64_t len = std::min<uint64_t>({log.length[r], log.values - v, first < size ? size - first : 0});
    std::copy(log.old_raw + v, log.old_raw + v + len, raw.begin() + static_cast<std::ptrdiff_t>(first));
    v += log.length[r];
  }
  return RestoreBlocksAndRebuild(cause);
}

Status SdemLearner::RestoreBlocksAndRebuild(const Status& cause) {
  Model& m = *model_;
  auto& raw = m.stats().raw();
  for (const auto& [b, values] : restarted_raw_) {
    std::copy(values.begin(), values.end(), raw.begin() + static_cast<std::ptrdiff_t>(saved_blocks_[b].offset));
  }
  std::copy(saved_blocks_.begin(), saved_blocks_.end(), m.stats().mutable_blocks().begin());
  const LearnerState& ls = m.learner_state();
  Status rb = m.Rebuild(trib_step{0.0, ls.effective_size, 0.0, ls.updates});
  if (!rb.ok()) {
    return Status::Internal(cause.ToString() + "; undoing the step failed too (" + rb.ToString() +
                            "): the model is unusable");
  }
  return cause;
}

Status SdemLearner::Fail(const trib_document& doc, const Status& st) const {
  return st.WithContext(DocumentName(doc.index, doc.id ? doc.id : ""));
}

void SdemLearner::FinishStep(const std::vector<double>& factors, double c, double rho) {
  LearnerState& ls = model_->learner_state();
  ++ls.updates;
  if (trace_ != nullptr) {
    ++trace_->steps;
    trace_->gradient |= c == 0;
    const double prior_step = rho / ls.effective_size;
    for (size_t b = 0; b < factors.size(); ++b) {
      trace_->decay[b] *= factors[b];
      trace_->offset[b] = factors[b] * trace_->offset[b] + prior_step;
    }
  }
}

Status SdemLearner::Learn(const trib_document& labelled_doc, LearnOutcome* outcome) {
  Model& m = *model_;
  const uint32_t K = m.num_outputs();
  const Plugin& loss = *m.loss_plugin();
  // A family with latent outputs learns from the documents alone: labels are
  // for evaluation only (trib_family_vtable.outputs).
  trib_document unlabelled;
  const trib_document* docp = &labelled_doc;
  if (m.latent_outputs() && labelled_doc.label >= 0) {
    unlabelled = labelled_doc;
    unlabelled.label = -1;
    docp = &unlabelled;
  }
  const trib_document& doc = *docp;
  if (loss.loss().requires_label && doc.label < 0) {
    if (m.latent_outputs()) {
      return Fail(doc, Status::InvalidArgument("loss '" + loss.name + "' needs labels, but family '" + m.family().name +
                                               "' learns latent components from unlabelled documents (use nll)"));
    }
    return Fail(doc, Status::InvalidDocument("loss '" + loss.name + "' needs a label, the document has none"));
  }
  if (doc.label >= static_cast<int64_t>(K)) {
    return Fail(doc, Status::InvalidDocument("label index " + std::to_string(doc.label) + " >= number of classes " +
                                             std::to_string(K)));
  }
  scores_.resize(K);
  weights_.resize(K);
  // 1. Scores. (Fail() names the document: only on the error path.)
  if (Status st = m.Score(doc, state_.get(), scores_.data()); !st.ok()) return Fail(doc, st);
  uint32_t best = 0;
  double best_score = scores_[0];
  bool bad_score = false;
  for (uint32_t k = 0; k < K; ++k) {
    const double sk = scores_[k];
    bad_score |= std::isnan(sk) || sk == INFINITY;
    if (sk > best_score) {
      best_score = sk;
      best = k;
    }
  }
  if (bad_score) {
    for (uint32_t k = 0; k < K; ++k) {
      if (std::isnan(scores_[k]) || scores_[k] == INFINITY) {
        return Fail(doc, Status::Numeric("family '" + m.family().name + "' scored class " + std::to_string(k) + " as " +
                                         std::to_string(scores_[k]) + ", expected a finite log-probability"));
      }
    }
  }
  // 2. Loss: w and c.
  double c = 0, loss_value = 0;
  if (Status st = m.LossWeights(scores_.data(), doc.label, weights_.data(), &c, &loss_value); !st.ok()) {
    return Fail(doc, st);
  }
  trib_error err;  // (not zero-filled: 516 bytes per document; plugins write a NUL-terminated message)
  err.code = TRIB_OK;
  err.message[0] = '\0';
  int rc;
  const double dw = doc.weight;
  double rho = m.learner_state().schedule.Rho(m.learner_state().updates);
  if (dw != 1.0) {
    if (c > 0) {
      rho = WeightedRho(m.learner_state(), c, dw);
    } else {
      for (auto& w : weights_) w *= dw;
    }
  }
  LearnerState& ls = m.learner_state();
  const double n = ls.effective_size;
  auto& blocks = m.stats().mutable_blocks();
  // The family's fused step (ABI 1.7) replaces steps 3, 5 and 6 unless a
  // block re-materialises (then rebuild, not commit, follows the apply).
  const auto fused = m.family().family().fused_step;
  bool use_fused = fused != nullptr && use_fused_;
  for (size_t b = 0; b < blocks.size() && use_fused; ++b) {
    const double f = 1.0 - rho * (c + blocks[b].nu / n);
    use_fused = !(f <= 0 || blocks[b].scale * f < kMinScale);
  }
  // 3. Expected statistics (with the statistics as score() saw them).
  trib_delta delta{delta_index_.data(), delta_value_.data(), 0, delta_index_.size(), this, &GrowDelta};
  trib_stats view;
  if (!use_fused) {
    view = m.stats().View();
    rc = m.family().family().accumulate(m.family_model(), &view, state_->get(), &doc, weights_.data(), &delta, &err);
    if (rc != TRIB_OK) return Fail(doc, PluginStatus(rc, err, m.family(), "accumulate"));
  }
  const uint64_t size = m.stats().size();
  // (Indices < size and finite values: checked while the delta is applied.)
  // 4. The block maps (eq. 15 / Table 1: every statistic decays by
  // f = 1 - rho (c + nu / n) and gains the prior's rho abar / n), lazily:
  // the blocks' scale and shift.
  factors_.resize(blocks.size());
  materialize_.assign(blocks.size(), 0);
  // Kept so that a failing commit or rebuild can be undone (O(blocks); a
  // restarted block's raw values are copied whole, which is rare).
  saved_blocks_.assign(blocks.begin(), blocks.end());
  restarted_raw_.clear();
  bool any_materialized = false;
  for (size_t b = 0; b < blocks.size(); ++b) {
    const double f = 1.0 - rho * (c + blocks[b].nu / n);
    factors_[b] = f;
    if (f <= 0 || blocks[b].scale * f < kMinScale) {
      // mu_new = f mu_old + rho abar/n folded into raw (scale restarts at 1;
      // shift - scale stays the paper's gamma, see SufficientStats).
      const auto& r = m.stats().raw();
      restarted_raw_.emplace_back(
          static_cast<uint32_t>(b),
          std::vector<double>(r.begin() + static_cast<std::ptrdiff_t>(blocks[b].offset),
                              r.begin() + static_cast<std::ptrdiff_t>(blocks[b].offset + blocks[b].size)));
      m.stats().Restart(static_cast<uint32_t>(b), f, rho / n);
      materialize_[b] = 1;
      any_materialized = true;
    } else {
      blocks[b].scale *= f;
      blocks[b].shift = blocks[b].shift * f + rho / n;
    }
  }
  trib_step step{rho, n, c, ls.updates};
  if (use_fused) {
    // 5'. The family's fused step: the expected statistics added to raw, its
    // check-step and caches in one pass (ABI 1.7), every run it wrote logged.
    block_mult_.resize(blocks.size());
    for (size_t b = 0; b < blocks.size(); ++b) block_mult_[b] = rho / blocks[b].scale;
    if (old_raw_.empty()) old_raw_.resize(1024);
    if (log_start_.empty()) {
      log_start_.resize(256);
      log_length_.resize(256);
    }
    trib_step_log log{
        log_start_.data(), log_length_.data(), 0, log_start_.size(), old_raw_.data(), 0, old_raw_.size(), this,
        &GrowLog};
    view = m.stats().View();
    rc = fused(m.family_model(), &view, state_->get(), &doc, weights_.data(), block_mult_.data(), &step, &log, &err);
    // The pages written, noted run by run (a run inside the statistics, of
    // at most a page, as a family's rows are: two stores). A run outside the
    // statistics or a log past its room is the family's bug: refused (what
    // lies inside is restored).
    bool bad_log = log.runs > log.run_capacity || log.values > log.value_capacity;
    log.runs = std::min(log.runs, log.run_capacity);
    log.values = std::min(log.values, log.value_capacity);
    SufficientStats& stats = m.stats();
    for (size_t r = 0; r < log.runs; ++r) {
      const uint64_t first = log.start[r], len = log.length[r];
      if (first >= size || len > size - first) {
        bad_log = true;
        break;
      }
      if (len - 1 < (uint64_t{1} << SufficientStats::kPageShift)) {
        stats.NoteWrittenShort(first, first + len);
      } else {
        stats.NoteWritten(first, first + len);
      }
    }
    if (rc != TRIB_OK || bad_log) {
      const Status cause = rc != TRIB_OK ? PluginStatus(rc, err, m.family(), "fused_step")
                                         : Status::PluginError("family '" + m.family().name +
                                                               "' logged a run outside the statistics or past the "
                                                               "room of its step log");
      // (Pages noted for a step undone only make a publication copy them.)
      return Fail(doc, UndoLog(log, cause));
    }
    FinishStep(factors_, c, rho);
    ++fused_steps_;
    if (outcome) {
      outcome->loss_value = loss_value;
      outcome->predicted = best;
      outcome->rho = rho;
      outcome->delta_entries = log.values;
    }
    return Status::OK();
  }
  // 5. Apply: raw += rho delta / scale, entry by entry: the block's bounds and factor
  // rho / scale are looked up only when the block changes (the delta runs
  // through one block at a time), and contiguous runs of indices (a family's
  // rows) take a loop the compiler vectorises.
  old_raw_.resize(delta.size);
  double* const raw = m.stats().raw().data();
  double* const old_raw = old_raw_.data();
  const uint64_t* const idx = delta.index;
  const double* const val = delta.value;
  // The delta is checked on the way, not in a pass of its own: an index >=
  // size stops the loop (a run's indices are below its block's end), a value
  // not finite sets the sign bit of `nonfinite`. A run's length is first
  // guessed to be the previous one's (one branch-free check), else measured.
  uint64_t lo = 1, hi = 0;  // current block [lo, hi); empty at first
  double mult = 0;
  uint64_t nonfinite = 0;
  size_t guess = 0;  // the previous run's length: a family's rows repeat (K entries each for NCLL)
  size_t j = 0;
  while (j < delta.size) {
    const uint64_t i = idx[j];
    if (i < lo || i >= hi) {
      if (i >= size) break;
      const trib_block& blk = blocks[m.stats().BlockOf(i)];
      lo = blk.offset;
      hi = blk.offset + blk.size;
      mult = rho / blk.scale;
    }
    const size_t max_len = std::min<uint64_t>(delta.size - j, hi - i);
    const size_t len = guess > 1 && guess <= max_len && IsRun(idx + j, guess) ? guess : RunLength(idx + j, max_len);
    guess = len;
    double* __restrict r = raw + i;
    double* __restrict o = old_raw + j;
    const double* __restrict v = val + j;
    for (size_t t = 0; t < len; ++t) {
      o[t] = r[t];
      r[t] += v[t] * mult;
      uint64_t bits;
      std::memcpy(&bits, &v[t], sizeof bits);
      nonfinite |= (bits & kExpBits) + kExpOne;
    }
    m.stats().NoteWritten(i, i + len);
    j += len;
  }
  if (j < delta.size || (nonfinite >> 63) != 0) {
    // A bad entry: what was applied is put back (in reverse, so that a
    // repeated index gets its first old value), then the restarted blocks
    // and the maps; the family's caches were not touched. The model is as
    // before the document, bit for bit. Find and name the first bad entry.
    for (size_t t = j; t-- > 0;) raw[idx[t]] = old_raw[t];
    for (const auto& [b, values] : restarted_raw_) {
      std::copy(values.begin(), values.end(), raw + saved_blocks_[b].offset);
    }
    std::copy(saved_blocks_.begin(), saved_blocks_.end(), blocks.begin());
    for (size_t t = 0; t < delta.size; ++t) {
      if (delta.index[t] >= size) {
        return Fail(doc, Status::PluginError("family '" + m.family().name + "' produced statistic index " +
                                             std::to_string(delta.index[t]) + " >= " + std::to_string(size)));
      }
      if (!std::isfinite(delta.value[t])) {
        return Fail(
            doc, Status::Numeric("expected statistics are not finite (entry " + std::to_string(delta.index[t]) + ")"));
      }
    }
    return Fail(doc, Status::Internal("delta check failed without a bad entry"));  // (unreachable)
  }
  // 6. Check-step and caches. On failure the step is undone: the model is
  // as before the document (statistics bit for bit; the family's caches
  // rebuilt from them, since a failing call may have half-updated them).
  if (any_materialized) {
    ++ls.materializations;
    Status st = m.Rebuild(step);
    if (!st.ok()) {
      --ls.materializations;
      return Fail(doc, Undo(delta, st));
    }
  } else {
    view = m.stats().View();
    rc = m.family().family().commit(m.family_model(), &view, delta.index, old_raw_.data(), delta.size, &step, &err);
    if (rc != TRIB_OK) return Fail(doc, Undo(delta, PluginStatus(rc, err, m.family(), "commit")));
  }
  FinishStep(factors_, c, rho);
  if (outcome) {
    outcome->loss_value = loss_value;
    outcome->predicted = best;
    outcome->rho = rho;
    outcome->delta_entries = delta.size;
  }
  return Status::OK();
}

}  // namespace tributary
