#!/usr/bin/env bash
# Stacks lost by a whole-host profile (issue 22): a 99 Hz profile of every
# CPU counting samples by [ustack, kstack] for DURATION seconds (600, the
# goal's 10 minutes, under make bench), then show -json: the samples whose
# stack was lost (full, collision) over all samples, per round. Beside it
# the samples the program counted (a keyless count, read a moment later
# while the profile still samples), the distinct stacks
# and the kernel's memlock figure of the stack maps, and the plan's
# worst-case bytes. Stacks stored by content (Linux 6.1+) lose only to a
# full map; the plan says which path the kernel takes.
#
#   bench/stacks.sh                 # DURATION=600 ROUNDS=1
#   DURATION=120 bench/stacks.sh    # a shorter run
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-600}
ROUNDS=${ROUNDS:-1}
FREQ=${FREQ:-99}
export PATH="$PATH:/usr/local/go/bin"

[ "$(id -u)" = 0 ] || { echo "needs root: it attaches probes" >&2; exit 1; }
tmp=$(mktemp -d /tmp/stacks-bench.XXXXXX)
export PROBECTL_STATE_DIR="$tmp/state" PROBECTL_WORKSPACE="stacks-$$"
cleanup() {
	"$tmp/probectl" destroy -auto-approve >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT
CGO_ENABLED=0 go build -o "$tmp/probectl" ./cmd/probectl
cat >"$tmp/stacks.hcl" <<HCL
probe "profile" "stacks_bench" {
  frequency = $FREQ
  on_entry {
    count "samples" {
      by       = [ustack, kstack]
      max_keys = 1000000
    }
    count "counted" {}
  }
}
HCL
"$tmp/probectl" plan "$tmp/stacks.hcl" | grep -E 'stk|memory' | sed 's/^ */  /'
ratios=()
for ((r = 0; r < ROUNDS; r++)); do
	"$tmp/probectl" apply -auto-approve "$tmp/stacks.hcl" >/dev/null
	sleep "$DURATION"
	pin=$("$tmp/probectl" status -json | python3 -c 'import json,sys; print(json.load(sys.stdin)["probes"][0]["pin_dir"])')
	memlock=0
	for m in "$pin"/map_?stack_*; do
		case $m in *_buf) continue ;; esac
		# A map pinned in bpffs shows its memlock to one who opens it:
		# python3 opens it with BPF_OBJ_GET and reads its fdinfo.
		n=$(python3 - "$m" <<'PY'
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
path = sys.argv[1].encode()
buf = ctypes.create_string_buffer(path)
attr = struct.pack("QII", ctypes.addressof(buf), 0, 0) + bytes(120 - 16)
a = ctypes.create_string_buffer(attr, len(attr))
fd = libc.syscall(321, 7, a, len(attr))  # bpf(BPF_OBJ_GET) on x86-64
if fd < 0:
    print(0); sys.exit()
for line in open(f"/proc/self/fdinfo/{fd}"):
    if line.startswith("memlock:"):
        print(line.split()[1])
PY
)
		memlock=$((memlock + n))
	done
	"$tmp/probectl" show -json >"$tmp/show.json"
	"$tmp/probectl" destroy -auto-approve >/dev/null
	ratio=$(python3 - "$tmp/show.json" "$memlock" "$DURATION" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
aggs = {a["name"]: a for a in d["probes"][0]["aggregations"]}
s = aggs["samples"]
samples = sum(e["value"] for e in s["entries"])
counted = sum(e["value"] for e in aggs["counted"]["entries"])
lost = s.get("stacks_lost") or {}
kept = sum(e["value"] for e in s["entries"] if not any(isinstance(v, list) and v and "lost" in v[0] for v in e["key"].values()))
gone = lost.get("full", 0) + lost.get("collision", 0)
print(f"  {sys.argv[3]} s: {samples} samples ({counted} counted), {len(s['entries'])} keys, {kept} with both stacks, lost {lost}, stack maps memlock {int(sys.argv[2]) / 2**20:.1f} MiB", file=sys.stderr)
print(f"{gone / max(samples, 1):.4f}")
PY
)
	echo "  round $((r + 1)): stacks lost $ratio of the samples"
	ratios+=("$ratio")
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, $FREQ Hz, $DURATION s"
# For bench/summary.sh (bench/README.md): the fraction of samples whose
# stack was lost.
printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR]=$1} END {printf "RATIO stacks-lost %s %s %s < 0.01\n", a[int((NR+1)/2)], a[1], a[NR]}'
