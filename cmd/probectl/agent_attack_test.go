package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tracepointSpec is a spec of one tracepoint probe, which needs no
// workload binary.
func tracepointSpec(name string) string {
	return fmt.Sprintf("probe \"tracepoint\" %q {\n  event = \"syscalls:sys_enter_getppid\"\n  on_entry {\n    count \"calls\" {}\n  }\n}\n", name)
}

// agentWorkspace makes a specs directory with one spec and a state dir and
// workspace of the test's own, destroyed at the end.
func agentWorkspace(t *testing.T, name string) (specs, state, ws string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("applying probes needs root")
	}
	dir := t.TempDir()
	specs = filepath.Join(dir, "specs")
	if err := os.Mkdir(specs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(specs, "a.hcl"), []byte(tracepointSpec(name)), 0o644); err != nil {
		t.Fatal(err)
	}
	state = filepath.Join(dir, "state")
	ws = fmt.Sprintf("%s-%d", name, os.Getpid())
	t.Cleanup(func() {
		var out strings.Builder
		run([]string{"-state-dir", state, "-workspace", ws, "destroy", "-auto-approve"}, &out, &out)
	})
	return specs, state, ws
}

// Another command that changes the agent's workspace (probectl destroy, an
// apply of other specs, a second agent) is not drift, but the probes the
// agent applied are gone all the same: the next resync applies its specs
// again, and /status never keeps saying they are live.
func TestAgentReappliesAfterAnotherCommand(t *testing.T) {
	specs, state, ws := agentWorkspace(t, "agtother")
	a := startAgent(t, state, ws, specs, "-resync", "500ms")
	s := a.waitStatus("applied", func(s agentStatus) bool { return probesOf(s) == "tracepoint.agtother" && s.LastError == nil })
	serial := s.Applied.Serial

	var out strings.Builder
	if code := run([]string{"-state-dir", state, "-workspace", ws, "destroy", "-auto-approve"}, &out, &out); code != 0 {
		t.Fatalf("destroy: %d\n%s", code, &out)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		s = a.status()
		if s.Applied != nil && s.Applied.Serial == serial+2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not apply its specs again after probectl destroy (serial %d destroyed them; /status says serial %d)\n%s",
				serial+1, s.Applied.Serial, a.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if at := s.LastAttempt; at.Reason != "resync" || at.Result != "applied" || at.Created != 1 {
		t.Errorf("last attempt %+v, want a resync that created 1 probe", at)
	}
	if _, err := os.Stat("/sys/fs/bpf/probectl/" + ws); err != nil {
		t.Errorf("the probe's pins: %v", err)
	}
	if got := a.metric(`probectl_probe_up{probe="tracepoint.agtother"}`); got != 1 {
		t.Errorf("probectl_probe_up = %v, want 1", got)
	}
}
