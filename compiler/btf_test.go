package compiler_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
)

// Kernel data through BTF, compiled against the host's own types: the
// offsets in the generated code are the ones the host's BTF gives, found
// here independently.

var live struct {
	once  sync.Once
	facts *bpf.Facts
	err   error
}

// liveTarget is the host kernel's facts (bpf.Detect: its BTF is read from
// /sys/kernel/btf/vmlinux when first needed) with the link families of
// the linux-7.2-amd64 profile: the host cannot attach to kernel functions,
// but its verifier loads kprobe-family programs.
func liveTarget(t *testing.T) *bpf.Facts {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("detecting the live kernel's facts loads probe programs: needs root")
	}
	live.once.Do(func() { live.facts, live.err = bpf.Detect(bpf.DetectOptions{Functions: true}) })
	if live.err != nil {
		t.Fatal(live.err)
	}
	if !live.facts.BTF {
		t.Skip("the host kernel has no BTF")
	}
	f := *live.facts
	f.Links = mustProfile(t, "linux-7.2-amd64").Links
	f.Derive()
	return &f
}

// hostSpec is the host's BTF, read by the test itself.
func hostSpec(t *testing.T) *btf.Spec {
	t.Helper()
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// offsetOf is the byte offset of a field path in a struct of the host's
// BTF, anonymous members searched; and the field's size.
func offsetOf(t *testing.T, spec *btf.Spec, structName string, fields ...string) (int, int) {
	t.Helper()
	var st *btf.Struct
	if err := spec.TypeByName(structName, &st); err != nil {
		t.Fatal(err)
	}
	var typ btf.Type = st
	off := 0
	for _, name := range fields {
		m, bits, ok := find(btf.UnderlyingType(typ), name)
		if !ok {
			t.Fatalf("struct %s: no %s", structName, name)
		}
		off += int(bits / 8)
		typ = m.Type
	}
	size, err := btf.Sizeof(typ)
	if err != nil {
		t.Fatal(err)
	}
	return off, size
}

func find(t btf.Type, name string) (btf.Member, btf.Bits, bool) {
	var ms []btf.Member
	switch v := t.(type) {
	case *btf.Struct:
		ms = v.Members
	case *btf.Union:
		ms = v.Members
	}
	for _, m := range ms {
		if m.Name == name {
			return m, m.Offset, true
		}
		if m.Name == "" {
			if inner, off, ok := find(btf.UnderlyingType(m.Type), name); ok {
				return inner, m.Offset + off, true
			}
		}
	}
	return btf.Member{}, 0, false
}

// read is one bpf_probe_read_kernel(_str): at R3's offset from the base
// in R0, size bytes.
type read struct {
	off, size int
	str       bool
}

// reads lists the kernel reads of the code generated for a by key.
func reads(insns asm.Instructions) []read {
	var out []read
	r0, off, size := 0, 0, 0 // R0's offset from the base (an array's address), R3's, R2
	for _, ins := range insns {
		imm := ins.OpCode.Source() == asm.ImmSource
		switch op := ins.OpCode.ALUOp(); {
		case ins.IsBuiltinCall():
			if fn := asm.BuiltinFunc(ins.Constant); fn == asm.FnProbeReadKernel || fn == asm.FnProbeReadKernelStr {
				out = append(out, read{off, size, fn == asm.FnProbeReadKernelStr})
			}
			r0 = 0
		case op == asm.Add && ins.Dst == asm.R0 && imm:
			r0 += int(ins.Constant)
		case op == asm.Mov && ins.Dst == asm.R3:
			off = r0
		case op == asm.Add && ins.Dst == asm.R3 && imm:
			off += int(ins.Constant)
		case op == asm.Mov && ins.Dst == asm.R2 && imm:
			size = int(ins.Constant)
		case ins.OpCode.Class() == asm.LdXClass && ins.Dst == asm.R0:
			r0 = 0
		}
	}
	return out
}

// keyCode compiles a kernel probe on fn counting by key, and returns the
// instructions of the key's code (from its source comment to the next).
func keyCode(t *testing.T, facts *bpf.Facts, fn, key string) asm.Instructions {
	t.Helper()
	out := compileText(t, facts, `probe "kernel" "p" {
  functions = ["`+fn+`"]
  on_entry {
    count "c" { by = [`+key+`] }
  }
}`)
	insns := out.Probes[0].Programs[0].Instructions
	for i, ins := range insns {
		if src := ins.Source(); src != nil && strings.HasSuffix(src.String(), "by "+key) {
			j := i + 1
			for j < len(insns) && insns[j].Source() == nil {
				j++
			}
			return insns[i:j]
		}
	}
	t.Fatalf("no code for by %s:\n%v", key, insns)
	return nil
}

func TestKernelPathOffsets(t *testing.T) {
	facts := liveTarget(t)
	spec := hostSpec(t)
	regs, _ := bpf.RegsFor(facts.Arch)
	fPath, _ := offsetOf(t, spec, "file", "f_path")
	dentry, _ := offsetOf(t, spec, "path", "dentry")
	dName, _ := offsetOf(t, spec, "dentry", "d_name", "name")
	parent, _ := offsetOf(t, spec, "task_struct", "real_parent")
	tgid, tgidSize := offsetOf(t, spec, "task_struct", "tgid")
	comm, commSize := offsetOf(t, spec, "task_struct", "comm")
	dport, dportSize := offsetOf(t, spec, "sock", "__sk_common", "skc_dport")
	daddr, _ := offsetOf(t, spec, "sock", "__sk_common", "skc_daddr")
	v6, v6Size := offsetOf(t, spec, "sock", "__sk_common", "skc_v6_daddr", "in6_u", "u6_addr8")
	t.Logf("host BTF: file.f_path %d, path.dentry %d, dentry.d_name.name %d, task_struct.real_parent %d, .tgid %d (%d bytes), .comm %d (%d bytes), sock.skc_dport %d (%d bytes), .skc_daddr %d",
		fPath, dentry, dName, parent, tgid, tgidSize, comm, commSize, dport, dportSize, daddr)

	tests := []struct {
		fn, key string
		want    []read
	}{
		{"vfs_read", "args.file.f_path.dentry", []read{{fPath + dentry, 8, false}}},
		{"vfs_read", "str(args.file.f_path.dentry.d_name.name)", []read{{fPath + dentry, 8, false}, {dName, 8, false}, {0, 64, true}}},
		{"vfs_read", "task.real_parent.tgid", []read{{parent, 8, false}, {tgid, tgidSize, false}}},
		{"vfs_read", "ppid", []read{{parent, 8, false}, {tgid, tgidSize, false}}},
		{"vfs_read", "task.comm", []read{{comm, commSize, true}}},
		{"vfs_read", "args.count", nil},
		{"tcp_connect", "args.sk.__sk_common.skc_dport", []read{{dport, dportSize, false}}},
		{"tcp_connect", `cast(arg0, "struct sock").__sk_common.skc_daddr`, []read{{daddr, 4, false}}},
		// __u8[16] is bytes, read whole (not a string that a 0 would end).
		{"tcp_connect", "args.sk.__sk_common.skc_v6_daddr.in6_u.u6_addr8", []read{{v6, v6Size, false}}},
	}
	for _, tt := range tests {
		code := keyCode(t, facts, tt.fn, tt.key)
		if got := reads(code); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s on %s: reads %+v, want %+v\n%v", tt.key, tt.fn, got, tt.want, code)
		}
	}
	// args.file is the first argument: from pt_regs, where kprobes find it.
	code := keyCode(t, facts, "vfs_read", "args.count")
	if ins := code[0]; ins.OpCode.Class() != asm.LdXClass || ins.Src != asm.R6 || ins.Offset != regs.Args[2] {
		t.Errorf("args.count is not read from the third argument register: %v", code)
	}
	// pid_t is a signed 32-bit int: task.real_parent.tgid sign-extends.
	if !strings.Contains(fmt.Sprint(keyCode(t, facts, "vfs_read", "ppid")), "ArShImm dst: r0 imm: 32") {
		t.Error("ppid is not sign-extended from 32 bits")
	}
}

