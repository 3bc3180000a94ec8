#!/usr/bin/env bash
# Apply of 1,000 tracepoints (issue 22): apply, status, show and destroy of a
# workspace of N=1 and N=1,000 tracepoint probes, timed in the same run, the
# whole command as a user runs it. Goals: apply of 1,000 <= 20x apply of one;
# status and show of 1,000 <= 3x those of one. Probes count by comm, spread
# over the syscall events, at most 2 per event. Medians and spreads (min-max)
# of ROUNDS rounds; each round applies, reads and destroys both sizes.
# Needs root.
#
#   bench/apply1k.sh              # ROUNDS=3, N=1000
#   ROUNDS=5 N=500 bench/apply1k.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
N=${N:-1000}
export PATH="$PATH:/usr/local/go/bin"

[ "$(id -u)" = 0 ] || { echo "needs root: it attaches probes" >&2; exit 1; }
tmp=$(mktemp -d /tmp/apply1k-bench.XXXXXX)
export PROBECTL_STATE_DIR="$tmp/state"
ws1="apply1k-one-$$" wsn="apply1k-many-$$"
cleanup() {
	for w in "$ws1" "$wsn"; do
		PROBECTL_WORKSPACE=$w "$tmp/probectl" destroy -auto-approve >/dev/null 2>&1 || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
CGO_ENABLED=0 go build -o "$tmp/probectl" ./cmd/probectl

events=$(ls /sys/kernel/tracing/events/syscalls 2>/dev/null | grep '^sys_' || ls /sys/kernel/debug/tracing/events/syscalls | grep '^sys_')
spec() { # N -> N probes, two per event at most
	local n=$1 i=0
	while [ "$i" -lt "$n" ]; do
		for e in $events; do
			[ "$i" -lt "$n" ] || break
			printf 'probe "tracepoint" "apply1k%d" {\n  event = "syscalls:%s"\n  on_entry {\n    count "calls" { by = [comm] }\n  }\n}\n' "$i" "$e"
			i=$((i + 1))
		done
	done
}
spec 1 > "$tmp/s1.hcl"
spec "$N" > "$tmp/sn.hcl"

# secs CMD...: wall seconds of CMD from date +%s%N (nanoseconds: /usr/bin/time's
# 10 ms steps made the one-probe figures, and so the ratios, mostly noise).
secs() {
	local t0 t1
	t0=$(date +%s%N)
	"$@" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
	t1=$(date +%s%N)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", (b - a) / 1e9 }'
}
stats() { sort -n | awk '{a[NR]=$1} END {printf "%.4f %.4f %.4f\n", a[int((NR+1)/2)], a[1], a[NR]}'; }

for _ in $(seq "$ROUNDS"); do
	for size in 1 n; do
		[ "$size" = 1 ] && w=$ws1 || w=$wsn
		export PROBECTL_WORKSPACE=$w
		secs "$tmp/probectl" apply -auto-approve "$tmp/s$size.hcl" >> "$tmp/apply$size"
		secs "$tmp/probectl" status >> "$tmp/status$size"
		secs "$tmp/probectl" show >> "$tmp/show$size"
		want=1; [ "$size" = 1 ] || want=$N
		got=$("$tmp/probectl" status -json | jq '.probes | length')
		[ "$got" = "$want" ] || { echo "workspace $w holds $got probes, not $want" >&2; exit 1; }
		secs "$tmp/probectl" destroy -auto-approve >> "$tmp/destroy$size"
	done
done

{
	printf 'apply, status, show, destroy of 1 and %d tracepoint probes, %d rounds: median (min-max) seconds\n' "$N" "$ROUNDS"
	for op in apply status show destroy; do
		read -r m1 l1 h1 < <(stats < "$tmp/${op}1")
		read -r mn ln hn < <(stats < "$tmp/${op}n")
		goal=""
		case $op in apply) goal="goal <= 20x" ;; status | show) goal="goal <= 3x" ;; esac
		awk -v op="$op" -v n="$N" -v m1="$m1" -v l1="$l1" -v h1="$h1" -v mn="$mn" -v ln="$ln" -v hn="$hn" -v goal="$goal" 'BEGIN {
			r = (m1 > 0) ? mn / m1 : 0
			printf "  %-8s 1: %7.4f (%.4f-%.4f)   %d: %7.4f (%.4f-%.4f)   ratio %6.1fx   %s\n", op, m1, l1, h1, n, mn, ln, hn, r, goal
		}'
	done
} 

# RATIO lines for bench/summary.sh (bench/README.md): the rounds' own ratios,
# N probes over one; status-show-vs-1 takes the larger of status's and show's.
ratios() { paste "$tmp/${1}n" "$tmp/${1}1" | awk '{ if ($2 > 0) printf "%.4f\n", $1 / $2 }'; }
ratio_line() { # name goal < ratios
	sort -n | awk -v name="$1" -v goal="$2" '{a[NR]=$1} END { if (NR) printf "RATIO %s %.3f %.3f %.3f <= %s\n", name, a[int((NR+1)/2)], a[1], a[NR], goal }'
}
ratios apply | ratio_line apply-1k-vs-1 20
paste <(ratios status) <(ratios show) | awk '{ print ($1 > $2) ? $1 : $2 }' | ratio_line status-show-vs-1 3
