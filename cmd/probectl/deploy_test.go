package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/probectl/probectl/internal/testenv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
)

// systemdVerify runs systemd-analyze verify on unit (its ExecStart binary
// replaced by this test binary, which is probectl: verify needs it to
// exist) and returns what it said. A unit verify has nothing to say about
// is good: it exits 0 on warnings such as an unknown key or a bad value,
// so any output is a failure.
func systemdVerify(t *testing.T, name, unit string) (string, error) {
	t.Helper()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		testenv.Absent(t, "systemd-analyze is missing (Debian's package systemd)")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(unit, "/usr/local/bin/probectl", self)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", path)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0", "SYSTEMD_PAGER=")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestSystemdUnit checks deploy/probectl-agent.service with systemd-analyze
// verify (and that verify, as the test reads it, refuses broken copies),
// and that its command line is one probectl accepts: every flag exists.
func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile("../../deploy/probectl-agent.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	if out, err := systemdVerify(t, "probectl-agent.service", unit); err != nil || out != "" {
		t.Errorf("systemd-analyze verify deploy/probectl-agent.service: %v\n%s", err, out)
	}
	for _, broken := range []struct{ from, to string }{
		{"ProtectSystem=strict", "ProtectSystem=stric"},
		{"Type=notify", "Typ=notify"},
		{"ExecStart=/usr/local/bin/probectl", "ExecStart=/nonexistent/probectl"},
		{"@system-service bpf", "@system-servic bpf"},
		{"AF_INET AF_INET6", "AF_INETX AF_INET6"},
	} {
		if !strings.Contains(unit, broken.from) {
			t.Fatalf("the unit has no %q", broken.from)
		}
		out, err := systemdVerify(t, "probectl-agent.service", strings.Replace(unit, broken.from, broken.to, 1))
		if err == nil && out == "" {
			t.Errorf("%s → %s: systemd-analyze verify found nothing wrong", broken.from, broken.to)
		}
	}

	// systemd ignores a capability name it does not know, silently.
	const want = "CAP_BPF CAP_PERFMON CAP_SYSLOG CAP_DAC_READ_SEARCH CAP_SYS_PTRACE CAP_CHECKPOINT_RESTORE"
	known := map[string]bool{}
	for _, c := range strings.Fields(linuxCapabilities) {
		known[c] = true
	}
	for _, key := range []string{"CapabilityBoundingSet=", "AmbientCapabilities="} {
		var got string
		for _, l := range strings.Split(unit, "\n") {
			if v, ok := strings.CutPrefix(l, key); ok {
				got = v
			}
		}
		for _, c := range strings.Fields(got) {
			if !known[c] {
				t.Errorf("%s%s: %s is no capability of Linux", key, got, c)
			}
		}
		if got != want {
			t.Errorf("%s%s, want %s (README, \"Deploy\", says why each)", key, got, want)
		}
	}

	// ExecStart's arguments are flags of probectl agent (or global ones)
	// with their values, as the command parses them.
	var line string
	for _, l := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
			line = v
		}
	}
	args := strings.Fields(line)
	if len(args) < 2 || args[0] != "/usr/local/bin/probectl" {
		t.Fatalf("ExecStart=%s: want /usr/local/bin/probectl and its arguments", line)
	}
	root := newRoot(io.Discard, io.Discard)
	agent, rest, err := root.Find(normalizeFlags(root, args[1:]))
	if err != nil || agent.Name() != "agent" {
		t.Fatalf("ExecStart=%s: not probectl agent: %v", line, err)
	}
	if err := agent.ParseFlags(rest); err != nil {
		t.Errorf("ExecStart=%s: %v", line, err)
	}
	if got := agent.Flags().Lookup("config").Value.String(); got != "/etc/probectl/specs" {
		t.Errorf("ExecStart: -config %q, want /etc/probectl/specs", got)
	}
	if got := root.PersistentFlags().Lookup("state-dir").Value.String(); got != "/var/lib/probectl" {
		t.Errorf("ExecStart: -state-dir %q, want /var/lib/probectl (StateDirectory=probectl)", got)
	}
}

