/* The workload of the stack tests (stacks_test.go), built with frame
 * pointers so that the kernel can walk its user stacks.
 *
 *   work burn SECONDS   spin in stk_hot (9 parts) and stk_cold (1 part)
 *   work getppid N      call getppid N times from stk_caller, then exit
 *   work call N         call stk_call(stk_target) N times (usym of a
 *                       function pointer argument)
 *   work threads N      start N threads in stk_thread, one at a time
 *   work nap N          nanosleep for N ms and 456789 ns, then
 *                       clock_nanosleep for 1 s more (naptime)
 *   work write N        write N times to /dev/null: 16 bytes, some that
 *                       do not print, then bytes 0 to 99 (buf())
 *   work paths SECONDS  spin in stk_leaf through 256 call paths (eight
 *                       levels of stk_pa/stk_pb), one after another,
 *                       for SECONDS of its CPU time (a busy host's
 *                       samples are as many)
 *   work deep SECONDS   the same, 40 levels deep (stacks of more than
 *                       30 frames)
 *   work open DIR       chdir to DIR, then openat (and close) r0, r1, r2,
 *                       nope (ENOENT), /dev/null and DIR/r0: four
 *                       relative paths, two absolute (cwd, opensnoop)
 *
 * It prints "ready PID" and waits for a line on stdin before working, then
 * "done", and exits when stdin closes. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

static volatile unsigned long sink;

__attribute__((noinline)) void stk_spin(unsigned long n) {
	for (unsigned long i = 0; i < n; i++)
		sink += i;
}

__attribute__((noinline)) void stk_hot(void) {
	for (unsigned long i = 0; i < 9000000; i++)
		sink += i;
}

__attribute__((noinline)) void stk_cold(void) {
	for (unsigned long i = 0; i < 1000000; i++)
		sink += i;
}

/* The system call is made here, not in libc's wrapper: a wrapper without
 * a frame of its own would hide its caller from a frame-pointer walk. */
__attribute__((noinline)) long stk_caller(void) {
#if defined(__x86_64__)
	long ret;
	__asm__ volatile("syscall" : "=a"(ret) : "0"((long)SYS_getppid) : "rcx", "r11", "memory");
	return ret;
#else
	return syscall(SYS_getppid);
#endif
}

__attribute__((noinline)) void stk_target(void) {
	sink++;
}

/* Takes a function pointer, as pthread_create takes its start routine. */
__attribute__((noinline)) void stk_call(void (*fn)(void)) {
	fn();
}

void *stk_thread(void *arg) {
	sink++;
	return arg;
}

/* stk_pa and stk_pb call each other or themselves, as each bit of path
 * says, depth times: each path is a distinct user stack. */
__attribute__((noinline)) void stk_leaf(void) {
	for (unsigned long i = 0; i < 200000; i++)
		sink += i;
}

__attribute__((noinline)) void stk_pb(int depth, unsigned path);

__attribute__((noinline)) void stk_pa(int depth, unsigned path) {
	if (depth == 0)
		stk_leaf();
	else if (path & 1)
		stk_pa(depth - 1, path >> 1);
	else
		stk_pb(depth - 1, path >> 1);
}

__attribute__((noinline)) void stk_pb(int depth, unsigned path) {
	if (depth == 0)
		stk_leaf();
	else if (path & 1)
		stk_pa(depth - 1, path >> 1);
	else
		stk_pb(depth - 1, path >> 1);
}

int main(int argc, char **argv) {
	if (argc != 3)
		return 2;
	printf("ready %d\n", getpid());
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		return 1;
	long n = strcmp(argv[1], "open") == 0 ? 0 : atol(argv[2]);
	if (strcmp(argv[1], "burn") == 0) {
		struct timespec start, now;
		clock_gettime(CLOCK_MONOTONIC, &start);
		do {
			stk_hot();
			stk_cold();
			clock_gettime(CLOCK_MONOTONIC, &now);
		} while (now.tv_sec - start.tv_sec < n);
	} else if (strcmp(argv[1], "paths") == 0 || strcmp(argv[1], "deep") == 0) {
		struct timespec start, now;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &start);
		unsigned path = 0;
		int depth = strcmp(argv[1], "deep") == 0 ? 40 : 8;
		do {
			stk_pa(depth, path++ % 256);
			clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
		} while (now.tv_sec - start.tv_sec < n);
	} else if (strcmp(argv[1], "getppid") == 0) {
		for (long i = 0; i < n; i++)
			stk_caller();
	} else if (strcmp(argv[1], "call") == 0) {
		for (long i = 0; i < n; i++)
			stk_call(stk_target);
	} else if (strcmp(argv[1], "threads") == 0) {
		for (long i = 0; i < n; i++) {
			pthread_t t;
			if (pthread_create(&t, NULL, stk_thread, NULL) != 0 || pthread_join(t, NULL) != 0)
				return 1;
		}
	} else if (strcmp(argv[1], "write") == 0) {
		static const char mixed[] = "ab\x01\xff\"\\ c\ttab\x7f~ \n";
		unsigned char all[100];
		for (int i = 0; i < 100; i++)
			all[i] = i;
		FILE *null = fopen("/dev/null", "w");
		if (!null)
			return 1;
		int fd = fileno(null);
		for (long i = 0; i < n; i++)
			if (write(fd, mixed, sizeof mixed - 1) != sizeof mixed - 1 || write(fd, all, sizeof all) != sizeof all)
				return 1;
	} else if (strcmp(argv[1], "open") == 0) {
		if (chdir(argv[2]) != 0)
			return 1;
		char abs[4096];
		snprintf(abs, sizeof abs, "%s/r0", argv[2]);
		const char *names[] = {"r0", "r1", "r2", "nope", "/dev/null", abs};
		for (int i = 0; i < 6; i++) {
			long fd = syscall(SYS_openat, AT_FDCWD, names[i], O_RDONLY);
			if (fd >= 0)
				close(fd);
		}
	} else if (strcmp(argv[1], "nap") == 0) {
		/* The system calls themselves: glibc's nanosleep calls
		 * clock_nanosleep. */
		struct timespec a = {0, n * 1000000 + 456789}, b = {1, n * 1000000 + 456789};
		if (syscall(SYS_nanosleep, &a, NULL) != 0 ||
		    syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &b, NULL) != 0)
			return 1;
	} else {
		return 2;
	}
	printf("done\n");
	fflush(stdout);
	/* Exit when stdin closes: the test decides how long the process
	 * lives after its work. */
	while (fgets(line, sizeof line, stdin))
		;
	return 0;
}
