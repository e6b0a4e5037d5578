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

/// The size from which an array is worth huge pages (half of one page): below
/// it, the rounding to a whole page wastes more than the faults it saves.
constexpr size_t kLargeBytes = kPage / 2;

/// RoundUp(bytes) bytes, uninitialised, aligned to 2 MiB; with `advise`, on
/// Linux, advised as transparent huge pages (a hint: without it, or with THP
/// off, the memory works the same). Free with std::free (or Free). Throws
/// std::bad_alloc.
inline void* Allocate(size_t bytes, bool advise) {
  if (bytes > (size_t{1} << 62)) throw std::bad_alloc();  // (also keeps RoundUp from wrapping)
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

/// A std::allocator for large arrays that are written whole soon after they
/// are allocated (the model's statistics): an allocation of at least
/// kLargeBytes (above) takes whole 2 MiB pages advised as huge pages (one page fault
/// per 2 MiB instead of one per 4 KiB), a smaller one comes from operator new.
/// The choice follows the size alone, so deallocate finds it again.
template <typename T>
struct Allocator {
  using value_type = T;  ///< what the allocator allocates
  Allocator() = default;
  /// Converting copy (allocators of every type are equal).
  template <typename U>
  Allocator(const Allocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)
  /// Memory for n values, uninitialised. Throws std::bad_alloc.
  T* allocate(size_t n) {
    if (n > (size_t{1} << 62) / sizeof(T)) throw std::bad_array_new_length();
    const size_t bytes = n * sizeof(T);
    if (bytes >= kLargeBytes) return static_cast<T*>(Allocate(bytes, true));
    return static_cast<T*>(::operator new(bytes));
  }
  /// Frees what allocate(n) returned.
  void deallocate(T* p, size_t n) noexcept {
    if (n * sizeof(T) >= kLargeBytes) {
      std::free(p);
    } else {
      ::operator delete(p);
    }
  }
  /// All allocators are interchangeable.
  template <typename U>
  bool operator==(const Allocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace tributary::huge_pages

#endif  // TRIBUTARY_HUGE_PAGES_H_
