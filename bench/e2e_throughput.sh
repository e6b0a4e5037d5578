#!/bin/sh
# End-to-end throughput of the program (train ncll/hinge/nll, eval) on synthetic
# streams at 10k and 1M terms; see e2e_throughput.py --help and RESULTS.md.
exec python3 "$(dirname "$0")/e2e_throughput.py" "$@"
