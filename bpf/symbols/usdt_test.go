package symbols

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probectl/probectl/internal/testenv"
)

// usdtSource has two probes with semaphores; usdtPlain one without, at
// two sites of different arguments.
const (
	usdtSource = `#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
unsigned short nt_tick_semaphore __attribute__((section(".probes")));
unsigned short nt_pick_semaphore __attribute__((section(".probes")));
void plain(int i, long j);
__attribute__((noinline)) void tick(int i) { STAP_PROBE2(nt, tick, i, -i); }
__attribute__((noinline)) void pick(long *a, long i) { STAP_PROBE1(nt, pick, a[i]); }
int main(int argc, char **argv) { long a[2] = {1, 2}; tick(argc); pick(a, argc); plain(argc, argc); return 0; }
`
	usdtPlain = `#include <sys/sdt.h>
__attribute__((noinline)) void plain(int i, long j) { DTRACE_PROBE1(nt, plain, i); DTRACE_PROBE1(nt, plain, j); }
`
)

// buildUSDT compiles sources with gcc and sys/sdt.h into a binary in a
// temporary directory, with flags.
func buildUSDT(t *testing.T, flags []string, sources ...string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Absent(t, "no gcc")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bt-usdt-notes")
	args := append(append([]string{}, flags...), "-o", bin)
	for i, src := range sources {
		c := filepath.Join(dir, fmt.Sprintf("usdt%d.c", i))
		if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, c)
	}
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		if bytes.Contains(out, []byte("sys/sdt.h")) {
			testenv.Absent(t, "no sys/sdt.h (systemtap-sdt-dev)")
		}
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}

// readelfNotes is what binutils' readelf -n says of the file's probes:
// "provider:name location semaphore args" per probe.
func readelfNotes(t *testing.T, bin string) []string {
	t.Helper()
	out, err := exec.Command("readelf", "-n", bin).Output()
	if err != nil {
		testenv.Absent(t, "readelf -n: %v", err)
	}
	var notes []string
	var cur []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "Provider:":
			cur = []string{f[1]}
		case len(f) == 2 && f[0] == "Name:":
			cur[0] += ":" + f[1]
		case len(f) >= 6 && f[0] == "Location:":
			cur = append(cur, strings.TrimSuffix(f[1], ","), f[5])
		case len(f) >= 1 && f[0] == "Arguments:":
			notes = append(notes, strings.Join(append(cur, strings.Join(f[1:], " ")), " "))
		}
	}
	return notes
}

// hex16 writes v as readelf does: 0x and 16 digits.
func hex16(v uint64) string { return fmt.Sprintf("0x%016x", v) }

// TestNotes reads a gcc-built program's probes as readelf does, and puts
// each probe's offset on its nop and each semaphore's on its symbol.
func TestNotes(t *testing.T) {
	for _, flags := range [][]string{{"-O0"}, {"-O2"}, {"-O2", "-no-pie"}, {"-O1", "-shared", "-fPIC"}} {
		t.Run(strings.Join(flags, ""), func(t *testing.T) {
			bin := buildUSDT(t, flags, usdtSource, usdtPlain)
			us, err := Notes(bin)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range us {
				got = append(got, strings.Join([]string{u.Key(), hex16(u.Addr), hex16(u.Semaphore), u.Args}, " "))
			}
			want := readelfNotes(t, bin)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("probes:\n%s\nreadelf -n:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if len(us) != 4 {
				t.Fatalf("%d probes, want 4: %v", len(us), got)
			}
			raw, err := os.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			ef, err := elf.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			defer ef.Close()
			syms, _ := ef.Symbols()
			semaphores := map[string]uint64{}
			for _, s := range syms {
				semaphores[s.Name] = s.Value
			}
			for _, u := range us {
				if raw[u.Offset] != 0x90 {
					t.Errorf("%s: byte %#x at offset %#x, not sys/sdt.h's nop", u.Key(), raw[u.Offset], u.Offset)
				}
				sem := semaphores[u.Provider+"_"+u.Name+"_semaphore"]
				if u.Semaphore != sem {
					t.Errorf("%s: semaphore %#x, its symbol is at %#x", u.Key(), u.Semaphore, sem)
				}
				if sem != 0 && (u.SemaphoreOffset == 0 || binary.LittleEndian.Uint16(raw[u.SemaphoreOffset:]) != 0) {
					t.Errorf("%s: semaphore at file offset %#x, which does not hold a zero counter", u.Key(), u.SemaphoreOffset)
				}
			}
		})
	}
}

