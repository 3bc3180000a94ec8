#!/usr/bin/env bash
# Per-hit overhead of probectl's generated programs, side by side in one run
# with the same aggregation written by hand in C (bench/reference, compiled
# with clang -O2, loaded by bench/refload) and with bpftrace:
#
#   tracepoint  count by comm on syscalls:sys_enter_getppid (N getppid calls)
#   uprobe      entry+exit latency histogram of a user function (NU calls)
#
# Rounds interleave the set-ups (baseline, probectl, reference, bpftrace), so
# that the machine's drift falls on all alike; each round attaches afresh and
# checks that every set-up counted exactly the calls made. It prints the
# medians (and spreads) of ns per call, the overheads over the baseline, and
# the ratios against their goals (probectl <= 1.05x the reference, <=
# bpftrace). Then body rounds: the programs' own run time per run
# (kernel.bpf_stats_enabled), probectl's and the reference's alternating,
# which is issue 22's measure (perhit-tp-vs-c, perhit-up-vs-c; the
# wall-clock overheads' ratios are perhit-tp-wall-vs-c, perhit-up-wall-vs-c).
# Needs root; installs bpftrace, clang, gcc and jq when missing.
#
#   bench/perhit.sh            # N=1000000 NU=100000 ROUNDS=5 SETTLE=1
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000000}
NU=${NU:-100000}
ROUNDS=${ROUNDS:-5}
SETTLE=${SETTLE:-1} # seconds after each attach before the workload: apply's
                    # and the loaders' after-effects (RCU, writes) settle
export PATH="$PATH:/usr/local/go/bin"

[ "$(id -u)" = 0 ] || { echo "needs root: it attaches probes" >&2; exit 1; }
for p in bpftrace clang gcc jq; do
	command -v $p >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $p >/dev/null
done
tmp=$(mktemp -d)
trap 'pkill -INT -f "$tmp/refload" 2>/dev/null || true; rm -rf "$tmp"' EXIT
# The workload's name is this run's own: the tracepoint counts by comm
# every process's getppid, and another run of this script may be going.
gp=bgp$$
gcc -O2 -static -o "$tmp/$gp" bench/getppid.c
gcc -O2 -static -o "$tmp/bench_ucall" bench/ucall.c
CGO_ENABLED=0 go build -o "$tmp/probectl" ./cmd/probectl
CGO_ENABLED=0 go build -o "$tmp/refload" ./bench/refload
for r in tp_count up_lat; do
	clang -O2 -g -target bpf -I"/usr/include/$(gcc -dumpmachine)" -c "bench/reference/$r.bpf.c" -o "$tmp/$r.o"
done

