/* The workload of the runtime tests: known calls, known arguments, known
 * return values, known system calls. Built by the tests with gcc -O0. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((noinline)) long target(long x) { return x * 2 - 5; }
__attribute__((noinline)) long other(long x, long y) { return x + y; }
__attribute__((noinline)) long fails(long x) { return -(x % 7) - 1; }

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 10;
	long sum = 0;
	for (long i = 0; i < n; i++)
		sum += target(i);
	for (long i = 0; i < n / 2; i++)
		sum += other(i, 1);
	for (long i = 0; i < n; i++)
		sum += fails(i);
	for (long i = 0; i < n; i++) {
		int fd = open("/nonexistent/probectl-test", O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			close(fd);
	}
	printf("%ld\n", sum);
	return 0;
}
