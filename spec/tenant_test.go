package spec_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/probectl/probectl/spec"
)

// TestTenantPolicy: a namespace's specs (a namespaced ProbeSet) are
// refused, at the construct and with the reason, what reads kernel
// addresses or other tasks' data, and probes that run for whatever task a
// CPU runs; what a task does itself (its system calls, its own functions,
// its own values) stays allowed. Each refused spec is allowed without a
// policy, so the refusal is the policy's.
func TestTenantPolicy(t *testing.T) {
	const sys = "probe \"tracepoint\" \"t\" {\n  event = %q\n  on_entry {\n    count \"n\" { by = [%s] }\n  }\n}\n"
	const user = "probe \"user\" \"u\" {\n  binary = \"/bin/true\"\n  functions = [\"main\"]\n  on_entry {\n    count \"n\" { by = [%s] }\n  }\n}\n"
	const kernel = "probe \"kernel\" \"k\" {\n  functions = [\"vfs_read\"]\n  on_entry {\n    count \"n\" { by = [pid] }\n  }\n}\n"
	const profile = "probe \"profile\" \"p\" {\n  frequency = 99\n  on_entry {\n    count \"n\" { by = [ustack] }\n  }\n}\n"
	denied := []struct {
		src, at, summary, class string
		line                    int
	}{
		{fmt.Sprintf(sys, "syscalls:sys_enter_read", "kstack"), "kstack", "Kernel stack denied", "kernel-stack", 4},
		{fmt.Sprintf(sys, "syscalls:sys_enter_read", "task.real_parent.comm"), "task.real_parent.comm", "Kernel data denied", "kernel-data", 4},
		{fmt.Sprintf(sys, "syscalls:sys_enter_read", "task.pid"), "task.pid", "Kernel data denied", "kernel-data", 4},
		{fmt.Sprintf(sys, "syscalls:sys_enter_read", "ppid"), "ppid", "Kernel data denied", "kernel-data", 4},
		{fmt.Sprintf(sys, "sched:sched_switch", "pid"), `"sched:sched_switch"`, "Node-wide probe denied", "node-wide", 2},
		{fmt.Sprintf(sys, "block:*", "pid"), `"block:*"`, "Node-wide probe denied", "node-wide", 2},
		{fmt.Sprintf(user, "kernel_str(arg0)"), "arg0", "Raw address denied", "raw-address", 5},
		{fmt.Sprintf(user, "kernel_u64(arg0)"), "arg0", "Raw address denied", "raw-address", 5},
		{fmt.Sprintf(user, `kernel_u64(kaddr("init_task") + 8)`), `kaddr("init_task")`, "Raw address denied", "raw-address", 5},
		{fmt.Sprintf(sys, "syscalls:sys_enter_read", `kaddr("avenrun")`), `kaddr("avenrun")`, "Raw address denied", "raw-address", 4},
		{kernel, `probe "kernel" "k"`, "Node-wide probe denied", "node-wide", 1},
		{profile, `probe "profile" "p"`, "Node-wide probe denied", "node-wide", 1},
	}
	tenant := spec.TenantPolicy("shop")
	if tenant.Tenant() != "shop" || (spec.Policy{}).Tenant() != "" {
		t.Fatalf("Tenant() = %q, zero policy's %q", tenant.Tenant(), spec.Policy{}.Tenant())
	}
	for _, c := range denied {
		cfg, diags := spec.Parse(map[string][]byte{"p.hcl": []byte(c.src)})
		if diags.HasErrors() {
			t.Fatalf("%s: %v", c.src, diags)
		}
		if d := cfg.Enforce(spec.Policy{}); len(d) != 0 {
			t.Errorf("%s: refused without a policy: %v", c.at, d)
		}
		d := cfg.Enforce(tenant)
		if len(d) != 1 {
			t.Errorf("%s: %d diagnostics under the tenant policy, want 1: %v", c.at, len(d), d)
			continue
		}
		start := strings.Index(strings.Split(c.src, "\n")[c.line-1], c.at) + 1
		want := fmt.Sprintf("p.hcl:%d,%d-", c.line, start)
		if got := d[0].Subject.String(); !strings.HasPrefix(got, want) || d[0].Summary != c.summary {
			t.Errorf("%s: %s at %s, want %s at %s...", c.at, d[0].Summary, got, c.summary, want)
		}
		if c.class != "raw-address" {
			for _, s := range []string{"namespace shop", "class " + c.class, "ClusterProbeSet"} {
				if !strings.Contains(d[0].Detail, s) {
					t.Errorf("%s: detail %q lacks %q", c.at, d[0].Detail, s)
				}
			}
		}
	}
	allowed := []string{
		fmt.Sprintf(sys, "syscalls:sys_enter_openat", "pid, comm, cgroup, str(args.filename)"),
		fmt.Sprintf(sys, "raw_syscalls:sys_enter", "args.id, tid, uid, ustack"),
		fmt.Sprintf(sys, "syscalls:sys_exit_*", "event, args.ret, ktime, cpu"),
		fmt.Sprintf(user, "str(arg0), arg1, ustack(8)"),
	}
	for _, src := range allowed {
		cfg, diags := spec.Parse(map[string][]byte{"p.hcl": []byte(src)})
		if diags.HasErrors() {
			t.Fatalf("%s: %v", src, diags)
		}
		if d := cfg.Enforce(tenant); len(d) != 0 {
			t.Errorf("%s: refused under the tenant policy: %v", src, d)
		}
	}
}
