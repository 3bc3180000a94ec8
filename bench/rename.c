/* Benchmark workload: N renames of the calling thread to its own name
 * (prctl PR_SET_NAME), each firing the tracepoint task:task_rename once,
 * in bursts of 1,000; prints the ns per call of the fastest burst (on a
 * shared machine a preempted burst says nothing about the probe).
 * Usage: rename N */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	const long burst = 1000;
	char name[16] = {0};
	if (prctl(PR_GET_NAME, name) != 0)
		return 1;
	double best = INFINITY;
	for (long done = 0; done < n; done += burst) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (long i = 0; i < burst && done + i < n; i++)
			if (prctl(PR_SET_NAME, name) != 0)
				return 1;
		clock_gettime(CLOCK_MONOTONIC, &b);
		long k = n - done < burst ? n - done : burst;
		double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / k;
		if (ns < best)
			best = ns;
	}
	printf("%.1f\n", best);
	return 0;
}
