// The reference for the kprobe + kretprobe route (klat.h): legacy kprobes
// through perf links.
#include "klat.h"

SEC("kprobe")
int entry(void *ctx)
{
	return on_entry();
}

SEC("kretprobe")
int exit_(void *ctx)
{
	return on_exit();
}
