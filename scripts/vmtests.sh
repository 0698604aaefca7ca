#!/usr/bin/env bash
# vmtests.sh: build rttscope's Go test binaries once and run them on other
# kernels, one qemu boot per kernel (scripts/vmtest.sh). See --help.
set -euo pipefail

prog=vmtests.sh
usage() {
	cat <<'EOF'
Usage: scripts/vmtests.sh [OPTIONS] [KERNEL...]

Builds the test binaries of the chosen packages on the host (go test -c) and
runs them, one package after the other, inside one qemu boot per KERNEL
(see scripts/vmtest.sh --help for KERNEL; default: $VM_KERNELS or "6.1 6.12").
Tests whose timing tolerances do not survive emulation are skipped (see
--skip). Prints one summary line per kernel; a kernel that cannot be
downloaded or booted is reported as SKIPPED with the reason.

Options:
  --pkgs "P..."      packages under internal/, or paths such as cmd/rttscope
                     (default: $VM_PKGS or
                     "loader replay monitor")
  --run PKG=REGEX    -test.run for PKG (default: all tests)
  --skip PKG=REGEX   -test.skip for PKG, replacing the default list
  --timeout DUR      per-kernel guest timeout (default 75m)
  --mem SIZE         guest memory (default 3G)
  --out DIR          DIR/KERNEL.log: the guest's output; DIR/KERNEL.failures:
                     each failed test with its first message (default bin/vmtest)
  -h, --help         this text

Exit status: 0 when every kernel ran and passed; 1 when a test failed or a
guest timed out or crashed; 2 when nothing failed but a kernel was SKIPPED.
EOF
}

# Timing-sensitive lab tests (sub-millisecond or few-millisecond tolerances,
# packet floods) fail under TCG from emulation noise alone.
declare -A skip_re=(
	[replay]='^TestLiveVersusReplay$'
	[monitor]='^(TestLabICMPMatchesPinger|TestLabTCPBulkMedian|TestFloodKeepsEstablishedFlows)$'
)
declare -A run_re=()

