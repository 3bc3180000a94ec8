package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Kernel is one kernel of the matrix: a Debian package resolved at run time.
type Kernel struct {
	Name  string // the profile name, e.g. linux-6.12-arm64
	Arch  string // Debian and GOARCH: amd64, arm64
	Suite string
	// Package matches the package holding vmlinuz; its first group is the
	// version that orders candidates (the newest wins).
	Package *regexp.Regexp
}

var kernels = []Kernel{
	{"linux-5.10-amd64", "amd64", "bullseye", regexp.MustCompile(`^linux-image-(5\.10\.0-\d+)-amd64$`)},
	{"linux-6.1-amd64", "amd64", "bookworm", regexp.MustCompile(`^linux-image-(6\.1\.0-\d+)-amd64$`)},
	{"linux-6.12-amd64", "amd64", "trixie", regexp.MustCompile(`^linux-image-(6\.12\.\d+)\+deb13-amd64$`)},
	{"linux-7.2-amd64", "amd64", "sid", regexp.MustCompile(`^linux-binary-(7\.2\.\d+)\+deb14-amd64$`)},
	{"linux-5.10-arm64", "arm64", "bullseye", regexp.MustCompile(`^linux-image-(5\.10\.0-\d+)-arm64$`)},
	{"linux-6.12-arm64", "arm64", "trixie", regexp.MustCompile(`^linux-image-(6\.12\.\d+)\+deb13-arm64$`)},
	{"linux-7.2-arm64", "arm64", "sid", regexp.MustCompile(`^linux-binary-(7\.2\.\d+)\+deb14-arm64$`)},
}

func kernelNames() []string {
	var n []string
	for _, k := range kernels {
		n = append(n, k.Name)
	}
	return n
}

func kernelByName(name string) (Kernel, error) {
	for _, k := range kernels {
		if k.Name == name {
			return k, nil
		}
	}
	return Kernel{}, fmt.Errorf("unknown kernel %q (known: %s)", name, strings.Join(kernelNames(), ", "))
}

// cacheDir holds apt's private state and the kernels, outside the git tree.
func cacheDir() string {
	if d := os.Getenv("PROBECTL_VM_CACHE"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "probectl", "vm")
}

// aptArgs are the options of a private apt: its own sources, state and
// cache, both architectures, no lock on the machine's apt.
func aptArgs() []string {
	d := filepath.Join(cacheDir(), "apt")
	return []string{
		"-o", "Dir::Etc::SourceList=" + filepath.Join(d, "sources.list"),
		"-o", "Dir::Etc::SourceParts=/dev/null",
		"-o", "Dir::Etc::Preferences=/dev/null",
		"-o", "Dir::Etc::PreferencesParts=" + filepath.Join(d, "prefs.d"),
		"-o", "Dir::State=" + filepath.Join(d, "state"),
		"-o", "Dir::Cache=" + filepath.Join(d, "cache"),
		"-o", "APT::Architectures::=amd64", "-o", "APT::Architectures::=arm64",
		"-o", "Debug::NoLocking=1",
		"-o", "Acquire::Retries=3",
	}
}

const sources = `deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bullseye main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main
`

// aptUpdate refreshes the private package lists when they are older than
// six hours, so that kernels resolve to the newest ABI, or when the
// suites of the matrix changed since (the stamp holds the sources).
func aptUpdate() error {
	d := filepath.Join(cacheDir(), "apt")
	for _, sub := range []string{"prefs.d", "state/lists/partial", "cache/archives/partial"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(d, "sources.list"), []byte(sources), 0o644); err != nil {
		return err
	}
	stamp := filepath.Join(d, "updated")
	if st, err := os.Stat(stamp); err == nil && time.Since(st.ModTime()) < 6*time.Hour {
		if b, err := os.ReadFile(stamp); err == nil && string(b) == sources {
			return nil
		}
	}
	fmt.Fprintln(os.Stderr, "vmexec: updating the private package lists (bullseye, bookworm, trixie, sid)")
	cmd := exec.Command("apt-get", append(aptArgs(), "-qq", "update")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get update: %v\n%s", err, out)
	}
	return os.WriteFile(stamp, []byte(sources), 0o644)
}