cat > "$tmp/tp.hcl" <<HCL
probe "tracepoint" "getppid" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    count "calls" { by = [comm] }
  }
}
HCL
cat > "$tmp/up.hcl" <<HCL
probe "user" "lat" {
  binary    = "$tmp/bench_ucall"
  functions = ["target"]
  on_entry {
    save = { start = ktime }
  }
  on_exit {
    hist "ns" { value = ktime - entry.start }
  }
}
HCL
export PROBECTL_STATE_DIR="$tmp/state" PROBECTL_WORKSPACE="perhit-$$"
fail=0
check() { # what got want
	if [ "$2" != "$3" ]; then echo "COUNT MISMATCH: $1 counted $2, want $3" >&2; fail=1; fi
}
# pc SPEC WORK N OUT: probectl applied around one workload run.
pc() {
	"$tmp/probectl" apply -auto-approve "$1" >/dev/null
	sleep "$SETTLE"
	"$2" "$3" >> "$4"
	"$tmp/probectl" show -json > "$tmp/show.json"
	"$tmp/probectl" destroy -auto-approve >/dev/null
}
# ref OBJ ATTACH WORK N OUT: the reference around one workload run.
ref() {
	"$tmp/refload" -obj "$1" $2 > "$tmp/ref.out" &
	local p=$!
	for _ in $(seq 100); do grep -q attached "$tmp/ref.out" && break; sleep 0.05; done
	sleep "$SETTLE"
	"$3" "$4" >> "$5"
	kill -INT $p; wait $p
}
# bt PROGRAM WORK N OUT: bpftrace around one workload run.
bt() {
	bpftrace -e "$1" > "$tmp/bt.out" 2>&1 &
	local p=$!
	for _ in $(seq 200); do grep -q Attaching "$tmp/bt.out" && break; sleep 0.1; done
	sleep "$SETTLE"
	"$2" "$3" >> "$4"
	kill -INT $p; wait $p || true
}
histsum() { jq '[.probes[] | .aggregations[] | .entries[] | .buckets[]?.count] | add'; }
for r in $(seq "$ROUNDS"); do
	"$tmp/$gp" "$N" >> "$tmp/tp.base"
	pc "$tmp/tp.hcl" "$tmp/$gp" "$N" "$tmp/tp.pc"
	check "probectl tracepoint" "$(tr -d ' \n' < "$tmp/show.json" | grep -o "\"comm\":\"$gp\"},\"value\":[0-9]*" | grep -o '[0-9]*$')" "$N"
	ref "$tmp/tp_count.o" "-tracepoint syscalls:sys_enter_getppid" "$tmp/$gp" "$N" "$tmp/tp.ref"
	check "reference tracepoint" "$(awk -v c="$gp" '$1 == c {print $2}' "$tmp/ref.out")" "$N"
	bt 'tracepoint:syscalls:sys_enter_getppid { @calls[comm] = count(); }' "$tmp/$gp" "$N" "$tmp/tp.bt"
	check "bpftrace tracepoint" "$(grep "$gp" "$tmp/bt.out" | grep -o '[0-9]*$')" "$N"

	"$tmp/bench_ucall" "$NU" >> "$tmp/up.base"
	pc "$tmp/up.hcl" "$tmp/bench_ucall" "$NU" "$tmp/up.pc"
	check "probectl uprobe" "$(histsum < "$tmp/show.json")" "$NU"
	ref "$tmp/up_lat.o" "-uprobe $tmp/bench_ucall:target" "$tmp/bench_ucall" "$NU" "$tmp/up.ref"
	check "reference uprobe" "$(grep -v '^attached\|^runtime' "$tmp/ref.out" | awk '{s += $2} END {print s}')" "$NU"
	bt "uprobe:$tmp/bench_ucall:target { @s[tid] = nsecs; } uretprobe:$tmp/bench_ucall:target /@s[tid]/ { @ns = hist(nsecs - @s[tid]); delete(@s[tid]); }" "$tmp/bench_ucall" "$NU" "$tmp/up.bt"
	check "bpftrace uprobe" "$(grep '^\[' "$tmp/bt.out" | sed 's/^[^)]*) *//' | awk '{s += $1} END {print s}')" "$NU"
done

# Body rounds: the kernel's own run time of the programs per run
# (kernel.bpf_stats_enabled: run_time_ns / run_cnt, entry and exit
# summed; per run, as other processes' getppid calls run the tracepoint
# program too), probectl's against the reference's, which the machine's
# noise around a system call does not blur. Not in the rounds
# above: the accounting adds its clock reads to every run.
stats_was=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -q -w kernel.bpf_stats_enabled="$stats_was"; pkill -INT -f "$tmp/refload" 2>/dev/null || true; rm -rf "$tmp"' EXIT
sysctl -q -w kernel.bpf_stats_enabled=1
body_pc() { # SPEC WORK N NAME
	"$tmp/probectl" apply -auto-approve "$1" >/dev/null
	sleep "$SETTLE"
	"$2" "$3" >/dev/null
	local pins
	pins=$("$tmp/probectl" status -json | jq -r '.probes[].pin_dir')
	"$tmp/refload" -runtime $(find $pins -name 'prog_*') | awk -v n="$4" '$3 > 0 {printf "%s probectl %.1f %d\n", n, $2 / $3, $3}' >> "$tmp/body"
	"$tmp/probectl" destroy -auto-approve >/dev/null
}
body_ref() { # OBJ ATTACH WORK N NAME
	ref "$1" "$2" "$3" "$4" /dev/null
	grep '^runtime' "$tmp/ref.out" | awk -v n="$5" '$3 > 0 {printf "%s reference %.1f %d\n", n, $2 / $3, $3}' >> "$tmp/body"
}
for r in $(seq "$ROUNDS"); do
	body_pc "$tmp/tp.hcl" "$tmp/$gp" "$N" tp
	body_ref "$tmp/tp_count.o" "-tracepoint syscalls:sys_enter_getppid" "$tmp/$gp" "$N" tp
	body_pc "$tmp/up.hcl" "$tmp/bench_ucall" "$NU" up
	body_ref "$tmp/up_lat.o" "-uprobe $tmp/bench_ucall:target" "$tmp/bench_ucall" "$NU" up
