#!/usr/bin/env bash
# Sets the machine up, builds rttscope and runs the demo: a client, a
# middlebox and two servers in network namespaces, with paths of 10 ms and
# 40 ms round trip, measured passively by rttscope on the middlebox.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
make build
exec ./bin/rttscope demo "$@"