// ret carries the declared return type: int is sign-extended from 32 bits,
// ssize_t (long) is the whole register.
func TestTypedRet(t *testing.T) {
	facts := liveTarget(t)
	for _, tt := range []struct {
		fn     string
		extend bool
	}{{"vfs_fsync", true}, {"vfs_read", false}} {
		out := compileText(t, facts, `probe "kernel" "p" {
  functions = ["`+tt.fn+`"]
  on_exit {
    count "c" { by = [ret] }
  }
}`)
		listing := fmt.Sprint(out.Probes[0].Programs[0].Instructions)
		if got := strings.Contains(listing, "ArShImm dst: r0 imm: 32"); got != tt.extend {
			t.Errorf("ret of %s sign-extended from 32 bits: %v, want %v\n%s", tt.fn, got, tt.extend, listing)
		}
	}
}

// Errors name the struct and the nearest fields, at the field's range.
func TestKernelPathErrors(t *testing.T) {
	facts := liveTarget(t)
	src := func(key string) string {
		return `probe "kernel" "p" {
  functions = ["vfs_read"]
  on_entry {
    count "c" { by = [` + key + `] }
  }
}`
	}
	tests := []struct {
		key, summary, at string
		detail           []string
	}{
		{"args.file.f_pth.dentry", "Unknown struct field", "f_pth", []string{"struct file", `"f_path"`}},
		{"args.fil", "Not a parameter", "args.fil", []string{"vfs_read", "file, buf, count, pos", `"file"`}},
		{"task.real_parnt.tgid", "Unknown struct field", "real_parnt", []string{"struct task_struct", `"real_parent"`}},
		{"args.count.x", "No fields here", "x", []string{"args.count is size_t"}},
		{`cast(args.file.f_flags, "struct sock").sk_type`, "cast needs a pointer", "args.file.f_flags", []string{"unsigned int"}},
		{`cast(arg0, "struct sokc").sk_type`, "Unknown struct", `"struct sokc"`, []string{`"sock"`}},
		{"str(args.count)", "str needs a pointer", "args.count", []string{"size_t"}},
		{"task.comm.x", "No fields here", "x", []string{"char[16]"}},
		{`enum_value("SKB_DROP_REASON_NOT_SPECIFIE")`, "Unknown enum constant", `enum_value("SKB_DROP_REASON_NOT_SPECIFIE")`, []string{"SKB_DROP_REASON_NOT_SPECIFIE", "write the number"}},
		{`offsetof("struct mount", "mnnt")`, "Unknown member", `offsetof("struct mount", "mnnt")`, []string{"struct mount has no member mnnt", "mnt_parent"}},
		{`offsetof("struct mont", "mnt")`, "Unknown struct", `offsetof("struct mont", "mnt")`, []string{`"mount"`}},
		{`offsetof("struct sock", "sk_type.x")`, "Not a struct", `offsetof("struct sock", "sk_type.x")`, []string{"struct sock.sk_type is a"}},
	}
	for _, tt := range tests {
		s := src(tt.key)
		diags := compileErrors(t, facts, s)
		if len(diags) != 1 || diags[0].Summary != tt.summary {
			t.Errorf("%s: %v, want one %q", tt.key, diags, tt.summary)
			continue
		}
		d := diags[0]
		line := strings.Split(s, "\n")[d.Subject.Start.Line-1]
		if got := line[d.Subject.Start.Column-1 : d.Subject.End.Column-1]; got != tt.at {
			t.Errorf("%s: %q at %q, want at %q", tt.key, d.Summary, got, tt.at)
		}
		for _, want := range tt.detail {
			if !strings.Contains(d.Detail, want) {
				t.Errorf("%s: detail %q lacks %q", tt.key, d.Detail, want)
			}
		}
		t.Logf("%s: %s: %s", tt.key, d.Summary, d.Detail)
	}
}

