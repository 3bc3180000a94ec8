#!/usr/bin/env bash
# Start-up: probectl apply + destroy of a one-probe spec against bpftrace's
# start -> attach -> exit for the same probe (a tracepoint counting by
# comm), side by side in interleaved rounds: wall time and peak RSS, medians
# and spreads (min-max). Issue 22's goals: time <= 0.10x, RSS <= 0.20x.
# Beside them, in the same rounds, the floors that bound probectl: a Go
# hello world (the Go runtime's own start-up and pages) and probectl
# version (every linked package's init and nothing else: the binary's
# pages that start-up touches).
# Needs root; installs bpftrace (Debian's) and time when missing.
#
#   bench/startup.sh            # ROUNDS=9
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-9}
export PATH="$PATH:/usr/local/go/bin"

[ "$(id -u)" = 0 ] || { echo "needs root: it attaches probes" >&2; exit 1; }
command -v bpftrace >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bpftrace >/dev/null
[ -x /usr/bin/time ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -o "$tmp/probectl" ./cmd/probectl
mkdir "$tmp/hello"
printf 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello") }\n' > "$tmp/hello/main.go"
printf 'module hello\n\ngo 1.21\n' > "$tmp/hello/go.mod"
(cd "$tmp/hello" && CGO_ENABLED=0 go build -o "$tmp/hello-go" .)

cat > "$tmp/spec.hcl" <<HCL
probe "tracepoint" "opens" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "calls" { by = [comm] }
  }
}
HCL
export PROBECTL_STATE_DIR="$tmp/state" PROBECTL_WORKSPACE="startup-$$"
# measure CMD...: "seconds KiB cpu-seconds", the wall time from the
# shell's clock (microseconds: time's %e has only hundredths, a third of an
# apply), the peak RSS from time's %M and the CPU time, user + system,
# from %U %S (time's last line: a failing command adds one). The CPU time
# is what a loaded machine leaves alone: eight engineers' builds stretch
# the wall time, not the work.
measure() {
	local t0=$EPOCHREALTIME
	/usr/bin/time -f "%M %U %S" -o "$tmp/t" "$@" >/dev/null 2>&1 || true
	local t1=$EPOCHREALTIME
	echo "$t0 $t1 $(tail -n 1 "$tmp/t")" | awk '{printf "%.6f %d %.2f\n", $2 - $1, $3, $4 + $5}'
}

for r in $(seq "$ROUNDS"); do
	a=$(measure "$tmp/probectl" apply -auto-approve "$tmp/spec.hcl")
	d=$(measure "$tmp/probectl" destroy -auto-approve)
	# apply + destroy: the times add, the peak is the larger.
	echo "$a $d" | awk '{print $1 + $4, ($2 > $5 ? $2 : $5), $3 + $6}' >> "$tmp/pc"
	measure bpftrace -e 'tracepoint:syscalls:sys_enter_openat { @calls[comm] = count(); } BEGIN { exit(); }' >> "$tmp/bt"
	measure "$tmp/hello-go" >> "$tmp/hello.t"
	measure "$tmp/probectl" version >> "$tmp/version.t"
done
stats() { # column -> "median min max"
	cut -d' ' -f"$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)], a[1], a[NR]}'
}
read -r pt ptl pth < <(stats 1 < "$tmp/pc")
read -r pm pml pmh < <(stats 2 < "$tmp/pc")
read -r bt btl bth < <(stats 1 < "$tmp/bt")
read -r bm bml bmh < <(stats 2 < "$tmp/bt")
read -r pc _ _ < <(stats 3 < "$tmp/pc")
read -r bc _ _ < <(stats 3 < "$tmp/bt")
read -r ht htl hth < <(stats 1 < "$tmp/hello.t")
read -r hm hml hmh < <(stats 2 < "$tmp/hello.t")
read -r vt vtl vth < <(stats 1 < "$tmp/version.t")
read -r vm vml vmh < <(stats 2 < "$tmp/version.t")
awk -v pt="$pt" -v ptl="$ptl" -v pth="$pth" -v pm="$pm" -v pml="$pml" -v pmh="$pmh" \
    -v bt="$bt" -v btl="$btl" -v bth="$bth" -v bm="$bm" -v bml="$bml" -v bmh="$bmh" -v n="$ROUNDS" \
    -v ht="$ht" -v htl="$htl" -v hth="$hth" -v hm="$hm" -v hml="$hml" -v hmh="$hmh" \
    -v vt="$vt" -v vtl="$vtl" -v vth="$vth" -v vm="$vm" -v vml="$vml" -v vmh="$vmh" \
    -v pc="$pc" -v bc="$bc" 'BEGIN {
	f = "  %-28s %6.3f s (%.3f-%.3f)   peak RSS %6.1f MiB (%.1f-%.1f)   x bpftrace: time %.3f, RSS %.3f\n"
	printf "start-up, one tracepoint probe, %d interleaved rounds: median (min-max)\n", n
	printf f, "probectl apply + destroy", pt, ptl, pth, pm/1024, pml/1024, pmh/1024, pt/bt, pm/bm
	printf f, "bpftrace start-attach-exit", bt, btl, bth, bm/1024, bml/1024, bmh/1024, 1, 1
	printf "  the floors (the goals are 0.10 and 0.20; apply + destroy is two starts):\n"
	printf f, "Go hello world", ht, htl, hth, hm/1024, hml/1024, hmh/1024, ht/bt, hm/bm
	printf f, "probectl version (init)", vt, vtl, vth, vm/1024, vml/1024, vmh/1024, vt/bt, vm/bm
	r = "-"
	if (bc > 0) r = sprintf("%.3f", pc / bc)
	printf "  CPU time, user + system (time has hundredths): probectl %.2f s, bpftrace %.2f s, ratio %s\n", pc, bc, r
}'
# The summary lines (bench/summary.sh): the median and spread of the
# rounds' own ratios (round r of probectl against round r of bpftrace,
# interleaved).
ratios() { # column of the paste, goal name
	paste -d' ' "$tmp/pc" "$tmp/bt" | awk -v c="$1" '{print $c / $(c + 3)}' | sort -g |
		awk -v n="$2" -v g="$3" '{a[NR] = $1} END {printf "RATIO %s %.3f %.3f %.3f <= %s\n", n, a[int((NR+1)/2)], a[1], a[NR], g}'
}
ratios 1 startup-time 0.10
ratios 2 startup-rss 0.20