// TestNotesNone: a file without probes has none.
func TestNotesNone(t *testing.T) {
	bin := buildUSDT(t, []string{"-O0"}, "int main(void) { return 0; }\n")
	us, err := Notes(bin)
	if err != nil || us != nil {
		t.Fatalf("%v, %v", us, err)
	}
}

// TestNotesHostile: notes cut short, sizes past the section's end, text
// without its NUL, and addresses outside the file are errors.
func TestNotesHostile(t *testing.T) {
	bin := buildUSDT(t, []string{"-O2"}, usdtSource, usdtPlain)
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	data, err := ef.Section(".note.stapsdt").Data()
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(data)) }
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"cut header", data[:7], "shorter than a note header"},
		{"cut description", data[:20], "run past the section's end"},
		{"huge description", edit(func(b []byte) []byte { le.PutUint32(b[4:], 0xffffffff); return b }), "run past the section's end"},
		{"huge name", edit(func(b []byte) []byte { le.PutUint32(b[0:], 0xfffffff0); return b }), "run past the section's end"},
		{"short description", edit(func(b []byte) []byte { le.PutUint32(b[4:], 16); return b }), "shorter than its three addresses"},
		{"no NUL", edit(func(b []byte) []byte {
			n := le.Uint32(b[4:])
			for i := 12 + 8 + 24; i < 12+8+int(n); i++ {
				b[i] = 'a'
			}
			return b
		}), "not NUL-terminated"},
		{"pc outside", edit(func(b []byte) []byte { le.PutUint64(b[20:], 1<<60); return b }), "is in no executable segment"},
		{"semaphore outside", edit(func(b []byte) []byte { le.PutUint64(b[36:], 1<<60); return b }), "semaphore: address 0x1000000000000000 is in no loaded segment"},
	} {
		r := noteReader{ef: ef, data: c.data, addrSize: 8}
		_, err := r.all()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// FuzzNotes reads notes against the test's own ELF file (its segments
// and byte order), from a valid note onwards.
func FuzzNotes(f *testing.F) {
	self, err := os.Executable()
	if err != nil {
		f.Fatal(err)
	}
	ef, err := elf.Open(self)
	if err != nil {
		f.Fatal(err)
	}
	defer ef.Close()
	var pc uint64
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			pc = p.Vaddr + 16
		}
	}
	desc := binary.LittleEndian.AppendUint64(nil, pc)
	desc = binary.LittleEndian.AppendUint64(desc, 0x1000)
	desc = binary.LittleEndian.AppendUint64(desc, 0)
	desc = append(desc, "nt\x00tick\x00-4@%edi -8@8(%rdi,%rsi,8)\x00"...)
	note := binary.LittleEndian.AppendUint32(nil, 8)
	note = binary.LittleEndian.AppendUint32(note, uint32(len(desc)))
	note = binary.LittleEndian.AppendUint32(note, 3)
	note = append(append(note, "stapsdt\x00"...), desc...)
	for len(note)%4 != 0 {
		note = append(note, 0)
	}
	if us, err := (noteReader{ef: ef, data: note, addrSize: 8}).all(); err != nil || len(us) != 1 {
		f.Fatalf("the seed note: %v, %v", us, err)
	}
	f.Add(note)
	f.Add(append(bytes.Clone(note), note...))
	f.Fuzz(func(t *testing.T, data []byte) {
		us, err := noteReader{ef: ef, data: data, addrSize: 8, base: 0x1000}.all()
		if err == nil {
			for _, u := range us {
				if u.Provider == "" || u.Name == "" {
					t.Fatalf("%+v", u)
				}
			}
		}
	})
}
