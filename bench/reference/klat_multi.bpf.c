// The reference for the kprobe.multi + kretprobe.multi route (klat.h).
#include "klat.h"

SEC("kprobe.multi")
int entry(void *ctx)
{
	return on_entry();
}

SEC("kretprobe.multi")
int exit_(void *ctx)
{
	return on_exit();
}
