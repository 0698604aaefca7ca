# rttscope build, test and maintenance targets. Most need root (BPF, netns).
GO      ?= go
BIN     ?= bin/rttscope
BPF_SRC := $(filter-out bpf/vmlinux.h,$(wildcard bpf/*.c bpf/*.h))
GO_PKGS := ./...
# vmtest: kernels (6.1, 6.12, a linux-image-... package or an extracted dir)
# and packages under internal/ whose tests run in the VMs
VM_KERNELS ?= 6.1 6.12
VM_PKGS    ?= loader replay monitor

# golangci-lint, pinned: `make lint` builds it from the module proxy into
# bin/tools when missing or at another version (slow: several minutes on two
# cores; scripts/setup.sh does it once). .golangci.yml configures it.
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT         := $(CURDIR)/bin/tools/golangci-lint

# The BPF compiler, pinned so that check-generate compares objects byte for
# byte whatever the host's `clang` is: Debian bookworm's clang-14 (14.0.6,
# installed by scripts/setup.sh). Of bookworm's clang-13, -14, -15 and -16
# only clang-14 gives the committed objects; the others compile different
# code (more or fewer instructions) that the verifier also accepts
# (docs/design.md). The instruction set is pinned too: -mcpu=v1 in
# internal/probe/gen.go, bpf2go's default.
BPF_CLANG ?= clang-14

.PHONY: all build generate generate-proto check-generate test test-go lint lint-tool fmt bench demo setup clean vmlinux vmtest vmtest-ci

all: build

## build: the static rttscope binary (no clang or cgo: BPF objects are committed;
##        GOARCH=arm64 make build cross-compiles)
build:
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/rttscope

## generate: rebuild the BPF objects and Go bindings from bpf/ (needs $(BPF_CLANG)),
##           and the protobuf code of the Kafka sink's schema (generate-proto)
generate: generate-proto
	@command -v $(BPF_CLANG) >/dev/null || \
		{ echo "$(BPF_CLANG) not found: run scripts/setup.sh (or set BPF_CLANG)"; exit 1; }
	cd internal/probe && BPF_CLANG=$(BPF_CLANG) $(GO) generate ./...

## check-generate: fail when the committed BPF objects or protobuf code differ from the sources
check-generate: generate
	@git diff --exit-code --stat -- internal/probe internal/recordpb || \
		{ echo "generated code is stale: run 'make generate' and commit internal/probe and internal/recordpb"; exit 1; }

## generate-proto: internal/recordpb from proto/rttscope/v1/records.proto, with
##                 Debian bookworm's protoc (3.21.12, scripts/setup.sh) and the
##                 protoc-gen-go that go.mod pins (a tool of the module)
generate-proto:
	@command -v protoc >/dev/null || { echo "protoc not found: run scripts/setup.sh"; exit 1; }
	$(GO) build -o bin/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go
	protoc --plugin=protoc-gen-go=bin/protoc-gen-go -I proto \
		--go_out=. --go_opt=module=github.com/rttscope/rttscope rttscope/v1/records.proto

## vmlinux: refresh bpf/vmlinux.h from the running kernel's BTF
vmlinux:
	bpftool btf dump file /sys/kernel/btf/vmlinux format c > bpf/vmlinux.h

## lint: golangci-lint (gofmt, goimports, errcheck, errorlint, misspell,
##       staticcheck, unused, ...: .golangci.yml), go vet and clang-format
##       (kernel style) checks
lint: lint-tool
	$(GOLANGCI_LINT) run $(GO_PKGS)
	$(GO) vet $(GO_PKGS)
	clang-format --style=file --dry-run --Werror $(BPF_SRC)

## lint-tool: install golangci-lint $(GOLANGCI_LINT_VERSION) into bin/tools unless it is there
lint-tool:
	@if [ "$$($(GOLANGCI_LINT) version --short 2>/dev/null)" != "$(GOLANGCI_LINT_VERSION:v%=%)" ]; then \
		echo "installing golangci-lint $(GOLANGCI_LINT_VERSION) into bin/tools (built from source: several minutes)"; \
		GOBIN=$(CURDIR)/bin/tools $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION); \
	fi

## fmt: format Go (gofmt, goimports with the local prefix) and BPF C sources in place
fmt: lint-tool
	$(GOLANGCI_LINT) fmt $(GO_PKGS)
	clang-format --style=file -i $(BPF_SRC)

## test-go: the Go test suite (BPF unit tests, lab integration tests; root)
test-go:
	$(GO) test -count=1 -p 1 -timeout 30m $(GO_PKGS)

## test: everything CI runs: lint, generated-code drift, the test suite on
##       this kernel, then the BPF suites on Debian's 6.1 and 6.12 kernels
##       under qemu (about 25 min: see docs/kernels.md)
test: lint check-generate test-go vmtest-ci

# CI's VM share: everything on 6.1 (the oldest kernel, ~31 min under TCG),
# on 6.12 the loader, the monitor lab and the replay tests of state,
# eviction and fallbacks (the full 6.12 run is `make vmtest`, ~25 min more).
# The PDM programs' tests on 6.1 too (~2 min; not the lab tests: TCG's
# noise alone can break TestLabTshark's 0.5 ms tolerances, and it cannot
# carry TestLabBulkRetransmits' 50 Mbit/s transfers), in the same boot the
# CLI's attach and signal tests (6.1 attaches with clsact, which only an
# orderly exit removes; ~1 min).
VM_CI_612_REPLAY := ^(TestFallbacksSameOutput|TestSnapshotEqualsKernelSummary|TestCleanupNone|TestFlowTimeout|TestTimestampTimeout|TestOverloadEviction|TestTCPTimestampMatch|TestFlowSummaryMatchesSamples)$$
VM_CI_61_CLI := ^(TestCLIMonitorStopsInOrderOnSIGPIPE|TestCLISignals|TestCLIUnknownInterface|TestCLINativeXDPUnsupported|TestPDMAttachAndUndo)$$
vmtest-ci:
	./scripts/vmtests.sh 6.1
	./scripts/vmtests.sh --pkgs 'pdm cmd/rttscope' --skip 'pdm=^(TestLabTshark|TestLabBulkRetransmits)$$' --run 'cmd/rttscope=$(VM_CI_61_CLI)' 6.1
	./scripts/vmtests.sh --run 'replay=$(VM_CI_612_REPLAY)' 6.12

## vmtest: the loader/replay/monitor tests on Debian's 6.1 and 6.12 kernels under
##         qemu (TCG; root; slow: see docs/kernels.md). VM_KERNELS, VM_PKGS select.
vmtest:
	VM_KERNELS="$(VM_KERNELS)" VM_PKGS="$(VM_PKGS)" ./scripts/vmtests.sh

## bench: per-packet BPF cost and overhead, then the PDM programs' cost and
##        TCP throughput with PDM off/on (results under bench/results/), then
##        events/s and bytes/sample of each sink: files, Kafka (a real broker),
##        metrics (docs/files.md, docs/sinks.md)
bench:
	$(GO) run ./cmd/rttscope bench
	$(GO) run ./cmd/rttscope pdm bench
	$(GO) test -run '^$$' -bench 'FileSinks' -benchtime 1000000x ./internal/parquetout
	$(GO) test -run '^$$' -bench 'Sinks|MetricsAggregates' -benchtime 300000x ./internal/sink

## demo: build a namespace lab with two paths and show rttscope measuring them
demo: build
	./$(BIN) demo

## setup: install what building and testing need (Debian; root)
setup:
	./scripts/setup.sh

clean:
	rm -rf bin
