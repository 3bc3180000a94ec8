#!/usr/bin/env bash
# bench/summary.sh: the goals of issue 22, one line each, from the RATIO
# lines the bench scripts print (make bench tees them into a log and runs
# this on it). A RATIO line is
#
#	RATIO name median min max op goal
#
# name one word (the goal's name), median the measured ratio's median over
# the rounds, min and max its spread (the rounds' own ratios), op "<=" or
# "<", goal the bound. A goal with no RATIO line reads "not measured".
# Usage: bench/summary.sh LOG...
set -euo pipefail
awk '
$1 == "RATIO" && NF == 7 {
	if (!($2 in seen)) order[++n] = $2
	seen[$2] = 1
	med[$2] = $3; lo[$2] = $4; hi[$2] = $5; op[$2] = $6; goal[$2] = $7
}
END {
	printf "\nissue 22 goals: measured median (min-max of the rounds), goal, verdict\n"
	for (i = 1; i <= n; i++) {
		k = order[i]
		met = (op[k] == "<" ? med[k] < goal[k] : med[k] <= goal[k])
		printf "  %-28s %8.3f (%.3f-%.3f)   goal %s %-8s %s\n", k, med[k], lo[k], hi[k], op[k], goal[k], (met ? "met" : "NOT MET")
		if (!met) bad++
	}
	if (n == 0) print "  no RATIO lines: nothing measured"
	printf "  %d of %d goals met\n", n - bad, n
}' "$@"
