#!/usr/bin/env bash
# Builds and runs the whole test suite: a Release build, the Python package
# (scripts/python_test.sh), then the same suite
# under AddressSanitizer + UndefinedBehaviorSanitizer, then the concurrency
# tests (the server's) under ThreadSanitizer, then a bounded fuzzing run
# (scripts/fuzz.sh).
# Usage: scripts/test.sh [--no-sanitizers]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
jobs=$(nproc)
# Sanitizer builds: -O1 and line tables only (-g1): what ASan and TSan
# recommend, stack traces keep file:line, and the build is about 3 times
# faster than RelWithDebInfo's -O2 -g (server_test.cc under ASan+UBSan: 39 s
# against 112 s), which keeps the whole run within its 45 minutes.
san_flags=("-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1")
run_suite() {
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
  (cd "$dir" && ctest --output-on-failure -j "$jobs" ${CTEST_EXCLUDE:+-E "$CTEST_EXCLUDE"})
}
echo "== Release build and tests" >&2
# TESTS=ON and PYTHON=OFF said each time: the Python step below configures
# this same tree for the module (TESTS=OFF, PYTHON=ON, its venv's
# interpreter), and a later run of this script must get its tests back.
run_suite build-test -DCMAKE_BUILD_TYPE=Release -DTRIBUTARY_BUILD_BENCH=OFF -DTRIBUTARY_BUILD_TESTS=ON \
  -DTRIBUTARY_BUILD_PYTHON=OFF
# The Python package, installed as the README says into a fresh venv,
# checked against the program just built. setup.py's CMake build goes to the
# Release tree just built (TRIBUTARY_PYTHON_BUILD_DIR) instead of a fresh
# build-python/: its flags are the same (Release), so the library and the
# plugins are already built and only the module (python/src/*.cc) is
# compiled; a fresh build-python/ compiled the whole library a second time
# (about 4 minutes on 2 cores).
echo "== Python package (venv, pip install ., tests/python)" >&2
TRIBUTARY_PYTHON_BUILD_DIR="$PWD/build-test" TRIBUTARY_BUILD_DIR=build-test TRIBUTARY_BUILD_JOBS="$jobs" \
  bash scripts/python_test.sh
if [[ "${1:-}" != "--no-sanitizers" ]]; then
  echo "== AddressSanitizer + UndefinedBehaviorSanitizer build and tests" >&2
  # Five end-to-end scripts run in the Release suite only, to keep the whole
  # run within its 45 minutes: cli.error_sources (about 500 runs of the
  # program on damaged inputs, checking that each refusal names its file;
  # three minutes under ASan; the fuzz targets below run the same readers on
  # damaged inputs under ASan), cli.sdk_example (installs the SDK and builds
  # the example project against it: a packaging test; the example's code is
  # the plugin-check and poisson tests), cli.embed_service (the same for the
  # embedding example: a packaging test; its concurrency is live_model_test's,
  # which runs under ASan and TSan), cli.tutorials (docs/tutorials/ run as
  # written: they install and build examples against the install) and
  # cli.gaussian_toy (the paper's toy end
  # to end; gaussian_family_test covers the family under ASan).
  # This build is also the MPI-less one (-DTRIBUTARY_MPI=OFF): everything
  # but train --distributed builds and passes without Open MPI (and Open
  # MPI's own allocations at exit would read as leaks).
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    CTEST_EXCLUDE='^cli[.](error_sources|sdk_example|embed_service|tutorials|gaussian_toy)$' run_suite build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRIBUTARY_BUILD_BENCH=OFF \
      "${san_flags[@]}" "-DTRIBUTARY_SANITIZE=address;undefined" -DTRIBUTARY_MPI=OFF

  # ThreadSanitizer: the tests with threads (tests/server_test.cc: I/O threads,
  # committer, learner, concurrent clients; tests/trainer_test.cc: candidates
  # learning in parallel; tests/parallel_test.cc and the threads part of
  # tests/distributed_test.cc: train --threads, shards learning on threads
  # and composing the statistics slice by slice; tests/live_model_test.cc: the
  # embedding handle's learner and readers at once). Any report fails the run.
  # BOOST_ASIO_DISABLE_FENCED_BLOCK: TSan does not model standalone fences
  # (GCC rejects them with -Werror=tsan); Asio's handler fences duplicate the
  # synchronisation of its scheduler's mutexes, which TSan does see. Defined
  # for every file of the build so all of them see the same Asio.
  # Not the Kafka source's tests: librdkafka starts its threads with C11
  # thrd_create, which TSan does not intercept, so TSan's own allocator
  # crashes in them (glibc 2.36); they run under ASan and in Release.
  echo "== ThreadSanitizer build and concurrency tests" >&2
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRIBUTARY_BUILD_BENCH=OFF "${san_flags[@]}" \
    -DTRIBUTARY_SANITIZE=thread -DCMAKE_CXX_FLAGS=-DBOOST_ASIO_DISABLE_FENCED_BLOCK -DTRIBUTARY_MPI=OFF >/dev/null
  cmake --build build-tsan -j "$jobs" --target server_test server_http_test server_tls_test server_source_test \
    trainer_test parallel_test distributed_test live_model_test
  (cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 history_size=4" \
    ctest --output-on-failure -j "$jobs" -R 'Server|TrainerTest|ParallelLearnerTest|DistributedTest[.]Nll|LiveModelTest' -E 'Kafka')

  # Fuzz targets (docs/fuzzing.md): the saved findings and seeds, then 15 s
  # of new inputs per target, under libFuzzer + ASan + UBSan (clang-14): seven
  # targets two at a time, four rounds: about 60 s of fuzzing in all.
  echo "== Fuzz targets" >&2
  bash scripts/fuzz.sh 15
fi
