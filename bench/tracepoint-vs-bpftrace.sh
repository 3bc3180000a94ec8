#!/usr/bin/env bash
# Per-hit overhead of a tracepoint probe counting by comm: probectl against
# bpftrace, side by side in one run, on the same workload (N getppid calls,
# ROUNDS rounds each, median). Both must count exactly N*ROUNDS calls.
# Needs root; installs bpftrace (Debian's) and gcc when missing.
#
#   bench/tracepoint-vs-bpftrace.sh            # N=1000000 ROUNDS=5
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000000}
ROUNDS=${ROUNDS:-5}
export PATH="$PATH:/usr/local/go/bin"

[ "$(id -u)" = 0 ] || { echo "needs root: it attaches probes" >&2; exit 1; }
for p in bpftrace gcc; do
	command -v $p >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $p >/dev/null
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -static -o "$tmp/bench_getppid" bench/getppid.c
CGO_ENABLED=0 go build -o "$tmp/probectl" ./cmd/probectl

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

cat > "$tmp/spec.hcl" <<HCL
probe "tracepoint" "getppid" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    count "calls" { by = [comm] }
  }
}
HCL
export PROBECTL_STATE_DIR="$tmp/state" PROBECTL_WORKSPACE="bench-$$"

# Rounds interleave the three set-ups, so that the machine's drift falls on
# all of them alike. Each round attaches afresh and checks its count.
pc_count=0 bt_count=0
for r in $(seq "$ROUNDS"); do
	"$tmp/bench_getppid" "$N" >> "$tmp/base"

	"$tmp/probectl" apply -auto-approve "$tmp/spec.hcl" >/dev/null
	"$tmp/bench_getppid" "$N" >> "$tmp/pc"
	c=$("$tmp/probectl" show -json | tr -d ' \n' | grep -o '"comm":"bench_getppid"},"value":[0-9]*' | grep -o '[0-9]*$')
	pc_count=$((pc_count + c))
	"$tmp/probectl" destroy -auto-approve >/dev/null

	bpftrace -e 'tracepoint:syscalls:sys_enter_getppid { @calls[comm] = count(); }' > "$tmp/bt.out" 2>&1 &
	bt=$!
	for _ in $(seq 100); do grep -q Attaching "$tmp/bt.out" && break; sleep 0.1; done
	sleep 0.3
	"$tmp/bench_getppid" "$N" >> "$tmp/bt"
	kill -INT $bt; wait $bt || true
	c=$(grep 'bench_getppid' "$tmp/bt.out" | grep -o '[0-9]*$')
	bt_count=$((bt_count + c))
done
base=$(median < "$tmp/base")
pc=$(median < "$tmp/pc")
btime=$(median < "$tmp/bt")

want=$((N * ROUNDS))
awk -v base="$base" -v pc="$pc" -v bt="$btime" -v pcn="$pc_count" -v btn="$bt_count" -v want="$want" 'BEGIN {
	printf "getppid, %d calls per round, median of rounds (ns per call)\n", want / '"$ROUNDS"'
	printf "  %-10s %8.1f\n", "baseline", base
	printf "  %-10s %8.1f   overhead %6.1f ns   counted %d of %d\n", "probectl", pc, pc - base, pcn, want
	printf "  %-10s %8.1f   overhead %6.1f ns   counted %d of %d\n", "bpftrace", bt, bt - base, btn, want
	if (bt - base > 0) printf "  overhead ratio probectl / bpftrace: %.2f\n", (pc - base) / (bt - base)
	if (pcn != want || btn != want) { print "  COUNT MISMATCH"; exit 1 }
}'
