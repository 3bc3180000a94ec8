/* The workload of the bpftrace side-by-side tests (bpftrace_side_test.go):
 * exactly known calls of the system calls and library functions that
 * bpftrace's tools trace.
 *
 *   work kill N      kill(own pid, 0) and kill(PID_MAX+1, SIGTERM), N each
 *   work sync N      fsync, fdatasync, syncfs, sync_file_range of a file
 *                    of its own (argv[3]), N each
 *   work setuid N    setuid(0), setfsuid(0) and setresuid(0, 0, 0), N each
 *   work stat N      stat, lstat (the system calls), statx of
 *                    argv[3]/missing-I and
 *                    statfs of argv[3], N each (I is 0 .. N-1)
 *   work exec N      fork and exec "/bin/true btside I", N times, one at
 *                    a time, saying "child PID" of each
 *   work threads N   start N threads in bs_thread, one at a time
 *   work dio N       write 4096 bytes and read 8192 bytes of the file
 *                    argv[3]/dio (8192 bytes on disk) with O_DIRECT, N
 *                    times each: one block request each, issued by this
 *                    process
 *
 * It prints "ready PID" and waits for a line on stdin before working, then
 * "done", and exits when stdin closes. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static volatile long sink;

void *bs_thread(void *arg) {
	sink++;
	return arg;
}

int main(int argc, char **argv) {
	if (argc < 3)
		return 2;
	const char *dir = argc > 3 ? argv[3] : "/tmp";
	char path[4096];
	int dio = -1;
	char *blk = 0;
	if (strcmp(argv[1], "dio") == 0) {
		snprintf(path, sizeof path, "%s/dio", dir);
		if (posix_memalign((void **)&blk, 4096, 8192) != 0)
			return 1;
		memset(blk, 'b', 8192);
		if ((dio = open(path, O_RDWR | O_DIRECT)) < 0)
			return 1;
	}
	printf("ready %d\n", getpid());
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		return 1;
	long n = atol(argv[2]);
	for (long i = 0; i < n; i++) {
		if (strcmp(argv[1], "kill") == 0) {
			kill(getpid(), 0);
			kill(4194304 + 1, SIGTERM);
		} else if (strcmp(argv[1], "sync") == 0) {
			snprintf(path, sizeof path, "%s/sync", dir);
			int fd = open(path, O_CREAT | O_WRONLY, 0600);
			if (fd < 0)
				return 1;
			fsync(fd);
			fdatasync(fd);
			syncfs(fd);
			sync_file_range(fd, 0, 0, 0);
			close(fd);
		} else if (strcmp(argv[1], "setuid") == 0) {
			if (setuid(0) != 0)
				return 1;
			setfsuid(0);
			setresuid(0, 0, 0);
		} else if (strcmp(argv[1], "stat") == 0) {
			struct stat st;
			struct statx stx;
			struct statfs sf;
			snprintf(path, sizeof path, "%s/missing-%ld", dir, i);
			/* glibc's stat and lstat call newfstatat: the tool
			 * traces stat and lstat themselves. */
			syscall(SYS_stat, path, &st);
			syscall(SYS_lstat, path, &st);
			statx(AT_FDCWD, path, 0, STATX_BASIC_STATS, &stx);
			statfs(dir, &sf);
		} else if (strcmp(argv[1], "exec") == 0) {
			pid_t p = fork();
			if (p == 0) {
				/* The strings are written by the child: a tracer
				 * reads them at exec's entry, and a page of the
				 * binary's not yet touched since fork cannot be read
				 * there (both bpftrace and probectl read "" then). */
				char file[] = "/bin/true", a0[] = "true", a1[] = "btside", a2[32];
				snprintf(a2, sizeof a2, "%ld", i);
				char *args[] = {a0, a1, a2, 0};
				execv(file, args);
				_exit(127);
			}
			printf("child %d\n", p);
			waitpid(p, 0, 0);
		} else if (strcmp(argv[1], "dio") == 0) {
			if (pwrite(dio, blk, 4096, 0) != 4096 || pread(dio, blk, 8192, 0) != 8192)
				return 1;
		} else if (strcmp(argv[1], "threads") == 0) {
			pthread_t th;
			if (pthread_create(&th, 0, bs_thread, 0) != 0)
				return 1;
			pthread_join(th, 0);
		} else {
			return 2;
		}
	}
	printf("done\n");
	fflush(stdout);
	while (fgets(line, sizeof line, stdin))
		;
	return 0;
}
