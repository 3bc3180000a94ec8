package fleet_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/probectl/probectl/fleet"
)

// TestPodCgroups: the pod cgroups of kubelet's two layouts are found by
// uid at any depth (a --cgroup-root prefix), once each (not their
// containers), and nothing else: other pods, names that only look like a
// pod's (a uid too short, hex digits in the wrong case, a trailing
// suffix, a path in the name), or a pod too deep.
func TestPodCgroups(t *testing.T) {
	const a, b, other = "0b6e4c52-9f4d-4e0a-8a8e-6a7c2c1d5e01", "7f3d1a20-1c2b-4c3d-9e8f-0a1b2c3d4e5f", "11111111-2222-3333-4444-555555555555"
	root := t.TempDir()
	found := []string{
		"kubepods/burstable/pod" + a,
		"custom/root/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + strings.ReplaceAll(b, "-", "_") + ".slice",
	}
	notFound := []string{
		"kubepods/pod" + other,
		"kubepods/pod" + a[:30],
		"kubepods/pod" + strings.ToUpper(a),
		"kubepods/pod" + a + "x",
		"kubepods/kubepods-pod" + strings.ReplaceAll(b, "-", "_") + ".slice.bak",
		"a/b/c/d/e/f/g/h/i/j/k/pod" + a,
	}
	for _, d := range append(append([]string{}, found...), notFound...) {
		if err := os.MkdirAll(filepath.Join(root, d, "cri-containerd-abc.scope"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var want []uint64
	for _, d := range found {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(root, d), &st); err != nil {
			t.Fatal(err)
		}
		want = append(want, st.Ino)
	}
	slices.Sort(want)
	if got := fleet.PodCgroups(root, []string{a, b}); !slices.Equal(got, want) {
		t.Errorf("PodCgroups = %v, want %v", got, want)
	}
	if got := fleet.PodCgroups(root, nil); len(got) != 0 {
		t.Errorf("PodCgroups of no pods = %v", got)
	}
	if got := fleet.PodCgroups(filepath.Join(root, "missing"), []string{a}); len(got) != 0 {
		t.Errorf("PodCgroups of a missing root = %v", got)
	}
}
