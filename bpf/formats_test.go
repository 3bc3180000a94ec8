package bpf

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Each profile embeds its kernel's capture, and only profiles have one;
// every format in them parses and classifies. What a capture holds is
// checked against the kernel itself in the VM matrix
// (runtime.TestKernelTargetMatchesProfile).
func TestProfileCaptures(t *testing.T) {
	files, err := fs.Glob(profileTracepoints, "tracepoints/*")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, name := range ProfileNames() {
		want = append(want, profileFormatFile(name))
	}
	if !slices.Equal(files, want) {
		t.Errorf("embedded captures %v, want one per profile: %v (make tracepoints)", files, want)
	}
	for _, name := range ProfileNames() {
		capture, err := ProfileTracepoints(name)
		if err != nil {
			t.Fatal(err)
		}
		arch := map[bool]string{true: "x86_64", false: "aarch64"}[strings.HasSuffix(name, "amd64")]
		if first, _, _ := strings.Cut(string(capture), "\n"); !strings.HasPrefix(first, "# Linux ") || !strings.HasSuffix(first, " "+arch) {
			t.Errorf("%s: the capture starts %q, not with the uname of an %s kernel", name, first, arch)
		}
		formats := checkCapture(t, name, capture)
		for _, ev := range []string{"syscalls:sys_enter_openat", "syscalls:sys_exit_read", "sched:sched_switch", "block:block_rq_issue"} {
			if formats[ev] == nil {
				t.Errorf("%s has no %s", name, ev)
			}
		}
		gz, _ := profileTracepoints.ReadFile(profileFormatFile(name))
		t.Logf("%s: %d events, %d KiB, %d KiB gzipped", name, len(formats), len(capture)/1024, len(gz)/1024)
	}
}

// A profile answers with its own kernel's tracepoints: open(2), stat(2)
// and lstat(2) are x86-64's only; 7.x's syscall tracepoints carry the
// strings they read from user memory, 6.x's do not.
func TestProfileTracepoints(t *testing.T) {
	for _, tt := range []struct {
		profile  string
		has, not []string
	}{
		{"linux-6.1-amd64", []string{"syscalls:sys_enter_open", "syscalls:sys_enter_newstat", "syscalls:sys_exit_newlstat"}, []string{"syscalls:sys_enter_mseal"}},
		{"linux-6.12-amd64", []string{"syscalls:sys_enter_open", "syscalls:sys_enter_mseal"}, nil},
		{"linux-7.2-amd64", []string{"syscalls:sys_enter_open", "syscalls:sys_enter_newstat"}, nil},
		{"linux-6.12-arm64", []string{"syscalls:sys_enter_openat"}, []string{"syscalls:sys_enter_open", "syscalls:sys_enter_newstat", "syscalls:sys_exit_newlstat"}},
		{"linux-7.2-arm64", []string{"syscalls:sys_enter_openat"}, []string{"syscalls:sys_enter_open", "syscalls:sys_enter_newstat", "syscalls:sys_exit_newlstat"}},
	} {
		f, err := Profile(tt.profile)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range tt.has {
			if _, err := f.Tracepoint(ev); err != nil {
				t.Errorf("%s: %s: %v", tt.profile, ev, err)
			}
		}
		for _, ev := range tt.not {
			if tp, err := f.Tracepoint(ev); !errors.Is(err, ErrNoTracepoint) {
				t.Errorf("%s has %s: %v, %v", tt.profile, ev, tp, err)
			}
		}
		openat, err := f.Tracepoint("syscalls:sys_enter_openat")
		if err != nil {
			t.Fatal(err)
		}
		if fl := openat.Field("flags"); fl == nil || fl.Offset != 32 || fl.Size != 8 {
			t.Errorf("%s: sys_enter_openat flags: %+v", tt.profile, fl)
		}
		if v := openat.Field("__filename_val"); (v != nil) != f.Kernel.AtLeast(7, 0) {
			t.Errorf("%s: sys_enter_openat __filename_val: %+v", tt.profile, v)
		}
		if exit, err := f.Tracepoint("syscalls:sys_exit_read"); err != nil || exit.Field("ret") == nil || exit.Field("ret").Offset != 16 || !exit.Field("ret").Signed {
			t.Errorf("%s: sys_exit_read: %+v, %v", tt.profile, exit, err)
		}
		execs, err := f.MatchEvents("syscalls:sys_enter_exec*")
		if err != nil || !slices.Equal(execs, []string{"syscalls:sys_enter_execve", "syscalls:sys_enter_execveat"}) {
			t.Errorf("%s: syscalls:sys_enter_exec* is %v, %v", tt.profile, execs, err)
		}
		if wakeups, _ := f.MatchEvents("sched:sched_wakeup*"); len(wakeups) != 2 {
			t.Errorf("%s: sched:sched_wakeup* is %v", tt.profile, wakeups)
		}
	}
}

