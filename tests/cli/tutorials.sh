#!/usr/bin/env bash
# Runs every tutorial of docs/tutorials/ as written: each ```sh block of a
# page, in order, as one bash script (set -euo pipefail) in a fresh directory
# that looks like the top of a built source tree (build/ is this build,
# scripts/ examples/ docs/ the sources). A command that fails fails the test,
# naming the page; so the tutorials cannot rot.
# Usage: tutorials.sh PATH/TO/build/bin/tributary SOURCE_DIR [PAGE.md ...]
set -euo pipefail
T=$1
SRC=$(cd "$2" && pwd -P)
BUILD=$(cd "$(dirname "$T")/.." && pwd -P)
shift 2
pages=("$@")
((${#pages[@]})) || pages=("$SRC"/docs/tutorials/*.md)
unset TRIBUTARY_PLUGIN_PATH
failed=0
for page in "${pages[@]}"; do
  name=$(basename "$page" .md)
  dir=$(mktemp -d)
  ln -s "$BUILD" "$dir/build"
  for d in scripts examples docs lib plugins streams proto cmake CMakeLists.txt; do ln -s "$SRC/$d" "$dir/$d"; done
  # The page's sh blocks, in order.
  /usr/bin/python3 - "$page" >"$dir/tutorial.sh" <<'PYEOF'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"^```sh\n(.*?)^```", text, flags=re.S | re.M)
print("set -euo pipefail")
for i, b in enumerate(blocks):
    print("echo '--- block %d' >&2" % (i + 1))
    print(b)
PYEOF
  blocks=$(grep -c "^echo '--- block" "$dir/tutorial.sh" || true)
  start=$(date +%s)
  if (cd "$dir" && timeout 600 bash tutorial.sh >"$dir/out.log" 2>&1); then
    echo "tutorial $name: OK ($blocks blocks, $(($(date +%s) - start)) s)"
  else
    echo "FAIL: tutorial $name (docs/tutorials/$name.md), output:" >&2
    tail -n 40 "$dir/out.log" >&2
    failed=1
  fi
  # (Anything a page left running is stopped with its directory.)
  pkill -f "$dir/" 2>/dev/null || true
  rm -rf "$dir"
done
exit $failed
