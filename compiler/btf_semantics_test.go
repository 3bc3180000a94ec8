package compiler

import (
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
	"golang.org/x/sys/unix"
)

// Kernel data read through BTF, run in the kernel: the generated code of
// kernel paths, compiled against the host's BTF, runs with BPF_PROG_RUN as
// a raw tracepoint program on this thread, so that task is this thread's
// task_struct; what it reads is compared with what the kernel says through
// /proc and system calls, and with the state the test gives the thread
// (its comm, its process's oom_score_adj, a bitfield set by sched_setattr).
// Arguments by name run the same way: the program of a kernel probe reads
// its arguments from pt_regs, and the raw tracepoint's context, an array
// of u64, stands for the argument registers.

// hostFacts is the live kernel's facts (its own BTF) with the links of
// the linux-7.2-amd64 profile: the host cannot attach to kernel functions,
// but runs their code.
func hostFacts(t *testing.T) *bpf.Facts {
	t.Helper()
	requireRoot(t)
	f, err := bpf.Detect(bpf.DetectOptions{Functions: true})
	if err != nil {
		t.Fatal(err)
	}
	if !f.BTF || f.Arch != bpf.ArchX86_64 {
		t.Skipf("needs an x86-64 kernel with BTF (this is %s, BTF %v)", f.Arch, f.BTF)
	}
	p, _ := bpf.Profile("linux-7.2-amd64")
	f.Links = p.Links
	f.Derive()
	return f
}

