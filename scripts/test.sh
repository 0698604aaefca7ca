#!/usr/bin/env bash
# Sets the machine up and runs everything CI runs: lint, the check that the
# committed BPF objects match the sources, and the full test suite (as root:
# BPF programs, network namespaces).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
make test
