#!/usr/bin/env bash
# Installs what rttscope needs to build, test and run its lab on Debian or
# Ubuntu: clang-14/llvm-14 (the compiler `make generate` is pinned to, see
# the Makefile) and libbpf headers (only for `make generate`), iproute2,
# ethtool, tcpdump and tshark (tests), nftables (the flowtable mode of
# `rttscope bench forwarding`), chromium (the bench report test renders a
# report headless), dnsmasq and dig (the DNS source's lab
# test), make, python3-pip, perf (`rttscope bench profile`), pyarrow
# (Parquet files read back by an independent reader) and aioquic (a QUIC
# peer whose spin bit spins) from PyPI, protoc (`make generate-proto`),
# the sinks' test servers: Prometheus (Debian's package) and an Apache
# Kafka broker (Java 17 and the kafka_2.13 jars from Maven Central, via
# mvn: scripts/kafka/fetch.sh, cached in /var/cache/rttscope/kafka);
# then the pinned golangci-lint (`make lint-tool`). Go >= 1.21 must be
# present; the go command then fetches the toolchain go.mod asks for from
# the module proxy.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
	echo "setup.sh: run as root (sudo $0)" >&2
	exit 1
fi

packages=(make clang-14 llvm-14 libbpf-dev bpftool clang-format iproute2 ethtool
	iputils-ping tcpdump tshark nftables chromium git ca-certificates python3-pip
	protobuf-compiler openjdk-17-jre-headless maven dnsmasq-base bind9-dnsutils)
# perf, for `rttscope bench profile` and its test: Debian's linux-perf;
# Ubuntu ships it as linux-tools-common (plus its kernel's linux-tools-*).
if grep -q '^ID=ubuntu' /etc/os-release 2>/dev/null; then
	packages+=(linux-tools-common)
else
	packages+=(linux-perf)
fi
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	echo "setup.sh: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	# tshark asks whether non-root users may capture; answer no.
	echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
	apt-get update -qq
	apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! command -v go >/dev/null 2>&1; then
	echo "setup.sh: Go is not installed: install Go >= 1.21 (e.g. from your distribution's backports); it fetches the toolchain go.mod requires" >&2
	exit 1
fi
go_minor=$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
if [ "${go_minor:-0}" -lt 21 ]; then
	echo "setup.sh: Go $(go env GOVERSION) is too old: need >= 1.21" >&2
	exit 1
fi
go mod download
# pyarrow reads back the Parquet output in cmd/rttscope's tests.
if ! python3 -c 'import pyarrow' 2>/dev/null; then
	echo "setup.sh: pyarrow from PyPI (tests read Parquet back with it)" >&2
	python3 -m pip install -q pyarrow 2>/dev/null || python3 -m pip install -q --break-system-packages pyarrow
fi
# aioquic is the QUIC peer whose spin bit the quic_spin source's lab test
# observes (it spins on every connection; internal/traffic/quicpeer.py).
if ! python3 -c 'import aioquic' 2>/dev/null; then
	echo "setup.sh: aioquic from PyPI (a QUIC peer that spins, for the spin bit lab test)" >&2
	python3 -m pip install -q aioquic 2>/dev/null || python3 -m pip install -q --break-system-packages aioquic
fi
# The Kafka broker the Kafka sink's tests start (internal/testservers).
echo "setup.sh: Apache Kafka jars for the sink tests (scripts/kafka/fetch.sh)" >&2
"$(dirname "$0")/kafka/fetch.sh"
# Prometheus, without the exporters it recommends. The package starts a
# server of its own where systemd runs: the tests start theirs on free
# ports, so a server this script installed is stopped and disabled.
if ! dpkg-query -W -f='${Status}' prometheus 2>/dev/null | grep -q "install ok installed"; then
	echo "setup.sh: installing prometheus (the metrics sink's tests)" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
	if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
		systemctl disable --now prometheus >/dev/null 2>&1 || true
	fi
fi
# The pinned golangci-lint that `make lint` runs, built once here (from the
# module proxy into bin/tools) so that lint runs do not pay for it.
echo "setup.sh: golangci-lint for make lint (bin/tools; the first build takes several minutes)" >&2
make -s -C "$(dirname "$0")/.." lint-tool
echo "setup.sh: ready ($(go env GOVERSION), $(clang-14 --version | head -n1))" >&2
