#!/usr/bin/env bash
# Start-up: probectl apply + destroy of a one-probe spec against bpftrace's
# start -> attach -> exit for the same probe (a tracepoint counting by
# comm), side by side in interleaved rounds: wall time and peak RSS, medians
# and spreads (min-max). Issue 12's goals: time <= 0.2x, RSS <= 0.25x.
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

cat > "$tmp/spec.hcl" <<HCL
probe "tracepoint" "opens" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "calls" { by = [comm] }
  }
}
HCL
export PROBECTL_STATE_DIR="$tmp/state" PROBECTL_WORKSPACE="startup-$$"
measure() { /usr/bin/time -f "%e %M" -o "$tmp/t" "$@" >/dev/null 2>&1; cat "$tmp/t"; }

for r in $(seq "$ROUNDS"); do
	a=$(measure "$tmp/probectl" apply -auto-approve "$tmp/spec.hcl")
	d=$(measure "$tmp/probectl" destroy -auto-approve)
	# apply + destroy: the times add, the peak is the larger.
	echo "$a $d" | awk '{print $1 + $3, ($2 > $4 ? $2 : $4)}' >> "$tmp/pc"
	measure bpftrace -e 'tracepoint:syscalls:sys_enter_openat { @calls[comm] = count(); } BEGIN { exit(); }' >> "$tmp/bt"
done
stats() { # column -> "median min max"
	cut -d' ' -f"$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)], a[1], a[NR]}'
}
read -r pt ptl pth < <(stats 1 < "$tmp/pc")
read -r pm pml pmh < <(stats 2 < "$tmp/pc")
read -r bt btl bth < <(stats 1 < "$tmp/bt")
read -r bm bml bmh < <(stats 2 < "$tmp/bt")
awk -v pt="$pt" -v ptl="$ptl" -v pth="$pth" -v pm="$pm" -v pml="$pml" -v pmh="$pmh" \
    -v bt="$bt" -v btl="$btl" -v bth="$bth" -v bm="$bm" -v bml="$bml" -v bmh="$bmh" -v n="$ROUNDS" 'BEGIN {
	printf "start-up, one tracepoint probe, %d interleaved rounds: median (min-max)\n", n
	printf "  %-28s %5.2f s (%.2f-%.2f)   peak RSS %6.1f MiB (%.1f-%.1f)\n", "probectl apply + destroy", pt, ptl, pth, pm/1024, pml/1024, pmh/1024
	printf "  %-28s %5.2f s (%.2f-%.2f)   peak RSS %6.1f MiB (%.1f-%.1f)\n", "bpftrace start-attach-exit", bt, btl, bth, bm/1024, bml/1024, bmh/1024
	printf "  time ratio %.2f (goal <= 0.10)   RSS ratio %.2f (goal <= 0.20)\n", pt/bt, pm/bm
}'
# The summary lines (bench/summary.sh): the median and spread of the
# rounds' own ratios (round r of probectl against round r of bpftrace,
# interleaved).
ratios() { # column of the paste, goal name
	paste -d' ' "$tmp/pc" "$tmp/bt" | awk -v c="$1" '{print $c / $(c + 2)}' | sort -g |
		awk -v n="$2" -v g="$3" '{a[NR] = $1} END {printf "RATIO %s %.3f %.3f %.3f <= %s\n", n, a[int((NR+1)/2)], a[1], a[NR], g}'
}
ratios 1 startup-time 0.10
ratios 2 startup-rss 0.20
