package bpf_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/internal/testenv"
)

// usdtFormsTypes are the sizes of testdata/usdtforms.c's probe
// arguments, negative when signed, as their C types say.
var usdtFormsTypes = map[string][]int{
	"f:regs":    {-1, 2, -4, 8},
	"f:indexed": {-8},
	"f:based":   {-8, -8},
	"f:consts":  {-4, -8},
	"f:stack":   {-4},
	"f:global":  {-8, -8},
}

// usdtFormsRefused are the arguments gcc places where probes cannot read
// them, by architecture, probe and index: x86-64's rip-relative global.
var usdtFormsRefused = map[string]string{
	"x86_64 f:global 1": "a rip-relative operand",
}

// usdtForm names an operand's form: what the parser must tell apart.
func usdtForm(a bpf.USDTArg) string {
	switch a.Kind {
	case bpf.USDTConst:
		return "constant"
	case bpf.USDTReg:
		return "register"
	}
	f := "memory base"
	if a.Scale > 1 {
		f += "+index*scale"
	} else if a.Scale == 1 {
		f += "+index"
	}
	if a.Value != 0 {
		f += "+disp"
	}
	return f
}

// TestParseUSDTArgsFromNotes builds testdata/usdtforms.c with gcc for
// x86-64 and with aarch64-linux-gnu-gcc for arm64, at -O0 and -O2, and
// parses the specifiers of every note the compiler wrote: each parses
// (but x86-64's rip-relative global, refused saying so), with the size
// and sign of its argument's C type, the constants' values,
// the -O2 register arguments in the registers the ABI passes them in
// (Regs.Args), and each architecture's notes together show every form
// gcc writes there (arm64 has no register-indexed [x0, x1]: sys/sdt.h
// asks for an offsettable operand).
func TestParseUSDTArgsFromNotes(t *testing.T) {
	include := sdtInclude(t)
	for _, c := range []struct {
		arch  bpf.Arch
		cc    string
		forms []string
	}{
		{bpf.ArchX86_64, "x86_64-linux-gnu-gcc", []string{"constant", "memory base", "memory base+disp", "memory base+index*scale", "memory base+index*scale+disp", "refused: rip-relative", "register"}},
		{bpf.ArchArm64, "aarch64-linux-gnu-gcc", []string{"constant", "memory base", "memory base+disp", "register"}},
	} {
		t.Run(string(c.arch), func(t *testing.T) {
			cc, err := exec.LookPath(c.cc)
			if err != nil {
				testenv.Absent(t, "no %s (gcc for %s; gcc-aarch64-linux-gnu for arm64): %v", c.cc, c.arch, err)
			}
			seen := map[string][]string{}
			for _, opt := range []string{"O0", "O2"} {
				bin := filepath.Join(t.TempDir(), "bt-usdtforms-"+opt)
				out, err := exec.Command("nice", "-n", "19", cc, "-"+opt, "-nostdlib", "-static", "-isystem", include,
					"-o", bin, "testdata/usdtforms.c").CombinedOutput()
				if err != nil {
					t.Fatalf("%s: %v\n%s", cc, err, out)
				}
				notes, err := symbols.Notes(bin)
				if err != nil {
					t.Fatal(err)
				}
				if len(notes) != len(usdtFormsTypes) {
					t.Fatalf("-%s: %d notes, want %d: %+v", opt, len(notes), len(usdtFormsTypes), notes)
				}
				for _, u := range notes {
					checkFormsNote(t, c.arch, opt, u, seen)
				}
			}
			var forms []string
			for f := range seen {
				forms = append(forms, f)
			}
			sort.Strings(forms)
			if !slices.Equal(forms, c.forms) {
				t.Errorf("forms %q, want %q", forms, c.forms)
			}
			t.Logf("%s: %v", c.arch, seen)
		})
	}
}

// checkFormsNote parses one note of usdtforms.c built for arch and
// records each argument's form in seen.
func checkFormsNote(t *testing.T, arch bpf.Arch, opt string, u symbols.USDT, seen map[string][]string) {
	t.Helper()
	types, ok := usdtFormsTypes[u.Key()]
	if !ok {
		t.Errorf("-%s: a note of %s, which usdtforms.c has not", opt, u.Key())
		return
	}
	texts := bpf.SplitUSDTArgs(u.Args)
	if len(texts) != len(types) {
		t.Errorf("-%s %s %q: %d arguments, want %d", opt, u.Key(), u.Args, len(texts), len(types))
		return
	}
	regs, _ := bpf.RegsFor(arch)
	for i, text := range texts {
		a, err := bpf.ParseUSDTArg(arch, text)
		refused := usdtFormsRefused[fmt.Sprintf("%s %s %d", arch, u.Key(), i)]
		if refused != "" && strings.Contains(text, "(%rip)") {
			if err == nil || !strings.Contains(err.Error(), refused) {
				t.Errorf("-%s %s %s: %+v, %v; want an error saying %q", opt, u.Key(), text, a, err, refused)
			}
			seen["refused: rip-relative"] = append(seen["refused: rip-relative"], text)
			continue
		}
		if err != nil {
			t.Errorf("-%s %s %s: %v", opt, u.Key(), text, err)
			continue
		}
		if want := types[i]; a.Size != max(want, -want) || a.Signed != (want < 0) {
			t.Errorf("-%s %s %s: size %d signed %v, want %d bytes of signed %v", opt, u.Key(), a.Text, a.Size, a.Signed, max(want, -want), want < 0)
		}
		if u.Name == "consts" && (a.Kind != bpf.USDTConst || a.Value != []int64{5, -7}[i]) {
			t.Errorf("-%s %s: %+v, want the constant %d", opt, a.Text, a, []int64{5, -7}[i])
		}
		if u.Name == "regs" && opt == "O2" && (a.Kind != bpf.USDTReg || a.Reg != regs.Args[i]) {
			t.Errorf("-%s %s: %+v, want argument %d's register, at %d in pt_regs", opt, a.Text, a, i, regs.Args[i])
		}
		f := usdtForm(a)
		if !slices.Contains(seen[f], a.Text) {
			seen[f] = append(seen[f], a.Text)
		}
	}
}

// sdtInclude returns a directory whose sys/ holds the host's sys/sdt.h
// and sdt-config.h (systemtap-sdt-dev puts them under the host's
// multiarch directory, where a cross compiler does not look; their text
// serves every architecture).
func sdtInclude(t *testing.T) string {
	t.Helper()
	found, _ := filepath.Glob("/usr/include/*/sys/sdt.h")
	found = append(found, "/usr/include/sys/sdt.h")
	for _, h := range found {
		b, err := os.ReadFile(h)
		if err != nil {
			continue
		}
		dir := filepath.Join(t.TempDir(), "sys")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		conf, err := os.ReadFile(filepath.Join(filepath.Dir(h), "sdt-config.h"))
		if err != nil && bytes.Contains(b, []byte("sdt-config.h")) {
			t.Fatal(fmt.Errorf("%s without its sdt-config.h: %w", h, err))
		}
		for name, text := range map[string][]byte{"sdt.h": b, "sdt-config.h": conf} {
			if err := os.WriteFile(filepath.Join(dir, name), text, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return filepath.Dir(dir)
	}
	testenv.Absent(t, "no sys/sdt.h (systemtap-sdt-dev)")
	return ""
}
