#!/usr/bin/env bash
# The plugin SDK end to end, as a plugin author outside this repository sees it:
#  1. `cmake --install` this build tree into a fresh temporary prefix;
#  2. copy examples/custom-family (the "poisson-nb" family) outside the source
#     tree, configure it with -DCMAKE_PREFIX_PATH=<prefix> only, check that no
#     include path points into the source or build tree, build it, run its
#     own unit tests; build it once more with pkg-config flags only;
#  3. with the INSTALLED program: `plugins` lists it through
#     TRIBUTARY_PLUGIN_PATH; train it by name with nll, ncll and hinge and by
#     path, evaluate every model, and require an accuracy that a broken family
#     misses (the data are 4 classes drawn from a Poisson naive Bayes model,
#     Bayes-optimal accuracy ~0.93; two classes differ only in length, so a
#     family that does not model the absent words' rates, e.g. the
#     multinomial, stays near 0.70).
# Usage: sdk_example.sh PATH/TO/build/bin/tributary SOURCE_DIR
set -euo pipefail
T=$1
SRC=$(cd "$2" && pwd -P)
BUILD=$(cd "$(dirname "$T")/.." && pwd -P)
unset TRIBUTARY_PLUGIN_PATH Tributary_DIR CMAKE_PREFIX_PATH PKG_CONFIG_PATH
start=$(date +%s)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
dir=$(cd "$dir" && pwd -P)
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
case "$dir/" in "$SRC"/* | "$BUILD"/*) fail "temporary directory $dir is inside the source or build tree" ;; esac
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)

# ---- 1. Install into a fresh prefix.
prefix=$dir/prefix
cmake --install "$BUILD" --prefix "$prefix" >"$dir/install.log" 2>&1 || { cat "$dir/install.log" >&2; fail "cmake --install"; }
PT=$prefix/bin/tributary
[[ -x $PT ]] || fail "no installed program at $PT"
for f in include/tributary/plugin_abi.h include/tributary/plugin_sdk.h lib/cmake/Tributary/TributaryConfig.cmake \
         lib/pkgconfig/tributary.pc; do
  [[ -f $prefix/$f ]] || fail "the install lacks $f"
done
# The installed program finds the installed built-in plugins by itself.
"$PT" plugins --json >"$dir/builtin.json"
python3 - "$dir/builtin.json" "$prefix" <<'EOF' || fail "the installed program does not list the installed built-in plugins"
import json, os, sys
j = json.load(open(sys.argv[1]))
plugins_dir = os.path.join(sys.argv[2], "lib", "tributary", "plugins")
found = {(p["kind"], p["name"]) for p in j["plugins"] if p["builtin"] and os.path.dirname(p["path"]) == plugins_dir}
want = {("family", "multinomial"), ("loss", "nll"), ("loss", "ncll"), ("loss", "hinge")}
sys.exit(0 if want <= found and not any(p["name"] == "poisson-nb" for p in j["plugins"]) else 1)
EOF

# ---- 2. The example, outside the source tree, against the install only.
ex=$dir/custom-family
exb=$dir/custom-family-build
cp -r "$SRC/examples/custom-family" "$ex"
rm -rf "$ex/build"
cmake -S "$ex" -B "$exb" "${gen[@]}" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DPOISSON_NB_WERROR=ON \
  >"$dir/configure.log" 2>&1 || { cat "$dir/configure.log" >&2; fail "configuring the example against $prefix"; }
found_dir=$(sed -n 's/^Tributary_DIR:PATH=//p' "$exb/CMakeCache.txt")
[[ $(cd "$found_dir" && pwd -P) == "$prefix/lib/cmake/Tributary" ]] ||
  fail "find_package(Tributary) found '$found_dir', expected $prefix/lib/cmake/Tributary"
for tree in "$SRC" "$BUILD"; do
  for f in compile_commands.json CMakeCache.txt; do
    if grep -n -F "$tree/" "$exb/$f" >&2; then
      fail "the example's $f (above) points into $tree"
    fi
  done
done
grep -q -F -- "$prefix/include" "$exb/compile_commands.json" || fail "the example does not compile against $prefix/include"
cmake --build "$exb" -j2 >"$dir/build.log" 2>&1 || { cat "$dir/build.log" >&2; fail "building the example"; }
ctest --test-dir "$exb" --output-on-failure >"$dir/ctest.log" 2>&1 || { cat "$dir/ctest.log" >&2; fail "the example's own tests"; }
grep -E "tests passed" "$dir/ctest.log"
so=$exb/tributary_family_poisson.so
[[ -f $so ]] || fail "no plugin at $so"
# Only the two entry points and the option table are exported (tributary_add_plugin:
# hidden visibility).
if command -v nm >/dev/null; then
  exported=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | grep -v '^_' | sort | tr '\n' ' ')
  [[ $exported == "tributary_plugin_info tributary_plugin_init tributary_plugin_options " ]] ||
    fail "the plugin exports: $exported"
fi

# The same plugin built without CMake, from the pkg-config file alone, as
# version 2.0.0 (used below: a snapshot of 1.0.0, another major version,
# must be refused by it).
pc_built=0
if command -v pkg-config >/dev/null && command -v c++ >/dev/null; then
  cflags=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags tributary)
  inc_ok=0
  for flag in $cflags; do
    [[ $flag == -I* && -d ${flag#-I} && $(cd "${flag#-I}" && pwd -P) == "$prefix/include" ]] && inc_ok=1
  done
  [[ $inc_ok == 1 ]] || fail "pkg-config --cflags tributary gives '$cflags', expected -I$prefix/include"
  mkdir "$dir/pc"
  # shellcheck disable=SC2086
  c++ -std=c++20 -O2 -fPIC -shared -fvisibility=hidden $cflags '-DPOISSON_NB_VERSION="2.0.0"' "$ex/poisson_nb.cc" \
    -o "$dir/pc/poisson_pc.so" || fail "building the plugin with pkg-config flags"
  TRIBUTARY_PLUGIN_PATH=$dir/pc "$PT" plugins | grep -q -P "^family\tpoisson-nb\t2\.0\.0\t" ||
    fail "the pkg-config build of the plugin is not listed"
  pc_built=1
fi

# ---- 3. The installed program loads, trains and evaluates it.
export TRIBUTARY_PLUGIN_PATH=$exb
listing=$("$PT" plugins)
echo "$listing"
grep -q -P "^family\tpoisson-nb\t1\.0\.0\t1\.[0-9]+\t\Q$so\E\$" <<<"$listing" ||
  fail "'tributary plugins' does not list poisson-nb at $so"
# Its option table reaches the installed program.
opts=$("$PT" plugins --options poisson-nb)
echo "$opts"
grep -q -P "^prior\tnumber\t1\t\(0, 1e100\]\t" <<<"$opts" && grep -q -P "^prior_docs\tnumber\t1\t" <<<"$opts" ||
  fail "'tributary plugins --options poisson-nb' does not show the plugin's options"

# The conformance checks pass on the example (rho = 0, cache, snapshot, every
# loss, concurrent scoring).
"$PT" plugin-check "$so" || fail "tributary plugin-check $so"
"$PT" plugin-check --json "$so" | python3 -c 'import json,sys; j=json.load(sys.stdin); sys.exit(0 if j["ok"] and j["name"] == "poisson-nb" else 1)' ||
  fail "tributary plugin-check --json $so"

python3 "$ex/gen_counts.py" --seed 1 --n 3000 --out "$dir/train.tsv"
python3 "$ex/gen_counts.py" --seed 2 --n 2000 --out "$dir/test.tsv"
"$PT" convert -q --format tsv --in "$dir/train.tsv" --out "$dir/train.pb"
"$PT" convert -q --format tsv --in "$dir/test.tsv" --out "$dir/test.pb"

accuracy() {  # model
  "$PT" eval --json --model "$1" --in "$dir/test.pb" | python3 -c 'import json,sys; print(json.load(sys.stdin)["accuracy"])'
}
check() {  # name min family train-flags...
  local name=$1 min=$2 family=$3
  shift 3
  "$PT" train -q --family "$family" "$@" --in "$dir/train.pb" --out "$dir/$name.trib"
  acc=$(accuracy "$dir/$name.trib")
  echo "$name: accuracy $acc (expected > $min)"
  python3 -c "import sys; sys.exit(0 if float('$acc') > $min else 1)" || fail "$name: accuracy $acc <= $min"
}
# NLL with the defaults is batch MAP. NCLL and hinge take a heavier prior
# (10 pseudo-documents per class at the base rate 0.25) and lambda 0.01 so
# that the first steps do not swamp the statistics (see the example's README).
check nll 0.85 poisson-nb --loss nll
check ncll 0.85 poisson-nb --loss ncll --prior 2.5 --opt prior_docs=10 --lambda 0.01
check hinge 0.85 poisson-nb --loss hinge --prior 2.5 --opt prior_docs=10 --lambda 0.01
# The family really models the rates: the multinomial cannot tell "short"
# from "long" documents on the same data.
multi=$("$PT" train -q --family multinomial --loss nll --in "$dir/train.pb" --out "$dir/multi.trib" && accuracy "$dir/multi.trib")
echo "multinomial nll (for comparison): accuracy $multi"
nll_acc=$(accuracy "$dir/nll.trib")
python3 -c "import sys; sys.exit(0 if float('$nll_acc') > float('$multi') + 0.1 else 1)" ||
  fail "poisson-nb (nll $nll_acc) is not clearly better than the multinomial ($multi) on length-only classes"

# By path, without the search path. The snapshot records the plugin's name
# (and its path, for the message): a model file never makes the program load
# a file, so evaluating needs the plugin on the search path (issue 13).
unset TRIBUTARY_PLUGIN_PATH
"$PT" train -q --family "$so" --loss ncll --prior 2.5 --opt prior_docs=10 --lambda 0.01 \
  --in "$dir/train.pb" --out "$dir/by-path.trib"
if "$PT" eval --model "$dir/by-path.trib" --in "$dir/test.pb" >/dev/null 2>"$dir/path.err"; then
  fail "a model trained by path loaded its plugin from the path recorded in the model"
fi
grep -q "never loaded from a path inside a model file" "$dir/path.err" ||
  { cat "$dir/path.err" >&2; fail "the refusal does not say why"; }
acc=$(TRIBUTARY_PLUGIN_PATH=$exb accuracy "$dir/by-path.trib")
echo "by-path: accuracy $acc (expected > 0.85)"
python3 -c "import sys; sys.exit(0 if float('$acc') > 0.85 else 1)" || fail "by-path: accuracy $acc <= 0.85"
# A snapshot records the plugin's version: another major version of
# poisson-nb refuses it, naming both (a newer minor version would read it).
if [[ $pc_built == 1 ]]; then
  if TRIBUTARY_PLUGIN_PATH=$dir/pc "$PT" eval --model "$dir/hinge.trib" --in "$dir/test.pb" >/dev/null 2>"$dir/ver.err"; then
    fail "a snapshot of poisson-nb 1.0.0 was evaluated by poisson-nb 2.0.0"
  fi
  grep -q "1\.0\.0" "$dir/ver.err" && grep -q "2\.0\.0" "$dir/ver.err" ||
    { cat "$dir/ver.err" >&2; fail "the version refusal does not name both versions"; }
fi
# Unknown family options are refused, naming the key.
if TRIBUTARY_PLUGIN_PATH=$exb "$PT" train -q --family poisson-nb --loss nll --opt smoothing=1 \
  --in "$dir/train.pb" --out "$dir/bad.trib" 2>"$dir/bad.err"; then
  fail "an unknown option was accepted"
fi
grep -q "smoothing" "$dir/bad.err" || { cat "$dir/bad.err" >&2; fail "the refusal does not name the option"; }
echo "sdk_example: OK in $(($(date +%s) - start)) s"
