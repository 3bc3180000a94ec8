package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// vmTimeout bounds one VM run.
const vmTimeout = 12 * time.Minute

var exitLine = regexp.MustCompile(`PROBECTL-VM-EXIT: (\d+)`)

// runVM boots k with the test binary as the payload of vminit. Each line
// of the console goes to consume, if not nil, and is printed unless
// consume takes it.
func runVM(k Kernel, testBin string, args []string, consume func(line string) bool) (int, error) {
	if err := checkArch(testBin, k.Arch); err != nil {
		return 0, err
	}
	qemu, err := ensureQEMU(k.Arch)
	if err != nil {
		return 0, err
	}
	vmlinuz, err := k.Fetch()
	if err != nil {
		return 0, err
	}
	tmp, err := os.MkdirTemp("", "vmexec-run-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	initrd, err := buildInitrd(k, tmp, testBin, args)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	fmt.Fprintf(os.Stderr, "vmexec: booting %s (%s) with %s\n", k.Name, filepath.Base(filepath.Dir(vmlinuz)), filepath.Base(testBin))
	cmd := exec.Command(qemu, qemuArgs(k.Arch, vmlinuz, initrd)...)
	cmd.Stdin = nil
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", qemu, err)
	}
	timer := time.AfterFunc(vmTimeout, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	code := readConsole(stdout, consume)
	werr := cmd.Wait()
	elapsed := time.Since(start).Round(100 * time.Millisecond)
	fmt.Fprintf(os.Stderr, "vmexec: %s: VM ran %s\n", k.Name, elapsed)
	if code < 0 {
		return 0, fmt.Errorf("the VM stopped without the test's exit status (qemu: %v); see the console above", werr)
	}
	return code, nil
}

// buildInitrd writes into tmp the initramfs of vminit with the test
// binary, its args and the PROBECTL_TEST_ environment, and returns its
// path.
func buildInitrd(k Kernel, tmp, testBin string, args []string) (string, error) {
	init, err := buildInit(k.Arch, tmp)
	if err != nil {
		return "", err
	}
	initrd := filepath.Join(tmp, "initrd.gz")
	env := []string{"PROBECTL_VM_PROFILE=" + k.Name}
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "PROBECTL_TEST_") {
			env = append(env, e)
		}
	}
	return initrd, writeInitramfs(initrd, init, testBin, args, env)
}

// qemuArgs boots vmlinuz with initrd on a machine of arch.
func qemuArgs(arch, vmlinuz, initrd string) []string {
	cmdline := "quiet panic=-1 oops=panic"
	// PROBECTL_VM_CMDLINE adds kernel parameters (to try one on a kernel
	// of the matrix without a change here).
	if extra := strings.TrimSpace(os.Getenv("PROBECTL_VM_CMDLINE")); extra != "" {
		cmdline += " " + extra
	}
	// Two vCPUs interleaved on one host thread: multi-threaded TCG races
	// the kernel's live text patching (ftrace, jump labels), and a guest
	// then trips over a stale int3 (seen on 7.2 amd64 in __schedule).
	var qargs []string
	switch arch {
	case "amd64":
		qargs = []string{"-cpu", "max", "-append", "console=ttyS0 " + cmdline}
	case "arm64":
		qargs = []string{"-machine", "virt", "-cpu", "max", "-append", "console=ttyAMA0 " + cmdline}
	}
	qargs = append(qargs, "-accel", "tcg,thread=single", "-m", "1024", "-smp", "2", "-kernel", vmlinuz, "-initrd", initrd,
		"-nographic", "-no-reboot", "-monitor", "none", "-serial", "stdio", "-display", "none")
	// -nographic already routes the serial port to stdio.
	return removePair(qargs, "-serial")
}

