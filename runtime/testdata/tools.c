/* The workload of the bpftrace tools' tests (tools_test.go): system calls
 * with known arguments and known results, made when the test says so.
 *
 *   pctools NAME MODE ARGS...
 *
 * sets its task name (comm) to NAME, does MODE's setup, prints
 * "ready PID", waits for a line on stdin, runs MODE (printing what the
 * calls returned, one line each), prints "done", then waits for stdin to
 * close and exits. The test applies its probes while the workload waits
 * for the line: what the probes see is exactly what MODE does. Built
 * static (gcc -static), so no dynamic loader makes calls of its own. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <linux/capability.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what) {
	perror(what);
	exit(2);
}

/* waitline reads stdin up to a newline; 0 at the end of the input. */
static int waitline(void) {
	char c;
	for (;;) {
		ssize_t n = read(0, &c, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0;
		if (c == '\n')
			return 1;
	}
}

/* result prints a call's result as the kernel gave it: the value, or
 * -errno. */
static long result(long r) { return r < 0 ? -errno : r; }

/* pin keeps the task on one CPU. */
static void pin(int cpu) {
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0)
		die("sched_setaffinity");
}

static long nowNs(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* spin keeps the CPU busy for ms milliseconds (forever if ms < 0). */
static void spin(long ms) {
	long end = nowNs() + ms * 1000000L;
	while (ms < 0 || nowNs() < end)
		;
}

/* runqlat: n sleeps in read(2) of stdin, each ended by a byte the test
 * writes once the workload sleeps; then ms milliseconds on the CPU in user
 * mode, then as long in the kernel, reading /dev/zero 64 MiB at a time
 * (the test runs a spinning task on the CPU too: the scheduler preempts
 * the workload in both modes). */
enum { zeroSize = 64 << 20 };
static char *zeroBuf;
static int zeroFd;

static void sleepSetup(void) {
	zeroFd = open("/dev/zero", O_RDONLY);
	if (zeroFd < 0)
		die("open /dev/zero");
	zeroBuf = mmap(NULL, zeroSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (zeroBuf == MAP_FAILED)
		die("mmap");
}

static void sleeps(long n, long ms) {
	char c;
	for (long i = 0; i < n; i++)
		if (read(0, &c, 1) != 1)
			die("read");
	spin(ms);
	long end = nowNs() + ms * 1000000L;
	while (nowNs() < end)
		if (read(zeroFd, zeroBuf, zeroSize) != zeroSize)
			die("read /dev/zero");
}

/* opensnoop: opens in the directory dir (the current one), of paths that
 * exist, do not, are not directories, are directories, and are too long. */
static void opens(void) {
	char longname[301];
	memset(longname, 'n', 300);
	longname[300] = 0;
	long r;
#ifdef SYS_open
	r = result(syscall(SYS_open, "exists", O_RDONLY));
	printf("open exists %ld\n", r);
	if (r >= 0)
		close(r);
#endif
	r = result(syscall(SYS_openat, AT_FDCWD, "missing", O_RDONLY));
	printf("openat missing %ld\n", r);
	r = result(syscall(SYS_openat, AT_FDCWD, "exists/x", O_RDONLY));
	printf("openat exists/x %ld\n", r);
	r = result(syscall(SYS_openat, AT_FDCWD, ".", O_WRONLY));
	printf("openat . %ld\n", r);
	r = result(syscall(SYS_openat, AT_FDCWD, longname, O_RDONLY));
	printf("openat long %ld\n", r);
	struct open_how how = {.flags = O_RDONLY, .resolve = RESOLVE_NO_SYMLINKS};
	r = result(syscall(SYS_openat2, AT_FDCWD, "exists", &how, sizeof how));
	printf("openat2 exists %ld\n", r);
	if (r >= 0)
		close(r);
}

/* killsnoop: signals to a child that ignores SIGUSR1 and SIGUSR2, to no
 * process, and a signal that does not exist. */
static void kills(void) {
	signal(SIGUSR1, SIG_IGN);
	signal(SIGUSR2, SIG_IGN);
	int ready[2];
	if (pipe(ready) != 0)
		die("pipe");
	pid_t child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		close(ready[0]);
		close(ready[1]);
		for (;;)
			pause();
	}
	close(ready[1]);
	printf("child %d\n", child);
	const pid_t none = INT_MAX; /* above any pid_max */
	printf("kill %ld\n", result(kill(child, 0)));
	printf("kill %ld\n", result(kill(child, SIGUSR1)));
	printf("kill %ld\n", result(kill(none, 0)));
	printf("kill %ld\n", result(kill(child, 99)));
	printf("tkill %ld\n", result(syscall(SYS_tkill, child, SIGUSR2)));
	printf("tgkill %ld\n", result(syscall(SYS_tgkill, child, child, 0)));
	printf("tgkill %ld\n", result(syscall(SYS_tgkill, getpid(), child, 0)));
	printf("kill %ld\n", result(kill(child, SIGKILL)));
	if (waitpid(child, NULL, 0) != child)
		die("waitpid");
}

/* capable, as root: three lower nice values (each a CAP_SYS_NICE check,
 * granted), then CAP_SYS_NICE dropped from the effective set and a lower
 * one again (checked, refused: EACCES from setpriority). */
static void capables(void) {
	for (int nice = -1; nice >= -3; nice--)
		printf("setpriority %ld\n", result(setpriority(PRIO_PROCESS, 0, nice)));
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) != 0)
		die("capget");
	data[CAP_SYS_NICE / 32].effective &= ~(1u << (CAP_SYS_NICE % 32));
	if (syscall(SYS_capset, &hdr, data) != 0)
		die("capset");
	printf("setpriority %ld\n", result(setpriority(PRIO_PROCESS, 0, -4)));
}