done
sysctl -q -w kernel.bpf_stats_enabled="$stats_was"

stats() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)], a[1], a[NR]}'; }
body() { # name
	read -r p pl ph < <(awk -v n="$1" '$1 == n && $2 == "probectl" {print $3}' "$tmp/body" | stats)
	read -r f fl fh < <(awk -v n="$1" '$1 == n && $2 == "reference" {print $3}' "$tmp/body" | stats)
	awk -v p="$p" -v pl="$pl" -v ph="$ph" -v f="$f" -v fl="$fl" -v fh="$fh" 'BEGIN {
		printf "  programs run time per run (kernel.bpf_stats_enabled, run_time_ns / run_cnt): probectl %.1f ns (%.1f-%.1f), reference %.1f ns (%.1f-%.1f): %.2f (goal <= 1.05)\n", p, pl, ph, f, fl, fh, p / f
	}'
	# Issue 22's goal (bench/summary.sh): the body's ratio, the median
	# and spread of the rounds' own ratios (each round runs probectl,
	# then the reference).
	paste -d' ' <(awk -v n="$1" '$1 == n && $2 == "probectl" {print $3}' "$tmp/body") \
		<(awk -v n="$1" '$1 == n && $2 == "reference" {print $3}' "$tmp/body") |
		awk '$2 > 0 {print $1 / $2}' | sort -g |
		awk -v name="$1" '{a[NR] = $1} END {if (NR) printf "RATIO perhit-%s-vs-c %.3f %.3f %.3f <= 1.05\n", name, a[int((NR+1)/2)], a[1], a[NR]}'
}
report() { # name calls
	read -r b bl bh < <(stats < "$tmp/$1.base")
	read -r p pl ph < <(stats < "$tmp/$1.pc")
	read -r f fl fh < <(stats < "$tmp/$1.ref")
	read -r t tl th < <(stats < "$tmp/$1.bt")
	awk -v name="$1" -v calls="$2" -v b="$b" -v bl="$bl" -v bh="$bh" -v p="$p" -v pl="$pl" -v ph="$ph" \
	    -v f="$f" -v fl="$fl" -v fh="$fh" -v t="$t" -v tl="$tl" -v th="$th" -v n="$ROUNDS" 'BEGIN {
		printf "%s: %d calls per round, %d interleaved rounds, ns per call: median (min-max)\n", name, calls, n
		printf "  %-10s %9.1f (%.1f-%.1f)\n", "baseline", b, bl, bh
		printf "  %-10s %9.1f (%.1f-%.1f)   overhead %8.1f\n", "probectl", p, pl, ph, p - b
		printf "  %-10s %9.1f (%.1f-%.1f)   overhead %8.1f\n", "reference", f, fl, fh, f - b
		printf "  %-10s %9.1f (%.1f-%.1f)   overhead %8.1f\n", "bpftrace", t, tl, th, t - b
		if (f - b > 0) printf "  probectl / reference %.2f (goal <= 1.05)", (p - b) / (f - b)
		if (t - b > 0) printf "   probectl / bpftrace %.2f (goal <= 1.00)", (p - b) / (t - b)
		print ""
	}'
	# The summary line (bench/summary.sh): the median and spread of the
	# rounds' own ratios, each round's overheads over its own baseline
	# (the rounds interleave baseline, probectl, reference).
	paste -d' ' "$tmp/$1.base" "$tmp/$1.pc" "$tmp/$1.ref" | awk '$3 - $1 > 0 {print ($2 - $1) / ($3 - $1)}' | sort -g |
		awk -v name="$1" '{a[NR] = $1} END {if (NR) printf "RATIO perhit-%s-wall-vs-c %.3f %.3f %.3f <= 1.05\n", name, a[int((NR+1)/2)], a[1], a[NR]}'
}
report tp "$N"
body tp
report up "$NU"
body up
exit $fail
