#!/usr/bin/env bash
# Builds the fuzz targets (tests/fuzz) with clang-14, libFuzzer, ASan and
# UBSan in build-fuzz/, replays the saved findings and the seed corpus, then
# fuzzes each target for SECONDS over a copy of its corpus (the repository is
# never written). Fails on any finding, printing the input that caused it.
# docs/fuzzing.md says more (longer runs, adding a finding).
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET (default 30)] [TARGET...]
#   TRIBUTARY_FUZZ_JOBS   targets fuzzed at once (default: nproc, at most 2)
#   TRIBUTARY_FUZZ_WORK   where corpora, logs and crash inputs go (default: a
#                         new directory under $TMPDIR, removed on success)
#   TRIBUTARY_FUZZ_MAX_LEN  largest input tried (default 4096 bytes)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(stream_reader decoder snapshot wal frame http_body broker_entry)
jobs=${TRIBUTARY_FUZZ_JOBS:-$(($(nproc) < 2 ? 1 : 2))}
max_len=${TRIBUTARY_FUZZ_MAX_LEN:-4096}
build=build-fuzz

if ! command -v clang++-14 >/dev/null; then
  echo "fuzz.sh: clang++-14 not found (scripts/install_deps.sh installs clang-14 and libclang-rt-14-dev)" >&2
  exit 1
fi
echo "== Fuzz targets: clang-14 build in $build" >&2
# -O1 and line tables: fast enough to fuzz, stack traces with lines. No
# NDEBUG: assertions stay on.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
  -DTRIBUTARY_FUZZ=ON -DTRIBUTARY_BUILD_TESTS=OFF -DTRIBUTARY_BUILD_BENCH=OFF >/dev/null
# Only the targets and what they link or load (fuzz_snapshot: a few plugins).
cmake --build "$build" -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

if [[ -n "${TRIBUTARY_FUZZ_WORK:-}" ]]; then
  work=$TRIBUTARY_FUZZ_WORK
  mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/tributary-fuzz.XXXXXX")
fi
# A small quarantine: the targets allocate and free a lot per input, and the
# default (256 MB) makes ASan's page churn the main cost.
export ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=16:detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Runs one target; its output goes to $work/<target>/log.
fuzz_one() {
  local t=$1 bin=$build/bin/fuzz_$1 dir=$work/$1
  local seeds=tests/fuzz/corpus/$t findings=tests/fuzz/findings/$t
  mkdir -p "$dir/corpus" "$dir/artifacts"
  local saved=("$seeds") dict=()
  [[ -d $findings ]] && saved+=("$findings")
  [[ -f tests/fuzz/$t.dict ]] && dict=("-dict=tests/fuzz/$t.dict")
  local inputs=()
  mapfile -t inputs < <(find "${saved[@]}" -type f ! -name '.*' | sort)
  {
    # 1. Past findings and the seeds as they are: each must run clean. Named
    # one by one, files are only run (a directory would get new inputs).
    ((${#inputs[@]})) && "$bin" -timeout=60 -artifact_prefix="$dir/artifacts/" "${inputs[@]}" &&
      # 2. New inputs, for $secs seconds, into a copy of the corpus.
      for d in "${saved[@]}"; do cp -r "$d/." "$dir/corpus/"; done &&
      "$bin" -max_total_time="$secs" -max_len="$max_len" -timeout=30 -rss_limit_mb=2048 \
        -artifact_prefix="$dir/artifacts/" -print_final_stats=1 "${dict[@]}" "$dir/corpus"
  } >"$dir/log" 2>&1
}

failed=()
pids=()
names=()
reap() {
  local i=$1
  if wait "${pids[$i]}"; then
    local execs
    execs=$(grep -m1 'stat::number_of_executed_units' "$work/${names[$i]}/log" | awk '{print $2}')
    echo "fuzz ${names[$i]}: OK (${execs:-?} executions in ${secs}s)" >&2
  else
    failed+=("${names[$i]}")
  fi
}
for t in "${targets[@]}"; do
  if ((${#pids[@]} >= jobs)); then
    reap 0
    pids=("${pids[@]:1}")
    names=("${names[@]:1}")
  fi
  fuzz_one "$t" &
  pids+=($!)
  names+=("$t")
done
for i in "${!pids[@]}"; do reap "$i"; done

if ((${#failed[@]})); then
  for t in "${failed[@]}"; do
    echo "== fuzz $t FAILED; its log ($work/$t/log) ends:" >&2
    tail -n 60 "$work/$t/log" >&2
    found=0
    for a in "$work/$t"/artifacts/*; do
      [[ -e "$a" ]] || continue
      found=1
      echo "fuzz $t: input that fails: $a (replay: $build/bin/fuzz_$t $a)" >&2
    done
    if ((!found)); then
      # A saved input (step 1): libFuzzer named it last before failing.
      a=$(grep '^Running: ' "$work/$t/log" | tail -n 1 | cut -d' ' -f2-)
      [[ -n "$a" ]] && echo "fuzz $t: input that fails: $a (replay: $build/bin/fuzz_$t $a)" >&2
    fi
  done
  echo "fuzz.sh: findings kept in $work (docs/fuzzing.md: how to add one to tests/fuzz/findings)" >&2
  exit 1
fi
[[ -n "${TRIBUTARY_FUZZ_WORK:-}" ]] || rm -rf "$work"
echo "fuzz.sh: ${targets[*]}: no finding in ${secs}s each" >&2