/* setuids, as root: setfsuid and back, a real uid of 1000, an effective
 * uid of 2000 (which drops the capabilities: setuid(3000) is refused),
 * back to 0 through the saved uid, then setuid(1000) for good. */
static void setuids(void) {
	printf("setfsuid %d\n", setfsuid(1234));
	printf("setfsuid %d\n", setfsuid(0));
	printf("setresuid %ld\n", result(setresuid(1000, -1, -1)));
	printf("setresuid %ld\n", result(setresuid(-1, 2000, -1)));
	printf("setuid %ld\n", result(setuid(3000)));
	printf("setfsuid %d\n", setfsuid(5000));
	printf("setresuid %ld\n", result(setresuid(-1, 0, -1)));
	printf("setuid %ld\n", result(setuid(1000)));
}

/* statsnoop: each stat system call, of paths that exist and do not. */
static void stats(void) {
	struct stat st;
	struct statx stx;
	struct statfs sfs;
#ifdef SYS_stat
	printf("newstat %ld\n", result(syscall(SYS_stat, "exists", &st)));
	printf("newlstat %ld\n", result(syscall(SYS_lstat, "missing", &st)));
#endif
	printf("newfstatat %ld\n", result(syscall(SYS_newfstatat, AT_FDCWD, "exists", &st, 0)));
	printf("statx %ld\n", result(syscall(SYS_statx, AT_FDCWD, "exists/x", 0, STATX_BASIC_STATS, &stx)));
	printf("statfs %ld\n", result(syscall(SYS_statfs, ".", &sfs)));
	printf("statfs %ld\n", result(syscall(SYS_statfs, "missing", &sfs)));
}

/* naptime: a nanosleep and a clock_nanosleep of known requests, made as
 * system calls (glibc's nanosleep is a clock_nanosleep). */
static void naps(void) {
	struct timespec a = {1, 2345678}, b = {0, 7654321};
	printf("nanosleep %ld\n", result(syscall(SYS_nanosleep, &a, NULL)));
	printf("clock_nanosleep %ld\n", result(syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &b, NULL)));
}

/* heapArgv copies argv to the heap. A child's copy of the parent's written
 * pages is there at once, while pages of read-only data (string literals)
 * are mapped again on first touch, and a probe cannot fault them in: a
 * shell's argv is on its heap too. */
static char **heapArgv(char **argv) {
	int n = 0;
	while (argv[n])
		n++;
	char **out = calloc(n + 1, sizeof *out);
	for (int i = 0; i < n; i++)
		out[i] = strdup(argv[i]);
	return out;
}

/* execsnoop: children that exec this program with known arguments (each
 * child's argv in execs[]), the last through execveat; each exits at once. */
static void execs(const char *self) {
	static char long1[101], long2[101], long3[101];
	memset(long1, 'a', 100);
	memset(long2, 'b', 100);
	memset(long3, 'c', 100);
	char *plain[] = {"pcexec", "exit", "one", "two words", "-x=3", NULL};
	char *many[] = {"pcexec", "exit", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10",
			"11", "12", "13", "14", "15", "16", "17", "18", NULL};
	char *longs[] = {"pcexec", "exit", long1, long2, long3, NULL};
	char *viaat[] = {"pcexec", "exit", "at", NULL};
	char **argvs[] = {heapArgv(plain), heapArgv(many), heapArgv(longs), heapArgv(viaat)};
	for (int i = 0; i < 4; i++) {
		pid_t child = fork();
		if (child < 0)
			die("fork");
		if (child == 0) {
			if (i == 3)
				syscall(SYS_execveat, AT_FDCWD, self, argvs[i], environ, 0);
			else
				execv(self, argvs[i]);
			_exit(127);
		}
		int status;
		if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			die("child");
		printf("child %d\n", child);
	}
}

