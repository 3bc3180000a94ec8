#!/usr/bin/env bash
# Per-hit cost under contention: count by comm on syscalls:sys_enter_getppid
# with P workers of one comm at once (one key, hit from every CPU). probectl's
# count is one value that every CPU adds to atomically (a shared cache line);
# the hand-written reference (bench/reference/tp_count.bpf.c) keeps one value
# per CPU. It prints the kernel's own run time of the programs per call
# (kernel.bpf_stats_enabled), probectl's against the reference's, medians
# (min-max) of ROUNDS interleaved rounds, and checks the counts are exact.
# bench/perhit.sh measures the same with one worker. Needs root, clang, gcc.
#
#   bench/contend.sh            # P=2 N=1000000 ROUNDS=5
set -euo pipefail
cd "$(dirname "$0")/.."
P=${P:-2}
N=${N:-1000000}
ROUNDS=${ROUNDS:-5}
export PATH="$PATH:/usr/local/go/bin"

[ "$(id -u)" = 0 ] || { echo "needs root: it attaches probes" >&2; exit 1; }
tmp=$(mktemp -d /tmp/contend-bench.XXXXXX)
stats_was=$(sysctl -n kernel.bpf_stats_enabled)
export PROBECTL_STATE_DIR="$tmp/state" PROBECTL_WORKSPACE="contend-$$"
cleanup() {
	sysctl -q -w kernel.bpf_stats_enabled="$stats_was"
	[ -z "${ref:-}" ] || kill -INT "$ref" 2>/dev/null || true
	"$tmp/probectl" destroy -auto-approve >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT
# A comm of its own: other runs of bench/perhit.sh count bench_getppid too.
comm="contend$$"
gcc -O2 -static -o "$tmp/$comm" bench/getppid.c
CGO_ENABLED=0 go build -o "$tmp/probectl" ./cmd/probectl
CGO_ENABLED=0 go build -o "$tmp/refload" ./bench/refload
clang -O2 -g -target bpf -I"/usr/include/$(gcc -dumpmachine)" -c bench/reference/tp_count.bpf.c -o "$tmp/tp_count.o"
cat > "$tmp/tp.hcl" <<HCL
probe "tracepoint" "getppid" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    count "calls" { by = [comm] }
  }
}
HCL
work() { # one call (it inserts the key: the reference's insert race drops
	# a hit, probectl's looks again), then P workers of N calls each, on
	# CPUs 0..P-1 when taskset is there
	local i pids=()
	"$tmp/$comm" 1 >/dev/null
	for i in $(seq 0 $((P - 1))); do
		if command -v taskset >/dev/null; then taskset -c "$((i % $(nproc)))" "$tmp/$comm" "$N" >/dev/null &
		else "$tmp/$comm" "$N" >/dev/null &
		fi
		pids+=($!)
	done
	wait "${pids[@]}"
}
want=$((P * N + 1))
sysctl -q -w kernel.bpf_stats_enabled=1
for _ in $(seq "$ROUNDS"); do
	"$tmp/probectl" apply -auto-approve "$tmp/tp.hcl" >/dev/null
	work
	got=$("$tmp/probectl" show -json | jq --arg c "$comm" '[.probes[].aggregations[].entries[] | select(.key.comm == $c) | .value] | add')
	[ "$got" = "$want" ] || { echo "COUNT MISMATCH: probectl counted $got, want $want" >&2; exit 1; }
	pins=$("$tmp/probectl" status -json | jq -r '.probes[].pin_dir')
	"$tmp/refload" -runtime $(find $pins -name 'prog_*') | awk '{print $2 / $3}' >> "$tmp/pc"
	"$tmp/probectl" destroy -auto-approve >/dev/null

	"$tmp/refload" -obj "$tmp/tp_count.o" -tracepoint syscalls:sys_enter_getppid > "$tmp/ref.out" &
	ref=$!
	for _ in $(seq 100); do grep -q attached "$tmp/ref.out" && break; sleep 0.05; done
	work
	kill -INT "$ref"; wait "$ref"; ref=
	got=$(awk -v c="$comm" '$1 == c {print $2}' "$tmp/ref.out")
	[ "$got" = "$want" ] || { echo "COUNT MISMATCH: reference counted $got, want $want" >&2; exit 1; }
	grep '^runtime' "$tmp/ref.out" | awk '{print $2 / $3}' >> "$tmp/ref"
done
stats() { sort -n | awk '{a[NR]=$1} END {printf "%.1f %.1f %.1f\n", a[int((NR+1)/2)], a[1], a[NR]}'; }
read -r pm pl ph < <(stats < "$tmp/pc")
read -r rm rl rh < <(stats < "$tmp/ref")
printf 'tp count by comm, %d workers x %d calls, %d rounds: programs run time per call, ns: median (min-max)\n' "$P" "$N" "$ROUNDS"
printf '  probectl (one value, atomic add)  %6.1f (%.1f-%.1f)\n' "$pm" "$pl" "$ph"
printf '  reference (per-CPU value)         %6.1f (%.1f-%.1f)\n' "$rm" "$rl" "$rh"
paste "$tmp/pc" "$tmp/ref" | awk '{ if ($2 > 0) printf "%.4f\n", $1 / $2 }' | sort -n |
	awk '{a[NR]=$1} END { if (NR) printf "RATIO perhit-tp-contended-vs-c %.3f %.3f %.3f <= 1.05\n", a[int((NR+1)/2)], a[1], a[NR] }'
