package fleet_test

import (
	"os"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/fleet"
)

// TestNodeFactsCarryFunctions: facts from a file travel with their
// function list (gzipped) and without their BTF, and plan as the file does.
func TestNodeFactsCarryFunctions(t *testing.T) {
	f, err := bpf.Profile("linux-6.12-amd64")
	if err != nil {
		t.Fatal(err)
	}
	f.Source, f.Name = "file", "old.json"
	f.Functions = []string{"vfs_write", "vfs_read"}
	f.KernelBTF = []byte("not carried")
	nf, err := fleet.NodeFactsOf("n", f)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(nf.Spec.Facts.Raw), "kernel_btf") || strings.Contains(string(nf.Spec.Facts.Raw), "vfs_read") {
		t.Errorf("facts carry BTF or an uncompressed function list: %.200s", nf.Spec.Facts.Raw)
	}
	back, err := fleet.FactsOf(nf)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(back.Functions, ","); got != "vfs_read,vfs_write" {
		t.Errorf("functions %s", got)
	}
	if d := back.Differences(f); len(d) > 0 {
		t.Errorf("differences %v", d)
	}
	if back.Source != "file" || nf.Spec.Source != "file old.json" {
		t.Errorf("source %q, published as %q", back.Source, nf.Spec.Source)
	}
	src, err := os.ReadFile("testdata/fleet.hcl")
	if err != nil {
		t.Fatal(err)
	}
	np := fleet.PlanNode("n", map[string][]byte{"fleet.hcl": src}, back, "")
	if np.OK() || len(np.Errors) != 1 || !strings.HasPrefix(np.Errors[0], "fleet.hcl:18:16: Function not found: ") {
		t.Errorf("plan of a node without do_sys_openat2: %q", np.Errors)
	}
}

// TestNodeFactsGzipBomb: a function list that unpacks beyond MaxFunctions
// is refused, not read into memory.
func TestNodeFactsGzipBomb(t *testing.T) {
	f, err := bpf.Profile("linux-6.12-amd64")
	if err != nil {
		t.Fatal(err)
	}
	f.Source, f.Name = "file", "bomb.json"
	f.Functions = []string{strings.Repeat("a", fleet.MaxFunctions+1)}
	nf, err := fleet.NodeFactsOf("n", f)
	if err != nil {
		t.Fatal(err)
	}
	if len(nf.Spec.Functions) > 64<<10 {
		t.Fatalf("%d bytes gzipped", len(nf.Spec.Functions))
	}
	_, err = fleet.FactsOf(nf)
	if want := "NodeFacts n: functions: the list unpacks to more than 16777216 bytes"; err == nil || err.Error() != want {
		t.Errorf("FactsOf: %v, want %q", err, want)
	}
}
