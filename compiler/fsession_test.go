package compiler_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/sys"
	"github.com/probectl/probectl/compiler"
)

// fsessionSpec is an entry+exit probe with attach = "fsession"; ENTRY is
// the body of its on_entry.
const fsessionSpec = `probe "kernel" "lat" {
  functions = ["vfs_read", "vfs_write"]
  attach    = "fsession"
  on_entry {
    ENTRY
  }
  on_exit {
    count "rets" { by = [func, ret] }
    hist "latency" { value = ktime - entry.start }
  }
}
`

// The fsession variants: where the entry data goes, for the code and the
// plan alike, as a golden listing and plan for linux-7.2-amd64.
func TestFsessionGolden(t *testing.T) {
	f := mustProfile(t, "linux-7.2-amd64")
	variants := []struct {
		name, entry string
		storage     compiler.Storage
		size        int
		reason      string
	}{
		{"cookie", "save = { start = ktime }", compiler.StorageCookie, 8, "entry data in the session cookie"},
		{"flag", "when = pid != 1", compiler.StorageCookie, 0, "entry data in the session cookie"},
		{"when-slot", "when = pid != 1\n    save = { start = ktime }", compiler.StorageMap, 8, "since the exit runs whatever the entry returns"},
		{"large-slot", "save = { start = ktime, fd = arg0 }", compiler.StorageMap, 16, "entry data of 16 bytes, more than the 8-byte cookie"},
	}
	var listing strings.Builder
	var plans []*compiler.Plan
	for _, v := range variants {
		src := strings.Replace(fsessionSpec, "ENTRY", v.entry, 1)
		if v.name == "flag" {
			src = strings.Replace(src, "ktime - entry.start", "ktime", 1)
		}
		out := compileText(t, f, src)
		p := out.Probes[0]
		if got := compiler.JoinFamilies(p.Attach); got != "fsession" || p.Route != compiler.RouteTrampoline {
			t.Errorf("%s: %s on %s, want fsession on trampoline", v.name, got, p.Route)
		}
		if p.EntryData.Storage != v.storage || p.EntryData.Size != v.size {
			t.Errorf("%s: entry data %+v, want %d bytes in %s", v.name, p.EntryData, v.size, v.storage)
		}
		if !strings.Contains(p.Reason, v.reason) {
			t.Errorf("%s: reason %q, want it to say %q", v.name, p.Reason, v.reason)
		}
		if len(p.Programs) != 1 {
			t.Fatalf("%s: %d programs, want one", v.name, len(p.Programs))
		}
		prog := p.Programs[0]
		if prog.Role != compiler.RoleSession || prog.Type != ebpf.Tracing || prog.AttachType != sys.AttachTraceFsession || !prog.PerFunction {
			t.Errorf("%s: program %s %v %v per-function %v, want a per-function session tracing program of attach type 58",
				v.name, prog.Role, prog.Type, prog.AttachType, prog.PerFunction)
		}
		fmt.Fprintf(&listing, "## %s: %s %s (%s, %s)\n%v\n", v.name, p.Address, prog.Role, prog.Family, prog.Type, prog.Instructions)
		plans = append(plans, compiler.NewPlan(out))
	}
	b, _ := json.MarshalIndent(plans, "", "  ")
	golden(t, filepath.Join("testdata/golden", "fsession-linux-7.2-amd64.insns"), listing.String())
	golden(t, filepath.Join("testdata/golden", "fsession-linux-7.2-amd64.plan.json"), string(b)+"\n")
}

// attach = "fsession" on a target without it is refused at the attach
// attribute, naming what it needs; so is one without on_exit.
func TestFsessionMissing(t *testing.T) {
	src := strings.Replace(fsessionSpec, "ENTRY", "save = { start = ktime }", 1)
	for _, name := range bpf.ProfileNames() {
		f := mustProfile(t, name)
		if f.Links.Fsession {
			if name != "linux-7.2-amd64" && name != "linux-7.2-arm64" {
				t.Errorf("profile %s has fsession; only the 7.2 ones should", name)
			}
			continue
		}
		diags := compileErrors(t, f, src)
		wantError(t, diags, "Attach family not available", 3)
		if !strings.Contains(diags[0].Detail, "Linux 7.0 on x86_64") {
			t.Errorf("%s: %s", name, diags[0].Detail)
		}
	}
	noExit := `probe "kernel" "p" {
  functions = ["vfs_read"]
  attach    = "fsession"
  on_entry {
    count "c" {}
  }
}`
	wantError(t, compileErrors(t, mustProfile(t, "linux-7.2-amd64"), noExit), "A session needs an exit", 3)
}

// attach = "auto" takes fsession for probes with an exit where the kernel
// has trampolines and fsession but no fprobe, and fentry for entry only.
func TestFsessionAuto(t *testing.T) {
	f := mustProfile(t, "linux-7.2-amd64")
	f.Links.KprobeMulti, f.Links.KprobeSession = false, false
	f.Derive()
	src := strings.Replace(strings.Replace(fsessionSpec, "ENTRY", "save = { start = ktime }", 1), `attach    = "fsession"`, "", 1)
	p := compileText(t, f, src).Probes[0]
	if got := compiler.JoinFamilies(p.Attach); got != "fsession" || p.EntryData.Storage != compiler.StorageCookie {
		t.Errorf("auto without fprobe: %s, entry data in %s (%s), want fsession with the cookie", got, p.EntryData.Storage, p.Reason)
	}
	if !strings.HasPrefix(p.Reason, "no fprobe") {
		t.Errorf("reason %q", p.Reason)
	}
	entryOnly := `probe "kernel" "p" {
  functions = ["vfs_read"]
  on_entry {
    count "c" {}
  }
}`
	if got := compiler.JoinFamilies(compileText(t, f, entryOnly).Probes[0].Attach); got != "fentry" {
		t.Errorf("auto entry only without fprobe: %s, want fentry", got)
	}
	// With fprobe, auto keeps kprobe.session.
	p = compileText(t, mustProfile(t, "linux-7.2-amd64"), src).Probes[0]
	if got := compiler.JoinFamilies(p.Attach); got != "kprobe.session" {
		t.Errorf("auto with fprobe: %s, want kprobe.session", got)
	}
}
