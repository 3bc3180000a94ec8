/* Benchmark workload: N calls of a user function (the probe's target);
 * prints the mean ns per call. Usage: ucall N */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) long target(long x) { asm volatile(""); return x + 1; }
int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 100000, s = 0;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++) s += target(i);
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
	return s == 0;
}
