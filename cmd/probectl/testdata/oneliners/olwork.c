/* The workload of the one-liner runs (oneliners_test.go): known counts of
 * what bpftrace's tutorial one-liners count. Built static, so that no
 * loader opens files or maps libraries when it starts.
 *
 *   olwork MODE N
 *     getppid N   N getppid calls (the syscall itself, from ol_caller)
 *     open N      N openat calls of /nonexistent/btone-ol (ENOENT)
 *     read N      N reads of 100 bytes from /dev/zero
 *     pages N     touch N fresh pages of an anonymous mapping: N faults
 *     sleep N     N nanosleeps of 1 ms
 *     exec N      N execve calls of /nonexistent/btone-exec a b (ENOENT)
 *     kill N      N kill(0x3ffffff0, SIGKILL) calls (ESRCH: no such pid)
 *     fork N      N children forked, each exiting at once, waited for
 *     call N      N calls of ol_func(i) and ol_name()
 *     burn N      spin in ol_burn for N seconds of CPU
 *
 * It prints "ready PID", stops itself (SIGSTOP) and works once continued
 * (SIGCONT), then leaves with exit_group alone: after SIGCONT it makes the
 * work's system calls and one more. With OLWORK_NOSTOP set it works at
 * once (bpftrace's -c, probectl run -c hold it until attached). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

__attribute__((noinline)) long ol_caller(void) { return syscall(SYS_getppid); }

__attribute__((noinline)) long ol_func(long i) {
	sink += i;
	return i * 2;
}

__attribute__((noinline)) const char *ol_name(void) {
	sink++;
	return "btone-name";
}

__attribute__((noinline)) void ol_burn(long seconds) {
	struct timespec start, now;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &start);
	do {
		for (unsigned long i = 0; i < 1000000; i++)
			sink += i;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
	} while (now.tv_sec - start.tv_sec < seconds);
}

int main(int argc, char **argv) {
	if (argc != 3)
		return 2;
	long n = atol(argv[2]);
	const char *mode = argv[1];
	int zero = strcmp(mode, "read") == 0 ? open("/dev/zero", O_RDONLY) : -1;
	char buf[100];
	char *pages = NULL;
	long pagesize = sysconf(_SC_PAGESIZE);
	if (strcmp(mode, "pages") == 0) {
		pages = mmap(NULL, n * pagesize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (pages == MAP_FAILED)
			return 1;
		/* A fault per page: no huge page maps several at once. */
		madvise(pages, n * pagesize, MADV_NOHUGEPAGE);
	}
	printf("ready %d\n", getpid());
	fflush(stdout);
	if (!getenv("OLWORK_NOSTOP"))
		raise(SIGSTOP);
	if (strcmp(mode, "getppid") == 0) {
		for (long i = 0; i < n; i++)
			ol_caller();
	} else if (strcmp(mode, "open") == 0) {
		for (long i = 0; i < n; i++)
			syscall(SYS_openat, AT_FDCWD, "/nonexistent/btone-ol", O_RDONLY);
	} else if (strcmp(mode, "read") == 0) {
		for (long i = 0; i < n; i++)
			syscall(SYS_read, zero, buf, sizeof buf);
	} else if (strcmp(mode, "pages") == 0) {
		for (long i = 0; i < n; i++)
			pages[i * pagesize] = 1;
	} else if (strcmp(mode, "sleep") == 0) {
		struct timespec ms = {0, 1000000};
		for (long i = 0; i < n; i++)
			syscall(SYS_nanosleep, &ms, NULL);
	} else if (strcmp(mode, "exec") == 0) {
		char *args[] = {"btone-exec", "a", "b", NULL};
		for (long i = 0; i < n; i++)
			syscall(SYS_execve, "/nonexistent/btone-exec", args, NULL);
	} else if (strcmp(mode, "kill") == 0) {
		for (long i = 0; i < n; i++)
			syscall(SYS_kill, 0x3ffffff0, SIGKILL);
	} else if (strcmp(mode, "fork") == 0) {
		for (long i = 0; i < n; i++) {
			pid_t c = fork();
			if (c == 0)
				syscall(SYS_exit_group, 0);
			waitpid(c, NULL, 0);
		}
	} else if (strcmp(mode, "call") == 0) {
		for (long i = 0; i < n; i++)
			sink += ol_func(i) + (unsigned long)ol_name();
	} else if (strcmp(mode, "burn") == 0) {
		ol_burn(n);
	} else {
		return 2;
	}
	syscall(SYS_exit_group, 0);
	return 0;
}
