#!/usr/bin/env bash
# bench/summary.sh: the goals of issue 22, one line each, from the RATIO
# lines the bench scripts print (make bench tees them into a log and runs
# this on it). A RATIO line is
#
#	RATIO name median min max op goal
#
# name one word (the goal's name), median the measured ratio's median over
# the rounds, min and max its spread (the rounds' own ratios), op "<=" or
# "<", goal the bound. The goals of issue 22 below are always listed: one
# no part printed (a part absent, or its rounds gave no ratio: e.g. the
# noise swallowed an overhead) reads "not measured". Other names are
# listed after them.
# Usage: bench/summary.sh LOG...
set -euo pipefail
awk -v expect="startup-time <= 0.10,startup-rss <= 0.20,perhit-tp-vs-c <= 1.05,perhit-up-vs-c <= 1.05,rawtp-vs-tracepoint <= 0.70,plan-1k-mixed-ms <= 100,apply-1k-vs-1 <= 20,status-show-vs-1 <= 3,stacks-lost < 0.01" '
BEGIN {
	m = split(expect, e, ",")
	for (i = 1; i <= m; i++) { split(e[i], f, " "); order[++n] = f[1]; seen[f[1]] = 1; op[f[1]] = f[2]; goal[f[1]] = f[3] }
}
$1 == "RATIO" && NF == 7 {
	if (!($2 in seen)) order[++n] = $2
	seen[$2] = 1
	got[$2] = 1; med[$2] = $3; lo[$2] = $4; hi[$2] = $5; op[$2] = $6; goal[$2] = $7
}
END {
	printf "\nissue 22 goals: measured median (min-max of the rounds), goal, verdict\n"
	for (i = 1; i <= n; i++) {
		k = order[i]
		if (!got[k]) { printf "  %-28s %-22s   goal %s %-8s not measured\n", k, "-", op[k], goal[k]; miss++; continue }
		met = (op[k] == "<" ? med[k] < goal[k] : med[k] <= goal[k])
		printf "  %-28s %8.3f (%.3f-%.3f)   goal %s %-8s %s\n", k, med[k], lo[k], hi[k], op[k], goal[k], (met ? "met" : "NOT MET")
		if (!met) bad++
	}
	printf "  %d of %d goals met, %d not met, %d not measured\n", n - bad - miss, n, bad + 0, miss + 0
}' "$@"
