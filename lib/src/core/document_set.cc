// DocumentSet (document.h): many documents in memory, in large chunks.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "tributary/document.h"

namespace tributary {

const void* DocumentSet::Append(const void* p, size_t n, size_t bytes, size_t align) {
  if (n == 0) return nullptr;
  const size_t need = n * bytes;
  size_t at = (used_ + align - 1) / align * align;
  if (chunks_.empty() || at + need > capacity_) {
    capacity_ = huge_pages::RoundUp(std::max(kChunkBytes, need));
    chunks_.emplace_back(static_cast<unsigned char*>(huge_pages::Allocate(capacity_, bytes_ >= kHugeAfter)));
    bytes_ += capacity_;
    at = 0;
  }
  unsigned char* dst = chunks_.back().get() + at;
  std::memcpy(dst, p, need);
  used_ = at + need;
  return dst;
}

void DocumentSet::Add(const trib_document& d) {
  if (size_ % kEntriesPerBlock == 0) {
    static_assert(std::is_trivially_default_constructible_v<Entry> && std::is_trivially_destructible_v<Entry>);
    blocks_.emplace_back(
        static_cast<Entry*>(huge_pages::Allocate(kEntriesPerBlock * sizeof(Entry), bytes_ >= kHugeAfter)));
    bytes_ += kEntriesPerBlock * sizeof(Entry);
  }
  trib_document& v = blocks_.back().get()[size_ % kEntriesPerBlock].view;
  v = d;
  v.struct_size = sizeof(trib_document);
  const char* id = d.id ? d.id : "";
  v.id = static_cast<const char*>(Append(id, std::strlen(id) + 1, 1, 1));
  v.term_ids = static_cast<const uint32_t*>(Append(d.term_ids, d.num_terms, sizeof(uint32_t), alignof(double)));
  v.term_counts = static_cast<const double*>(Append(d.term_counts, d.num_terms, sizeof(double), alignof(double)));
  v.reals = static_cast<const double*>(Append(d.reals, d.num_reals, sizeof(double), alignof(double)));
  v.categoricals =
      static_cast<const uint32_t*>(Append(d.categoricals, d.num_categoricals, sizeof(uint32_t), alignof(uint32_t)));
  v.real_missing = d.real_missing ? static_cast<const uint8_t*>(Append(d.real_missing, d.num_reals, 1, 1)) : nullptr;
  v.categorical_missing = d.categorical_missing
                              ? static_cast<const uint8_t*>(Append(d.categorical_missing, d.num_categoricals, 1, 1))
                              : nullptr;
  ++size_;
}

std::string DocumentSet::Name(size_t i) const {
  const trib_document& v = at(i).view;
  return DocumentName(v.index, v.id);
}

void DocumentSet::Prefetch(size_t i) const {
  const trib_document& v = at(i).view;
  __builtin_prefetch(v.term_ids);
  __builtin_prefetch(v.term_counts);
}

}  // namespace tributary