// linuxCapabilities are the capabilities of linux/capability.h (6.x).
const linuxCapabilities = `CAP_CHOWN CAP_DAC_OVERRIDE CAP_DAC_READ_SEARCH CAP_FOWNER CAP_FSETID
CAP_KILL CAP_SETGID CAP_SETUID CAP_SETPCAP CAP_LINUX_IMMUTABLE CAP_NET_BIND_SERVICE
CAP_NET_BROADCAST CAP_NET_ADMIN CAP_NET_RAW CAP_IPC_LOCK CAP_IPC_OWNER CAP_SYS_MODULE
CAP_SYS_RAWIO CAP_SYS_CHROOT CAP_SYS_PTRACE CAP_SYS_PACCT CAP_SYS_ADMIN CAP_SYS_BOOT
CAP_SYS_NICE CAP_SYS_RESOURCE CAP_SYS_TIME CAP_SYS_TTY_CONFIG CAP_MKNOD CAP_LEASE
CAP_AUDIT_WRITE CAP_AUDIT_CONTROL CAP_SETFCAP CAP_MAC_OVERRIDE CAP_MAC_ADMIN CAP_SYSLOG
CAP_WAKE_ALARM CAP_BLOCK_SUSPEND CAP_AUDIT_READ CAP_PERFMON CAP_BPF CAP_CHECKPOINT_RESTORE`

// TestSystemdUnitCapabilities runs probectl agent as the unit does, as
// root bounded to the unit's capabilities (setpriv --bounding-set: what
// systemd's CapabilityBoundingSet does to a root service), on a spec of a
// user probe, and checks its exact count in /metrics; status and show
// work under the same bound. (systemd itself is not PID 1 here: the rest
// of the sandbox is verify's only.)
func TestSystemdUnitCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("applying probes needs root")
	}
	for _, need := range []string{"gcc", "setpriv"} {
		if _, err := exec.LookPath(need); err != nil {
			t.Skipf("%s is missing", need)
		}
	}
	b, err := os.ReadFile("../../deploy/probectl-agent.service")
	if err != nil {
		t.Fatal(err)
	}
	var caps []string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapabilityBoundingSet="); ok {
			for _, c := range strings.Fields(v) {
				caps = append(caps, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
			}
		}
	}
	bound := "--bounding-set=-all," + strings.Join(caps, ",")

	dir := t.TempDir()
	work := buildC(t, dir, "cap-work", serveWork)
	specs := filepath.Join(dir, "specs")
	os.Mkdir(specs, 0o700)
	spec := fmt.Sprintf(`probe "user" "capped" {
  binary    = %q
  functions = ["target"]
  on_entry {
    count "calls" { by = [comm] }
    hist "args" { value = arg0 }
  }
}

probe "profile" "capcpu" {
  frequency = 99
  on_entry {
    count "samples" { by = [kstack] }
  }
}
`, work)
	if err := os.WriteFile(filepath.Join(specs, "capped.hcl"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	ws := fmt.Sprintf("unit-caps-%d", os.Getpid())
	capped := func(args ...string) *exec.Cmd {
		return exec.Command("setpriv", append([]string{bound, "probectl", "-state-dir", state, "-workspace", ws}, args...)...)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("probectl", "-state-dir", state, "-workspace", ws, "destroy", "-auto-approve").CombinedOutput(); err != nil {
			t.Errorf("destroy: %v\n%s", err, out)
		}
	})

	a := startAgentCmd(t, capped("agent", "-config", specs, "-listen", "127.0.0.1:0", "-debounce", "200ms", "-log-json"))
	a.waitStatus("the spec applied", func(s agentStatus) bool {
		return strings.Contains(probesOf(s), "user.capped") && strings.Contains(probesOf(s), "profile.capcpu")
	})

	if out, err := exec.Command(work, "25").CombinedOutput(); err != nil {
		t.Fatalf("workload: %v\n%s", err, out)
	}
	for _, c := range []struct {
		series string
		want   float64
	}{
		{`probectl_count_user_capped_calls_total{comm="cap-work"}`, 25},
		{`probectl_hist_user_capped_args_bucket{le="31"}`, 25},
		{`probectl_probe_hits_total{handler="entry",probe="user.capped"}`, 25},
		{`probectl_probe_missed_hits_total{probe="user.capped"}`, 0},
		{`probectl_probe_up{probe="user.capped"}`, 1},
		{`probectl_probe_drift{probe="user.capped"}`, 0},
	} {
		if got := a.metric(c.series); got != c.want {
			t.Errorf("%s = %v, want %v\n%s", c.series, got, c.want, a.log)
		}
	}
	// Kernel stacks are symbolized (CAP_SYSLOG: kallsyms's addresses):
	// time in the kernel, sampled.
	if out, err := exec.Command("dd", "if=/dev/zero", "of=/dev/null", "bs=1M", "count=3000").CombinedOutput(); err != nil {
		t.Fatalf("dd: %v\n%s", err, out)
	}
	out, err := capped("show", "-json", "profile.capcpu").CombinedOutput()
	if err != nil {
		t.Fatalf("show -json profile.capcpu: %v\n%s", err, out)
	}
	var shown struct {
		Probes []struct {
			Aggregations []struct {
				Entries []struct {
					Key struct {
						Kstack []struct{ Symbol string } `json:"kstack"`
					} `json:"key"`
				} `json:"entries"`
			} `json:"aggregations"`
		} `json:"probes"`
	}
	if err := json.Unmarshal(out, &shown); err != nil {
		t.Fatal(err)
	}
	frames, named := 0, 0
	for _, p := range shown.Probes {
		for _, ag := range p.Aggregations {
			for _, e := range ag.Entries {
				for _, f := range e.Key.Kstack {
					frames++
					if f.Symbol != "" {
						named++
					}
				}
			}
		}
	}
	if frames == 0 || named == 0 {
		t.Errorf("kernel stacks under %s: %d frames, %d with a symbol; want some, symbolized", bound, frames, named)
	}
	for _, args := range [][]string{{"status"}, {"show", "-json", "user.capped"}} {
		out, err := capped(args...).CombinedOutput()
		if err != nil {
			t.Errorf("probectl %v under %s: %v\n%s", args, bound, err, out)
		}
		var compact bytes.Buffer
		if args[0] == "show" && (json.Compact(&compact, out) != nil || !strings.Contains(compact.String(), `"key":{"comm":"cap-work"},"value":25`)) {
			t.Errorf("show -json under %s:\n%s", bound, out)
		}
	}
	if err := a.signal(syscall.SIGTERM); err != nil {
		t.Errorf("agent on SIGTERM: %v\n%s", err, a.log)
	}
}