// runKernelValue compiles `sum "v" { value = x }` (or, for a string x,
// `count "v" { when = x == lit }`) into the entry program of a kernel
// probe on fn, loads it as a raw tracepoint program whose context holds
// args where pt_regs holds the argument registers, runs it once on this
// (locked) thread and returns the value.
func runKernelValue(t *testing.T, facts *bpf.Facts, fn, x string, args ...uint64) int64 {
	t.Helper()
	action := fmt.Sprintf("sum \"v\" { value = %s }", x)
	if lhs, lit, ok := strings.Cut(x, " == \""); ok && strings.HasSuffix(lit, "\"") {
		action = fmt.Sprintf("count \"v\" { when = %s == \"%s }", lhs, lit)
	}
	src := fmt.Sprintf("probe \"kernel\" \"k\" {\n  functions = [%q]\n  on_entry {\n    %s\n  }\n}\n", fn, action)
	cfg, diags := spec.Parse(map[string][]byte{"k.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	out, diags := Compile(cfg, facts)
	if diags.HasErrors() {
		t.Fatalf("%s: %v", x, diags)
	}
	p := out.Probes[0]
	cs, err := p.CollectionSpec(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var key string
	var prog *ebpf.ProgramSpec
	for k, ps := range cs.Programs {
		key, prog = k, ps
	}
	prog.Type, prog.AttachType = ebpf.RawTracepoint, ebpf.AttachNone
	regs, _ := bpf.RegsFor(facts.Arch)
	for i := range prog.Instructions {
		ins := &prog.Instructions[i]
		if ins.OpCode.Class() == asm.LdXClass && ins.Src == regCtx {
			for n, off := range regs.Args {
				if ins.Offset == off {
					ins.Offset = int16(8 * n) // argument n: the context's u64 n
				}
			}
		}
	}
	coll, err := ebpf.NewCollection(cs)
	if err != nil {
		t.Fatalf("%s: load: %v", x, err)
	}
	defer coll.Close()
	ctx := make([]uint64, 6)
	copy(ctx, args)
	if _, err := coll.Programs[key].Run(&ebpf.RunOptions{Context: ctx}); err != nil {
		t.Fatalf("%s: run: %v", x, err)
	}
	total, err := aggTotal(coll.Maps[p.Aggregations[0].MapRef], uint64(0))
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return 0
	} else if err != nil {
		t.Fatal(err)
	}
	return total
}

// procStat returns field n (1-based, as proc(5) numbers them) of
// /proc/PID/stat.
func procStat(t *testing.T, pid string, n int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// The comm, field 2, is in parentheses and may hold spaces.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	v, err := strconv.ParseInt(strings.Fields(rest)[n-3], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestKernelDataSemantics(t *testing.T) {
	facts := hostFacts(t)
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()

	// The thread's state the reads must see.
	const comm = "probectl-btf"
	var saved [16]byte
	unix.Prctl(unix.PR_GET_NAME, uintptr(unsafe.Pointer(&saved[0])), 0, 0, 0)
	name := append([]byte(comm), 0)
	if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&saved[0])), 0, 0, 0)
	oldAdj, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	// Raising it needs no privilege (lowering it needs CAP_SYS_RESOURCE).
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte("317"), 0); err != nil {
		t.Fatal(err)
	}
	defer os.WriteFile("/proc/self/oom_score_adj", oldAdj, 0)
	host, _ := os.Hostname()
	pid, tid, ppid := int64(os.Getpid()), int64(unix.Gettid()), int64(os.Getppid())
	gppid := procStat(t, fmt.Sprint(ppid), 4)
	me := fmt.Sprint(pid)

	task := runKernelValue(t, facts, "vfs_read", "task")
	tests := []struct {
		fn, x string
		want  int64
		args  []uint64
	}{
		{"vfs_read", "task.pid", tid, nil},
		{"vfs_read", "task.tgid", pid, nil},
		{"vfs_read", "ppid", ppid, nil},
		{"vfs_read", "task.real_parent.tgid", ppid, nil},
		{"vfs_read", "task.real_parent.real_parent.tgid", gppid, nil},
		{"vfs_read", "task.group_leader.pid", pid, nil},
		{"vfs_read", `cast(task.real_parent + 0, "struct task_struct").tgid`, ppid, nil},
		// struct signal_struct's short.
		{"vfs_read", "task.signal.oom_score_adj", 317, nil},
		// mm_struct's fields sit in an anonymous struct.
		{"vfs_read", "task.mm.start_stack", procStat(t, me, 28), nil},
		{"vfs_read", "task.mm.arg_start", procStat(t, me, 48), nil},
		// char arrays compared as strings; nodename is in an embedded struct.
		{"vfs_read", `task.comm == "` + comm + `"`, 1, nil},
		{"vfs_read", `task.comm == "probectl"`, 0, nil},
		{"vfs_read", `task.nsproxy.uts_ns.name.nodename == "` + host + `"`, 1, nil},
		{"vfs_read", `str(task.comm, 9) == "probectl"`, 1, nil},
		// Bitfields: 0 while this thread runs, not in execve.
		{"vfs_read", "task.sched_reset_on_fork", 0, nil},
		{"vfs_read", "task.in_execve", 0, nil},
		{"vfs_read", "task.in_iowait", 0, nil},
		// Arguments by name, from their registers: send_sig(int sig,
		// struct task_struct *p, int priv). An int's upper register bits
		// are undefined: only the low 32 count, sign-extended.
		{"send_sig", "args.sig", -9, []uint64{0xdeadbeef_fffffff7, uint64(task), 1}},
		{"send_sig", "args.priv", 1, []uint64{9, uint64(task), 0x12345678_00000001}},
		{"send_sig", "args.p.tgid", pid, []uint64{9, uint64(task), 1}},
		{"send_sig", "args.p.real_parent.tgid", ppid, []uint64{9, uint64(task), 1}},
		{"send_sig", `args.p.comm == "` + comm + `"`, 1, []uint64{9, uint64(task), 1}},
		{"wake_up_process", "args.p.pid", tid, []uint64{uint64(task)}},
		// A NULL pointer on the way reads as 0.
		{"wake_up_process", "args.p.real_parent.tgid", 0, []uint64{0}},
		{"wake_up_process", `cast(arg0, "struct task_struct").tgid`, pid, []uint64{uint64(task)}},
	}
	for _, tt := range tests {
		if got := runKernelValue(t, facts, tt.fn, tt.x, tt.args...); got != tt.want {
			t.Errorf("%s on %s = %d in BPF, want %d", tt.x, tt.fn, got, tt.want)
		}
	}

	// SCHED_RESET_ON_FORK sets the bitfield, on this thread only.
	attr := &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL, Flags: unix.SCHED_FLAG_RESET_ON_FORK}
	if err := unix.SchedSetAttr(0, attr, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}, 0)
	for x, want := range map[string]int64{"task.sched_reset_on_fork": 1, "task.in_execve": 0, "task.in_iowait": 0, "task.pid": tid} {
		if got := runKernelValue(t, facts, "vfs_read", x); got != want {
			t.Errorf("after SCHED_RESET_ON_FORK: %s = %d in BPF, want %d", x, got, want)
		}
	}
	t.Logf("task %#x: pid %d, tid %d, ppid %d, grandparent %d, comm %q, host %q", task, pid, tid, ppid, gppid, comm, host)
}
