package symbols

import (
	"bufio"
	"debug/elf"
	"fmt"
	"github.com/probectl/probectl/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

func TestParseKallsyms(t *testing.T) {
	k, err := parseKallsyms(strings.NewReader(`ffffffff81000000 T _stext
ffffffff81000100 T do_one
ffffffff81000100 D some_data
ffffffff81000200 t do_two
ffffffffc0201000 t ext4_thing	[ext4]
0000000000000000 T hidden
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		addr uint64
		want string
	}{
		{0xffffffff81000104, "do_one+0x4"},
		{0xffffffff81000200, "do_two"},
		{0xffffffffc0201010, "ext4_thing+0x10 [ext4]"},
		{0xffffffff80000000, "0xffffffff80000000"},
	} {
		if got := k.Frame(c.addr).String(); got != c.want {
			t.Errorf("%#x: %q, want %q", c.addr, got, c.want)
		}
	}
	var none *KernelSymbols
	if got := none.Frame(0x10).String(); got != "0x10" {
		t.Errorf("no symbols: %q", got)
	}
}

func TestParseMaps(t *testing.T) {
	m := parseMaps(`55d0c0a00000-55d0c0a20000 r--p 00000000 fe:01 123 /usr/bin/true
55d0c0a20000-55d0c0a40000 r-xp 00020000 fe:01 123 /usr/bin/true
7f0000000000-7f0000001000 r-xp 00000000 00:00 0 [vdso]
7f0000100000-7f0000200000 r-xp 00010000 fe:01 9 /tmp/a b (deleted)
7f0000300000-7f0000400000 r-xp 00001000 fe:01 10 /opt/with space/lib.so
7f0000500000-7f0000600000 r-xp 00001000 fe:01 11                         /opt/two  spaces/lib.so
`)
	if len(m) != 3 || m[2].path != "/opt/two  spaces/lib.so" || m[0].path != "/usr/bin/true" || m[0].start != 0x55d0c0a20000 || m[0].off != 0x20000 || m[1].path != "/opt/with space/lib.so" {
		t.Errorf("%+v", m)
	}
}

// A function of libc, found by libc's build id and the file offset of its
// code, as the kernel records a user frame.
func TestFrameByBuildID(t *testing.T) {
	var lib string
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"} {
		if _, err := os.Stat(p); err == nil {
			lib = p
			break
		}
	}
	if lib == "" {
		t.Skip("no libc.so.6 in the usual places")
	}
	ef, err := elf.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	id := elfBuildID(ef)
	if id == "" || FileBuildID(lib) != id {
		t.Fatalf("%s: build id %q", lib, id)
	}
	syms, err := ef.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	var addr uint64
	names := map[uint64][]string{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
			names[s.Value] = append(names[s.Value], s.Name)
			if s.Name == "getppid" {
				addr = s.Value
			}
		}
	}
	if addr == 0 {
		t.Fatal("libc has no getppid")
	}
	var off uint64
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && addr >= p.Vaddr && addr < p.Vaddr+p.Filesz {
			off = addr - p.Vaddr + p.Off
		}
	}
	u := NewUserSymbols("", []string{"/nonexistent"})
	f := u.FrameByBuildID(Process{}, id, off+2)
	found := false
	for _, n := range names[addr] {
		found = found || n == f.Symbol
	}
	if !found || f.Offset != 2 || f.Module != lib && !strings.HasSuffix(f.Module, "libc.so.6") {
		t.Errorf("frame %+v, want one of %v +2 in %s", f, names[addr], lib)
	}
	if f := u.FrameByBuildID(Process{}, strings.Repeat("0", 40), 0x10); f.Symbol != "" || !strings.HasPrefix(f.Module, "build-id ") {
		t.Errorf("an unknown build id: %+v", f)
	}
}

// withTimeout runs fn, failing the test if it has not returned after d (a
// blocked open of a FIFO never returns).
func withTimeout(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: still blocked after %s", what, d)
	}
}

// A local user controls the names probectl opens as root to symbolize:
// the paths its processes map, the build-id index, the -symbols
// directories. A named pipe there must not block show: the file named
// "a  b" (two spaces) is mapped, and "a b" is a FIFO nobody writes.
func TestUserSymbolsNeverBlock(t *testing.T) {
	dir := t.TempDir()
	elfData, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip(err)
	}
	mapped := filepath.Join(dir, "a  b")
	if err := os.WriteFile(mapped, elfData, 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "a b")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(mapped)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, len(elfData), syscall.PROT_READ|syscall.PROT_EXEC, syscall.MAP_PRIVATE)
	if err != nil {
		t.Skipf("mmap PROT_EXEC of %s: %v (noexec?)", mapped, err)
	}
	defer syscall.Munmap(mem)
	ip := uint64(uintptr(unsafe.Pointer(&mem[0]))) + 0x10
	u := NewUserSymbols("", nil)
	withTimeout(t, 10*time.Second, "FrameAt", func() {
		fr := u.FrameAt(Process{PID: os.Getpid()}, ip)
		if fr.Module != mapped {
			t.Errorf("the frame's file is %q, want %q (the mapped one)", fr.Module, mapped)
		}
	})

	// The index names a FIFO for a build id; a -symbols directory holds
	// a link to one.
	id := strings.Repeat("ab", 20)
	index := filepath.Join(dir, "buildids.json")
	if err := os.WriteFile(index, []byte(`{"`+id+`": "`+fifo+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	sdir := filepath.Join(dir, "syms")
	if err := os.Mkdir(sdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fifo, filepath.Join(sdir, "lib.so")); err != nil {
		t.Fatal(err)
	}
	u = NewUserSymbols(index, []string{sdir})
	u.procsScanned = time.Now() // not every process's files: this test's
	withTimeout(t, 10*time.Second, "FrameByBuildID", func() {
		if fr := u.FrameByBuildID(Process{}, id, 0x10); fr.Symbol != "" {
			t.Errorf("a FIFO gave a symbol: %+v", fr)
		}
	})
}

// A user's process maps a copy of a system file (the same build id: a
// forged one may name its functions anything) after root's processes
// map the real one: the build-id index keeps the file no other user
// controls, and frames by build id are named from it.
func TestBuildIDIndexPrefersTrustedFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a file of another user is made with chown")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip(err)
	}
	real, forged := filepath.Join(dir, "real"), filepath.Join(dir, "forged")
	for _, p := range []string{real, forged} {
		if err := os.WriteFile(p, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(forged, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	id := FileBuildID(real)
	if id == "" {
		t.Skip("/bin/true has no build id")
	}
	index := filepath.Join(dir, "buildids.json")
	u := NewUserSymbols(index, nil)
	u.file(real)
	u.file(forged) // seen later in the scan of /proc
	if got := u.index[id]; got != real {
		t.Errorf("the index names %q for %s, want %q", got, id, real)
	}
	if err := u.Save(); err != nil {
		t.Fatal(err)
	}
	u = NewUserSymbols(index, nil)
	u.procsScanned = time.Now()
	if f := u.FrameByBuildID(Process{}, id, 0x10); f.Module != real || f.Note != "" {
		t.Errorf("frame from %q, want %q", f.Module, real)
	}

	// Another user's file is never indexed, even when it is the only one
	// (see TestBuildIDSpoofing).
	u = NewUserSymbols("", nil)
	u.file(forged)
	if got, ok := u.index[id]; ok {
		t.Errorf("the index names %q for another user's file", got)
	}
}

// A process in a mount namespace of its own (a container; any user, with
// user namespaces) maps a file at a path that names another file in
// probectl's: its frames are named from the file it maps, never from the
// file its path names here.
func TestFrameAtOtherMountNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: unshare -m")
	}
	for _, tool := range []string{"gcc", "unshare", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"real", "fake"} {
		src := filepath.Join(dir, name+".c")
		if err := os.WriteFile(src, []byte("int atk_"+name+"_func(int x) { return x * 3 + 1; }\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("gcc", "-O0", "-shared", "-fPIC", "-Wl,--build-id=none", "-o", filepath.Join(dir, name+".so"), src).CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
	}
	real, fake := filepath.Join(dir, "real.so"), filepath.Join(dir, "fake.so")
	script := `import mmap, sys, time
f = open(sys.argv[1], "rb")
m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ | mmap.PROT_EXEC)
print("mapped", flush=True)
time.sleep(60)
`
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		`mount --bind "$1" "$2" && exec python3 -c "$3" "$2"`, "sh", fake, real, script)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "mapped\n" {
		t.Fatalf("the mapping process: %q %v", line, err)
	}
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var start uint64
	for _, m := range parseMaps(string(maps)) {
		if m.path == real && m.off == 0 {
			start = m.start
		}
	}
	if start == 0 {
		t.Fatalf("no mapping of %s at offset 0 in:\n%s", real, maps)
	}
	ef, err := elf.Open(fake)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	syms, _ := ef.Symbols()
	var off uint64
	for _, s := range syms {
		if s.Name == "atk_fake_func" {
			for _, p := range ef.Progs {
				if p.Type == elf.PT_LOAD && s.Value >= p.Vaddr && s.Value < p.Vaddr+p.Filesz {
					off = s.Value - p.Vaddr + p.Off
				}
			}
		}
	}
	if off == 0 {
		t.Fatal("fake.so: no atk_fake_func")
	}
	u := NewUserSymbols("", nil)
	if f := u.FrameAt(Process{PID: cmd.Process.Pid}, start+off+1); f.Symbol != "atk_fake_func" || f.Offset != 1 {
		t.Errorf("frame %+v, want atk_fake_func+0x1 (the file mapped)", f)
	}
	for id, path := range u.index {
		if strings.HasPrefix(path, "/proc/") || path == real {
			t.Errorf("the index names %s for %s", path, id)
		}
	}
}

// A long-running reader (events -follow) symbolizes the processes of
// every user: one that makes file after file (a new library for each
// process) or process after process grows what it caches no further than
// bounds.
func TestUserSymbolsCacheBounded(t *testing.T) {
	data, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip(err)
	}
	defer func(old int) { maxCachedFiles = old }(maxCachedFiles)
	maxCachedFiles = 8
	dir := t.TempDir()
	u := NewUserSymbols("", nil)
	for i := 0; i < 50; i++ {
		p := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(p, data, 0o755); err != nil {
			t.Fatal(err)
		}
		u.FrameAt(Process{PID: os.Getpid()}, 0x10) // as a frame of this process
		u.file(p)
	}
	if len(u.files) > 8+len(u.maps[Process{PID: os.Getpid()}].maps) {
		t.Errorf("%d files cached, bound 8", len(u.files))
	}

	// The maps of a process gone are dropped when processes are scanned.
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	gone := Process{PID: cmd.Process.Pid}
	u.maps[gone] = &procMaps{maps: []mapping{{start: 1, end: 2, path: "/bin/true", open: "/bin/true"}}, ok: true}
	u.FrameByBuildID(Process{}, strings.Repeat("00", 20), 0x10)
	if _, ok := u.maps[gone]; ok {
		t.Errorf("the maps of process %d, gone, are kept", cmd.Process.Pid)
	}
}

// Which file is believed for a build id: root's (or this user's), not
// writable by others; another user's only for a process of that user; a
// file anyone may write, never. Others name frames with a note saying
// whose they are, and never enter the index.
func TestBuildIDTrust(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: files of another user are made with chown")
	}
	data, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mine, theirs, open := filepath.Join(dir, "mine"), filepath.Join(dir, "theirs"), filepath.Join(dir, "open")
	for _, p := range []string{mine, theirs, open} {
		if err := os.WriteFile(p, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o666); err != nil {
		t.Fatal(err)
	}
	id := FileBuildID(mine)
	if id == "" {
		t.Skip("/bin/true has no build id")
	}
	index := filepath.Join(dir, "buildids.json")
	u := NewUserSymbols(index, nil)
	u.procsScanned = time.Now() // this test's files only
	for _, d := range append(filepath.SplitList(os.Getenv("PATH")), libDirs...) {
		u.scanned[d] = true
	}
	u.file(open)
	u.file(theirs)
	if len(u.index) != 0 {
		t.Errorf("the index holds files another user controls: %v", u.index)
	}
	f := u.FrameByBuildID(Process{}, id, 0x10)
	if want := "untrusted: " + open + " writable by others (mode 0666)"; f.Note != want || f.Module != open {
		t.Errorf("an exited process's frame: %+v, want note %q", f, want)
	}
	if !strings.HasSuffix(f.String(), " ["+f.Note+"]") {
		t.Errorf("String %q: want the note in the module's place", f.String())
	}

	// A running process of uid 65534: its user's file is believed for it.
	sleep := exec.Command("sleep", "60")
	sleep.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleep.Process.Kill(); sleep.Wait() }()
	u.claims[id] = theirs
	start, err := StartTime(sleep.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	p := Process{PID: sleep.Process.Pid, Start: ProcessStarted | uint32(start)&(ProcessStarted-1)}
	if uid, ok := p.Running(); !ok || uid != 65534 {
		t.Fatalf("%+v: running %v as uid %d, want uid 65534", p, ok, uid)
	}
	if f := u.FrameByBuildID(p, id, 0x10); f.Note != "" || f.Module != theirs {
		t.Errorf("a frame of uid 65534's process from their file: %+v, want no note", f)
	}
	if f := u.FrameByBuildID(Process{}, id, 0x10); f.Note != "untrusted: "+theirs+" owned by uid 65534" {
		t.Errorf("an exited process's frame from uid 65534's file: %+v", f)
	}
	// Another process now has the pid: not the one recorded.
	if _, ok := (Process{PID: p.PID, Start: ProcessStarted | (p.Start+1)&(ProcessStarted-1)}).Running(); ok {
		t.Errorf("pid %d with another start time reads as running", p.PID)
	}

	// root's file: indexed, believed for anyone, and it wins.
	u.file(mine)
	if f := u.FrameByBuildID(Process{}, id, 0x10); f.Note != "" || f.Module != mine {
		t.Errorf("a frame with root's file known: %+v", f)
	}
	if err := u.Save(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(index)
	if err != nil || !strings.Contains(string(b), mine) || strings.Contains(string(b), theirs) || strings.Contains(string(b), open) {
		t.Errorf("the saved index: %v\n%s", err, b)
	}
}

// A process's start time is read past its name, whatever the name holds.
func TestStartTimeOddName(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip(err)
	}
	odd := filepath.Join(t.TempDir(), "x) 1 2 (y")
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(odd, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(odd, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	mine, err1 := StartTime(os.Getpid())
	its, err2 := StartTime(cmd.Process.Pid)
	if err1 != nil || err2 != nil || its < mine {
		t.Errorf("start times: this process %d (%v), its child %d (%v)", mine, err1, its, err2)
	}
	if _, ok := (Process{PID: cmd.Process.Pid, Start: ProcessStarted | uint32(its)&(ProcessStarted-1)}).Running(); !ok {
		t.Errorf("the child, with its start time, is not running")
	}
}

// startedChild starts sleep, mapping libc, and returns the process as a
// program records it (pid and start time), an address one byte into
// nanosleep in its libc, and a function that ends it and waits.
func startedChild(t *testing.T) (Process, uint64, func()) {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	end := func() { cmd.Process.Kill(); cmd.Wait() }
	t.Cleanup(end)
	pid := cmd.Process.Pid
	var maps []mapping
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
		if maps = parseMaps(string(b)); len(maps) > 1 && strings.Contains(string(b), "libc.so") {
			break
		}
	}
	start, err := StartTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	p := Process{PID: pid, Start: ProcessStarted | uint32(start)&(ProcessStarted-1)}
	for _, m := range maps {
		if !strings.HasPrefix(filepath.Base(m.path), "libc.so") {
			continue
		}
		ef, err := elf.Open(m.path)
		if err != nil {
			t.Fatal(err)
		}
		defer ef.Close()
		syms, _ := ef.DynamicSymbols()
		for _, s := range syms {
			if s.Name != "nanosleep" || elf.ST_TYPE(s.Info) != elf.STT_FUNC {
				continue
			}
			for _, ph := range ef.Progs {
				if ph.Type == elf.PT_LOAD && s.Value >= ph.Vaddr && s.Value < ph.Vaddr+ph.Filesz {
					if off := s.Value - ph.Vaddr + ph.Off; off >= m.off && off-m.off < m.end-m.start {
						return p, m.start + off - m.off + 1, end
					}
				}
			}
		}
	}
	testenv.Absent(t, "sleep maps no libc with nanosleep (a dynamically linked coreutils): %+v", maps)
	return p, 0, end
}

// An address of a process recorded with its start time is named, after
// the process exits, as it was while it ran: through the maps and files
// read then, across a Refresh and the scan of running processes. Known by
// its pid alone, or by another start time (its pid another's), it is not.
func TestFrameAtAfterExit(t *testing.T) {
	p, ip, end := startedChild(t)
	u := NewUserSymbols("", nil)
	live := u.FrameAt(p, ip)
	if live.Symbol == "" || live.Offset != 1 || live.Note != "" || !strings.HasPrefix(filepath.Base(live.Module), "libc.so") {
		t.Fatalf("while it runs: %+v, want a libc function+0x1", live)
	}
	pidOnly := Process{PID: p.PID}
	if f := u.FrameAt(pidOnly, ip); f.Symbol != live.Symbol {
		t.Fatalf("by pid alone, while it runs: %+v", f)
	}
	end()
	if f := u.FrameAt(p, ip); f != live {
		t.Errorf("after it exited: %+v, want %+v", f, live)
	}
	u.Refresh()
	u.FrameByBuildID(Process{}, strings.Repeat("00", 20), 0x10) // scans the running processes
	if f := u.FrameAt(p, ip); f != live {
		t.Errorf("after it exited, a Refresh and a scan: %+v, want %+v", f, live)
	}
	if f, want := u.FrameAt(pidOnly, ip), p.Exited(); f.Note != want || f.Symbol != "" {
		t.Errorf("by pid alone, after it exited: %+v, want the note %q", f, want)
	}
	other := Process{PID: p.PID, Start: ProcessStarted | (p.Start+1)&(ProcessStarted-1)}
	if f, want := u.FrameAt(other, ip), other.Exited(); f.Note != want || f.Symbol != "" {
		t.Errorf("another start time: %+v, want the note %q", f, want)
	}
	if f := NewUserSymbols("", nil).FrameAt(p, ip); f.Note != p.Exited() {
		t.Errorf("a symbolizer that never saw it run: %+v, want the note %q", f, p.Exited())
	}
}
