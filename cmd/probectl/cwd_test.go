package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/probectl/probectl/internal/testenv"
	"golang.org/x/sys/unix"
)

// buildOpenWork builds the stack tests' workload linked statically, so
// that the dynamic loader opens nothing: every open its process makes is
// one of work open's six.
func buildOpenWork(t *testing.T, prefix string) (path, comm string) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Absent(t, "needs root to load BPF")
	}
	comm = fmt.Sprintf("%s-w%d", prefix, os.Getpid()%1000000)
	path = filepath.Join(t.TempDir(), comm)
	out, err := exec.Command("gcc", "-static", "-O0", "-o", path, "testdata/stacks/work.c", "-lpthread").CombinedOutput()
	if err != nil {
		t.Fatalf("gcc -static (the cwd tests need glibc's static library, libc6-dev): %v\n%s", err, out)
	}
	return path, comm
}

// openWorkDir mounts a tmpfs of the test's own and makes the directory
// work open goes into, two levels below the mount, with r0, r1 and r2 in
// it: the walk up from it crosses the mount.
func openWorkDir(t *testing.T) string {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "loops-mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("loops-cwd", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	dir := filepath.Join(mnt, "d1", "d2")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"r0", "r1", "r2"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// cwd on a tracepoint: the workload chdirs into a directory on a tmpfs
// mounted for the test and opens six paths; each sys_exit_openat event
// names that directory, its full path from the root, across the mount.
// Six events: fd 3 for the five that exist, -2 (ENOENT) for nope.
func TestRunCwd(t *testing.T) {
	path, comm := buildOpenWork(t, "cwd")
	dir := openWorkDir(t)
	spec := filepath.Join(t.TempDir(), "cwd.hcl")
	if err := os.WriteFile(spec, []byte(fmt.Sprintf(`
probe "tracepoint" "loopscwd" {
  event = "syscalls:sys_exit_openat"
  on_entry {
    event "open" {
      when   = comm == %q
      fields = {
        fd  = args.ret
        cwd = cwd
      }
    }
  }
}
`, comm)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runWhileWorking(t, spec, path, []string{"open", dir}, "-v", "-duration", "5s", "-interval", "0")
	var got []string
	for _, l := range out {
		if _, ev, ok := strings.Cut(l, " tracepoint.loopscwd open: "); ok {
			got = append(got, ev)
		}
	}
	var want []string
	for _, fd := range []int{3, 3, 3, -2, 3, 3} {
		want = append(want, fmt.Sprintf("fd=%d, cwd=%s", fd, dir))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the workload's opens:\n%s\nwant:\n%s\nall of it:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), strings.Join(out, "\n"))
	}
}

// opensnoop.bt as bpftrace ships it (its getcwd and printcwd loops are
// the value cwd): the workload chdirs into a directory on a tmpfs mounted
// for the test and opens four relative paths and two absolute ones. Six
// lines, exactly bpftrace's: the relative ones with the directory's full
// path before them, across the mount; nope with fd -1 and errno 2.
func TestRunImportedOpensnoop(t *testing.T) {
	path, comm := buildOpenWork(t, "osn")
	dir := openWorkDir(t)
	out := runWhileWorking(t, "../../spec/bpftrace/testdata/tools/opensnoop.bt", path, []string{"open", dir}, "-duration", "5s", "-interval", "0")
	var got []string
	pid := ""
	for _, l := range out {
		f := strings.Fields(l)
		if len(f) < 5 || f[1] != comm {
			continue
		}
		if pid == "" {
			pid = f[0]
		}
		got = append(got, l)
	}
	var want []string
	for _, o := range []struct {
		fd, errno int
		name      string
		relative  bool
	}{
		{3, 0, "r0", true}, {3, 0, "r1", true}, {3, 0, "r2", true}, {-1, 2, "nope", true},
		{3, 0, "/dev/null", false}, {3, 0, dir + "/r0", false},
	} {
		cwd := ""
		if o.relative {
			cwd = dir + "/"
		}
		want = append(want, fmt.Sprintf("%-6s %-16s %4d %3d %s%s", pid, comm, o.fd, o.errno, cwd, o.name))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("opensnoop printed, of the workload (%d lines, want %d):\n%s\nwant:\n%s\nall of it:\n%s", len(got), len(want), strings.Join(got, "\n"), strings.Join(want, "\n"), strings.Join(out, "\n"))
	}
}

// rewrite017 is the tool in bpftrace 0.17's dialect: bpftrace017's, or
// testdata/btside/TOOL-0.17.bt, a rewrite by hand where regular
// expressions do not reach (opensnoop's macros and loops), with
// @MOUNT_MNT@ replaced by offsetof(struct mount, mnt) on the host.
func rewrite017(t *testing.T, tool string, src []byte) string {
	t.Helper()
	hand, err := os.ReadFile(filepath.Join("testdata/btside", tool+"-0.17.bt"))
	if errors.Is(err, os.ErrNotExist) {
		return bpftrace017(string(src))
	}
	if err != nil {
		t.Fatal(err)
	}
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatalf("kernel BTF: %v", err)
	}
	var mount *btf.Struct
	if err := kernel.TypeByName("mount", &mount); err != nil {
		t.Fatalf("struct mount: %v", err)
	}
	for _, m := range mount.Members {
		if m.Name == "mnt" {
			return strings.ReplaceAll(string(hand), "@MOUNT_MNT@", fmt.Sprint(m.Offset/8))
		}
	}
	t.Fatal("struct mount has no mnt")
	return ""
}

// opensnoop side by side: bpftrace 0.17 runs the rewrite by hand
// (testdata/btside/opensnoop-0.17.bt), probectl run the tool as it is;
// the static workload chdirs into a directory on a tmpfs mounted for the
// test and opens four relative and two absolute paths. Both print the
// same six rows: the relative ones after the directory's full path.
func TestSideOpensnoop(t *testing.T) {
	path, comm := buildOpenWork(t, "bso")
	dir := openWorkDir(t)
	runSide(t, sideTool{tool: "opensnoop",
		mine: func(row string) bool {
			f := strings.Fields(row)
			return len(f) == 5 && f[1] == comm
		},
		work: func(t *testing.T) []string {
			pid := doWork(t, path, "open", dir)
			var want []string
			for _, o := range []struct {
				fd, errno int
				path      string
			}{
				{3, 0, dir + "/r0"}, {3, 0, dir + "/r1"}, {3, 0, dir + "/r2"}, {-1, 2, dir + "/nope"},
				{3, 0, "/dev/null"}, {3, 0, dir + "/r0"},
			} {
				want = append(want, fmt.Sprintf("%-6d %-16s %4d %3d %s", pid, comm, o.fd, o.errno, o.path))
			}
			return want
		}})
}
