package compiled

// ProbePoint is one place a probe can attach, as probectl list shows it:
// one line of bpftrace -l ("kprobe:vfs_read",
// "tracepoint:syscalls:sys_enter_openat", "uprobe:/bin/bash:readline").
type ProbePoint struct {
	// Kind is the pattern's kind spelt in full: bpftrace's "kprobe",
	// "kretprobe", "fentry", "fexit", "tracepoint", "uprobe", "uretprobe",
	// "usdt", or probectl's "kernel" and "user".
	Kind string `json:"kind"`
	// Name is what it attaches to: a kernel function ("vfs_read"; for
	// fentry and fexit with its module, "vmlinux:vfs_read", as bpftrace
	// prints them), an event ("syscalls:sys_enter_openat"), or a binary's
	// function ("/bin/bash:readline") or USDT probe
	// ("/usr/bin/python3.11:python:function__entry").
	Name string `json:"name"`
	// Fields are shown with -v, one C declaration each: a tracepoint's
	// fields ("int __syscall_nr", "const char * filename"), or a kernel
	// function's prototype from the target's BTF ("struct file * file",
	// and its return value), or a USDT probe's argument specifiers, one
	// line per distinct set among its sites ("-4@%edi 8@%rsi"). Nil without -v, or where the target does
	// not know them (a function its BTF does not declare).
	Fields []string `json:"fields,omitempty"`
}

// String is the point as bpftrace -l prints it: KIND:NAME.
func (p ProbePoint) String() string { return p.Kind + ":" + p.Name }
