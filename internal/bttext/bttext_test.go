package bttext

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/internal/testenv"
)

// bpftrace runs prog with the installed bpftrace and returns its stdout
// without the "Attaching" line.
func bpftrace(t *testing.T, prog string) string {
	t.Helper()
	path, err := exec.LookPath("bpftrace")
	if err != nil {
		testenv.Absent(t, "bpftrace is not installed")
	}
	if os.Geteuid() != 0 {
		testenv.Absent(t, "bpftrace needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-e", prog)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bpftrace: %v\n%s", err, stderr.String())
	}
	s := string(out)
	first, rest, _ := strings.Cut(s, "\n")
	if !strings.HasPrefix(first, "Attaching ") {
		t.Fatalf("bpftrace's first line is %q, not Attaching", first)
	}
	return rest
}

// btString quotes s as a bpftrace string literal.
func btString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}

type printfCase struct {
	format string
	args   []any
}

// TestPrintfAsBpftrace prints each format with bpftrace and with Printf,
// and compares the lines byte for byte.
func TestPrintfAsBpftrace(t *testing.T) {
	cases := []printfCase{
		{"%d|%5d|%-5d|%05d|%.3d|\n", []any{int64(-3), int64(42), int64(42), int64(12), int64(7)}},
		{"%x|%X|%08x|%-8x|%lx|%llx|\n", []any{int64(255), int64(255), int64(255), int64(255), int64(5000000000), int64(-1)}},
		{"%u|%lu|%llu|%d|%ld|\n", []any{int64(-1), int64(5000000000), int64(-1), int64(5000000000), int64(-5)}},
		{"%s|%-10s|%5s|%.3s|%10.4s|\n", []any{"ab", "cd", "ef", "abcdef", "abcdefg"}},
		{"%c|%-5c|%3c|%p|\n", []any{int64(65), int64(66), int64(67), int64(4096)}},
		{"a%%b %d tail %% \\ \"q\"\t|\n", []any{int64(1)}},
		{"100%%\n", nil},
		{"%s=%d%%\n", []any{"pid", int64(5)}},
		{"PID %-6d COMM %-16s RET %d\n", []any{int64(1234), "bash", int64(-2)}},
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	verbs := []string{"%d", "%u", "%x", "%ld", "%lu", "%lx", "%5d", "%-7x", "%012lu"}
	for i := 0; i < 12; i++ {
		var f strings.Builder
		var args []any
		for k := 0; k < 4; k++ {
			f.WriteString(verbs[rng.Intn(len(verbs))] + " ")
			args = append(args, rng.Int63()>>uint(rng.Intn(63))*int64(1-2*rng.Intn(2)))
		}
		f.WriteString("\n")
		cases = append(cases, printfCase{f.String(), args})
	}
	var prog, want strings.Builder
	prog.WriteString("BEGIN {\n")
	for _, c := range cases {
		prog.WriteString("  printf(" + btString(c.format))
		for _, a := range c.args {
			switch v := a.(type) {
			case string:
				prog.WriteString(", " + btString(v))
			default:
				fmt.Fprintf(&prog, ", %d", v)
			}
		}
		prog.WriteString(");\n")
		want.WriteString(Printf(c.format, c.args...))
	}
	prog.WriteString("  exit();\n}\n")
	got := bpftrace(t, prog.String())
	// bpftrace ends its output with the (empty) maps' blank lines.
	got = strings.TrimSuffix(got, "\n\n")
	gl, wl := strings.Split(got, "\n"), strings.Split(want.String(), "\n")
	for i := range max(len(gl), len(wl)) {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Errorf("line %d:\nbpftrace %q\nPrintf   %q", i+1, g, w)
		}
	}
	if t.Failed() {
		t.Logf("program:\n%s", prog.String())
	}
}

// TestHistAsBpftrace feeds the same values to bpftrace's hist and lhist and
// to HistIndex/LhistIndex, and compares the rows byte for byte.
func TestHistAsBpftrace(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	vals := []int64{-5, 0, 1, 2, 3, 1023, 1024, 1 << 20, 3 << 30}
	for i := 0; i < 40; i++ {
		vals = append(vals, rng.Int63()>>uint(rng.Intn(63)))
	}
	const lmin, lmax, lstep = 0, 3000, 250
	hist := make([]uint64, 66)
	lhist := make([]uint64, LhistIndex(lmax, lmin, lmax, lstep)+1)
	var prog strings.Builder
	prog.WriteString("BEGIN {\n")
	for _, v := range vals {
		fmt.Fprintf(&prog, "  @h = hist(%d);\n", v)
		hist[HistIndex(v)]++
		lv := v % 3500
		fmt.Fprintf(&prog, "  @l = lhist(%d, %d, %d, %d);\n", lv, lmin, lmax, lstep)
		lhist[LhistIndex(lv, lmin, lmax, lstep)]++
	}
	prog.WriteString("  exit();\n}\n")
	got := bpftrace(t, prog.String())
	blocks := map[string]string{}
	for _, b := range strings.Split(strings.Trim(got, "\n"), "\n\n") {
		head, rows, _ := strings.Cut(b, "\n")
		blocks[head] = rows + "\n"
	}
	for head, want := range map[string]string{"@h: ": Hist(hist), "@l: ": Lhist(lhist, lmin, lmax, lstep)} {
		if blocks[head] != want {
			t.Errorf("%s\nbpftrace:\n%s\nHist:\n%s", head, blocks[head], want)
		}
	}
	if t.Failed() {
		t.Logf("program:\n%s", prog.String())
	}
}

// TestStrftimeAsDate formats one instant with Strftime and with date(1)
// (C's strftime) and compares; %f, bpftrace's own, is the microseconds.
func TestStrftimeAsDate(t *testing.T) {
	date, err := exec.LookPath("date")
	if err != nil {
		testenv.Absent(t, "date is not installed")
	}
	at := time.Unix(1780000000, 123456789).UTC()
	for _, f := range []string{"%H:%M:%S", "%Y-%m-%d %j %a %A %b %B %h", "%T %D %F %R %s", "%I %p %y %e %%", "%Z %z"} {
		out, err := exec.Command(date, "-u", "-d", "@1780000000", "+"+f).Output()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := Strftime(f, at), strings.TrimSuffix(string(out), "\n"); got != want {
			t.Errorf("Strftime(%q) = %q, date says %q", f, got, want)
		}
	}
	if got := Strftime("%H:%M:%S.%f", at); got != "20:26:40.123456" {
		t.Errorf("Strftime(%%H:%%M:%%S.%%f) = %q, want 20:26:40.123456", got)
	}
}
