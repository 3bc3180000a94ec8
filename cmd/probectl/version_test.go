package main

import (
	"encoding/json"
	"fmt"
	"github.com/probectl/probectl/internal/testenv"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/internal/buildinfo"
)

// TestVersionOfMakeBuild builds probectl with make build (its -X version
// from git describe) and checks what the binary says of itself against git:
// probectl version -json, and, as root, probectl_build_info in a real
// scrape of its serve, which promtool check metrics finds clean. An -X
// naming a variable that is gone is ignored by the linker without a word:
// this is what notices.
func TestVersionOfMakeBuild(t *testing.T) {
	for _, tool := range []string{"git", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Absent(t, "%s is missing", tool)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		if err != nil {
			t.Skipf("git %v: %v (not a git checkout: the build has no VCS information)", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	head := git("rev-parse", "HEAD")
	describe := git("describe", "--always", "--dirty")
	modified := git("status", "--porcelain") != ""
	dir := t.TempDir()
	if out, err := exec.Command("make", "-C", root, "--no-print-directory", "build", "BINDIR="+dir).CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "probectl")

	out, err := exec.Command(bin, "version", "-json").Output()
	if err != nil {
		t.Fatalf("probectl version -json: %v", err)
	}
	var got buildinfo.Info
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("probectl version -json: %v\n%s", err, out)
	}
	want := buildinfo.Info{Version: describe, Commit: head, Modified: &modified, GoVersion: runtime.Version()}
	if got.Modified == nil || fmt.Sprint(got.Version, got.Commit, *got.Modified, got.GoVersion) != fmt.Sprint(want.Version, want.Commit, *want.Modified, want.GoVersion) {
		t.Errorf("probectl version -json of make build:\n%s\nwant version %q, commit %s, modified %v, go %s", out, want.Version, want.Commit, modified, want.GoVersion)
	}
	out, err = exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("probectl version: %v", err)
	}
	mark := ""
	if modified {
		mark = " (modified)"
	}
	if w := fmt.Sprintf("probectl %s\ncommit %s%s\n%s\n", describe, head, mark, runtime.Version()); string(out) != w {
		t.Errorf("probectl version:\n got %q\nwant %q", out, w)
	}

	if os.Geteuid() != 0 {
		t.Skip("serve needs CAP_BPF and CAP_PERFMON: the scrape needs root")
	}
	url := startServe(t, bin, "-state-dir", filepath.Join(dir, "state"), "-workspace", fmt.Sprintf("version-%d", os.Getpid()))
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %v %v\n%s", url, resp.Status, err, body)
	}
	sample := fmt.Sprintf("probectl_build_info{commit=%q,goversion=%q,version=%q} 1\n", head, runtime.Version(), describe)
	if n := strings.Count(string(body), "\nprobectl_build_info{"); n != 1 || !strings.Contains(string(body), "\n"+sample) {
		t.Errorf("the scrape has %d probectl_build_info samples, want exactly %q:\n%s", n, sample, body)
	}
	promtoolCheckMetrics(t, filepath.Join(dir, "metrics.txt"), string(body))
}

// TestRegistryServesBuildInfo: the one registry of serve, agent and the
// node agent (registryHandler) serves probectl_build_info of this build,
// once, with or without other collectors.
func TestRegistryServesBuildInfo(t *testing.T) {
	bi := buildinfo.Read()
	sample := fmt.Sprintf("\nprobectl_build_info{commit=%q,goversion=%q,version=%q} 1\n", bi.Commit, bi.GoVersion, bi.Version)
	for _, h := range []http.Handler{registryHandler(), metricsHandler(t.TempDir(), "buildinfo", 10)} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body := rec.Body.String()
		if n := strings.Count(body, "\nprobectl_build_info{"); n != 1 || !strings.Contains(body, sample) {
			t.Errorf("%d probectl_build_info samples, want exactly %q:\n%s", n, sample, body)
		}
	}
}
