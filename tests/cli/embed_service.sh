#!/usr/bin/env bash
# The embedding API end to end, as a program outside this repository sees it
# (issue 18): examples/embed-service, an HTTP service that embeds the
# learner (tributary/live_model.h) instead of talking to `tributary serve`:
#  1. `cmake --install` this build tree into a fresh temporary prefix;
#  2. copy the example outside the source tree, configure it against the
#     prefix only (-DCMAKE_PREFIX_PATH), check that nothing points into the
#     source or build tree, build it with warnings as errors;
#  3. run its own test (concurrent clients: one teaching, three predicting);
#  4. run the service program itself: teach it over HTTP, predict, snapshot,
#     and stop it with SIGTERM (it must exit 0).
# Usage: embed_service.sh PATH/TO/build/bin/tributary SOURCE_DIR
set -euo pipefail
T=$1
SRC=$(cd "$2" && pwd -P)
BUILD=$(cd "$(dirname "$T")/.." && pwd -P)
unset TRIBUTARY_PLUGIN_PATH Tributary_DIR CMAKE_PREFIX_PATH PKG_CONFIG_PATH
start=$(date +%s)
dir=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
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
for f in include/tributary/live_model.h include/tributary/input_document.h lib/cmake/Tributary/TributaryConfig.cmake; do
  [[ -f $prefix/$f ]] || fail "the install lacks $f"
done

# ---- 2. The example, outside the source tree, against the install only.
ex=$dir/embed-service
exb=$dir/embed-service-build
cp -r "$SRC/examples/embed-service" "$ex"
rm -rf "$ex/build"
cmake -S "$ex" -B "$exb" "${gen[@]}" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DEMBED_SERVICE_WERROR=ON \
  >"$dir/configure.log" 2>&1 || { cat "$dir/configure.log" >&2; fail "configuring the example against $prefix"; }
found_dir=$(sed -n 's/^Tributary_DIR:PATH=//p' "$exb/CMakeCache.txt")
[[ $(cd "$found_dir" && pwd -P) == "$prefix/lib/cmake/Tributary" ]] ||
  fail "find_package(Tributary) found '$found_dir', expected $prefix/lib/cmake/Tributary"
for tree in "$SRC" "$BUILD"; do
  for f in compile_commands.json CMakeCache.txt build.ninja; do
    [[ -f $exb/$f ]] || continue
    if grep -n -F "$tree/" "$exb/$f" >&2; then
      fail "the example's $f (above) points into $tree"
    fi
  done
done
cmake --build "$exb" -j2 >"$dir/build.log" 2>&1 || { cat "$dir/build.log" >&2; fail "building the example"; }

# ---- 3. Its own test.
ctest --test-dir "$exb" --output-on-failure >"$dir/ctest.log" 2>&1 || { cat "$dir/ctest.log" >&2; fail "the example's own test"; }
grep -E "tests passed" "$dir/ctest.log"

# ---- 4. The program.
"$exb/embed_service" --port 0 --snapshot "$dir/model.trib" >"$dir/service.out" 2>"$dir/service.err" &
pid=$!
# (Up to 30 s: a loaded 2-core machine; a service that died is not waited for.)
for _ in $(seq 300); do
  grep -q "listening on" "$dir/service.out" && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
port=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$dir/service.out")
[[ -n $port ]] || { cat "$dir/service.err" >&2; fail "the service did not say where it listens"; }
/usr/bin/python3 - "$port" <<'PYEOF' || fail "the service's answers (above)"
import json, sys, urllib.request, urllib.error
base = "http://127.0.0.1:%s" % sys.argv[1]
def post(path, body):
    req = urllib.request.Request(base + path, data=body.encode(), method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
lines = []
for i in range(200):
    lines.append("green\tgrass leaf tree forest moss %d" % (i % 7))
    lines.append("blue\tsea sky ocean wave water %d" % (i % 5))
status, r = post("/learn", "\n".join(lines) + "\n")
assert status == 200 and r == {"learned": 400, "version": 400}, (status, r)
status, r = post("/predict", "the ocean and the sky")
assert status == 200 and r["label"] == "blue" and r["version"] == 400, (status, r)
status, r = post("/predict", "moss in the forest")
assert status == 200 and r["label"] == "green", (status, r)
status, r = post("/snapshot", "")
assert status == 200 and r["version"] == 400, (status, r)
status, r = post("/learn", "no tab\n")
assert status == 400 and "line 1" in r["error"], (status, r)
PYEOF
[[ -s $dir/model.trib ]] || fail "no snapshot at $dir/model.trib"
# The snapshot is a model the installed program reads.
"$prefix/bin/tributary" inspect --json --model "$dir/model.trib" >"$dir/inspect.json" 2>&1 ||
  { cat "$dir/inspect.json" >&2; fail "tributary inspect on the service's snapshot"; }
grep -q '"green"' "$dir/inspect.json" && grep -q '"blue"' "$dir/inspect.json" ||
  { cat "$dir/inspect.json" >&2; fail "the snapshot lacks the classes the service learned"; }
kill -TERM $pid
wait $pid || fail "the service exited with status $? on SIGTERM"
pid=
echo "embed_service: OK in $(($(date +%s) - start)) s"
