// SufficientStats (model.h): the global statistics mu in the lazy affine form
// mu[i] = scale * raw[i] + shift * alpha_bar per block (docs/design.md, "The
// lazy affine map"), and the page epochs that let a copy take only what was
// written since it was made (Model::RefreshFrom).
#include <algorithm>
#include <cmath>

#include "tributary/model.h"

namespace tributary {

Status SufficientStats::Init(std::vector<trib_block> blocks) {
  uint64_t expect = 0;
  for (size_t b = 0; b < blocks.size(); ++b) {
    if (blocks[b].offset != expect) {
      return Status::Internal("statistics block " + std::to_string(b) + " starts at " +
                              std::to_string(blocks[b].offset) + ", expected " + std::to_string(expect) +
                              " (blocks must be contiguous and ordered)");
    }
    if (!std::isfinite(blocks[b].nu) || blocks[b].nu < 0 || !std::isfinite(blocks[b].alpha_bar)) {
      return Status::Internal("statistics block " + std::to_string(b) + " has an invalid prior (nu, alpha_bar)");
    }
    blocks[b].scale = 1.0;
    blocks[b].shift = 1.0;  // mu_0 = alpha_bar (Algorithm 1, line 1)
    expect += blocks[b].size;
  }
  blocks_ = std::move(blocks);
  raw_.assign(expect, 0.0);
  page_epoch_.assign((expect >> kPageShift) + 1, epoch_);
  all_epoch_ = epoch_;
  return Status::OK();
}

void SufficientStats::CopyWrittenSince(const SufficientStats& src, uint64_t since) {
  blocks_ = src.blocks_;
  // (src.epoch_ < since: src is not what this copy was made from, e.g. a
  // model re-created by growth; copy everything.)
  if (src.all_epoch_ > since || src.epoch_ < since || raw_.size() != src.raw_.size() ||
      page_epoch_.size() != src.page_epoch_.size()) {
    raw_ = src.raw_;
  } else {
    const uint64_t page = uint64_t{1} << kPageShift;
    for (uint64_t p = 0; p < src.page_epoch_.size(); ++p) {
      if (src.page_epoch_[p] <= since) continue;
      const uint64_t first = p * page, end = std::min<uint64_t>(first + page, raw_.size());
      std::copy(src.raw_.begin() + static_cast<std::ptrdiff_t>(first),
                src.raw_.begin() + static_cast<std::ptrdiff_t>(end), raw_.begin() + static_cast<std::ptrdiff_t>(first));
    }
  }
  page_epoch_ = src.page_epoch_;
  epoch_ = src.epoch_;
  all_epoch_ = src.all_epoch_;
}

uint64_t SufficientStats::PagesWrittenSince(uint64_t since) const {
  if (all_epoch_ > since) return page_epoch_.size();
  uint64_t n = 0;
  for (uint64_t e : page_epoch_) n += e > since;
  return n;
}

void SufficientStats::Materialize(uint32_t b) {
  trib_block& blk = blocks_[b];
  const double add = blk.shift * blk.alpha_bar;
  for (uint64_t i = blk.offset; i < blk.offset + blk.size; ++i) raw_[i] = blk.scale * raw_[i] + add;
  blk.scale = 1.0;
  blk.shift = 0.0;
  NoteWritten(blk.offset, blk.offset + blk.size);
}

void SufficientStats::Restart(uint32_t b, double f, double prior_step) {
  // N = scale (raw + abar) becomes f N; gamma = shift - scale becomes
  // f gamma + prior_step; with scale' = 1: raw' = f N - abar, shift' = gamma' + 1.
  trib_block& blk = blocks_[b];
  const double mult = f * blk.scale;
  const double abar = blk.alpha_bar;
  for (uint64_t i = blk.offset; i < blk.offset + blk.size; ++i) raw_[i] = mult * (raw_[i] + abar) - abar;
  NoteWritten(blk.offset, blk.offset + blk.size);
  blk.shift = f * (blk.shift - blk.scale) + prior_step + 1.0;
  blk.scale = 1.0;
}

trib_stats SufficientStats::View() {
  return trib_stats{raw_.data(), raw_.size(), static_cast<uint32_t>(blocks_.size()), blocks_.data()};
}

trib_stats SufficientStats::ConstView() const {
  return trib_stats{const_cast<double*>(raw_.data()), raw_.size(), static_cast<uint32_t>(blocks_.size()),
                    blocks_.data()};
}

}  // namespace tributary