// TestMemoryBounds: the agent reads other users' files (the ELF files
// their processes map) at every scrape, so both deployments bound its
// memory: the Go runtime's soft limit (GOMEMLIMIT) under the cgroup's
// (the systemd unit's MemoryHigh and MemoryMax, the DaemonSet's
// limits.memory), with room between for what is not Go's heap (the BPF
// maps the agent creates are charged to its cgroup).
func TestMemoryBounds(t *testing.T) {
	b, err := os.ReadFile("../../deploy/probectl-agent.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			if k == "Environment" {
				k, v, _ = strings.Cut(v, "=")
			}
			unit[k] = v
		}
	}
	quantity := func(what, s string) int64 {
		t.Helper()
		// systemd's K, M, G are powers of 1024, as Go's KiB, MiB, GiB.
		s = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(s, "iB"), "i"), "B")
		q, err := resource.ParseQuantity(s + "i")
		if err != nil {
			t.Fatalf("%s=%q: %v", what, s, err)
		}
		return q.Value()
	}
	goLimit := quantity("GOMEMLIMIT", unit["GOMEMLIMIT"])
	high, max := quantity("MemoryHigh", unit["MemoryHigh"]), quantity("MemoryMax", unit["MemoryMax"])
	if goLimit < 256<<20 || goLimit+64<<20 > high || high > max {
		t.Errorf("the unit's GOMEMLIMIT=%d MiB, MemoryHigh=%d MiB, MemoryMax=%d MiB: want 256 MiB <= GOMEMLIMIT, 64 MiB under MemoryHigh <= MemoryMax",
			goLimit>>20, high>>20, max>>20)
	}
	for _, broken := range []string{"MemoryMax=512X", "MemoryHigh=lots"} {
		k, _, _ := strings.Cut(broken, "=")
		text := strings.Replace(string(b), k+"="+unit[k], broken, 1)
		if out, err := systemdVerify(t, "probectl-agent.service", text); err == nil && out == "" {
			t.Errorf("%s: systemd-analyze verify found nothing wrong", broken)
		}
	}

	f, err := os.Open("../../deploy/kubernetes/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ds appsv1.DaemonSet
	if err := k8syaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&ds); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name != "agent" {
			continue
		}
		found = true
		limit := c.Resources.Limits.Memory().Value()
		var env string
		for _, e := range c.Env {
			if e.Name == "GOMEMLIMIT" {
				env = e.Value
			}
		}
		if env == "" {
			t.Fatalf("the DaemonSet's agent has no GOMEMLIMIT")
		}
		kube := quantity("GOMEMLIMIT", env)
		if limit == 0 || kube+64<<20 > limit || kube != goLimit || limit != max {
			t.Errorf("the DaemonSet's agent: GOMEMLIMIT=%d MiB, limits.memory %d MiB; want 64 MiB under the limit, both as the unit's (%d MiB, %d MiB)",
				kube>>20, limit>>20, goLimit>>20, max>>20)
		}
	}
	if !found {
		t.Fatal("the DaemonSet has no container agent")
	}
}