/* biolatency: n direct writes of 4 KiB to file, made and written through
 * before the test's probes are on; prints the file's extents (bytes on
 * its device) and the device. */
static int bioFd;
static void *bioBuf;

static void bioSetup(const char *path, long n) {
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	if (fd < 0)
		die("open");
	char block[4096];
	memset(block, 'x', sizeof block);
	for (long i = 0; i < n; i++)
		if (write(fd, block, sizeof block) != sizeof block)
			die("write");
	if (fsync(fd) != 0)
		die("fsync");
	struct stat st;
	if (fstat(fd, &st) != 0)
		die("fstat");
	printf("dev %u %u\n", major(st.st_dev), minor(st.st_dev));
	struct {
		struct fiemap map;
		struct fiemap_extent extents[32];
	} fm;
	memset(&fm, 0, sizeof fm);
	fm.map.fm_length = ~0ULL;
	fm.map.fm_flags = FIEMAP_FLAG_SYNC;
	fm.map.fm_extent_count = 32;
	if (ioctl(fd, FS_IOC_FIEMAP, &fm) != 0)
		die("fiemap");
	for (unsigned i = 0; i < fm.map.fm_mapped_extents; i++)
		printf("extent %llu %llu %llu\n", (unsigned long long)fm.extents[i].fe_logical,
		       (unsigned long long)fm.extents[i].fe_physical, (unsigned long long)fm.extents[i].fe_length);
	close(fd);
	bioFd = open(path, O_WRONLY | O_DIRECT);
	if (bioFd < 0)
		die("open O_DIRECT");
	if (posix_memalign(&bioBuf, 4096, 4096) != 0)
		die("posix_memalign");
	memset(bioBuf, 'y', 4096);
}

static void bios(long n) {
	for (long i = 0; i < n; i++)
		if (pwrite(bioFd, bioBuf, 4096, i * 4096) != 4096)
			die("pwrite");
}

int main(int argc, char **argv) {
	if (argc >= 2 && strcmp(argv[1], "exit") == 0)
		return 0; /* a child of execs */
	if (argc < 3) {
		fprintf(stderr, "usage: pctools NAME MODE ARGS...\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	/* Descriptors from 3 on are the calls' own: opensnoop's first is 3. */
	for (int fd = 3; fd < 1024; fd++)
		close(fd);
	if (prctl(PR_SET_NAME, argv[1]) != 0)
		die("prctl");
	const char *mode = argv[2];
	if (strcmp(mode, "bio") == 0) {
		if (argc != 5)
			die("bio FILE N");
		bioSetup(argv[3], atol(argv[4]));
	}
	if (strcmp(mode, "sleep") == 0 || strcmp(mode, "spin") == 0) {
		if (argc != (mode[1] == 'l' ? 6 : 4))
			die("sleep N MS CPU, spin CPU");
		pin(atoi(argv[argc - 1]));
		if (mode[1] == 'l')
			sleepSetup();
	}
	if (strcmp(mode, "open") == 0 || strcmp(mode, "stat") == 0) {
		if (argc != 4 || chdir(argv[3]) != 0)
			die("chdir");
	}
	/* Every page now, so that no page fault waits for the disk later. */
	if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0)
		die("mlockall");
	printf("ready %d\n", getpid());
	if (!waitline())
		return 1;
	if (strcmp(mode, "sleep") == 0)
		sleeps(atol(argv[3]), atol(argv[4]));
	else if (strcmp(mode, "spin") == 0)
		spin(-1);
	else if (strcmp(mode, "open") == 0)
		opens();
	else if (strcmp(mode, "kill") == 0)
		kills();
	else if (strcmp(mode, "setuid") == 0)
		setuids();
	else if (strcmp(mode, "capable") == 0)
		capables();
	else if (strcmp(mode, "stat") == 0)
		stats();
	else if (strcmp(mode, "nap") == 0)
		naps();
	else if (strcmp(mode, "exec") == 0)
		execs("/proc/self/exe");
	else if (strcmp(mode, "bio") == 0)
		bios(atol(argv[4]));
	else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	printf("done\n");
	while (waitline())
		;
	return 0;
}
