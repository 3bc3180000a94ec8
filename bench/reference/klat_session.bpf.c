// The reference for the kprobe.session route (klat.h): one program runs
// at entry and exit, the start time in the session's cookie. The kfuncs
// took no argument before Linux 7.0 and take the context since; compile
// with -DKLAT_SESSION_CTX for 7.0 and later.
#define KLAT_COOKIE
#include "klat.h"

#ifdef KLAT_SESSION_CTX
extern _Bool bpf_session_is_return(void *ctx) __ksym;
extern __u64 *bpf_session_cookie(void *ctx) __ksym;
#define CTX ctx
#else
extern _Bool bpf_session_is_return(void) __ksym;
extern __u64 *bpf_session_cookie(void) __ksym;
#define CTX
#endif

SEC("kprobe.session")
int session(void *ctx)
{
	if (!bpf_session_is_return(CTX)) {
		*bpf_session_cookie(CTX) = bpf_ktime_get_ns(); // 0: run at exit too
		return 0;
	}
	__u64 now = bpf_ktime_get_ns();
	record(now - *bpf_session_cookie(CTX));
	return 0;
}
