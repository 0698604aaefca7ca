#!/usr/bin/env bash
# vmtest.sh: boot one of Debian's kernels under qemu (TCG) and run a command
# from the host's filesystem inside it. See --help and docs/kernels.md.
set -euo pipefail

prog=vmtest.sh
usage() {
	cat <<'EOF'
Usage: scripts/vmtest.sh [OPTIONS] KERNEL -- CMD [ARGS...]

Boots KERNEL under qemu (TCG emulation, no KVM) with a busybox initramfs and
runs CMD as root inside it. The guest's root is the host's root filesystem
(shared read-only over virtio-9p) under an in-memory overlay, so everything
on the host is visible, writes stay in the guest and are lost at power-off.
CMD runs in the host's current directory with RTTSCOPE_VM=1 in its
environment; its output is streamed to stdout and vmtest.sh exits with its
exit status.

KERNEL is one of
  6.1, 6.12, X.Y       the newest Debian linux-image-X.Y...-amd64-unsigned
                       package in the apt index (downloaded and extracted
                       once into the cache, never installed)
  linux-image-...      an exact package name
  DIR                  an already extracted package (DIR/boot/vmlinuz-*,
                       DIR/lib/modules/VERSION)

Options:
  --timeout DUR   kill the guest after DUR (timeout(1) syntax; default 40m)
  --mem SIZE      guest memory (qemu -m syntax; default 3G)
  --smp N         guest CPUs (default 2)
  --env NAME=VAL  extra environment variable for CMD (repeatable)
  --keep-log DIR  copy the guest's dmesg to DIR/dmesg.txt at the end
  --resolve       only download/extract KERNEL and print its directory
  -h, --help      this text

Inside the guest: /proc, /sys, /dev, /sys/fs/bpf, debugfs, tracefs and
cgroup2 are mounted, /run is a fresh tmpfs (with /run/netns), loopback is up
and the kernel's own modules are at /lib/modules/VERSION (modprobe works).

Exit status: CMD's status; 124 when the guest was killed by --timeout; 123
when the guest stopped without reporting a status (panic, crash); 125 when
the kernel could not be prepared or the guest did not boot; 2 for bad usage.

Environment:
  VMTEST_CACHE    where extracted kernels are kept (default
                  ${XDG_CACHE_HOME:-/var/cache}/rttscope-vmtest)
  VMTEST_MODULES  modules loaded at boot where the kernel has them (default
                  "veth tun 8021q bridge macvlan vxlan sch_ingress sch_htb
                  sch_tbf cls_bpf act_bpf xfrm_user nfnetlink nf_tables
                  nf_conntrack"); others load on demand (modprobe)
EOF
}

die() {
	echo "$prog: $*" >&2
	exit 125
}
usage_err() {
	echo "$prog: $* (see --help)" >&2
	exit 2
}
note() { echo "$prog: $*" >&2; }

timeout_dur=40m
modules=${VMTEST_MODULES:-veth tun 8021q bridge macvlan vxlan sch_ingress sch_htb sch_tbf cls_bpf act_bpf xfrm_user nfnetlink nf_tables nf_conntrack}
mem=3G
smp=2
resolve_only=0
keep_log=
extra_env=()
while [ $# -gt 0 ]; do
	case $1 in
	-h | --help)
		usage
		exit 0
		;;
	--timeout)
		[ $# -ge 2 ] || usage_err "--timeout needs a duration"
		timeout_dur=$2
		shift 2
		;;
	--timeout=*)
		timeout_dur=${1#*=}
		shift
		;;
	--mem)
		[ $# -ge 2 ] || usage_err "--mem needs a size"
		mem=$2
		shift 2
		;;
	--mem=*)
		mem=${1#*=}
		shift
		;;
	--smp)
		[ $# -ge 2 ] || usage_err "--smp needs a number"
		smp=$2
		shift 2
		;;
	--env)
		[ $# -ge 2 ] || usage_err "--env needs NAME=VALUE"
		extra_env+=("$2")
		shift 2
		;;
	--keep-log)
		[ $# -ge 2 ] || usage_err "--keep-log needs a directory"
		keep_log=$2
		shift 2
		;;
	--resolve)
		resolve_only=1
		shift
		;;
	--)
		usage_err "KERNEL missing before --"
		;;
	-*)
		usage_err "unknown option $1"
		;;
	*)
		break
		;;
	esac