// Nothing about a profile's facts but asking for a tracepoint unpacks its
// capture, and it is unpacked once, however many copies ask.
func TestProfileCaptureIsLazy(t *testing.T) {
	f, _ := Profile("linux-7.2-arm64")
	loads := 0
	f.formats = newFormatSet("test", func() ([]byte, error) {
		loads++
		return profileTracepoints.ReadFile(profileFormatFile("linux-7.2-arm64"))
	})
	g := *f
	_ = f.Label()
	_ = f.Differences(&g)
	if _, err := json.Marshal(f); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteFile(filepath.Join(t.TempDir(), "facts.json")); err != nil {
		t.Fatal(err)
	}
	if loads != 0 {
		t.Fatalf("the capture was unpacked %d times before a tracepoint was asked for", loads)
	}
	for _, facts := range []*Facts{f, &g, f} {
		if _, err := facts.Tracepoint("sched:sched_switch"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.MatchEvents("sched:*"); err != nil {
		t.Fatal(err)
	}
	if loads != 1 {
		t.Errorf("the capture was unpacked %d times", loads)
	}
	if b, _ := json.Marshal(f); bytes.Contains(b, []byte("tracepoint_formats")) || bytes.Contains(b, []byte("sched_switch")) {
		t.Error("a profile's facts carry its capture")
	}
}

// CaptureTracepoints keeps each event's own fields, in name order, and
// leaves out the common fields, dynamic events and the ftrace group.
func TestCaptureTracepoints(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, text string) {
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	format := func(fields ...string) string {
		return "name: x\nID: 7\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n" +
			"\t" + strings.Join(fields, "\n\t") + "\n\nprint fmt: \"x\"\n"
	}
	write("events/sched/sched_switch/format", format("field:pid_t prev_pid;\toffset:8;\tsize:4;\tsigned:1;"))
	write("events/block/block_rq_issue/format", format("field:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;", "field:char rwbs[8];\toffset:12;\tsize:8;\tsigned:0;"))
	write("events/kprobes/my_open/format", format("field:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;"))
	write("events/ftrace/function/format", format("field:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;"))
	write("events/sched/enable", "0\n")
	write("dynamic_events", "p:kprobes/my_open do_sys_open\n")
	capture, err := CaptureTracepoints(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := "block:block_rq_issue\nfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\nfield:char rwbs[8];\toffset:12;\tsize:8;\tsigned:0;\n\n" +
		"sched:sched_switch\nfield:pid_t prev_pid;\toffset:8;\tsize:4;\tsigned:1;\n"
	if string(capture) != want {
		t.Errorf("capture\n%s\nwant\n%s", capture, want)
	}
	changed := bytes.Replace(capture, []byte("prev_pid;\toffset:8"), []byte("prev_pid;\toffset:12"), 1)
	changed = append(changed, "\nsched:sched_wakeup\n"...)
	diffs, err := DiffTracepoints(append([]byte("# Linux 1\n"), capture...), changed, "the profile", "the kernel", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) != 2 || !strings.HasPrefix(diffs[0], "sched:sched_switch: the profile has") || diffs[1] != "sched:sched_wakeup: only in the kernel" {
		t.Errorf("differences: %q", diffs)
	}
	if diffs, _ := DiffTracepoints(capture, append([]byte("# Linux 2\n"), capture...), "a", "b", 10); len(diffs) != 0 {
		t.Errorf("comments differ: %q", diffs)
	}
}

// Facts files carry the capture of the kernel they describe; one written
// before they did lists the events but knows no format; a damaged capture
// is an error at the event, never a crash.
func TestFactsFileTracepoints(t *testing.T) {
	capture, err := ProfileTracepoints("linux-6.12-arm64")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "facts.json")
	write := func(f *Facts) *Facts {
		t.Helper()
		if err := f.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		g, err := ReadFactsFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	f, _ := Profile("linux-6.12-arm64")
	f.TracepointFormats = Gzip(capture)
	g := write(f)
	if tp, err := g.Tracepoint("sched:sched_switch"); err != nil || tp.Field("next_pid") == nil {
		t.Errorf("sched_switch from the facts file: %v, %v", tp, err)
	}
	if _, err := g.Tracepoint("syscalls:sys_enter_open"); !errors.Is(err, ErrNoTracepoint) {
		t.Errorf("sys_enter_open on arm64: %v", err)
	}
	if evs, err := g.MatchEvents("syscalls:sys_enter_open*"); err != nil || len(evs) == 0 || slices.Contains(evs, "syscalls:sys_enter_open") {
		t.Errorf("events: %v, %v", evs, err)
	}

	old, _ := Profile("linux-6.12-arm64")
	old.Events = []string{"sched:sched_switch", "syscalls:sys_enter_openat"}
	g = write(old)
	if _, err := g.Tracepoint("sched:sched_switch"); !errors.Is(err, ErrFormatUnknown) {
		t.Errorf("a listed event without a format: %v", err)
	}
	if _, err := g.Tracepoint("sched:sched_wakeup"); !errors.Is(err, ErrNoTracepoint) {
		t.Errorf("an event the file does not list: %v", err)
	}
	old.Events = nil
	g = write(old)
	if _, err := g.Tracepoint("sched:sched_wakeup"); !errors.Is(err, ErrFormatUnknown) {
		t.Errorf("a file without events: %v", err)
	}
	if _, err := g.MatchEvents("sched:*"); !errors.Is(err, ErrEventsUnknown) {
		t.Errorf("a file without events lists: %v", err)
	}

	for _, bad := range [][]byte{
		[]byte("not gzip"),
		Gzip([]byte("sched:sched_switch\nfield:int x;\toffset:8;\tsize:4;\tsigned:1;\n\nsched:sched_switch\n")), // twice
		Gzip([]byte("not an event\n")),
		Gzip([]byte("sched:sched_switch\nfield:int x;\toffset:eight;\tsize:4;\tsigned:1;\n")), // this one only
	} {
		f.TracepointFormats = bad
		g := write(f)
		tp, err := g.Tracepoint("sched:sched_switch")
		if err == nil || errors.Is(err, ErrNoTracepoint) || errors.Is(err, ErrFormatUnknown) {
			t.Errorf("%q: %v, %v", bad, tp, err)
		}
	}
}

// What a plan pays the first time it asks a profile for a tracepoint:
// unpacking and indexing the capture, then parsing one format.
func BenchmarkProfileFirstTracepoint(b *testing.B) {
	for i := 0; i < b.N; i++ {
		s := newFormatSet("bench", func() ([]byte, error) {
			return profileTracepoints.ReadFile(profileFormatFile("linux-7.2-amd64"))
		})
		if _, err := s.format("sched:sched_switch"); err != nil {
			b.Fatal(err)
		}
	}
}