// resolve finds the newest package of k in the private lists.
func (k Kernel) resolve() (string, error) {
	out, err := exec.Command("apt-cache", append(aptArgs(), "pkgnames")...).Output()
	if err != nil {
		return "", fmt.Errorf("apt-cache pkgnames: %w", err)
	}
	type cand struct {
		name string
		ver  []int
	}
	var cands []cand
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		m := k.Package.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		var ver []int
		for _, p := range regexp.MustCompile(`\d+`).FindAllString(m[1], -1) {
			n, _ := strconv.Atoi(p)
			ver = append(ver, n)
		}
		cands = append(cands, cand{sc.Text(), ver})
	}
	if len(cands) == 0 {
		return "", fmt.Errorf("no package matching %s in %s", k.Package, k.Suite)
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i].ver, cands[j].ver
		for x := 0; x < len(a) && x < len(b); x++ {
			if a[x] != b[x] {
				return a[x] > b[x]
			}
		}
		return len(a) > len(b)
	})
	return cands[0].name, nil
}

// Fetch returns the path of k's vmlinuz, downloading it once. Without
// network it falls back to the newest kernel of k already cached.
func (k Kernel) Fetch() (string, error) {
	kdir := filepath.Join(cacheDir(), "kernels", k.Name)
	pkg, err := k.resolveFresh()
	if err != nil {
		// Without network, or once sid (which keeps only its newest
		// kernel) moves past this series, a cached one still tests the
		// profile.
		if cached := newestCached(kdir); cached != "" {
			fmt.Fprintf(os.Stderr, "vmexec: %v; using the cached %s\n", err, cached)
			return cached, nil
		}
		return "", err
	}
	vmlinuz := filepath.Join(kdir, pkg, "vmlinuz")
	if _, err := os.Stat(vmlinuz); err == nil {
		return vmlinuz, nil
	}
	if err := k.download(pkg, vmlinuz); err != nil {
		return "", err
	}
	return vmlinuz, nil
}

// resolveFresh updates the package lists, then resolves k's package.
func (k Kernel) resolveFresh() (string, error) {
	if err := aptUpdate(); err != nil {
		return "", err
	}
	return k.resolve()
}

// download downloads pkg and writes its vmlinuz to vmlinuz.
func (k Kernel) download(pkg, vmlinuz string) error {
	fmt.Fprintf(os.Stderr, "vmexec: downloading %s (%s)\n", pkg, k.Arch)
	tmp, err := os.MkdirTemp("", "vmexec-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	dl := exec.Command("apt-get", append(aptArgs(), "-qq", "download", pkg+":"+k.Arch)...)
	dl.Dir = tmp
	if out, err := dl.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get download %s: %v\n%s", pkg, err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("apt-get download %s: got %v", pkg, debs)
	}
	found, err := extractVmlinuz(pkg, debs[0], filepath.Join(tmp, "x"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(vmlinuz), 0o755); err != nil {
		return err
	}
	b, err := os.ReadFile(found)
	if err != nil {
		return err
	}
	if err := os.WriteFile(vmlinuz+".tmp", b, 0o644); err != nil {
		return err
	}
	return os.Rename(vmlinuz+".tmp", vmlinuz)
}

// extractVmlinuz unpacks the package pkg, deb, into x and returns the
// path of its vmlinuz.
func extractVmlinuz(pkg, deb, x string) (string, error) {
	if out, err := exec.Command("dpkg-deb", "-x", deb, x).CombinedOutput(); err != nil {
		return "", fmt.Errorf("dpkg-deb -x: %v\n%s", err, out)
	}
	var found string
	_ = filepath.WalkDir(x, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasPrefix(d.Name(), "vmlinuz-") || d.Name() == "vmlinuz") {
			found = path
		}
		return nil
	})
	if found == "" {
		return "", fmt.Errorf("%s holds no vmlinuz", pkg)
	}
	return found, nil
}

func newestCached(kdir string) string {
	matches, _ := filepath.Glob(filepath.Join(kdir, "*", "vmlinuz"))
	var newest string
	var when time.Time
	for _, m := range matches {
		if st, err := os.Stat(m); err == nil && st.ModTime().After(when) {
			newest, when = m, st.ModTime()
		}
	}
	return newest
}
