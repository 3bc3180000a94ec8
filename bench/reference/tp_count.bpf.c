// The reference for a tracepoint probe counting by comm, written by hand as
// one would in C (clang -O2 -target bpf): what probectl generates for
//
//   probe "tracepoint" "getppid" {
//     event = "syscalls:sys_enter_getppid"
//     on_entry { count "calls" { by = [comm] } }
//   }
//
// the same map (a per-CPU hash of 10240 comms), without probectl's
// per-probe hit counter. bench/perhit.sh loads it with bench/refload.
#include <linux/bpf.h>

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

static long (*bpf_get_current_comm)(void *buf, __u32 size) = (void *)BPF_FUNC_get_current_comm;
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_lookup_elem;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, __u64 flags) = (void *)BPF_FUNC_map_update_elem;

struct comm {
	char c[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 10240);
	__type(key, struct comm);
	__type(value, __u64);
} calls SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getppid")
int count(void *ctx)
{
	struct comm k = {};
	bpf_get_current_comm(&k, sizeof(k));
	__u64 *v = bpf_map_lookup_elem(&calls, &k);
	if (v) {
		*v += 1; // per-CPU: no other CPU writes this value
		return 0;
	}
	__u64 one = 1;
	bpf_map_update_elem(&calls, &k, &one, BPF_NOEXIST);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
