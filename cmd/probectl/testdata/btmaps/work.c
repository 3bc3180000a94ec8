/*
 * work: the fixed workload of the bpftrace side-by-side tests.
 *
 *   work [stay]
 *           prints "ready PID", waits for a line on stdin, then makes
 *           exactly these system calls and exits:
 *           for k = 1..5, k writes of k*300 bytes to /dev/null (15 in
 *           all, 1 of 300 bytes ... 5 of 1500), 7 getppid, then
 *           bm_call(bm_one) once and bm_call(bm_two) twice (no system
 *           call), exit_group.
 *
 * Every count it makes differs from the others (1..5 writes a size; 15
 * writes, 7 getppid, 1 exit_group): bpftrace sorts a map by value with
 * an unstable sort, so equal values would print in either order.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static char buf[1500];

/* Called through bm_call: its argument is the function (usym(arg0)). */
__attribute__((noinline)) void bm_one(void) { __asm__ volatile(""); }
__attribute__((noinline)) void bm_two(void) { __asm__ volatile(""); }
__attribute__((noinline)) void bm_call(void (*f)(void)) { f(); }

int main(int argc, char **argv) {
	int stay = argc > 1; /* work stay: after the calls, print "done" and
	                      * live until stdin closes (symbols of a live
	                      * process resolve) */
	int fd = open("/dev/null", O_WRONLY);
	if (fd < 0)
		return 1;
	printf("ready %d\n", getpid());
	fflush(stdout);
	/* read(2), not stdio: nothing between the ready line and the
	 * blocking read, which the probes (attached meanwhile) would see. */
	char line[16];
	if (read(0, line, sizeof line) <= 0)
		return 1;
	for (int k = 1; k <= 5; k++)
		for (int i = 0; i < k; i++)
			syscall(SYS_write, fd, buf, (size_t)(k * 300));
	for (int i = 0; i < 7; i++)
		syscall(SYS_getppid);
	bm_call(bm_one);
	bm_call(bm_two);
	bm_call(bm_two);
	if (stay) {
		printf("done\n");
		fflush(stdout);
		while (read(0, line, sizeof line) > 0)
			;
	}
	syscall(SYS_exit_group, 0);
	return 0;
}
