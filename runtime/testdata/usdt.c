/* The USDT workload: probes of sys/sdt.h with semaphores, their
   arguments in every operand form gcc writes (registers of each size,
   memory with base, index and scale, constants), called argv[1] times
   with known values. It prints how many of its iterations saw
   work:tick's semaphore raised (a probe attached). */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#include <stdio.h>
#include <stdlib.h>

unsigned short work_tick_semaphore __attribute__((section(".probes")));
unsigned short work_pick_semaphore __attribute__((section(".probes")));
unsigned short work_at_semaphore __attribute__((section(".probes")));
unsigned short work_two_semaphore __attribute__((section(".probes")));
unsigned short work_many_semaphore __attribute__((section(".probes")));

struct vec { long pad; long v[8]; };

/* a->v[i]: 8(%rdi,%rsi,8) at -O2. */
__attribute__((noinline)) void at(struct vec *a, long i) { STAP_PROBE1(work, at, a->v[i]); }

__attribute__((noinline)) long pick(long *a, long i, int small, short neg) {
	STAP_PROBE5(work, pick, a[i], small, neg, 5, (unsigned char)(i + 250));
	return a[i];
}

/* work:two has two sites, whose arguments gcc places apart. */
__attribute__((noinline)) void two(int i, long big) {
	STAP_PROBE1(work, two, i);
	STAP_PROBE1(work, two, big);
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 1, raised = 0;
	long a[8] = {10, 20, 30, 40, 50, 60, 70, 80};
	struct vec x = {0, {-1, -2, -3, -4, -5, -6, -7, -8}};
	for (int i = 0; i < n; i++) {
		if (work_tick_semaphore)
			raised++;
		STAP_PROBE2(work, tick, i, -i);
		pick(a, i % 8, i * 3, (short)-i);
		at(&x, i % 8);
		two(i, 1000000000000L + i);
		/* twelve arguments, sys/sdt.h's most: argK is i * (K + 1) */
		STAP_PROBE12(work, many, i, 2 * i, 3 * i, 4 * i, 5 * i, 6 * i, 7 * i, 8 * i, 9 * i, 10 * i, 11 * i, 12 * i);
	}
	printf("%d\n", raised);
	return 0;
}
