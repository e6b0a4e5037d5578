// Memory in whole 2 MiB pages, 2 MiB-aligned, optionally advised as
// transparent huge pages: for large arrays read at random (the decoded stream
// of train's shuffled passes, the frozen scoring table), where 4 KiB pages
// cost a page fault per page and a TLB miss per access. Header-only, for the
// library and plugins alike.
#ifndef TRIBUTARY_HUGE_PAGES_H_
#define TRIBUTARY_HUGE_PAGES_H_

#include <cstddef>
#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace tributary::huge_pages {

constexpr size_t kPage = size_t{1} << 21;  ///< 2 MiB

/// `bytes` rounded up to whole pages (at least one).
constexpr size_t RoundUp(size_t bytes) { return bytes == 0 ? kPage : (bytes + kPage - 1) / kPage * kPage; }

/// RoundUp(bytes) bytes, uninitialised, aligned to 2 MiB; with `advise`, on
/// Linux, advised as transparent huge pages (a hint: without it, or with THP
/// off, the memory works the same). Free with std::free (or Free). Throws
/// std::bad_alloc.
inline void* Allocate(size_t bytes, bool advise) {
  const size_t size = RoundUp(bytes);
  void* p = std::aligned_alloc(kPage, size);
  if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (advise) madvise(p, size, MADV_HUGEPAGE);
#else
  (void)advise;
#endif
  return p;
}

/// A deleter for what Allocate returned.
struct Free {
  /// Frees p (null: nothing).
  void operator()(void* p) const noexcept { std::free(p); }
};

}  // namespace tributary::huge_pages

#endif  // TRIBUTARY_HUGE_PAGES_H_