done

[ $# -ge 1 ] || usage_err "KERNEL missing"
kernel_arg=$1
shift
if [ "$resolve_only" = 0 ]; then
	if [ $# -eq 0 ] || [ "$1" != "--" ]; then usage_err "expected -- CMD after KERNEL"; fi
	shift
	[ $# -ge 1 ] || usage_err "CMD missing after --"
fi
[[ $timeout_dur =~ ^[0-9]+(\.[0-9]+)?[smhd]?$ ]] || usage_err "bad --timeout '$timeout_dur' (e.g. 90s, 40m, 2h)"
[[ $mem =~ ^[0-9]+[MG]?$ ]] || usage_err "bad --mem '$mem' (e.g. 3G, 2048M)"
[[ $smp =~ ^[1-9][0-9]*$ ]] || usage_err "bad --smp '$smp'"
for e in "${extra_env[@]}"; do
	[[ $e =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || usage_err "bad --env '$e' (want NAME=VALUE)"
done

[ "$(id -u)" -eq 0 ] || die "run as root (qemu shares / over 9p, the initramfs needs device nodes)"
[ "$(uname -m)" = x86_64 ] || die "only x86_64 hosts are supported (got $(uname -m))"

cache=${VMTEST_CACHE:-${XDG_CACHE_HOME:-/var/cache}/rttscope-vmtest}
tmp=
qpid=
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	if [ -n "$qpid" ]; then kill "$qpid" 2>/dev/null && wait "$qpid" 2>/dev/null; fi
	if [ -n "$tmp" ]; then rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
tmp=$(mktemp -d /tmp/vmtest.XXXXXX)

# need_pkgs installs the Debian packages providing the given commands.
need_pkgs() {
	local missing=() cmd pkg
	while [ $# -gt 0 ]; do
		cmd=$1 pkg=$2
		shift 2
		command -v "$cmd" >/dev/null 2>&1 || [ -e "$cmd" ] || missing+=("$pkg")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	note "installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$tmp/apt.log" 2>&1 ||
		die "apt-get install ${missing[*]} failed: $(tail -n1 "$tmp/apt.log")"
}

apt_updated=0
# candidates REGEX: package names from the apt index matching REGEX, oldest first.
candidates() {
	local re=$1 names
	names=$(apt-cache pkgnames linux-image- 2>/dev/null | grep -E "$re" | sort -V || true)
	if [ -z "$names" ] && [ "$apt_updated" = 0 ]; then
		apt_updated=1
		note "no matching kernel package in the apt index: running apt-get update"
		apt-get update -qq >"$tmp/apt.log" 2>&1 || note "apt-get update failed: $(tail -n1 "$tmp/apt.log")"
		names=$(apt-cache pkgnames linux-image- 2>/dev/null | grep -E "$re" | sort -V || true)
	fi
	printf '%s' "$names"
}

# fetch_pkg NAME: extract package NAME into $cache/NAME (once); prints the dir.
fetch_pkg() {
	local name=$1 dir=$cache/$1 deb ver
	if [ -f "$dir/.complete" ]; then
		echo "$dir"
		return 0
	fi
	need_pkgs apt-get apt dpkg-deb dpkg depmod kmod
	mkdir -p "$cache" "$tmp/dl"
	note "downloading $name"
	(cd "$tmp/dl" && apt-get download -o APT::Sandbox::User=root "$name") >"$tmp/apt.log" 2>&1 ||
		die "cannot download $name: $(grep -E '^E:' "$tmp/apt.log" | head -n1 || tail -n1 "$tmp/apt.log")"
	deb=$(find "$tmp/dl" -name '*.deb' | head -n1)
	[ -n "$deb" ] || die "apt-get download $name produced no .deb"
	rm -rf "$dir.partial"
	dpkg-deb -x "$deb" "$dir.partial" || die "dpkg-deb -x $deb failed"
	rm -f "$deb"
	ver=$(find "$dir.partial/lib/modules" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | head -n1)
	[ -n "$ver" ] || die "$name has no lib/modules/VERSION"
	# The package ships no modules.dep: depmod normally runs at install time.
	depmod -b "$dir.partial" "$ver" || die "depmod for $ver failed"
	touch "$dir.partial/.complete"
	rm -rf "$dir"
	mv "$dir.partial" "$dir"
	echo "$dir"
}

# resolve_kernel ARG: prints the extracted kernel dir for ARG.
resolve_kernel() {
	local arg=$1 re names cached
	if [ -d "$arg" ]; then
		(cd "$arg" && pwd)
		return 0
	fi
	case $arg in
	linux-image-*-unsigned | linux-image-*-amd64)
		fetch_pkg "$arg"
		;;
	[0-9]*.[0-9]*)
		[[ $arg =~ ^[0-9]+\.[0-9]+$ ]] || usage_err "bad kernel alias '$arg' (want X.Y, e.g. 6.1 or 6.12)"
		re="^linux-image-${arg//./\\.}\\.[0-9]+(-[0-9]+|\\+deb[0-9]+)?-amd64-unsigned\$"
		names=$(candidates "$re")
		if [ -z "$names" ]; then
			# Offline: fall back to the newest kernel already in the cache.
			cached=$(find "$cache" -mindepth 2 -maxdepth 2 -name .complete -printf '%h\n' 2>/dev/null |
				xargs -r -n1 basename | grep -E "$re" | sort -V | tail -n1 || true)
			[ -n "$cached" ] || die "no Debian package matches kernel $arg (apt-cache pkgnames linux-image- | grep -E '$re' is empty)"
			note "using cached $cached (apt index has no $arg kernel)"
			echo "$cache/$cached"
			return 0
		fi
		fetch_pkg "$(tail -n1 <<<"$names")"
		;;
	*)
		usage_err "unknown kernel '$arg' (want 6.1, 6.12, a linux-image-... package name or an extracted directory)"
		;;
	esac
}

kdir=$(resolve_kernel "$kernel_arg")
vmlinuz=$(find "$kdir/boot" -maxdepth 1 -name 'vmlinuz-*' 2>/dev/null | sort -V | tail -n1)
[ -n "$vmlinuz" ] || die "$kdir has no boot/vmlinuz-*"
kver=${vmlinuz##*/vmlinuz-}
moddir=$kdir/lib/modules/$kver
[ -d "$moddir" ] || die "$kdir has no lib/modules/$kver"
if [ "$resolve_only" = 1 ]; then
	echo "$kdir"
	exit 0
fi
if [ ! -f "$moddir/modules.dep" ]; then
	need_pkgs depmod kmod
	depmod -b "$kdir" "$kver" || die "depmod for $kver failed"
fi

need_pkgs qemu-system-x86_64 qemu-system-x86 /bin/busybox busybox-static cpio cpio xz xz-utils zstd zstd timeout coreutils
grep -qx insmod <<<"$(/bin/busybox --list)" || die "/bin/busybox has no insmod: install busybox-static"

# --- initramfs: busybox, the modules for 9p and overlayfs, /init ---
irfs=$tmp/initramfs
mkdir -p "$irfs"/{bin,sbin,dev,proc,sys,host,newroot,vmtest,upper,modules}
cp /bin/busybox "$irfs/bin/busybox"
mknod -m 600 "$irfs/dev/console" c 5 1
mknod -m 666 "$irfs/dev/null" c 1 3

# modfile NAME: the modules.dep path of module NAME ("" when built in).
modfile() {
	grep -E "(^|/)$1\\.ko(\\.xz|\\.zst|\\.gz)?:" "$moddir/modules.dep" | head -n1 | cut -d: -f1 || true
}
declare -A loaded=()
order=()
# add_mod PATH: queue PATH after its dependencies (modules.dep lists them
# so that the last one must be loaded first).
add_mod() {
	local path=$1 deps d i
	[ -n "${loaded[$path]:-}" ] && return 0
	loaded[$path]=1
	deps=$(grep -E "^${path//./\\.}:" "$moddir/modules.dep" | cut -d: -f2 || true)
	read -r -a d <<<"$deps"
	for ((i = ${#d[@]} - 1; i >= 0; i--)); do add_mod "${d[$i]}"; done
	order+=("$path")
}
for m in virtio_pci 9pnet_virtio 9p overlay; do
	p=$(modfile "$m")
	if [ -z "$p" ]; then
		grep -qE "/$m\\.ko" "$moddir/modules.builtin" 2>/dev/null ||
			die "kernel $kver has no module $m (the -cloud- flavour lacks 9p: use the plain one)"
		continue
	fi
	add_mod "$p"
done
: >"$irfs/modules/order"
for p in "${order[@]}"; do
	base=${p##*/}
	case $base in
	*.ko.xz) xz -dc "$moddir/$p" >"$irfs/modules/${base%.xz}" ;;
	*.ko.zst) zstd -qdc "$moddir/$p" >"$irfs/modules/${base%.zst}" ;;
	*.ko.gz) gzip -dc "$moddir/$p" >"$irfs/modules/${base%.gz}" ;;
	*) cp "$moddir/$p" "$irfs/modules/$base" ;;
	esac
	echo "${base%.ko*}.ko" >>"$irfs/modules/order"
done

cat >"$irfs/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
fail() {
	echo "vmtest-init: $*"
	poweroff -f
}
while read -r m; do
	insmod "/modules/$m" 2>/tmp.err || grep -q 'File exists' /tmp.err || fail "insmod $m: $(cat /tmp.err)"
done </modules/order
mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288,ro,cache=loose hostroot /host ||
	fail "cannot mount the host root over 9p"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288,cache=none vmtest /vmtest ||
	fail "cannot mount the result share over 9p"
echo booted >/vmtest/booted
. /vmtest/guest.conf
# The host root, made writable by an in-memory overlay.
mount -t tmpfs -o mode=755 upper /upper
mkdir -p /upper/data /upper/work
mount -t overlay -o lowerdir=/host,upperdir=/upper/data,workdir=/upper/work overlay /newroot ||
	fail "cannot mount the overlay root"
r=/newroot
mount -t proc proc $r/proc
mount -t sysfs sysfs $r/sys
mount -t devtmpfs devtmpfs $r/dev
mkdir -p $r/dev/pts $r/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts $r/dev/pts
mount -t tmpfs -o mode=1777 shm $r/dev/shm
mount -t bpf -o mode=700 bpf $r/sys/fs/bpf
mount -t debugfs debugfs $r/sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs $r/sys/kernel/tracing 2>/dev/null
mount -t cgroup2 cgroup2 $r/sys/fs/cgroup 2>/dev/null
mount -t tmpfs -o mode=755 run $r/run
mkdir -p $r/run/netns $r/run/vmtest
# /var/run is normally a symlink to /run; bind it where it is not.
if [ ! -L $r/var/run ] && [ -d $r/var/run ]; then mount --bind $r/run $r/var/run; fi
mount --bind /vmtest $r/run/vmtest
mkdir -p "$r/lib/modules/$KVER"
mount --bind "$r$MODDIR" "$r/lib/modules/$KVER"
ip link set lo up
# Modules the tests use, where the kernel has them (autoloading covers the
# rest); a missing one is no error.
for m in $MODULES; do /sbin/modprobe -q "$m" 2>/dev/null; done
# A clsact qdisc on the guest's loopback for its whole life keeps the
# kernel's ingress/egress/TCX static keys switched on. Otherwise the first
# and last tc or TCX attachment of every test rewrites the branch in
# __netif_receive_skb_core while other vCPUs receive packets, and under
# multi-threaded TCG a vCPU can trip over the int3 of that live patch
# (6.12 panicked with RIP in the middle of the NOP, "Fatal exception in
# interrupt"). On hardware the patch is safe; this is emulation only.
err=$(chroot $r /sbin/tc qdisc add dev lo clsact 2>&1) ||
	echo "vmtest-init: no clsact on lo, static keys will toggle: $err"
# The other keys on that path (TCX, generic XDP, packet timestamps) are
# held by internal/vmtest/holdkeys, alive until power-off. clsact alone does not hold the TCX key: 6.12 panicked so again.
if [ -x /vmtest/holdkeys ]; then
	chroot $r /run/vmtest/holdkeys >/holdkeys.out 2>&1 &
	hk=$!
	i=0
	while ! grep -q '^ready' /holdkeys.out && kill -0 $hk 2>/dev/null && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	grep -q '^ready' /holdkeys.out || echo "vmtest-init: holdkeys did not start, static keys will toggle:"
	grep -v '^ready' /holdkeys.out | sed 's/^/vmtest-init: /'
fi
hostname "vmtest-$KVER"
echo 1 >/proc/sys/kernel/sysrq
stty -onlcr 2>/dev/null
echo "vmtest-init: $(uname -r) up after $(cut -d' ' -f1 /proc/uptime)s"
chroot $r /bin/sh /run/vmtest/cmd.sh </dev/null
echo $? >/vmtest/status.tmp
dmesg >/vmtest/dmesg.txt 2>/dev/null
mv /vmtest/status.tmp /vmtest/status
sync
poweroff -f
EOF
# The kernel runs /sbin/modprobe (module autoloading: ip link add ... type
# veth, netlink families, qdiscs) with the initramfs as its root: hand it on
# to the host's modprobe in the guest's root.
printf '#!/bin/sh\nexec chroot /newroot /sbin/modprobe "$@"\n' >"$irfs/sbin/modprobe"
chmod 755 "$irfs/init" "$irfs/sbin/modprobe"
(cd "$irfs" && find . | cpio -o -H newc -R 0:0 --quiet | gzip -1) >"$tmp/initramfs.cpio.gz"

# --- the command, run by /bin/sh from the host root ---
share=$tmp/share
mkdir -p "$share"
# The static-key holder the guest's init starts (see the init above).
src=$(cd "$(dirname "$0")/.." && pwd)
if ! (cd "$src" && CGO_ENABLED=0 go build -o "$share/holdkeys" ./internal/vmtest/holdkeys) >"$tmp/holdkeys.err" 2>&1; then
	note "cannot build internal/vmtest/holdkeys, the guest's static keys will toggle: $(tail -n 3 "$tmp/holdkeys.err")"
fi
printf 'KVER=%q\nMODDIR=%q\nMODULES=%q\n' "$kver" "$moddir" "$modules" >"$share/guest.conf"
{
	echo "cd $(printf %q "$PWD") || exit 125"
	printf 'exec env -i'
	printf ' %q' "PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin" "HOME=${HOME:-/root}" \
		"TERM=dumb" "LANG=C.UTF-8" "TMPDIR=/tmp" "RTTSCOPE_VM=1" "${extra_env[@]}" "$@"
	echo
} >"$share/cmd.sh"

# --- boot ---
# qboot starts faster than SeaBIOS and prints nothing on the console.
bios=()
if [ -f /usr/share/qemu/qboot.rom ]; then bios=(-bios /usr/share/qemu/qboot.rom); fi
start=$(date +%s.%N)
# In the background, so that INT/TERM reach the traps (and the cleanup stops
# qemu) at once instead of after the guest ends.
timeout -k 10s "$timeout_dur" qemu-system-x86_64 \
	-accel tcg,thread=multi -cpu max -smp "$smp" -m "$mem" \
	"${bios[@]}" -nographic -no-reboot -nodefaults -serial stdio -monitor none \
	-kernel "$vmlinuz" -initrd "$tmp/initramfs.cpio.gz" \
	-append "console=ttyS0 panic=-1 quiet loglevel=3 rdinit=/init mitigations=off nowatchdog rcupdate.rcu_cpu_stall_suppress=1" \
	-fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap \
	-device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
	-fsdev local,id=vmtest,path="$share",security_model=none,multidevs=remap \
	-device virtio-9p-pci,fsdev=vmtest,mount_tag=vmtest \
	</dev/null &
qpid=$!
qrc=0
wait "$qpid" || qrc=$?
qpid=
elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')

if [ -n "$keep_log" ] && [ -f "$share/dmesg.txt" ]; then
	mkdir -p "$keep_log" && cp "$share/dmesg.txt" "$keep_log/dmesg.txt"
fi
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
	note "timeout: killed the $kver guest after $timeout_dur (hung or too slow; raise --timeout)"
	exit 124
fi
if [ -f "$share/status" ]; then
	status=$(cat "$share/status")
	note "$kver: exit status $status after ${elapsed}s"
	exit "$status"
fi
if [ -f "$share/booted" ]; then
	note "the $kver guest stopped without reporting an exit status (kernel panic or crash; qemu exit $qrc after ${elapsed}s)"
	exit 123
fi
note "the $kver guest did not boot (qemu exit $qrc after ${elapsed}s)"
exit 125
