#include "tributary/sep_engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "tributary/document.h"

namespace tributary {

namespace {
// Below this a block's scale is folded back into raw (O(block), rare), as in
// the sdEM engine: keeps raw = mu / scale well inside double range.
constexpr double kMinScale = 1e-100;

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// Block of entry i (binary search over the block offsets).
uint32_t BlockOf(const std::vector<trib_block>& blocks, uint64_t i) {
  auto it =
      std::upper_bound(blocks.begin(), blocks.end(), i, [](uint64_t v, const trib_block& b) { return v < b.offset; });
  return static_cast<uint32_t>(it - blocks.begin()) - 1;
}

// mu at entry i (sep_abi.h: scale * raw + shift * alpha_bar of its block).
// `b` is a hint: the block of the previous entry, updated when i is outside it.
double MuAt(const std::vector<trib_block>& blocks, const SufficientStats::RawValues& raw, uint64_t i, uint32_t* b) {
  if (i < blocks[*b].offset || i >= blocks[*b].offset + blocks[*b].size) *b = BlockOf(blocks, i);
  const trib_block& blk = blocks[*b];
  return blk.scale * raw[i] + blk.shift * blk.alpha_bar;
}

std::string ErrText(const trib_error& err) {
  return std::string(err.message, strnlen(err.message, sizeof(err.message)));
}
}  // namespace

const char* SepEngineName(SepEngine engine) {
  switch (engine) {
    case SepEngine::kSep:
      return "sep";
    case SepEngine::kEp:
      return "ep";
    case SepEngine::kAdf:
      return "adf";
  }
  return "?";
}

Result<SepEngine> ParseSepEngine(const std::string& name) {
  if (name == "sep") return SepEngine::kSep;
  if (name == "ep") return SepEngine::kEp;
  if (name == "adf") return SepEngine::kAdf;
  return Status::InvalidArgument("unknown engine '" + name + "' (expected sep, ep or adf)");
}

bool SepLearner::Supports(const Plugin& family) {
  return family.kind == TRIB_KIND_FAMILY && family.family().sep != nullptr;
}

Result<std::unique_ptr<SepLearner>> SepLearner::Create(Model* model, const SepOptions& options) {
  if (model == nullptr) return Status::InvalidArgument("SepLearner: no model");
  const Plugin& fam = model->family();
  const trib_sep_hooks* hooks = fam.family().sep;
  const char* engine = SepEngineName(options.engine);
  if (hooks == nullptr) {
    return Status::InvalidArgument("family '" + fam.name + "' cannot be trained with --engine " + engine +
                                   ": it has no SEP/EP hooks (train it with sdEM)");
  }
  constexpr size_t kNeed = offsetof(trib_sep_hooks, commit) + sizeof(hooks->commit);
  if (hooks->struct_size < kNeed || !hooks->num_params || !hooks->support || !hooks->moment_match || !hooks->feasible ||
      !hooks->commit) {
    return Status::PluginError("family '" + fam.name + "' has an incomplete SEP hook table (struct_size " +
                               std::to_string(hooks->struct_size) +
                               ", needs num_params, support, moment_match, feasible and commit)");
  }
  std::unique_ptr<SepLearner> l(new SepLearner());
  l->model_ = model;
  l->hooks_ = hooks;
  l->options_ = options;
  // P must be a whole number of leading blocks: the engine decays those
  // blocks and never touches the family's own entries after them.
  const uint64_t P = hooks->num_params(model->family_model());
  const auto& blocks = model->stats().blocks();
  uint64_t covered = 0;
  uint32_t nb = 0;
  while (nb < blocks.size() && covered < P) covered += blocks[nb++].size;
  if (P == 0 || covered != P || P > model->stats().size()) {
    return Status::PluginError("family '" + fam.name + "' reports " + std::to_string(P) +
                               " natural parameters, which is not a whole number of its leading statistics blocks "
                               "(statistics size " +
                               std::to_string(model->stats().size()) + ")");
  }
  for (uint32_t b = 0; b < nb; ++b) {
    if ((blocks[b].alpha_bar != 0.0 && blocks[b].alpha_bar != 1.0) || blocks[b].nu != 0.0) {
      return Status::PluginError("family '" + fam.name + "': SEP statistics block " + std::to_string(b) +
                                 " must have nu = 0 and alpha_bar 0 or 1");
    }
  }
  l->num_params_ = P;
  l->num_param_blocks_ = nb;
  LearnerState& ls = model->learner_state();
  if (options.effective_size != 0) {
    if (!(options.effective_size > 0) || !std::isfinite(options.effective_size)) {
      return Status::InvalidArgument("effective data-set size N must be > 0, got " + Num(options.effective_size));
    }
    ls.effective_size = options.effective_size;
  }
  if (!(ls.effective_size > 0) || !std::isfinite(ls.effective_size)) {
    return Status::InvalidArgument("effective data-set size N must be > 0, got " + Num(ls.effective_size));
  }
  l->n_ = ls.effective_size;
  if (options.damping != 0 && (!(options.damping > 0) || !std::isfinite(options.damping))) {
    return Status::InvalidArgument("damping must be a finite number > 0, got " + Num(options.damping));
  }
  switch (options.engine) {
    case SepEngine::kSep:
      l->damping_ = options.damping > 0 ? options.damping : 1.0 / l->n_;
      break;
    case SepEngine::kEp:
      l->damping_ = options.damping > 0 ? options.damping : 1.0;
      break;
    case SepEngine::kAdf:
      l->damping_ = 1.0;
      break;
  }
  // The family's caches of lambda = lambda0 + N mu must use this N.
  trib_step step{0.0, l->n_, 0.0, ls.updates};
  TRIB_RETURN_IF_ERROR(model->Rebuild(step));
  auto st = model->NewScoringState(options.seed);
  if (!st.ok()) return st.status();
  l->state_ = std::move(st).value();
  return l;
}

int SepLearner::SupportBuffer::Grow(trib_delta* d, size_t min_capacity) {
  auto* self = static_cast<SupportBuffer*>(d->host);
  size_t cap = std::max(min_capacity, d->capacity * 2);
  try {
    self->index.resize(cap);
    self->prior.resize(cap);
  } catch (...) {
    return TRIB_ERR_NO_MEMORY;
  }
  d->index = self->index.data();
  d->value = self->prior.data();
  d->capacity = cap;
  return TRIB_OK;
}

Status SepLearner::Fail(const trib_document& doc, const Status& st) const {
  return st.WithContext(DocumentName(doc.index, doc.id ? doc.id : ""));
}

Status SepLearner::Skip(const std::string& reason, SepOutcome* outcome) {
  ++counters_.skipped_infeasible;
  ++counters_.documents;
  outcome->skipped = true;
  outcome->skip_reason = reason;
  return Status::OK();
}

size_t SepLearner::SiteBytes() const {
  // Each table node holds the key, the Site and a next pointer; plus one
  // bucket pointer per bucket.
  if (sites_.empty()) return 0;
  size_t bytes = sites_.bucket_count() * sizeof(void*);
  for (const auto& [key, site] : sites_) {
    bytes += sizeof(key) + sizeof(Site) + sizeof(void*);
    bytes += site.index.capacity() * sizeof(uint64_t) + site.value.capacity() * sizeof(double) +
             site.blocks.capacity() * sizeof(site.blocks[0]);
  }
  return bytes;
}

Status SepLearner::Learn(const trib_document& doc, SepOutcome* outcome) {
  SepOutcome local;
  SepOutcome& out = outcome ? *outcome : local;
  out = SepOutcome{};
  Model& m = *model_;
  const Plugin& fam = m.family();
  trib_error err;
  err.code = TRIB_OK;
  err.message[0] = '\0';

  // 1. The support and the prior there.
  trib_delta d = support_.Delta();
  trib_stats view = m.stats().View();
  int rc = hooks_->support(m.family_model(), &view, &doc, &d, &err);
  if (rc != TRIB_OK) return Fail(doc, PluginStatus(rc, err, fam, "sep support"));
  const size_t cnt = d.size;
  const uint64_t* idx = d.index;
  const double* prior = d.value;
  for (size_t j = 0; j < cnt; ++j) {
    if (idx[j] >= num_params_) {
      return Fail(doc, Status::PluginError("family '" + fam.name + "' listed support entry " + std::to_string(idx[j]) +
                                           " >= its number of natural parameters " + std::to_string(num_params_)));
    }
    if (!std::isfinite(prior[j])) {
      return Fail(doc, Status::PluginError("family '" + fam.name + "' gave a non-finite prior at entry " +
                                           std::to_string(idx[j])));
    }
  }
  out.support = cnt;

  // 2. The cavity at the support.
  const Site* site = nullptr;
  if (options_.engine == SepEngine::kEp) {
    auto it = sites_.find(doc.index);
    if (it != sites_.end()) {
      site = &it->second;
      if (site->index.size() != cnt || !std::equal(site->index.begin(), site->index.end(), idx)) {
        return Fail(doc, Status::InvalidDocument("EP: the document's support differs from the one its stored site "
                                                 "was computed on (a different document with the same index?)"));
      }
    }
  }
  const auto& blocks = m.stats().blocks();
  const auto& raw = m.stats().raw();
  cavity_.resize(cnt);
  mu_old_.resize(cnt);
  block_of_.resize(cnt);
  const double coef = options_.engine == SepEngine::kSep ? n_ - 1.0 : n_;
  {
    uint32_t b = 0;
    for (size_t j = 0; j < cnt; ++j) {
      const uint64_t i = idx[j];
      const double mu = MuAt(blocks, raw, i, &b);
      block_of_[j] = b;
      mu_old_[j] = mu;
      cavity_[j] = prior[j] + coef * mu - (site ? site->value[j] : 0.0);
      if (!std::isfinite(cavity_[j])) return Skip("cavity not finite at entry " + std::to_string(i), &out);
    }
  }

  // 3. Moment matching (the family; does not modify the model).
  lambda_new_.resize(cnt);
  const uint32_t nb = static_cast<uint32_t>(blocks.size());
  block_site_.assign(nb, 0.0);
  trib_sep_outcome so{sizeof(trib_sep_outcome), 0, NAN, block_site_.data(), nb};
  view = m.stats().View();
  rc = hooks_->moment_match(m.family_model(), &view, state_->get(), &doc, idx, cavity_.data(), cnt, lambda_new_.data(),
                            &so, &err);
  if (rc != TRIB_OK) return Fail(doc, PluginStatus(rc, err, fam, "sep moment_match"));
  out.log_z = so.log_z;
  if (so.skip) return Skip(ErrText(err), &out);
  for (uint32_t b = 0; b < nb; ++b) {
    if (block_site_[b] == 0.0) continue;
    if (b >= num_param_blocks_ || blocks[b].alpha_bar != 1.0) {
      return Fail(doc, Status::PluginError("family '" + fam.name + "' set a block site on block " + std::to_string(b) +
                                           ", which is not a natural-parameter block with alpha_bar 1"));
    }
    if (!std::isfinite(block_site_[b])) return Skip("non-finite block site on block " + std::to_string(b), &out);
  }
  // The block sites actually applied: the change of lambda off the support.
  const Site* const old_site = site;
  block_delta_.assign(nb, 0.0);
  for (uint32_t b = 0; b < num_param_blocks_; ++b) {
    double u = block_site_[b];
    switch (options_.engine) {
      case SepEngine::kSep:
        block_delta_[b] = n_ * damping_ * u;
        break;
      case SepEngine::kEp: {
        double u_old = 0;
        if (old_site) {
          for (const auto& [ob, ov] : old_site->blocks) u_old = ob == b ? ov : u_old;
        }
        u = (1.0 - damping_) * u_old + damping_ * u;  // damped, as the support entries
        block_site_[b] = u;
        block_delta_[b] = u - u_old;
        break;
      }
      case SepEngine::kAdf:
        block_delta_[b] = u;
        break;
    }
  }

  // 4. The new posterior at the support, checked before anything is written.
  mu_new_.resize(cnt);
  posterior_.resize(cnt);
  if (options_.engine == SepEngine::kEp) site_new_.resize(cnt);
  const double eps = damping_;
  for (size_t j = 0; j < cnt; ++j) {
    const double f = lambda_new_[j] - cavity_[j];  // the document's site (eq. 36 / 65-69)
    double mu;
    switch (options_.engine) {
      case SepEngine::kSep:
        mu = (1.0 - eps) * mu_old_[j] + eps * f;  // eq. 11
        break;
      case SepEngine::kEp: {
        const double f_old = site ? site->value[j] : 0.0;
        const double f_damped = (1.0 - eps) * f_old + eps * f;
        site_new_[j] = f_damped;
        mu = mu_old_[j] + (f_damped - f_old) / n_;
        break;
      }
      case SepEngine::kAdf:
      default:
        mu = (lambda_new_[j] - prior[j]) / n_;
        break;
    }
    mu_new_[j] = mu;
    posterior_[j] = prior[j] + n_ * mu;
    if (!std::isfinite(f) || !std::isfinite(mu) || !std::isfinite(posterior_[j])) {
      return Skip("non-finite update at entry " + std::to_string(idx[j]), &out);
    }
  }
  rc = hooks_->feasible(m.family_model(), idx, posterior_.data(), cnt, &err);
  if (rc == TRIB_ERR_NUMERIC) return Skip("infeasible posterior: " + ErrText(err), &out);
  if (rc != TRIB_OK) return Fail(doc, PluginStatus(rc, err, fam, "sep feasible"));
  // Entries off the support that a block site moves: the family's bound
  // (block_feasible), since feasible() above only saw the support.
  if (hooks_->struct_size >= offsetof(trib_sep_hooks, block_feasible) + sizeof(hooks_->block_feasible) &&
      hooks_->block_feasible != nullptr) {
    const double block_decay = options_.engine == SepEngine::kSep ? 1.0 - eps : 1.0;
    for (uint32_t b = 0; b < num_param_blocks_; ++b) {
      if (block_delta_[b] == 0.0) continue;
      view = m.stats().View();
      rc = hooks_->block_feasible(m.family_model(), &view, b, block_decay, block_delta_[b], &err);
      if (rc == TRIB_ERR_NUMERIC)
        return Skip("infeasible block site on block " + std::to_string(b) + ": " + ErrText(err), &out);
      if (rc != TRIB_OK) return Fail(doc, PluginStatus(rc, err, fam, "sep block_feasible"));
    }
  }
  // SEP also decays every other entry towards zero, i.e. lambda towards the
  // prior: (1 - eps) lambda + eps lambda0 stays feasible (convex feasible
  // sets, see sep_abi.h) for eps in (0, 1]; for eps > 1 that is an
  // extrapolation the engine cannot check in O(document), so it is refused.
  if (options_.engine == SepEngine::kSep && eps > 1.0) {
    return Skip("SEP damping " + Num(eps) + " > 1 would move untouched entries past the prior", &out);
  }

  // 5. Apply (the previous block maps and support values are kept, so that a
  // failing commit can be undone).
  auto& mblocks = m.stats().mutable_blocks();
  auto& wraw = m.stats().raw();
  saved_blocks_.assign(mblocks.begin(), mblocks.begin() + num_param_blocks_);
  raw_old_.resize(cnt);
  for (size_t j = 0; j < cnt; ++j) raw_old_[j] = wraw[idx[j]];
  bool materialized = false;
  double decay = 1.0;
  if (options_.engine == SepEngine::kSep) {
    decay = 1.0 - eps;
    for (uint32_t b = 0; b < num_param_blocks_; ++b) {
      trib_block& blk = mblocks[b];
      // Off the support: mu <- decay mu + eps u_b (eq. 11 with the block site).
      const double add = eps * block_site_[b];
      if (decay <= 0 || blk.scale * decay < kMinScale) {
        // Fold the map into raw (O(block), rare).
        const double sh = blk.shift * blk.alpha_bar;
        for (uint64_t i = blk.offset; i < blk.offset + blk.size; ++i) {
          wraw[i] = decay * (blk.scale * wraw[i] + sh) + add;
        }
        blk.scale = 1.0;
        blk.shift = 0.0;
        materialized = true;
        m.stats().NoteWritten(blk.offset, blk.offset + blk.size);
      } else {
        blk.scale *= decay;
        blk.shift = decay * blk.shift + add;  // add != 0 only where alpha_bar = 1
      }
    }
  } else {
    for (uint32_t b = 0; b < num_param_blocks_; ++b) mblocks[b].shift += block_delta_[b] / n_;
  }
  for (size_t j = 0; j < cnt; ++j) {
    const trib_block& blk = mblocks[block_of_[j]];
    wraw[idx[j]] = (mu_new_[j] - blk.shift * blk.alpha_bar) / blk.scale;
    m.stats().NoteWritten(idx[j], idx[j] + 1);
  }

  // 6. The family's caches.
  LearnerState& ls = m.learner_state();
  if (materialized) {
    ++counters_.materializations;
    trib_step step{0.0, n_, 0.0, ls.updates};
    Status st = m.Rebuild(step);
    if (!st.ok()) return Fail(doc, st);
  } else {
    trib_sep_step step{sizeof(trib_sep_step), n_, decay, ls.updates, static_cast<uint32_t>(options_.engine),
                       block_delta_.data(),   nb};
    view = m.stats().View();
    rc = hooks_->commit(m.family_model(), &view, idx, mu_old_.data(), cnt, &step, &err);
    if (rc != TRIB_OK) {
      // Undo: the block maps and the support values as they were, and the
      // family's caches rebuilt from them (commit may have half-updated
      // them). The model is then exactly as before the document. A NUMERIC
      // refusal (an entry the family found infeasible) is a skip, counted;
      // anything else is an error.
      std::copy(saved_blocks_.begin(), saved_blocks_.end(), mblocks.begin());
      for (size_t j = 0; j < cnt; ++j) wraw[idx[j]] = raw_old_[j];
      trib_step rstep{0.0, n_, 0.0, ls.updates};
      Status rb = m.Rebuild(rstep);
      if (!rb.ok()) return Fail(doc, rb);
      if (rc == TRIB_ERR_NUMERIC) return Skip("the family refused the update in commit: " + ErrText(err), &out);
      return Fail(doc, PluginStatus(rc, err, fam, "sep commit"));
    }
  }
  if (options_.engine == SepEngine::kEp) {
    Site& s = sites_[doc.index];
    s.index.assign(idx, idx + cnt);
    s.value.assign(site_new_.begin(), site_new_.end());
    s.blocks.clear();
    for (uint32_t b = 0; b < num_param_blocks_; ++b) {
      if (block_site_[b] != 0.0) s.blocks.emplace_back(b, block_site_[b]);
    }
  }
  if (trace_ != nullptr) {
    ++trace_->steps;
    // Off the support: SEP decays by (1 - eps) and adds eps u_b (alpha_bar
    // 1 where u_b != 0); EP and ADF add the block delta / N.
    for (uint32_t b = 0; b < num_param_blocks_; ++b) {
      if (options_.engine == SepEngine::kSep) {
        trace_->decay[b] *= decay;
        trace_->offset[b] = decay * trace_->offset[b] + eps * block_site_[b];
      } else {
        trace_->offset[b] += block_delta_[b] / n_;
      }
    }
  }
  ++ls.updates;
  ++counters_.updates;
  ++counters_.documents;
  if (std::isfinite(so.log_z)) counters_.log_evidence += so.log_z;

  // 7. The family's structural move (sep_abi.h, ABI 1.9): SEP, not in a
  // shard (trace_: the parallel and distributed learners compose the shards'
  // steps as affine maps of the statistics, which a move is not).
  if (options_.engine == SepEngine::kSep && trace_ == nullptr &&
      hooks_->struct_size >= offsetof(trib_sep_hooks, move) + sizeof(hooks_->move) && hooks_->move != nullptr) {
    trib_sep_step step{sizeof(trib_sep_step), n_, decay, ls.updates, static_cast<uint32_t>(options_.engine),
                       block_delta_.data(),   nb};
    uint32_t moved = 0;
    view = m.stats().View();
    rc = hooks_->move(m.family_model(), &view, &step, &moved, &err);
    if (rc != TRIB_OK) {
      trib_step rstep{0.0, n_, 0.0, ls.updates};
      Status rb = m.Rebuild(rstep);
      if (!rb.ok()) return Fail(doc, rb);
      return Fail(doc, PluginStatus(rc, err, fam, "sep move"));
    }
    if (moved != 0) {
      ++counters_.moves;
      m.stats().NoteWritten(0, num_params_);
    }
  }
  return Status::OK();
}

Result<double> SepLearner::LogPredictive(const Model& model, ScoringState* state, const trib_document& doc) {
  const Plugin& fam = model.family();
  const trib_sep_hooks* hooks = fam.family().sep;
  if (hooks == nullptr) {
    return Status::InvalidArgument("family '" + fam.name + "' has no SEP/EP hooks: no approximate log evidence");
  }
  if (state == nullptr) return Status::InvalidArgument("LogPredictive: no scoring state");
  SupportBuffer support;
  trib_error err{};
  trib_delta d = support.Delta();
  trib_stats view = model.stats().ConstView();
  const std::string name = DocumentName(doc.index, doc.id ? doc.id : "");
  int rc = hooks->support(model.family_model(), &view, &doc, &d, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, fam, "sep support").WithContext(name);
  const uint64_t P = hooks->num_params(model.family_model());
  const double n = model.learner_state().effective_size;
  const auto& blocks = model.stats().blocks();
  const auto& raw = model.stats().raw();
  std::vector<double> posterior(d.size), lambda_new(d.size);
  uint32_t b = 0;
  for (size_t j = 0; j < d.size; ++j) {
    const uint64_t i = d.index[j];
    if (i >= P) {
      return Status::PluginError("family '" + fam.name + "' listed support entry " + std::to_string(i) +
                                 " >= its number of natural parameters " + std::to_string(P))
          .WithContext(name);
    }
    // lambda = lambda0 + N mu (sep_abi.h): the posterior is the cavity.
    posterior[j] = d.value[j] + n * MuAt(blocks, raw, i, &b);
    if (!std::isfinite(posterior[j])) return std::nan("");
  }
  std::vector<double> block_site(blocks.size(), 0.0);
  trib_sep_outcome so{sizeof(trib_sep_outcome), 0, NAN, block_site.data(), static_cast<uint32_t>(blocks.size())};
  rc = hooks->moment_match(model.family_model(), &view, state->get(), &doc, d.index, posterior.data(), d.size,
                           lambda_new.data(), &so, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, fam, "sep moment_match").WithContext(name);
  if (so.skip) return std::nan("");
  return so.log_z;
}

namespace {
struct SinkAdapter {
  trib_sep_summary_sink sink;
  SepLearner::SummaryVisitor visit;
  void* ctx;
};
int SinkPut(trib_sep_summary_sink* self, const char* name, uint32_t component, const double* values, size_t count) {
  auto* a = reinterpret_cast<SinkAdapter*>(self);
  a->visit(a->ctx, name ? name : "", component, values, count);
  return 0;
}
}  // namespace

Result<bool> SepLearner::Summary(const Model& model, SummaryVisitor visit, void* ctx) {
  const trib_sep_hooks* hooks = model.family().family().sep;
  if (hooks == nullptr || hooks->struct_size < offsetof(trib_sep_hooks, summary) + sizeof(hooks->summary) ||
      hooks->summary == nullptr) {
    return false;
  }
  SinkAdapter a{{nullptr, &SinkPut}, visit, ctx};
  a.sink.host = &a;
  trib_error err{};
  trib_stats view = model.stats().ConstView();
  int rc = hooks->summary(model.family_model(), &view, &a.sink, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, model.family(), "sep summary");
  return true;
}

}  // namespace tributary
