#!/usr/bin/env bash
# Builds and runs the whole test suite: a Release build, then the same suite
# under AddressSanitizer + UndefinedBehaviorSanitizer.
# Usage: scripts/test.sh [--no-sanitizers]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
jobs=$(nproc)
run_suite() {
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
  (cd "$dir" && ctest --output-on-failure -j "$jobs")
}
echo "== Release build and tests" >&2
run_suite build-test -DCMAKE_BUILD_TYPE=Release -DTRIBUTARY_BUILD_BENCH=OFF
if [[ "${1:-}" != "--no-sanitizers" ]]; then
  echo "== AddressSanitizer + UndefinedBehaviorSanitizer build and tests" >&2
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suite build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRIBUTARY_BUILD_BENCH=OFF \
      "-DTRIBUTARY_SANITIZE=address;undefined"
fi
