package bpf

import (
	"os"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
)

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]Version{
		"6.1.0-50-amd64":       {6, 1, 0},
		"6.12.117+deb13-arm64": {6, 12, 117},
		"7.2":                  {7, 2, 0},
		"6.18.44-fc-v782":      {6, 18, 44},
	} {
		got, err := ParseVersion(in)
		if err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "6", "a.b", "6.1.2.3"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) succeeded", bad)
		}
	}
	if !(Version{6, 19, 0}).AtLeast(6, 19) || (Version{6, 18, 9}).AtLeast(6, 19) || !(Version{7, 0, 0}).AtLeast(6, 19) {
		t.Error("AtLeast is wrong")
	}
}

func TestAddress(t *testing.T) {
	a, err := ParseAddress("kernel.vfs_latency")
	if err != nil || a != (Address{KindKernel, "vfs_latency"}) || a.String() != "kernel.vfs_latency" {
		t.Fatalf("got %v, %v", a, err)
	}
	for _, bad := range []string{"kernel", "kern.x", "kernel.", "kernel.a-b", "user.1x"} {
		if _, err := ParseAddress(bad); err == nil {
			t.Errorf("ParseAddress(%q) succeeded", bad)
		}
	}
	if !(Address{KindKernel, "z"}).Less(Address{KindUser, "a"}) {
		t.Error("kernel probes sort before user probes")
	}
}

// The profiles encode the kernel lab's findings; Derive must agree with them.
func TestProfiles(t *testing.T) {
	tests := map[string]struct {
		fprobe   FprobeBackend
		fastPath bool
		session  bool
		isaV4    bool
		perfLink bool // BPF links on perf events (5.15)
	}{
		"linux-5.10-amd64": {FprobeNone, false, false, false, false},
		"linux-5.10-arm64": {FprobeNone, false, false, false, false},
		"linux-6.1-amd64":  {FprobeNone, false, false, true, true},
		"linux-6.12-amd64": {FprobeRethook, false, true, true, true},
		"linux-7.2-amd64":  {FprobeFgraph, true, true, true, true},
		"linux-6.12-arm64": {FprobeNone, false, false, true, true},
		"linux-7.2-arm64":  {FprobeFgraph, true, true, true, true},
	}
	if len(ProfileNames()) != len(tests) {
		t.Fatalf("profiles %v", ProfileNames())
	}
	for name, want := range tests {
		f, err := Profile(name)
		if err != nil {
			t.Fatal(err)
		}
		if f.Fprobe != want.fprobe || f.FprobeEntryFastPath != want.fastPath || f.Links.KprobeSession != want.session {
			t.Errorf("%s: fprobe %s fast path %v session %v; want %+v", name, f.Fprobe, f.FprobeEntryFastPath, f.Links.KprobeSession, want)
		}
		if f.ISAv4 != want.isaV4 { // 6.6, and Debian's 6.1 (6.1.176)
			t.Errorf("%s: ISA v4 %v, want %v", name, f.ISAv4, want.isaV4)
		}
		if f.Perf.Link != want.perfLink {
			t.Errorf("%s: BPF links on perf events %v, want %v", name, f.Perf.Link, want.perfLink)
		}
		if d := f.Differences(f); len(d) != 0 {
			t.Errorf("%s differs from itself: %v", name, d)
		}
	}
	a, _ := Profile("linux-6.12-amd64")
	b, _ := Profile("linux-7.2-amd64")
	if len(a.Differences(b)) == 0 {
		t.Error("6.12 and 7.2 should differ")
	}
	b.ISAv4 = false
	if d := a.Differences(b); !strings.Contains(strings.Join(d, "; "), "isa_v4: true, not false") {
		t.Errorf("ISA v4 is not a difference: %v", d)
	}
	if _, err := Profile("linux-2.6-amd64"); err == nil {
		t.Error("unknown profile accepted")
	}
}

func TestFactsFileRoundTrip(t *testing.T) {
	f, _ := Profile("linux-6.12-arm64")
	f.Functions = []string{"vfs_write", "vfs_read"}
	path := t.TempDir() + "/facts.json"
	if err := f.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	g, err := ReadFactsFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := f.Differences(g); len(d) != 0 || !g.HasFunction("vfs_read") || g.Source != "file" {
		t.Errorf("round trip: %v, %+v", d, g)
	}
}

func TestResolveKfuncs(t *testing.T) {
	insns := asm.Instructions{KfuncCall("bpf_session_cookie"), asm.Return()}
	if name, ok := KfuncName(&insns[0]); !ok || name != "bpf_session_cookie" {
		t.Fatal("kfunc name lost")
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		t.Skip("this kernel has no BTF to resolve kfuncs against")
	}
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatalf("kernel BTF: %v", err)
	}
	out, err := ResolveKfuncs(insns, kernel)
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Constant <= 0 || insns[0].Constant != -1 {
		t.Errorf("resolved %d, original %d", out[0].Constant, insns[0].Constant)
	}
	if _, err := ResolveKfuncs(asm.Instructions{KfuncCall("no_such_kfunc")}, kernel); err == nil {
		t.Error("a missing kfunc resolved")
	}
}

func TestDetectLive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("detection loads probe programs: needs root")
	}
	f, err := Detect(DetectOptions{Functions: true})
	if err != nil {
		t.Fatal(err)
	}
	wantArch := map[string]Arch{"amd64": ArchX86_64, "arm64": ArchArm64}[goruntime.GOARCH]
	if f.Arch != wantArch || f.Source != "live" || !f.Links.Tracepoint || len(f.Functions) == 0 {
		t.Errorf("facts: %+v (%d functions)", f, len(f.Functions))
	}
	if (f.Fprobe == FprobeNone) == f.Links.KprobeMulti {
		t.Errorf("fprobe %s but kprobe.multi %v", f.Fprobe, f.Links.KprobeMulti)
	}
}
