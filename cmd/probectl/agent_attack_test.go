package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
	deadline := time.Now().Add(60 * time.Second)
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
	if want := fmt.Sprintf(`"why":"another command changed it (serial %d, the agent's %d: `, serial+1, serial); !strings.Contains(a.log.String(), want) {
		t.Errorf("the log does not say why it applied again (%s):\n%s", want, a.log)
	}
	if _, err := os.Stat("/sys/fs/bpf/probectl/" + ws); err != nil {
		t.Errorf("the probe's pins: %v", err)
	}
	if got := a.metric(`probectl_probe_up{probe="tracepoint.agtother"}`); got != 1 {
		t.Errorf("probectl_probe_up = %v, want 1", got)
	}
}

// The agent's port is open to every local user. Connections it holds
// open are file descriptors of a root process that needs its own to
// apply: a user that opened many (each with one request, then idle, kept
// alive for ever) made every apply fail with "too many open files" while
// the old probes stayed, and /status and /metrics went dark. Connections
// are now bounded (past the bound, the one waiting longest is closed) and
// idle ones time out; here 300 held connections against a limit of 200
// descriptors leave the agent applying a change.
func TestAgentConnectionsCannotStarveApply(t *testing.T) {
	specs, state, ws := agentWorkspace(t, "agtconns")
	a := startAgentCmd(t, exec.Command("sh", "-c", `ulimit -n 200 && exec probectl "$@"`, "sh",
		"-state-dir", state, "-workspace", ws, "agent", "-config", specs,
		"-listen", "127.0.0.1:0", "-debounce", "200ms", "-log-json"))
	a.waitStatus("applied", func(s agentStatus) bool { return probesOf(s) == "tracepoint.agtconns" && s.LastError == nil })

	addr := strings.TrimPrefix(a.base, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 300; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	time.Sleep(time.Second) // the agent accepts what it will
	if err := os.WriteFile(filepath.Join(specs, "a.hcl"), []byte(tracepointSpec("agtconns2")), 0o644); err != nil {
		t.Fatal(err)
	}
	// /status may wait behind the held connections: ask the state.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var out, errs strings.Builder
		run([]string{"-state-dir", state, "-workspace", ws, "status", "-json"}, &out, &errs)
		if strings.Contains(out.String(), `"address": "tracepoint.agtconns2"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the change was not applied while 300 connections were held:\n%s%s\nlog:\n%s", &out, &errs, a.log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", a.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if len(fds) > maxConns+40 {
		t.Errorf("the agent holds %d file descriptors with %d connections allowed", len(fds), maxConns)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	s := a.waitStatus("the status after", func(s agentStatus) bool { return probesOf(s) == "tracepoint.agtconns2" })
	if s.LastError != nil {
		t.Errorf("last error %+v", s.LastError)
	}
}

// Editing a spec in the directory with Emacs makes a lock file, .#a.hcl,
// a dangling symlink, while the buffer is modified: the agent counted a
// read error and reported the last apply failed for as long as someone
// edited. Hidden files are skipped; the rest applies.
func TestAgentSkipsHiddenFiles(t *testing.T) {
	specs, state, ws := agentWorkspace(t, "agthidden")
	if err := os.Symlink("root@host.4242:1700000000", filepath.Join(specs, ".#a.hcl")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(specs, ".b.hcl"), []byte("not a spec {"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, state, ws, specs)
	s := a.waitStatus("applied", func(s agentStatus) bool { return s.LastAttempt != nil })
	if s.LastError != nil || probesOf(s) != "tracepoint.agthidden" {
		t.Fatalf("status %+v, error %+v", s.Applied, s.LastError)
	}
	if got := strings.Join(s.Applied.Files, ","); got != filepath.Join(specs, "a.hcl") {
		t.Errorf("files %s", got)
	}
	if got := a.metric(`probectl_apply_errors_total{stage="read"}`); got != 0 {
		t.Errorf("read errors %v", got)
	}
	// Only hidden files: the directory's error, not "destroy everything".
	os.Remove(filepath.Join(specs, "a.hcl"))
	s = a.waitStatus("the error", func(s agentStatus) bool { return s.LastError != nil })
	if s.LastError.Stage != "read" || !strings.Contains(s.LastError.Diagnostics[0].Detail, "hidden") || probesOf(s) != "tracepoint.agthidden" {
		t.Errorf("only hidden files: %+v, probes %s", s.LastError, probesOf(s))
	}
}

// -destroy-on-exit waiting for a workspace another command holds: the
// wait is a line of the agent's log, not plain text in the middle of its
// JSON lines; the destroy that times out exits 1 and leaves the probes.
func TestAgentDestroyOnExitWaitIsLogged(t *testing.T) {
	specs, state, ws := agentWorkspace(t, "agtwait")
	a := startAgent(t, state, ws, specs, "-destroy-on-exit", "-lock-timeout", "1s")
	a.waitStatus("applied", func(s agentStatus) bool { return probesOf(s) == "tracepoint.agtwait" && s.LastError == nil })
	d, err := os.Open(filepath.Join(state, ws))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	err = a.signal(syscall.SIGTERM)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("agent exit %v, want 1 (the destroy failed)", err)
	}
	waited := false
	for _, line := range strings.Split(strings.TrimSpace(a.log.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("-log-json wrote a line that is not JSON: %q", line)
			continue
		}
		waited = waited || rec["msg"] == "waiting for the workspace"
	}
	if !waited {
		t.Errorf("no log line of the wait:\n%s", a.log)
	}
	syscall.Flock(int(d.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat("/sys/fs/bpf/probectl/" + ws); err != nil {
		t.Errorf("the failed destroy removed the probes: %v", err)
	}
}

// -config a symlink to a directory (/etc/probectl/specs -> /srv/specs),
// and that directory replaced by a rename (a deploy tool's "move the new
// tree into place"): its events were filtered out as some other entry of
// the link's parent, and the new directory was never watched, so the
// agent went on with the old specs, reporting no error, until a resync.
// With -config the directory itself, the rename was seen, but the new
// directory was not watched (the path was, as the old one), so edits in
// it went unseen until a resync.
func TestAgentTargetDirectoryReplaced(t *testing.T) {
	for _, viaLink := range []bool{true, false} {
		t.Run(fmt.Sprintf("link=%v", viaLink), func(t *testing.T) { testTargetReplaced(t, viaLink) })
	}
}

func testTargetReplaced(t *testing.T, viaLink bool) {
	specs, state, ws := agentWorkspace(t, "agtrepl")
	config := specs
	if viaLink {
		config = filepath.Join(filepath.Dir(specs), "link")
		if err := os.Symlink("specs", config); err != nil {
			t.Fatal(err)
		}
	}
	a := startAgent(t, state, ws, config, "-resync", "10m")
	a.waitStatus("applied", func(s agentStatus) bool { return probesOf(s) == "tracepoint.agtrepl" && s.LastError == nil })

	next := filepath.Join(filepath.Dir(specs), "specs.new")
	if err := os.Mkdir(next, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(next, "a.hcl"), []byte(tracepointSpec("agtrepl2")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(specs, specs+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, specs); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := a.status()
		if probesOf(s) == "tracepoint.agtrepl2" && s.LastError == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replaced directory's specs were not applied: probes %s, error %+v\n%s", probesOf(s), s.LastError, a.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// And edits inside the new directory are seen.
	if err := os.WriteFile(filepath.Join(specs, "b.hcl"), []byte(tracepointSpec("agtrepl3")), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(60 * time.Second)
	for {
		s := a.status()
		if probesOf(s) == "tracepoint.agtrepl2,tracepoint.agtrepl3" && s.LastError == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a file written in the new directory was not applied: probes %s\n%s", probesOf(s), a.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A specs' directory that a local user may write (mode 0777, a file
// another user owns) decides what the agent attaches as root: the agent
// applied such a user's spec and served its data back on the loopback
// port. It is now a read error at each read: the previous probes stay.
func TestAgentRefusesUntrustedConfig(t *testing.T) {
	specs, state, ws := agentWorkspace(t, "agttrust")
	a := startAgent(t, state, ws, specs)
	a.waitStatus("applied", func(s agentStatus) bool { return probesOf(s) == "tracepoint.agttrust" && s.LastError == nil })

	if err := os.Chmod(specs, 0o777); err != nil {
		t.Fatal(err)
	}
	s := a.waitStatus("the directory refused", func(s agentStatus) bool { return s.LastError != nil })
	if d := s.LastError.Diagnostics; s.LastError.Stage != "read" || len(d) != 1 || d[0].Summary != "Untrusted specs' directory" ||
		!strings.Contains(d[0].Detail, specs+": it is writable by its group or by anyone (mode 0777)") {
		t.Errorf("a world-writable directory: %+v", s.LastError)
	}
	evil := filepath.Join(specs, "evil.hcl")
	if err := os.WriteFile(evil, []byte(tracepointSpec("agtevil")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(evil, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(specs, 0o755); err != nil {
		t.Fatal(err)
	}
	s = a.waitStatus("the file refused", func(s agentStatus) bool {
		return s.LastError != nil && len(s.LastError.Diagnostics) == 1 && s.LastError.Diagnostics[0].File == evil
	})
	if d := s.LastError.Diagnostics[0]; !strings.Contains(d.Detail, "it is owned by uid 65534, not root") {
		t.Errorf("a file another user owns: %+v", d)
	}
	if probesOf(s) != "tracepoint.agttrust" {
		t.Errorf("probes %s, want the earlier tracepoint.agttrust alone", probesOf(s))
	}
	var out strings.Builder
	run([]string{"-state-dir", state, "-workspace", ws, "status", "-json"}, &out, &out)
	if strings.Contains(out.String(), "agtevil") {
		t.Errorf("the other user's probe was applied:\n%s", &out)
	}
	// Root's again: applied.
	if err := os.Chown(evil, 0, 0); err != nil {
		t.Fatal(err)
	}
	a.waitStatus("root's file applied", func(s agentStatus) bool {
		return probesOf(s) == "tracepoint.agtevil,tracepoint.agttrust" && s.LastError == nil
	})
}

// An apply killed between pinning a probe's directory and writing the
// state leaves the directory, its links attached, until the next apply or
// destroy: status said nothing of it (exit 0) and the metrics neither.
// Status now lists it, exits 2, and /metrics counts it.
func TestStatusShowsLeftovers(t *testing.T) {
	specs, state, ws := agentWorkspace(t, "agtleft")
	var out, errs strings.Builder
	cli := func(args ...string) int {
		out.Reset()
		errs.Reset()
		return run(append([]string{"-state-dir", state, "-workspace", ws}, args...), &out, &errs)
	}
	if code := cli("apply", "-auto-approve", specs); code != 0 {
		t.Fatalf("apply: %d\n%s%s", code, &out, &errs)
	}
	left := "tracepoint-agtleft-99"
	if err := os.Mkdir(filepath.Join("/sys/fs/bpf/probectl", ws, left), 0o700); err != nil {
		t.Fatal(err)
	}
	if code := cli("status"); code != 2 || !strings.Contains(out.String(), "LEFTOVERS  1 probe directory") || !strings.Contains(out.String(), left) {
		t.Errorf("status with a leftover: exit %d\n%s%s", code, &out, &errs)
	}
	if code := cli("status", "-json"); code != 2 || !strings.Contains(out.String(), `"leftovers": [
    "`+left+`"
  ]`) {
		t.Errorf("status -json with a leftover: exit %d\n%s%s", code, &out, &errs)
	}
	a := startAgentCmd(t, exec.Command("probectl", "-state-dir", state, "-workspace", ws, "serve", "-listen", "127.0.0.1:0"))
	a.base = strings.TrimSuffix(a.base, "/metrics") // serve says "at http://ADDR/metrics"
	if got := a.metric(`probectl_leftover_probe_dirs{workspace="` + ws + `"}`); got != 1 {
		t.Errorf("probectl_leftover_probe_dirs = %v, want 1", got)
	}
	// The next apply removes it.
	if code := cli("apply", "-auto-approve", specs); code != 0 {
		t.Fatalf("apply: %d\n%s%s", code, &out, &errs)
	}
	if code := cli("status"); code != 0 || strings.Contains(out.String(), "LEFTOVERS") {
		t.Errorf("status after the repair: exit %d\n%s%s", code, &out, &errs)
	}
	if got := a.metric(`probectl_leftover_probe_dirs{workspace="` + ws + `"}`); got != 0 {
		t.Errorf("probectl_leftover_probe_dirs = %v after the repair, want 0", got)
	}
}

// A file written on and on in the directory (a log, a tool's status
// file) re-armed the debounce at each write: a spec changed meanwhile was
// applied only once the writes stopped, or at a resync. Events no longer
// put the read off: the specs' content alone decides when they settle.
func TestAgentDebounceBounded(t *testing.T) {
	specs, state, ws := agentWorkspace(t, "agtdeb")
	a := startAgent(t, state, ws, specs, "-resync", "10m") // -debounce 200ms
	a.waitStatus("applied", func(s agentStatus) bool { return probesOf(s) == "tracepoint.agtdeb" && s.LastError == nil })
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		f, err := os.OpenFile(filepath.Join(specs, "app.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				f.WriteString("x\n")
			}
		}
	}()
	defer func() { close(stop); <-done }()
	time.Sleep(300 * time.Millisecond)
	changed := time.Now()
	if err := os.WriteFile(filepath.Join(specs, "a.hcl"), []byte(tracepointSpec("agtdeb2")), 0o644); err != nil {
		t.Fatal(err)
	}
	for {
		s := a.status()
		if probesOf(s) == "tracepoint.agtdeb2" {
			break
		}
		if time.Since(changed) > 60*time.Second { // a bound on liveness, not on speed: a busy machine applies slowly
			t.Fatalf("the change was not applied in 60 s while another file was written every 50 ms (debounce 200ms): probes %s\n%s", probesOf(s), a.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Under systemd (Type=notify) the agent says READY=1 on $NOTIFY_SOCKET
// only once it handles SIGHUP: a reload that systemd sends at once after
// is a re-read, not the signal's default action, death.
func TestAgentReadyBeforeReload(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the agent needs root")
	}
	dir := t.TempDir()
	specs := filepath.Join(dir, "specs")
	if err := os.Mkdir(specs, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for try := 0; try < 3; try++ {
		cmd := exec.Command("probectl", "-state-dir", filepath.Join(dir, "state"), "-workspace", fmt.Sprintf("hup-%d", os.Getpid()),
			"agent", "-config", specs, "-listen", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 256)
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, err := conn.Read(buf)
		if err != nil || string(buf[:n]) != "READY=1" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("notify socket: %q %v, want READY=1", buf[:n], err)
		}
		cmd.Process.Signal(syscall.SIGHUP) // systemctl reload, at once
		time.Sleep(300 * time.Millisecond)
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("try %d: a SIGHUP right after READY=1 ended the agent: %v (want exit 0 on SIGTERM)", try, err)
		}
	}
}