# pkgdir PKG: a package's directory in the repository (a bare name is
# under internal/); testbin PKG: its test binary's file name.
pkgdir() { case $1 in */*) echo "$1" ;; *) echo "internal/$1" ;; esac; }
testbin() { echo "${1//\//_}.test"; }

# --in-guest BINDIR REPO PKG=RUN=SKIP...: runs inside the VM (vmtest.sh).
if [ "${1:-}" = --in-guest ]; then
	bindir=$2 repo=$3
	shift 3
	export GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-buildvcs=false
	rc=0
	for spec in "$@"; do
		pkg=${spec%%=*} rest=${spec#*=}
		run=${rest%%=*} skip=${rest#*=}
		args=(-test.v -test.count=1 -test.timeout=65m)
		[ -n "$run" ] && args+=("-test.run=$run")
		[ -n "$skip" ] && args+=("-test.skip=$skip")
		echo "vmtests: package $pkg: ${args[*]}"
		start=$(date +%s)
		set +e
		(cd "$repo/$(pkgdir "$pkg")" && "$bindir/$(testbin "$pkg")" "${args[@]}" 2>&1)
		prc=$?
		set -e
		echo "vmtests: package $pkg exit $prc in $(($(date +%s) - start))s"
		[ "$prc" = 0 ] || rc=1
	done
	exit "$rc"
fi

die() {
	echo "$prog: $*" >&2
	exit 2
}

repo=$(cd "$(dirname "$0")/.." && pwd)
read -r -a pkgs <<<"${VM_PKGS:-loader replay monitor}"
timeout_dur=75m
mem=3G
out=$repo/bin/vmtest
kernels=()
while [ $# -gt 0 ]; do
	case $1 in
	-h | --help)
		usage
		exit 0
		;;
	--pkgs)
		[ $# -ge 2 ] || die "--pkgs needs a list"
		read -r -a pkgs <<<"$2"
		shift 2
		;;
	--run | --skip)
		if [ $# -lt 2 ] || [[ $2 != *=* ]]; then die "$1 needs PKG=REGEX"; fi
		if [ "$1" = --run ]; then run_re[${2%%=*}]=${2#*=}; else skip_re[${2%%=*}]=${2#*=}; fi
		shift 2
		;;
	--timeout)
		[ $# -ge 2 ] || die "--timeout needs a duration"
		timeout_dur=$2
		shift 2
		;;
	--mem)
		[ $# -ge 2 ] || die "--mem needs a size"
		mem=$2
		shift 2
		;;
	--out)
		[ $# -ge 2 ] || die "--out needs a directory"
		out=$2
		shift 2
		;;
	-*) die "unknown option $1 (see --help)" ;;
	*)
		kernels+=("$1")
		shift
		;;
	esac
done
if [ ${#kernels[@]} -eq 0 ]; then read -r -a kernels <<<"${VM_KERNELS:-6.1 6.12}"; fi
[ ${#pkgs[@]} -gt 0 ] || die "no packages"
for p in "${pkgs[@]}"; do
	[[ $p =~ ^[a-z0-9_]+(/[a-z0-9_]+)*$ ]] || die "bad package name '$p'"
	[ -d "$repo/$(pkgdir "$p")" ] || die "no package $(pkgdir "$p")"
done
for r in "${run_re[@]}" "${skip_re[@]}"; do
	[[ $r != *=* ]] || die "a -run/-skip regex must not contain '=': $r"
done
[ "$(id -u)" -eq 0 ] || die "run as root (qemu, 9p, the tests load BPF)"
command -v go >/dev/null || die "go not found in PATH"

bindir=$(mktemp -d /tmp/vmtests-bin.XXXXXX)
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() { rm -rf "$bindir"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$out"

cd "$repo"
echo "$prog: building test binaries for ${pkgs[*]}" >&2
for p in "${pkgs[@]}"; do
	go test -c -o "$bindir/$(testbin "$p")" "./$(pkgdir "$p")" || die "go test -c ./$(pkgdir "$p") failed"
done
# The monitor tests build cmd/rttscope in the guest: fill the host's build
# cache so that the guest (which sees it read-only) only links.
go build -o /dev/null ./cmd/rttscope || die "go build ./cmd/rttscope failed"

specs=()
for p in "${pkgs[@]}"; do specs+=("$p=${run_re[$p]:-}=${skip_re[$p]:-}"); done

summaries=()
any_fail=0
any_skip=0
for k in "${kernels[@]}"; do
	echo "$prog: === kernel $k ===" >&2
	safe=${k//\//_}
	log=$out/$safe.log
	if ! kdir=$(scripts/vmtest.sh --resolve "$k" 2>"$out/$safe.err"); then
		reason=$(tail -n1 "$out/$safe.err")
		summaries+=("$k: SKIPPED (${reason#vmtest.sh: })")
		any_skip=1
		continue
	fi
	start=$(date +%s)
	set +e
	scripts/vmtest.sh --timeout "$timeout_dur" --mem "$mem" "$kdir" -- \
		"$repo/scripts/vmtests.sh" --in-guest "$bindir" "$repo" "${specs[@]}" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	set -e
	secs=$(($(date +%s) - start))
	name=$(basename "$kdir")
	name=${name#linux-image-}
	name=${name%-unsigned}
	boot=$(sed -n 's/^vmtest-init: .* up after \([0-9.]*\)s.*/\1s/p' "$log" | head -n1)
	case $rc in
	125)
		summaries+=("$name: SKIPPED (guest did not boot: $(grep '^vmtest.sh:' "$log" | tail -n1))")
		any_skip=1
		continue
		;;
	124) state=TIMEOUT any_fail=1 ;;
	123) state=CRASHED any_fail=1 ;;
	0) state=PASS ;;
	*) state=FAIL any_fail=1 ;;
	esac
	line="$name: $state boot ${boot:-?} total ${secs}s;"
	# Each failed top-level test with the first message logged while it ran
	# (and the line after it when that message ends in a colon).
	awk '
		cont { m = $0; sub(/^ +/, "", m); first[cur] = first[cur] " " m; cont = 0; next }
		/^=== RUN   / { split($3, a, "/"); cur = a[1]; next }
		/^--- FAIL: / { printf "%s\t%s\n", $3, ($3 in first ? first[$3] : "(no message)"); next }
		/^ +[A-Za-z0-9_]+_test\.go:[0-9]+: / && cur != "" && !(cur in first) {
			m = $0; sub(/^ +/, "", m); first[cur] = m; cont = (m ~ /:$/)
		}
	' "$log" >"$out/$safe.failures"
	for p in "${pkgs[@]}"; do
		prc=$(sed -n "s|^vmtests: package $p exit \\([0-9]*\\) in \\([0-9]*\\)s.*|\\1 \\2|p" "$log" | tail -n1)
		# Count top-level results between this package's start and end markers.
		counts=$(awk -v p="$p" '
			$0 ~ "^vmtests: package " p ": " { on = 1; next }
			$0 ~ "^vmtests: package " p " exit " { on = 0 }
			on && /^--- PASS: / { ok++ }
			on && /^--- FAIL: / { bad++; names = names " " $3 }
			on && /^--- SKIP: / { sk++ }
			END { printf "%d pass, %d fail, %d skip%s", ok, bad, sk, (bad ? ":" names : "") }' "$log")
		if [ -z "$prc" ]; then
			line+=" $p not finished ($counts);"
		else
			read -r pexit psecs <<<"$prc"
			if [ "$pexit" = 0 ]; then pstate=ok; else pstate="FAIL($pexit)"; fi
			line+=" $p $pstate ${psecs}s ($counts);"
		fi
	done
	summaries+=("$line log $log, failures $out/$safe.failures")
done

echo
echo "$prog: summary"
for s in "${summaries[@]}"; do echo "  $s"; done
if [ "$any_fail" = 1 ]; then exit 1; fi
if [ "$any_skip" = 1 ]; then exit 2; fi
exit 0
