#!/usr/bin/env bash
# Installs the Debian packages Tributary needs, only those missing.
# Usage: scripts/install_deps.sh [--demo]   (run as root; --demo adds the peers)
# The small real corpora (fortunes, bible-kjv) are always installed: tests use them.
set -euo pipefail
pkgs=(cmake ninja-build g++ pkg-config python3 python3-protobuf
      libboost-dev libeigen3-dev libprotobuf-dev protobuf-compiler zlib1g-dev libutf8proc-dev libisal-dev
      libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
      # the Redis Streams source (hiredis) and the real server its tests start
      libhiredis-dev redis-server
      # the Kafka source (librdkafka's C API; its tests use librdkafka's mock cluster)
      librdkafka-dev
      # train --distributed (Open MPI: the library, mpirun for its tests)
      libopenmpi-dev openmpi-bin
      fortunes fortunes-min bible-kjv
      # scripts/fuzz.sh: clang with libFuzzer and the sanitizer runtimes
      # (libclang-rt-14-dev is only a Recommends of clang-14).
      clang-14 libclang-rt-14-dev
      # the API reference from the public headers (docs/Doxyfile.in, test docs.api_reference)
      doxygen
      # the Python package (python/): pybind11, a venv with pip for the
      # offline install, numpy/scipy/scikit-learn for tributary.sklearn and
      # its tests, matplotlib for tributary.plot and `prequential --plot`
      python3-dev python3-venv python3-pip python3-wheel python3-setuptools pybind11-dev python3-pybind11
      python3-numpy python3-scipy python3-sklearn python3-pandas python3-matplotlib python3-pytest
      # the status page's browser test (tests/server_status_page_test.cc)
      chromium
      # the Prometheus scrape test (tests/cli/prometheus.sh)
      prometheus
      # TLS on the HTTP port (OpenSSL); tests/cli/tls.sh makes its certificates
      # with the openssl program and fetches with curl
      libssl-dev openssl curl
      # systemd-analyze: tests/cli/deploy.sh verifies deploy/systemd/tributary.service
      # (a container base image may not have it)
      systemd)
if [[ "${1:-}" == "--demo" ]]; then
  pkgs+=(liblinear-tools fasttext)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}" >&2
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
