# Sourced by the shell tests that drive the Python client
# (examples/python-client): picks a Python with Debian's protobuf runtime
# (python3-protobuf; the first python3 on PATH may be another installation
# without it) into $PY and exports what the client module needs.
# Expects $SRC (the source tree) and $dir (the test's scratch directory).
PY=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import google.protobuf' 2>/dev/null; then PY=$p; break; fi
done
[[ -n "$PY" ]] || { echo "FAIL: no python3 with google.protobuf (apt-get install python3-protobuf)" >&2; exit 1; }
export TRIBUTARY_PROTO="$SRC/proto/tributary/v1/tributary.proto"
export TRIBUTARY_PB2_DIR="$dir/pb2"
export PYTHONPATH="$SRC/examples/python-client${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1  # keep the source tree clean