// A profile carries no BTF: the plan lists what is resolved at apply, and
// the probe compiles with placeholders.
func TestDeferredWithoutBTF(t *testing.T) {
	out := compileText(t, mustProfile(t, "linux-7.2-amd64"), `probe "kernel" "p" {
  functions = ["vfs_read"]
  on_entry {
    save = { name = str(args.file.f_path.dentry.d_name.name) }
    count "c" { by = [task.comm, ppid, args.count, cast(arg0, "struct sock").sk_type, enum_value("SKB_DROP_REASON_NOT_SPECIFIED") + offsetof("struct mount", "mnt")] }
  }
  on_exit {
    count "r" {
      when = entry.name == "x" && starts_with(task.comm, "y") && task.comm != "z"
      by   = [ret]
    }
  }
}

probe "kernel" "plain" {
  functions = ["vfs_read"]
  on_entry {
    count "c" { by = [arg0] }
  }
}`)
	want := []string{"args.file.f_path.dentry.d_name.name", "task.comm", "ppid", "args.count", `cast(arg0, "struct sock").sk_type`, `enum_value("SKB_DROP_REASON_NOT_SPECIFIED")`, `offsetof("struct mount", "mnt")`, "ret"}
	if got := out.Probes[0].Deferred; !reflect.DeepEqual(got, want) {
		t.Errorf("deferred %q, want %q", got, want)
	}
	if d := out.Probes[1].Deferred; d != nil {
		t.Errorf("a probe reading no kernel data deferred %q", d)
	}
}

