/* A shared library with a USDT probe behind a semaphore, for
   TestUSDTLibraryRunning: built with -DMAIN it is the program that loads
   it, which waits for a line on stdin, calls lib_tick argv[1] times and
   prints how many calls saw the semaphore raised. */
#ifndef MAIN
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

unsigned short lib_tick_semaphore __attribute__((section(".probes")));

int lib_tick(int i) {
	STAP_PROBE1(lib, tick, 7 * i);
	return lib_tick_semaphore != 0;
}
#else
#include <stdio.h>
#include <stdlib.h>

int lib_tick(int i);

int main(int argc, char **argv) {
	int n = atoi(argv[1]), raised = 0;
	getchar();
	for (int i = 0; i < n; i++)
		raised += lib_tick(i);
	printf("%d\n", raised);
	return 0;
}
#endif
