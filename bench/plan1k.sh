#!/usr/bin/env bash
# Plan of 1,000 mixed probes (issue 22) as a process: "probectl plan
# -target linux-7.2-amd64" of a third tracepoints, a third kernel functions
# with entry+exit histograms, a third uprobes of libc's malloc/free, against
# the plan of one tracepoint probe, in interleaved rounds: wall ms, medians
# and spreads (min-max), and the thousand's ratio to the goal (100 ms).
# Needs no root: a -target profile plan loads nothing.
#
#   bench/plan1k.sh             # ROUNDS=9
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-9}
export PATH="$PATH:/usr/local/go/bin"
tmp=$(mktemp -d /tmp/plan1k-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -o "$tmp/probectl" ./cmd/probectl

gen() { # gen N FILE: the first N probes of the mixed spec
	for ((i = 0; i < $1; i++)); do
		case $((i % 3)) in
		0) printf 'probe "tracepoint" "plan1k_t%d" {\n  event = "syscalls:sys_enter_openat"\n  on_entry {\n    count "tcalls" { by = [comm] }\n  }\n}\n' "$i" ;;
		1) printf 'probe "kernel" "plan1k_k%d" {\n  functions = ["ksys_write"]\n  on_entry {\n    save = { start = ktime }\n  }\n  on_exit {\n    hist "klat" { value = ktime - entry.start }\n  }\n}\n' "$i" ;;
		2) printf 'probe "user" "plan1k_u%d" {\n  binary    = "libc"\n  functions = ["malloc", "free"]\n  on_entry {\n    hist "ubytes" { value = arg0 }\n  }\n}\n' "$i" ;;
		esac
	done >"$2"
}
gen 1 "$tmp/one.hcl"
gen 1000 "$tmp/mixed.hcl"
export PROBECTL_STATE_DIR="$tmp/state" PROBECTL_WORKSPACE="plan1k-$$"
ms() { # ms SPEC: wall milliseconds of one plan
	local t0 t1
	t0=$(date +%s%N)
	"$tmp/probectl" plan -target linux-7.2-amd64 "$1" >/dev/null
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}
ms "$tmp/mixed.hcl" >/dev/null # warm the page cache
one=() thousand=()
for ((r = 0; r < ROUNDS; r++)); do
	one+=("$(ms "$tmp/one.hcl")")
	thousand+=("$(ms "$tmp/mixed.hcl")")
done
stats() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {printf "%d ms (%d-%d)", a[int((NR+1)/2)], a[1], a[NR]}'; }
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "rounds: $ROUNDS, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "plan of 1 probe:          $(stats "${one[@]}")"
echo "plan of 1,000 mixed:      $(stats "${thousand[@]}")"
awk -v t="$(med "${thousand[@]}")" -v o="$(med "${one[@]}")" 'BEGIN {printf "1,000 / 1: %.1fx; 1,000 / goal (100 ms): %.2fx\n", t/(o?o:1), t/100}'
# For bench/summary.sh (bench/README.md): the 1,000-probe plan in ms.
printf '%s\n' "${thousand[@]}" | sort -n | awk '{a[NR]=$1} END {printf "RATIO plan-1k-mixed-ms %d %d %d <= 100\n", a[int((NR+1)/2)], a[1], a[NR]}'
