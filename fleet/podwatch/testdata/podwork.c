/* The workload of the real pods' test: argv[1] opens of a path that does
 * not exist (one openat each), then it waits for its end (SIGTERM). With
 * argv[2], its first run (no /state/ran yet) makes /state/ran (mkdir, not
 * an open), lives 6 s and exits 1, so that the kubelet restarts it. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static void done(int sig) { (void)sig; _exit(0); }

int main(int argc, char **argv) {
	signal(SIGTERM, done);
	long n = argc > 1 ? atol(argv[1]) : 1;
	for (long i = 0; i < n; i++) {
		int fd = open("/nonexistent/probectl-pod", O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			close(fd);
	}
	if (argc > 2 && mkdir("/state/ran", 0755) == 0) {
		sleep(6);
		return 1;
	}
	for (;;)
		pause();
}
