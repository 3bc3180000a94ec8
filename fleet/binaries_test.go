package fleet_test

import (
	"encoding/json"
	"github.com/probectl/probectl/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/fleet"
	"github.com/probectl/probectl/fleet/api/v1alpha1"
)

// TestNodeFactsBTFIdentity: a node whose published BTF identity is the
// planner's own kernel's is planned with the planner's BTF (do_exit's
// args.code and task.real_parent.comm resolved, the plan ok); another
// hash leaves those reads unchecked, and the plan says which, never ok.
func TestNodeFactsBTFIdentity(t *testing.T) {
	id, err := bpf.LiveBTFIdentity()
	if err != nil {
		testenv.Absent(t, "this kernel has no BTF to compare with: %v", err)
	}
	src, err := os.ReadFile("../examples/bpftrace/exits.hcl")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"exits.hcl": src}
	for _, c := range []struct {
		hash, status string
	}{{id.SHA256, fleet.StatusOK}, {strings.Repeat("0", 64), fleet.StatusUnchecked}} {
		f, err := bpf.Profile("linux-6.12-amd64")
		if err != nil {
			t.Fatal(err)
		}
		f.Source, f.Name, f.Functions = "file", "n.json", []string{"do_exit", "vfs_read"}
		nf, err := fleet.NodeFactsOf("n", f)
		if err != nil {
			t.Fatal(err)
		}
		nf.Spec.BTF = &v1alpha1.NodeBTF{SHA256: c.hash, Size: id.Size}
		back, err := fleet.FactsOf(nf)
		if err != nil {
			t.Fatal(err)
		}
		np := fleet.PlanNode("n", files, back, "")
		if np.Status != c.status || len(np.Errors) > 0 {
			t.Errorf("BTF %s…: status %s, errors %q, unchecked %q; want %s", c.hash[:8], np.Status, np.Errors, np.Unchecked, c.status)
		}
		if c.status == fleet.StatusUnchecked && (len(np.Unchecked) != 1 || !strings.Contains(np.Unchecked[0], "probe kernel.exits: reads through BTF not checked (") ||
			!strings.Contains(np.Unchecked[0], "task.real_parent.comm")) {
			t.Errorf("unchecked %q, want the probe's BTF reads named", np.Unchecked)
		}
	}
}

// TestNodeFactsBinariesSize: a node publishing a realistic set of
// binaries (the shared libraries ld.so.cache lists here and the binaries
// of /usr/bin, up to MaxBinaries) with a kernel's function list (this
// kernel's text symbols) stays well under etcd's 1.5 MiB; what does not
// fit is published with its digest only, and plans say it was not
// checked.
func TestNodeFactsBinariesSize(t *testing.T) {
	out, err := exec.Command("ldconfig", "-p").Output()
	if err != nil {
		testenv.Absent(t, "ldconfig -p: %v", err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if _, path, ok := strings.Cut(line, " => "); ok {
			names = append(names, strings.TrimSpace(path))
		}
	}
	bins, _ := filepath.Glob("/usr/bin/*")
	names = append(names, bins...)
	if len(names) < 50 {
		testenv.Absent(t, "only %d binaries here", len(names))
	}
	f, err := bpf.Detect(bpf.DetectOptions{})
	if err != nil {
		t.Skipf("no live facts: %v", err)
	}
	f.Functions = kernelTextSymbols(t)
	nf, err := fleet.NodeFactsOf("n", f)
	if err != nil {
		t.Fatal(err)
	}
	nf.Spec.Binaries = fleet.DescribeBinaries(f, names)
	b, err := json.Marshal(nf)
	if err != nil {
		t.Fatal(err)
	}
	full, digestOnly := 0, 0
	for _, nb := range nf.Spec.Binaries {
		switch {
		case len(nb.Functions) > 0:
			full++
		case nb.Error == "" && nb.Digest != "":
			digestOnly++
		}
	}
	t.Logf("%d binaries, %d published: %d with their functions, %d digest only; %d kernel functions (%d bytes gzipped); the object is %d bytes",
		len(names), len(nf.Spec.Binaries), full, digestOnly, len(f.Functions), len(nf.Spec.Functions), len(b))
	if len(b) > 1400<<10 {
		t.Errorf("NodeFacts of %d bytes, over 1.4 MiB", len(b))
	}
	if full == 0 || digestOnly == 0 {
		t.Errorf("%d with functions, %d digest only: want both (the budget cuts the list)", full, digestOnly)
	}
	back, err := fleet.FactsOf(nf)
	if err != nil {
		t.Fatal(err)
	}
	for _, nb := range nf.Spec.Binaries {
		if nb.Error != "" || len(nb.Functions) > 0 {
			continue
		}
		hcl := "probe \"user\" \"u\" {\n  binary    = \"" + nb.Name + "\"\n  functions = [\"main\"]\n  on_entry {\n    count \"c\" {}\n  }\n}\n"
		np := fleet.PlanNode("n", map[string][]byte{"u.hcl": []byte(hcl)}, back, "")
		if np.Status != fleet.StatusUnchecked || !strings.Contains(strings.Join(np.Unchecked, " "), "without its function list (sha256 "+nb.Digest+")") {
			t.Errorf("plan of %s, published without functions: %s %q %q", nb.Name, np.Status, np.Errors, np.Unchecked)
		}
		break
	}
}

// kernelTextSymbols are the kernel's function names as /proc/kallsyms
// lists them: a function list of a real kernel's size.
func kernelTextSymbols(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		testenv.Absent(t, "no kallsyms: %v", err)
	}
	seen := map[string]bool{}
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		if len(fs) >= 3 && (fs[1] == "t" || fs[1] == "T") && len(fs) == 3 && !seen[fs[2]] {
			seen[fs[2]] = true
			names = append(names, fs[2])
		}
	}
	if len(names) < 10000 {
		testenv.Absent(t, "kallsyms lists %d functions (kptr_restrict?)", len(names))
	}
	sort.Strings(names)
	return names
}

// TestNodeFactsHostileBinary: a node's published binary whose strings
// would not print as themselves (a terminal escape in a refusal's
// reason) is refused as a whole, never shown.
func TestNodeFactsHostileBinary(t *testing.T) {
	f, err := bpf.Profile("linux-6.12-amd64")
	if err != nil {
		t.Fatal(err)
	}
	nf, err := fleet.NodeFactsOf("n", f)
	if err != nil {
		t.Fatal(err)
	}
	nf.Spec.Binaries = []v1alpha1.NodeBinary{{Name: "/usr/bin/x", Path: "/usr/bin/x", Refused: map[string]string{"f": "\x1b[2Jcleared"}}}
	if _, err := fleet.FactsOf(nf); err == nil || !strings.Contains(err.Error(), `binary "/usr/bin/x": "\x1b[2Jcleared" does not print as itself`) {
		t.Errorf("FactsOf: %v", err)
	}
}
