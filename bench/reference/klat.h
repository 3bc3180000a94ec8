// What the klat_*.bpf.c references share: an entry+exit latency log2
// histogram of one kernel function, written by hand in C (clang -O2
// -target bpf), the same aggregation probectl generates for
//
//   probe "kernel" "lat" {
//     functions = [FUNCTION]
//     attach    = ROUTE
//     on_entry { save = { start = ktime } }
//     on_exit  { hist "ns" { value = ktime - entry.start } }
//   }
//
// with the same maps: the start time in an LRU hash per thread (16,384
// slots) where the route has no session cookie, the log2 buckets in a
// per-CPU hash (10,240 keys), bucketed as probectl buckets (0 below zero,
// 1 for zero, 2 + floor(log2 v) above). A careful engineer writing it for
// one function keys the start by thread alone, and keeps no hit counter:
// that is probectl's extra work, which the comparison measures. The
// histogram is named calls for bench/kperhit.
#include <linux/bpf.h>

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name
#define __ksym __attribute__((section(".ksyms")))

static __u64 (*bpf_ktime_get_ns)(void) = (void *)BPF_FUNC_ktime_get_ns;
static __u64 (*bpf_get_current_pid_tgid)(void) = (void *)BPF_FUNC_get_current_pid_tgid;
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_lookup_elem;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, __u64 flags) = (void *)BPF_FUNC_map_update_elem;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_delete_elem;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 10240);
	__type(key, __u64);
	__type(value, __u64);
} calls SEC(".maps");

// bucket is probectl's log2 bucket of v.
static __always_inline __u64 bucket(__s64 v)
{
	__u64 u, r = 2, s;
	if (v <= 0)
		return v == 0;
	u = v;
	s = (u > 0xFFFFFFFFULL) << 5; u >>= s; r += s;
	s = (u > 0xFFFF) << 4; u >>= s; r += s;
	s = (u > 0xFF) << 3; u >>= s; r += s;
	s = (u > 0xF) << 2; u >>= s; r += s;
	s = (u > 0x3) << 1; u >>= s; r += s;
	return r + (u >> 1);
}

// record counts one latency in its bucket.
static __always_inline void record(__s64 ns)
{
	__u64 k = bucket(ns), one = 1;
	__u64 *v = bpf_map_lookup_elem(&calls, &k);
	if (v) {
		*v += 1;
		return;
	}
	bpf_map_update_elem(&calls, &k, &one, BPF_NOEXIST);
}

#ifndef KLAT_COOKIE
// The routes without a session cookie keep the start time per thread.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u64);
} start SEC(".maps");

static __always_inline int on_entry(void)
{
	__u64 tid = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	bpf_map_update_elem(&start, &tid, &now, BPF_ANY);
	return 0;
}

static __always_inline int on_exit(void)
{
	__u64 now = bpf_ktime_get_ns(), tid = bpf_get_current_pid_tgid(), then;
	__u64 *t = bpf_map_lookup_elem(&start, &tid);
	if (!t)
		return 0;
	then = *t;
	bpf_map_delete_elem(&start, &tid);
	record(now - then);
	return 0;
}
#endif

char LICENSE[] SEC("license") = "GPL";
