// The reference for the fsession route (klat.h): one program run by the
// function's BPF trampoline at entry and exit (Linux 7.0), the start time
// in the session's cookie. cilium/ebpf v0.22 cannot load fsession
// programs; bench/kperhit loads it with probectl's raw loader
// (bpf/sys.LoadFsession), as probectl loads its own. The section names a
// placeholder; bench/kperhit gives the kernel's function.
#define KLAT_COOKIE
#include "klat.h"

extern _Bool bpf_session_is_return(void *ctx) __ksym;
extern __u64 *bpf_session_cookie(void *ctx) __ksym;

SEC("fsession/klat_function")
int session(unsigned long long *ctx)
{
	if (!bpf_session_is_return(ctx)) {
		*bpf_session_cookie(ctx) = bpf_ktime_get_ns();
		return 0;
	}
	__u64 now = bpf_ktime_get_ns();
	record(now - *bpf_session_cookie(ctx));
	return 0;
}
