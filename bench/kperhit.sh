#!/usr/bin/env bash
# Per-hit overhead of probectl's entry+exit latency histogram of a kernel
# function, on each route the kernel offers (kprobe.multi + kretprobe.multi,
# kprobe.session, fentry + fexit, kprobe + kretprobe, fsession), against
# the same histogram written by hand in C (bench/reference/klat_*.bpf.c,
# clang -O2, loaded with cilium/ebpf; fsession, which cilium/ebpf cannot
# load, with probectl's raw loader), in the VM matrix: the host kernel cannot attach
# to kernel functions. Issue 22's goal: probectl <= 1.05x the reference
# per hit, the programs' own run time (BPF stats), as ratios within one VM
# run; the overheads' ratio is printed too.
#
# It compiles the references on the host into bench/kperhit/obj (ignored by
# git), builds bench/kperhit's test for each kernel's arch with them
# embedded, and runs it in the kernel through bin/vmexec (QEMU TCG). In the
# VM, interleaved rounds (the order rotating) run the getppid system call
# unprobed, under probectl's probe (applied through the runtime package)
# and under the reference, attaching afresh each time, and check that each
# histogram holds exactly the calls made. A run's figure is the 10th
# percentile of its bursts of 100 calls: TCG emulates both vCPUs in one
# host thread on a shared machine, and a burst during which anything else
# ran says nothing about the probe. At the end: per kernel and route, the
# medians (min-max over the rounds) of ns per call and of the overhead over
# each round's baseline, and the ratio probectl / reference; then body
# rounds: the programs' own run time per call as the kernel counts it
# (BPF_ENABLE_STATS, entry and exit summed, the same quantile of bursts),
# probectl's against the reference's, without the attach machinery's cost.
#
#   bench/kperhit.sh      # KERNELS="linux-7.2-amd64 linux-6.12-amd64" CALLS=20000 ROUNDS=15
#
# Needs root (QEMU, and the kernels' download on first use); installs clang
# when missing. About 2-4 minutes a kernel (amd64; arm64 is slower).
set -euo pipefail
cd "$(dirname "$0")/.."
KERNELS=${KERNELS:-linux-7.2-amd64 linux-6.12-amd64}
export PROBECTL_TEST_KPERHIT_CALLS=${CALLS:-20000}
export PROBECTL_TEST_KPERHIT_ROUNDS=${ROUNDS:-15}
LOGS=${LOGS:-bin/kperhit-logs} # each kernel's whole console log
export PATH="$PATH:/usr/local/go/bin"

command -v clang >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang >/dev/null
obj=bench/kperhit/obj
rm -f "$obj"/*.o
inc="/usr/include/$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)"
cc() { clang -O2 -g -target bpf -I"$inc" -Wall -Werror "$@"; }
for r in multi kprobe fentry session fsession; do
	cc -c "bench/reference/klat_$r.bpf.c" -o "$obj/klat_$r.o"
done
# The session kfuncs take the context since Linux 7.0.
cc -DKLAT_SESSION_CTX -c bench/reference/klat_session.bpf.c -o "$obj/klat_session_ctx.o"

CGO_ENABLED=0 go build -o bin/vmexec ./cmd/vmexec
mkdir -p "$LOGS"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=""
for k in $KERNELS; do
	arch=${k##*-}
	echo "== $k"
	start=$(date +%s)
	if ! PROBECTL_VM_KERNEL=$k CGO_ENABLED=0 GOARCH=$arch go test -exec "$PWD/bin/vmexec" -count=1 -v -timeout 15m \
		-run '^TestKPerHit$' ./bench/kperhit > "$LOGS/$k.log" 2>&1; then
		fail="$fail $k"
	fi
	# The test's own report, without the console's boot noise.
	sed -n '/^=== RUN/,/^--- /p' "$LOGS/$k.log" | grep -v '^PROBECTL-KPERHIT' || true
	grep -q '^--- ' "$LOGS/$k.log" || tail -30 "$LOGS/$k.log"
	grep '^PROBECTL-KPERHIT-ROW ' "$LOGS/$k.log" | cut -d' ' -f2- >> "$tmp/rows" || true
	grep '^PROBECTL-KPERHIT-RATIO ' "$LOGS/$k.log" | sed 's/^PROBECTL-KPERHIT-//' >> "$tmp/ratios" || true
	echo "== $k: $(( $(date +%s) - start ))s (log: $LOGS/$k.log)"
done

if [ -s "$tmp/rows" ]; then
	echo
	echo "Per hit, kernel-function entry+exit latency histogram: probectl / hand-written C (goal <= 1.05)"
	echo "ns per call: the baseline's median; probectl's and the reference's overheads over each round's baseline,"
	echo "medians (min-max) of the interleaved rounds; ratio of the medians (min-max of the rounds' ratios)"
	cat "$tmp/rows"
	echo "QEMU TCG: emulated times, comparable only within one VM run; read the spreads."
fi
# The summary lines (bench/summary.sh), one per route and kernel: the
# programs' own run time, probectl / reference, median (min-max) of the
# body rounds' ratios.
[ ! -s "$tmp/ratios" ] || cat "$tmp/ratios"
if [ -n "$fail" ]; then echo "bench/kperhit failed on:$fail" >&2; exit 1; fi
