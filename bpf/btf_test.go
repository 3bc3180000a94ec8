package bpf

import (
	"bytes"
	"compress/gzip"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// hostBTF returns the host's raw vmlinux BTF (readable without privileges).
func hostBTF(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(VmlinuxBTF)
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("this kernel has no BTF (" + VmlinuxBTF + ")")
	}
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// A facts file carries the BTF; it is parsed when first asked for, once,
// and the copies of the facts share it. Differences ignores it.
func TestFactsFileCarriesBTF(t *testing.T) {
	raw := hostBTF(t)
	gz, err := GzipBTF(raw)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := Profile("linux-7.2-amd64")
	f.KernelBTF = gz
	path := filepath.Join(t.TempDir(), "facts.json")
	if err := f.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	g, err := ReadFactsFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g.KernelBTF, gz) {
		t.Fatal("the BTF did not survive the round trip")
	}
	if d := g.Differences(&Facts{Arch: g.Arch, Kernel: g.Kernel, BTF: true, ISAv4: g.ISAv4, Links: g.Links,
		Fprobe: g.Fprobe, FtraceWithRegs: g.FtraceWithRegs, FtraceWithArgs: g.FtraceWithArgs,
		FprobeEntryFastPath: g.FprobeEntryFastPath, Helpers: g.Helpers, Perf: g.Perf}); len(d) != 0 {
		t.Errorf("facts differing only in BTF data differ: %v", d)
	}
	copied := *g
	spec, err := g.Types()
	if err != nil {
		t.Fatal(err)
	}
	var task *btf.Struct
	if err := spec.TypeByName("task_struct", &task); err != nil {
		t.Fatalf("task_struct: %v", err)
	}
	if again, _ := copied.Types(); again != spec {
		t.Error("a copy of the facts parsed the BTF again")
	}
	t.Logf("host BTF: %d bytes, %d gzipped; task_struct is %d bytes", len(raw), len(gz), task.Size)
}

// A profile carries no BTF: what needs it is resolved at apply.
func TestProfileDefersTypes(t *testing.T) {
	f, _ := Profile("linux-6.1-amd64")
	if _, err := f.Types(); !errors.Is(err, ErrTypesDeferred) {
		t.Errorf("profile types: %v, want ErrTypesDeferred", err)
	}
	f, _ = Profile("linux-6.1-amd64")
	f.BTF = false
	if _, err := f.Types(); err == nil || errors.Is(err, ErrTypesDeferred) {
		t.Errorf("a target without BTF: %v, want an error that is not deferral", err)
	}
}

// Whatever a facts file carries as BTF, reading and parsing it fails with
// an error, never a panic, and never reads more than MaxKernelBTF.
func TestHostileKernelBTF(t *testing.T) {
	raw := hostBTF(t)
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	cases := map[string][]byte{
		"not gzip":       []byte("hello"),
		"gzip of junk":   gz([]byte("this is not BTF at all, not even close")),
		"truncated":      gz(raw[:len(raw)/2]),
		"header only":    gz(raw[:24]),
		"gzip bomb":      gz(make([]byte, MaxKernelBTF+1)),
		"truncated gzip": gz(raw)[:1000],
	}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 6; i++ {
		bad := bytes.Clone(raw)
		for j := 0; j < 8; j++ {
			bad[r.Intn(64)] = byte(r.Intn(256)) // the header and the first type offsets
		}
		cases["corrupt header "+string(rune('a'+i))] = gz(bad)
	}
	for name, data := range cases {
		f, _ := Profile("linux-7.2-amd64")
		f.KernelBTF = data
		spec, err := f.Types()
		if err == nil {
			// Corrupting a header byte that nothing checks can leave valid BTF.
			if name[:7] != "corrupt" {
				t.Errorf("%s: parsed", name)
			}
			var task *btf.Struct
			_ = spec.TypeByName("task_struct", &task)
			continue
		}
		t.Logf("%s: %v", name, err)
	}
	f, _ := Profile("linux-7.2-amd64")
	f.KernelBTF = make([]byte, MaxKernelBTF+1)
	path := filepath.Join(t.TempDir(), "facts.json")
	if err := f.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFactsFile(path); err == nil {
		t.Error("a facts file with BTF over the limit was read")
	}
}
