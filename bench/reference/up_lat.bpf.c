// The reference for a user probe's entry+exit latency histogram, written
// by hand in C (clang -O2 -target bpf): what probectl generates for
//
//   probe "user" "lat" {
//     binary = ".../bench_ucall"  functions = ["target"]
//     on_entry { save = { start = ktime } }
//     on_exit  { hist "ns" { value = ktime - entry.start } }
//   }
//
// the same maps (the start time in an LRU hash per thread, the log2
// buckets in a per-CPU hash), without probectl's per-probe hit counter.
// The map is named calls for bench/refload.
#include <linux/bpf.h>

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

static __u64 (*bpf_ktime_get_ns)(void) = (void *)BPF_FUNC_ktime_get_ns;
static __u64 (*bpf_get_current_pid_tgid)(void) = (void *)BPF_FUNC_get_current_pid_tgid;
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_lookup_elem;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, __u64 flags) = (void *)BPF_FUNC_map_update_elem;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_delete_elem;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u64);
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 10240);
	__type(key, __u64);
	__type(value, __u64);
} calls SEC(".maps");

SEC("uprobe.multi")
int entry(void *ctx)
{
	__u64 tid = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	bpf_map_update_elem(&start, &tid, &now, BPF_ANY);
	return 0;
}

// bucket is bpftrace's hist: 0 for 0, 1 + floor(log2(v)) above.
static __always_inline __u64 bucket(__u64 v)
{
	__u64 r = 0, s;
	if (v == 0)
		return 0;
	s = (v > 0xFFFFFFFFULL) << 5; v >>= s; r |= s;
	s = (v > 0xFFFF) << 4; v >>= s; r |= s;
	s = (v > 0xFF) << 3; v >>= s; r |= s;
	s = (v > 0xF) << 2; v >>= s; r |= s;
	s = (v > 0x3) << 1; v >>= s; r |= s;
	r |= (v >> 1);
	return r + 1;
}

SEC("uretprobe.multi")
int exit_(void *ctx)
{
	__u64 tid = bpf_get_current_pid_tgid();
	__u64 *t = bpf_map_lookup_elem(&start, &tid);
	if (!t)
		return 0;
	__u64 k = bucket(bpf_ktime_get_ns() - *t);
	bpf_map_delete_elem(&start, &tid);
	__u64 *v = bpf_map_lookup_elem(&calls, &k);
	if (v) {
		*v += 1;
		return 0;
	}
	__u64 one = 1;
	bpf_map_update_elem(&calls, &k, &one, BPF_NOEXIST);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
