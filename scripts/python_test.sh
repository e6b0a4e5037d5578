#!/usr/bin/env bash
# Tests the Python package as a user installs it (README "Python"): a fresh
# venv of Debian's python3 with the system site packages (numpy, scipy,
# scikit-learn, matplotlib from apt), `pip install --no-build-isolation .`
# from the repository root, then tests/python run from another directory so
# that `import tributary` finds the installed package, not the source tree.
# The side-by-side tests run the program built in $TRIBUTARY_BUILD_DIR
# (default build/).
# Usage: scripts/python_test.sh [pytest args...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export TRIBUTARY_BUILD_DIR="$(cd "${TRIBUTARY_BUILD_DIR:-$root/build}" && pwd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Debian's interpreter, the one python3-* packages are built for (python3 on
# PATH may be another).
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
(cd "$root" && "$work/venv/bin/pip" install --no-build-isolation --no-input -q .)
cd "$work"
"$work/venv/bin/python" -c 'import tributary, sys; assert "site-packages" in tributary.__file__, tributary.__file__'
MPLBACKEND=Agg "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$root/tests/python" "$@"
