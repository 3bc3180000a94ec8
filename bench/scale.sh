#!/usr/bin/env bash
# Scale of specs (issue 12): probectl plan of 1,000 probes offline, status
# and show of a workspace holding 1,000 probes (goals: 100 ms each, the
# whole command as a user runs it), and apply time against the number of
# probes (goal: linear). Tracepoint probes counting by comm, spread over
# the syscall events, at most 2 per event. Medians and spreads (min-max)
# of ROUNDS runs. Needs root for apply, status and show.
#
#   bench/scale.sh            # ROUNDS=7
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-7}
export PATH="$PATH:/usr/local/go/bin"

[ "$(id -u)" = 0 ] || { echo "needs root: it attaches probes" >&2; exit 1; }
[ -x /usr/bin/time ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null
tmp=$(mktemp -d)
export PROBECTL_STATE_DIR="$tmp/state" PROBECTL_WORKSPACE="scale-$$"
trap '"$tmp/probectl" destroy -auto-approve >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -o "$tmp/probectl" ./cmd/probectl

events=$(ls /sys/kernel/tracing/events/syscalls 2>/dev/null | grep '^sys_' || ls /sys/kernel/debug/tracing/events/syscalls | grep '^sys_')
spec() { # N -> N probes, two per event
	local n=$1 i=0
	while [ "$i" -lt "$n" ]; do
		for e in $events; do
			[ "$i" -lt "$n" ] || break
			printf 'probe "tracepoint" "p%d" {\n  event = "syscalls:%s"\n  on_entry {\n    count "calls" { by = [comm] }\n  }\n}\n' "$i" "$e"
			i=$((i + 1))
		done
	done
}
for n in 100 300 1000; do spec $n > "$tmp/s$n.hcl"; done

secs() { /usr/bin/time -f %e -o "$tmp/t" "$@" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }; cat "$tmp/t"; }
stats() { sort -n | awk '{a[NR]=$1} END {printf "%.3f %.3f %.3f\n", a[int((NR+1)/2)], a[1], a[NR]}'; }

for _ in $(seq "$ROUNDS"); do secs "$tmp/probectl" plan -target linux-7.2-amd64 "$tmp/s1000.hcl"; done | stats > "$tmp/plan"
for n in 100 300 1000; do
	secs "$tmp/probectl" apply -auto-approve "$tmp/s$n.hcl" > "$tmp/apply$n"
	[ "$n" = 1000 ] || "$tmp/probectl" destroy -auto-approve >/dev/null
done
for _ in $(seq "$ROUNDS"); do secs "$tmp/probectl" status; done | stats > "$tmp/status"
for _ in $(seq "$ROUNDS"); do secs "$tmp/probectl" show; done | stats > "$tmp/show"
probes=$("$tmp/probectl" status -json | jq '.probes | length')
[ "$probes" = 1000 ] || { echo "the workspace holds $probes probes, not 1000" >&2; exit 1; }

read -r pm pl ph < "$tmp/plan"
read -r sm sl sh < "$tmp/status"
read -r wm wl wh < "$tmp/show"
a100=$(cat "$tmp/apply100") a300=$(cat "$tmp/apply300") a1000=$(cat "$tmp/apply1000")
awk -v pm="$pm" -v pl="$pl" -v ph="$ph" -v sm="$sm" -v sl="$sl" -v sh="$sh" -v wm="$wm" -v wl="$wl" -v wh="$wh" \
    -v a1="$a100" -v a3="$a300" -v a10="$a1000" -v n="$ROUNDS" 'BEGIN {
	printf "scale of specs, 1,000 tracepoint probes, %d rounds: median (min-max)\n", n
	printf "  %-34s %6.0f ms (%.0f-%.0f)   goal <= 100 ms\n", "plan -target (offline)", pm*1000, pl*1000, ph*1000
	printf "  %-34s %6.0f ms (%.0f-%.0f)   goal <= 100 ms\n", "status", sm*1000, sl*1000, sh*1000
	printf "  %-34s %6.0f ms (%.0f-%.0f)   goal <= 100 ms\n", "show", wm*1000, wl*1000, wh*1000
	printf "  apply 100 / 300 / 1,000 probes: %.2f / %.2f / %.2f s = %.1f / %.1f / %.1f ms per probe (goal: linear; 1,000 vs 100 per probe %.2fx)\n",
		a1, a3, a10, a1*10, a3*1000/300, a10, (a10/1000)/(a1/100)
}'
