// The reference for the fentry + fexit route (klat.h): BPF trampolines.
// The section names a placeholder; bench/kperhit sets the kernel's
// function (AttachTo) before loading.
#include "klat.h"

SEC("fentry/klat_function")
int entry(unsigned long long *ctx)
{
	return on_entry();
}

SEC("fexit/klat_function")
int exit_(unsigned long long *ctx)
{
	return on_exit();
}