// A facts file written with the kernel's BTF types kernel data exactly as
// the live kernel does.
func TestFactsFileTypesAsLive(t *testing.T) {
	liveFacts := liveTarget(t)
	withFile, err := bpf.Detect(bpf.DetectOptions{Functions: true, BTF: true})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "facts.json")
	if err := withFile.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	fileFacts, err := bpf.ReadFactsFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fileFacts.Links = liveFacts.Links
	fileFacts.Derive()
	src := `probe "kernel" "p" {
  functions = ["vfs_read", "vfs_write"]
  on_entry {
    save = { name = str(args.file.f_path.dentry.d_name.name), start = ktime }
    count "c" { by = [task.comm, ppid, args.count, task.real_parent.real_parent.pid] }
  }
  on_exit {
    hist "h" {
      value = ktime - entry.start
      by    = [entry.name, ret]
    }
  }
}`
	a, b := compileText(t, liveFacts, src), compileText(t, fileFacts, src)
	if a.Probes[0].Digest != b.Probes[0].Digest {
		t.Errorf("live and facts file compile differently: %s, %s", a.Probes[0].Digest, b.Probes[0].Digest)
	}
	fi, _ := os.Stat(path)
	t.Logf("facts file with BTF: %d bytes; digest %s", fi.Size(), a.Probes[0].Digest)
	if _, err := fileFacts.Types(); err != nil || errors.Is(err, bpf.ErrTypesDeferred) {
		t.Errorf("facts file types: %v", err)
	}
	js, err := json.Marshal(compiler.NewPlan(b))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(js), "kernel_btf") || len(js) > 1<<20 {
		t.Errorf("the plan's JSON carries the BTF (%d bytes)", len(js))
	}
}

// Every example of examples/bpftrace compiles against the host's types and
// its programs pass the host's verifier (kprobe-family and tracepoint
// programs; fentry is the VM matrix's). Against each profile, those that
// probe only kernel functions compile too, with what they read through
// BTF resolved at apply. An example that names a kernel function the host
// lacks (a module's: mdflush) or a binary it lacks is compiled for the
// profiles only, and says so.
func TestBPFtraceExamplesLoad(t *testing.T) {
	kernel := requireBPF(t)
	names, _ := filepath.Glob("../examples/bpftrace/*.hcl")
	if len(names) == 0 {
		t.Fatal("no examples in examples/bpftrace")
	}
	for _, name := range names {
		t.Run(filepath.Base(name), func(t *testing.T) {
			cfg, diags := spec.LoadPaths([]string{name})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			facts := liveTarget(t)
			kernelOnly := true
			var lacks []string
			for _, p := range cfg.Probes {
				for _, ev := range p.Events {
					if err := facts.LoadTracepoints([]string{ev.Text}); err != nil {
						t.Fatal(err)
					}
				}
				kernelOnly = kernelOnly && p.Addr.Kind == bpf.KindKernel
				switch p.Addr.Kind {
				case bpf.KindKernel:
					for _, fn := range p.Functions {
						if !strings.ContainsAny(fn.Text, "*?[") && !slices.Contains(facts.Functions, fn.Text) {
							lacks = append(lacks, "kernel function "+fn.Text)
						}
					}
				case bpf.KindUser:
					if _, err := os.Stat(p.Binary); err != nil {
						lacks = append(lacks, p.Binary)
					}
				}
			}
			if kernelOnly {
				for _, profile := range bpf.ProfileNames() {
					pf := mustProfile(t, profile)
					if !pf.Kernel.AtLeast(5, 15) {
						// Refused only for what 5.10 lacks: attach
						// cookies and BPF perf links (5.15).
						if _, diags := compiler.Compile(cfg, pf); diags.HasErrors() {
							for _, d := range diags {
								if d.Summary != "No attach cookies" && d.Summary != "Cannot sample" {
									t.Errorf("%s: %s: %s", profile, d.Summary, d.Detail)
								}
							}
							continue
						}
					}
					out := compileConfig(t, pf, cfg, diags)
					for _, p := range out.Probes {
						t.Logf("%s on %s: resolved at apply: %v", p.Address, profile, p.Deferred)
					}
				}
			}
			if len(lacks) > 0 {
				t.Skipf("this machine lacks %s", strings.Join(lacks, ", "))
			}
			out := compileConfig(t, facts, cfg, diags)
			for _, p := range out.Probes {
				if len(p.Deferred) > 0 {
					t.Errorf("%s: deferred %v against the live kernel", p.Address, p.Deferred)
				}
			}
			t.Logf("%d programs loaded", loadAll(t, out, kernel))
		})
	}
}

// A target whose BTF cannot be read (damaged in a facts file, or a kernel
// built without it) is an error at the kernel data, never a deferral.
func TestKernelTypesUnavailable(t *testing.T) {
	const src = `probe "tracepoint" "t" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "c" { by = [task.comm] }
  }
}`
	damaged := mustProfile(t, "linux-7.2-amd64")
	damaged.KernelBTF = []byte("not gzip")
	noBTF := mustProfile(t, "linux-7.2-amd64")
	noBTF.BTF = false
	wantError(t, compileErrors(t, damaged, src), "Kernel types unavailable", 4)
	wantError(t, compileErrors(t, noBTF, src), "Kernel has no BTF", 4)
}
