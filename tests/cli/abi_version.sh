#!/usr/bin/env bash
# The plugin ABI version is written once, in plugin_abi.h; everything that
# states the current version says the same (issue 40: embedding.md said 1.8
# and the CMake package 1.7 while the header was 1.9):
#  - docs/plugins.md and docs/embedding.md ("X.Y today");
#  - the CMake package's TRIBUTARY_ABI_MAJOR / TRIBUTARY_ABI_MINOR (read
#    from the header at configure time).
# Usage: abi_version.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
SRC=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
major=$(sed -n 's/^#define TRIB_ABI_MAJOR \([0-9]*\)u.*/\1/p' "$SRC/lib/include/tributary/plugin_abi.h")
minor=$(sed -n 's/^#define TRIB_ABI_MINOR \([0-9]*\)u.*/\1/p' "$SRC/lib/include/tributary/plugin_abi.h")
[[ -n "$major" && -n "$minor" ]] || fail "no TRIB_ABI_MAJOR / TRIB_ABI_MINOR in plugin_abi.h"
want="$major.$minor"
for doc in docs/plugins.md docs/embedding.md; do
  # Every "N.M today" (the sentence may wrap after the number).
  found=$(tr '\n' ' ' <"$SRC/$doc" | grep -oE '[0-9]+\.[0-9]+ today' || true)
  [[ -n "$found" ]] || fail "$doc states no current ABI version ('N.M today')"
  while read -r v _; do
    [[ "$v" == "$want" ]] || fail "$doc says ABI $v today; plugin_abi.h is $want"
  done <<<"$found"
done
config="$(dirname "$T")/../TributaryConfig.cmake"
[[ -f "$config" ]] || fail "no $config (the build tree's CMake package)"
grep -q "set(TRIBUTARY_ABI_MAJOR $major)" "$config" || fail "$config: $(grep ABI_MAJOR "$config")"
grep -q "set(TRIBUTARY_ABI_MINOR $minor)" "$config" || fail "$config: $(grep ABI_MINOR "$config")"
echo "abi_version: $want everywhere"
