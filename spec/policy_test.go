package spec_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/probectl/probectl/spec"
)

// TestDenyRawAddress replays issue 18's arbitrary kernel read: a cast of
// an integer literal read kernel rodata, and nothing could refuse it.
// Under -deny raw-address every read of kernel memory whose address is not
// kernel data named through BTF is an error at the address, naming the
// construct and the fix; reads through BTF-typed data, user memory and
// syscall tracepoints' (user) pointers stay allowed. Without the policy
// nothing is refused.
func TestDenyRawAddress(t *testing.T) {
	const kernel = "probe \"kernel\" \"k\" {\n  functions = [\"vfs_read\"]\n  on_entry {\n    count \"n\" { by = [%s] }\n  }\n}\n"
	const tracepoint = "probe \"tracepoint\" \"t\" {\n  event = %q\n  on_entry {\n    count \"n\" { by = [%s] }\n  }\n}\n"
	const user = "probe \"user\" \"u\" {\n  binary = \"/bin/true\"\n  functions = [\"main\"]\n  on_entry {\n    count \"n\" { by = [%s] }\n  }\n}\n"
	denied := []struct {
		src, addr, fn string
	}{
		{fmt.Sprintf(kernel, `cast(hex("0xffffffff82000000"), "struct file").f_flags`), `hex("0xffffffff82000000")`, "cast"},
		{fmt.Sprintf(kernel, `cast(-2113929216, "struct file").f_flags`), `-2113929216`, "cast"},
		{fmt.Sprintf(kernel, `cast(arg0, "struct file").f_flags`), `arg0`, "cast"},
		{fmt.Sprintf(kernel, `cast(arg0 + 8, "struct file").f_flags`), `arg0 + 8`, "cast"},
		{fmt.Sprintf(kernel, `kernel_str(arg1)`), `arg1`, "kernel_str"},
		{fmt.Sprintf(kernel, `str(arg1)`), `arg1`, "str"},
		{fmt.Sprintf(kernel, `kernel_str(cpu * 4096)`), `cpu * 4096`, "kernel_str"},
		{fmt.Sprintf(kernel, `buf(arg1, 8)`), `arg1`, "buf"},
		{fmt.Sprintf(kernel, `kernel_u64(arg1 + 16)`), `arg1 + 16`, "kernel_u64"},
		{fmt.Sprintf(tracepoint, "sched:sched_switch", `cast(args.prev_pid, "struct task_struct").pid`), `args.prev_pid`, "cast"},
		{fmt.Sprintf(tracepoint, "sched:sched_switch", `str(pid)`), `pid`, "str"},
		{fmt.Sprintf(tracepoint, "syscalls:sys_enter_openat", `kernel_str(args.filename + 16)`), `args.filename + 16`, "kernel_str"},
	}
	deny, err := spec.ParsePolicy("raw-address")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range denied {
		cfg, diags := spec.Parse(map[string][]byte{"p.hcl": []byte(c.src)})
		if diags.HasErrors() {
			t.Fatalf("%s: %v", c.src, diags)
		}
		if d := cfg.Enforce(spec.Policy{}); len(d) != 0 {
			t.Errorf("%s: refused without a policy: %v", c.addr, d)
		}
		d := cfg.Enforce(deny)
		if len(d) != 1 {
			t.Errorf("%s: %d diagnostics under -deny raw-address, want 1: %v", c.addr, len(d), d)
			continue
		}
		line := 4
		start := strings.Index(strings.Split(c.src, "\n")[line-1], c.addr) + 1
		want := fmt.Sprintf("p.hcl:%d,%d-%d", line, start, start+len(c.addr))
		if got := d[0].Subject.String(); got != want || d[0].Summary != "Raw address denied" {
			t.Errorf("%s: %s at %s, want Raw address denied at %s", c.addr, d[0].Summary, got, want)
		}
		for _, s := range []string{c.fn + " reads kernel memory at " + c.addr, "-deny raw-address", "Read kernel data by name instead: args.NAME, task"} {
			if !strings.Contains(d[0].Detail, s) {
				t.Errorf("%s: detail %q lacks %q", c.addr, d[0].Detail, s)
			}
		}
	}

	allowed := []string{
		fmt.Sprintf(kernel, `cast(args.file, "struct file").f_flags`),
		fmt.Sprintf(kernel, `str(args.file.f_path.dentry.d_name.name)`),
		fmt.Sprintf(kernel, `kernel_str(task.mm.owner.comm)`),
		fmt.Sprintf(kernel, `user_str(arg1)`),
		fmt.Sprintf(kernel, `arg0 + 8`),
		fmt.Sprintf(tracepoint, "syscalls:sys_enter_openat", `str(args.filename)`),
		fmt.Sprintf(tracepoint, "syscalls:sys_enter_openat", `str(args.filename + 16)`),
		fmt.Sprintf(tracepoint, "syscalls:sys_enter_write", `buf(args.buf, args.count)`),
		fmt.Sprintf(tracepoint, "sched:sched_process_exec", `str(args.filename)`), // a string in the record, or the compiler's to refuse
		fmt.Sprintf(user, `str(arg0)`),
		fmt.Sprintf(tracepoint, "syscalls:sys_enter_nanosleep", `user_cast(args.rqtp, "struct __kernel_timespec").tv_sec`), // user memory
	}
	for _, src := range allowed {
		cfg, diags := spec.Parse(map[string][]byte{"p.hcl": []byte(src)})
		if diags.HasErrors() {
			t.Fatalf("%s: %v", src, diags)
		}
		if d := cfg.Enforce(deny); len(d) != 0 {
			t.Errorf("refused under -deny raw-address:\n%s%v", src, d)
		}
		if !cfg.Policy.Denies(spec.RawAddress) {
			t.Errorf("Enforce did not record the policy for the compiler")
		}
	}
}

// TestParsePolicy: the classes by name, commas, and an unknown class
// named with the list of known ones.
func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]string{"": "", "raw-address": "raw-address", " raw-address , raw-address,": "raw-address"} {
		p, err := spec.ParsePolicy(in)
		if err != nil || p.String() != want {
			t.Errorf("ParsePolicy(%q) = %q, %v; want %q", in, p, err, want)
		}
	}
	if (spec.Policy{}).Denies(spec.RawAddress) {
		t.Error("the zero Policy denies raw-address")
	}
	_, err := spec.ParsePolicy("raw-address,raw")
	want := `no such class "raw"; the classes: raw-address (reading kernel memory at an address that is not kernel data typed by BTF, kaddr and kernel_u64), kernel-stack (`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("ParsePolicy(raw): %v, want %q...", err, want)
	}
	for _, c := range spec.DenyClasses {
		if !strings.Contains(err.Error(), string(c.Class)+" ("+c.Refuses+")") {
			t.Errorf("ParsePolicy(raw): %v does not name %s", err, c.Class)
		}
	}
}