// readConsole reads the VM's console until it closes, handing each line
// to consume (if not nil) and printing the lines it does not take. It
// returns the test's exit status, -1 when the console never gave it.
func readConsole(stdout io.Reader, consume func(line string) bool) int {
	code := -1
	r := bufio.NewReader(stdout)
	for {
		line, err := r.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		if m := exitLine.FindStringSubmatch(line); m != nil {
			code, _ = strconv.Atoi(m[1])
		} else if consume != nil && consume(line) {
			// the caller's
		} else if line != "" || err == nil {
			fmt.Println(line)
		}
		if err != nil {
			return code
		}
	}
}

func removePair(args []string, flag string) []string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			return append(args[:i:i], args[i+2:]...)
		}
	}
	return args
}

func checkArch(bin, arch string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("test binary: %w", err)
	}
	defer f.Close()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if f.Machine != want {
		return fmt.Errorf("the test binary is %v, the kernel is %s: build it with GOARCH=%s CGO_ENABLED=0", f.Machine, arch, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("the test binary is dynamically linked: build it with CGO_ENABLED=0")
		}
	}
	return nil
}

// ensureQEMU finds qemu for arch, installing Debian's package when root.
func ensureQEMU(arch string) (string, error) {
	bin, pkg := "qemu-system-x86_64", "qemu-system-x86"
	if arch == "arm64" {
		bin, pkg = "qemu-system-aarch64", "qemu-system-arm"
	}
	if p, err := exec.LookPath(bin); err == nil {
		return p, nil
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("%s is not installed (apt-get install %s)", bin, pkg)
	}
	fmt.Fprintf(os.Stderr, "vmexec: installing %s\n", pkg)
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "--no-install-recommends", pkg}} {
		c := exec.Command("apt-get", args...)
		c.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := c.CombinedOutput(); err != nil {
			return "", fmt.Errorf("apt-get %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return exec.LookPath(bin)
}

// buildInit builds vminit for arch from this module.
func buildInit(arch, dir string) (string, error) {
	return build("vminit", arch, filepath.Join(dir, "init"))
}

// build builds a command of this module (cmd/NAME) statically for arch.
func build(name, arch, out string) (string, error) {
	cmd := exec.Command("go", "build", "-o", out, "github.com/probectl/probectl/cmd/"+name)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", name, err, b)
	}
	return out, nil
}

// writeInitramfs writes a gzipped newc cpio archive: /init, the test
// binary, its arguments and environment, and the mount points.
func writeInitramfs(path, init, testBin string, args, env []string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	w := &cpioWriter{w: zw}
	for _, d := range []string{"dev", "proc", "sys", "tmp", "bin"} {
		w.dir(d)
	}
	if err := w.file("init", init, 0o755); err != nil {
		return err
	}
	if err := w.file("probectl.test", testBin, 0o755); err != nil {
		return err
	}
	w.data("args", []byte(strings.Join(args, "\n")+"\n"), 0o644)
	w.data("env", []byte(strings.Join(env, "\n")+"\n"), 0o644)
	w.trailer()
	if w.err != nil {
		return w.err
	}
	return zw.Close()
}

// cpioWriter writes the "newc" format the kernel unpacks.
type cpioWriter struct {
	w   io.Writer
	ino int
	err error
}

func (c *cpioWriter) header(name string, mode, size int) {
	c.ino++
	var b bytes.Buffer
	fmt.Fprintf(&b, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, 1, 0, size, 0, 0, 0, 0, len(name)+1, 0)
	b.WriteString(name)
	b.WriteByte(0)
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	c.write(b.Bytes())
}

func (c *cpioWriter) write(p []byte) {
	if c.err == nil {
		_, c.err = c.w.Write(p)
	}
}

func (c *cpioWriter) pad(n int) {
	if n%4 != 0 {
		c.write(make([]byte, 4-n%4))
	}
}

func (c *cpioWriter) dir(name string) { c.header(name, 0o040755, 0) }

func (c *cpioWriter) data(name string, b []byte, perm int) {
	c.header(name, 0o100000|perm, len(b))
	c.write(b)
	c.pad(len(b))
}

func (c *cpioWriter) file(name, src string, perm int) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	c.data(name, b, perm)
	return nil
}

func (c *cpioWriter) trailer() { c.header("TRAILER!!!", 0, 0) }
