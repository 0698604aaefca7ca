#!/usr/bin/env bash
# Sets the machine up and runs everything CI runs: lint, the check that the
# committed BPF objects match the sources, and the full test suite (as root:
# BPF programs, network namespaces).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1-}" in
-h | --help)
	cat <<'USAGE'
Usage: sudo ./scripts/test.sh

Sets the machine up (scripts/setup.sh: Debian packages, Go tools, Kafka's
jars) and runs everything CI runs (make test): lint, the check that the
committed BPF objects match bpf/, every test as root, then the BPF tests
on Debian's Linux 6.1 and 6.12 under qemu (~70 min on 2 vCPUs).
Parts alone: make lint, make check-generate, go test ./...,
scripts/vmtests.sh --help.
USAGE
	exit 0
	;;
"") ;;
*)
	echo "test.sh: takes no arguments (got '$1'); see --help" >&2
	exit 2
	;;
esac
./scripts/setup.sh
make test
