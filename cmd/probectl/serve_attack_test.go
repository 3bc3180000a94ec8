package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// servedProc is a probectl serve or agent running as its own process.
type servedProc struct {
	cmd  *exec.Cmd
	base string // http://ADDR, https://ADDR or unix:PATH
	log  *syncWriter
	done chan struct{}
}

// stop stops it as systemd would (SIGTERM) and waits for it to exit.
func (p *servedProc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// startServed runs a probectl command line that serves, and reads where
// from the line it prints first ("... at BASE/metrics").
func startServed(t *testing.T, args ...string) *servedProc {
	t.Helper()
	cmd := exec.Command("probectl", args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &servedProc{cmd: cmd, log: &syncWriter{w: &strings.Builder{}}, done: make(chan struct{})}
	cmd.Stderr = p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	go func() { io.Copy(io.Discard, stdout); cmd.Wait(); close(p.done) }()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, p.log)
	}
	for _, f := range strings.Fields(line) {
		if u, ok := strings.CutSuffix(strings.TrimSuffix(f, ","), "/metrics"); ok && strings.Contains(u, ":") {
			p.base = u
			return p
		}
	}
	t.Fatalf("it said %q\n%s", line, p.log)
	return nil
}

// appliedWorkspace applies a tracepoint probe NAME into a workspace of the
// test's own (destroyed at the end) and returns the state dir, the
// workspace and the specs directory.
func appliedWorkspace(t *testing.T, name string) (state, ws, specs string) {
	t.Helper()
	specs, state, ws = agentWorkspace(t, name)
	var out strings.Builder
	if code := run([]string{"-state-dir", state, "-workspace", ws, "apply", "-auto-approve", specs}, &out, &out); code != 0 {
		t.Fatalf("apply: %d\n%s", code, &out)
	}
	return state, ws, specs
}

// fetch GETs base+path with c within a deadline and returns the status and
// body.
func fetch(c *http.Client, base, path string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// sockets counts the TCP sockets process pid holds open on the port of
// addr (HOST:PORT): its listener and the connections it accepted.
func sockets(t *testing.T, pid int, addr string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if ino, ok := strings.CutPrefix(l, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	local := fmt.Sprintf(":%04X", p)
	n := 0
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line) // sl local remote st ... uid timeout inode
			if len(f) > 9 && strings.HasSuffix(f[1], local) && inodes[f[9]] {
				n++
			}
		}
	}
	return n
}

// holdConnections opens, to addr, n connections of each kind a local user
// can hold: kept alive by a cheap 404 (each answered before the next is
// opened), sending its headers slowly (one line, then nothing), and in a
// request whose body never comes (the server waits to read it after
// answering). It returns them open.
func holdConnections(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", addr, 30*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns), err)
		}
		conns = append(conns, c)
		return c
	}
	for i := 0; i < n; i++ {
		c := dial()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(c, "GET /nothing-here HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatalf("keep-alive connection %d: %v", i, err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("keep-alive connection %d: no answer while %d connections are held: %v", i, len(conns)-1, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 || resp.Close {
			t.Fatalf("keep-alive connection %d: %s (close %v), want a 404 kept alive", i, resp.Status, resp.Close)
		}
		c.SetDeadline(time.Time{})
	}
	for i := 0; i < n; i++ {
		if _, err := io.WriteString(dial(), "GET / HTTP/1.1\r\n"); err != nil {
			t.Fatalf("slow-header connection %d: %v", i, err)
		}
	}
	for i := 0; i < n; i++ {
		if _, err := io.WriteString(dial(), "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"); err != nil {
			t.Fatalf("pending-body connection %d: %v", i, err)
		}
	}
	return conns
}

// Any local user holding 64 keep-alive connections, each kept alive by a
// cheap 404, blocked every scrape of serve and the agent, and /healthz,
// which the DaemonSet's liveness probe reads: connections were limited to
// 64 and the rest waited to be accepted until one closed, after 2 minutes
// idle. Here 100 connections of each kind a user can hold (kept alive,
// slow headers, a body that never comes) are open, 300 in all; then
// /metrics, /healthz and the agent's /status answer, and the process holds
// no more sockets than its limit allows.
func TestServeHeldConnectionsCannotStarveScrapes(t *testing.T) {
	state, ws, specs := appliedWorkspace(t, "srvheld")
	for _, tc := range []struct {
		name  string
		args  []string
		paths []string
	}{
		{"serve", []string{"-state-dir", state, "-workspace", ws, "serve", "-listen", "127.0.0.1:0"}, []string{"/metrics"}},
		{"agent", []string{"-state-dir", state, "-workspace", ws, "agent", "-config", specs, "-listen", "127.0.0.1:0", "-log-json"}, []string{"/metrics", "/healthz", "/status"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startServed(t, tc.args...)
			holdConnections(t, strings.TrimPrefix(p.base, "http://"), 100)
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			for _, path := range tc.paths {
				code, body, err := fetch(c, p.base, path)
				if err != nil || code != 200 {
					t.Fatalf("GET %s with 300 connections held: %d %v\n%s\nlog:\n%s", path, code, err, body, p.log)
				}
				if path == "/metrics" && !strings.Contains(body, "\nprobectl_probe_up{probe=\"tracepoint.srvheld\"} 1\n") {
					t.Errorf("/metrics has no probectl_probe_up of tracepoint.srvheld:\n%s", body)
				}
				if path == "/healthz" && body != "ok\n" {
					t.Errorf("/healthz said %q", body)
				}
			}
			// The listener, the connections it holds, and one closing.
			n := sockets(t, p.cmd.Process.Pid, strings.TrimPrefix(p.base, "http://"))
			t.Logf("%s holds %d sockets on its port", tc.name, n)
			if n > maxConns+2 || n < 1 {
				t.Errorf("%s holds %d sockets with %d connections allowed", tc.name, n, maxConns)
			}
		})
	}
}

// The node agent's /healthz is what the DaemonSet's liveness probe reads,
// on a port any pod reaches: with 300 connections held (as above), a
// plan-only node agent still answers /healthz and /metrics.
func TestKubeAgentHeldConnectionsCannotStarveHealth(t *testing.T) {
	ctx := context.Background()
	c, _ := kubeLab(t)
	cfg, err := c.PodToken(ctx, "probectl-system", "probectl-agent", "held")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kc := filepath.Join(dir, "held.kubeconfig")
	if err := c.WriteKubeconfig(kc, cfg); err != nil {
		t.Fatal(err)
	}
	p := startServed(t, "-state-dir", filepath.Join(dir, "state"), "agent", "-kubernetes", "-node", "held", "-kubeconfig", kc,
		"-facts", "linux-6.1-amd64", "-listen", "127.0.0.1:0", "-log-json")
	holdConnections(t, strings.TrimPrefix(p.base, "http://"), 100)
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, path := range []string{"/healthz", "/metrics"} {
		code, body, err := fetch(hc, p.base, path)
		if err != nil || code != 200 {
			t.Fatalf("GET %s with 300 connections held: %d %v\n%s\nlog:\n%s", path, code, err, body, p.log)
		}
		if path == "/healthz" && body != "ok\n" {
			t.Errorf("/healthz said %q", body)
		}
	}
	if n := sockets(t, p.cmd.Process.Pid, strings.TrimPrefix(p.base, "http://")); n > maxConns+2 || n < 1 {
		t.Errorf("the node agent holds %d sockets with %d connections allowed", n, maxConns)
	}
}

// selfSigned writes a self-signed ECDSA certificate for 127.0.0.1 (which
// is also its own CA) and its key into dir as NAME.crt and NAME.key.
func selfSigned(t *testing.T, dir, name string, client bool) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".key"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// -web.config.file is the Prometheus exporter-toolkit's web config: serve
// (and both agents, through the same serveFlags) speaks TLS with the
// certificate it names, answers only with the right basic-auth password,
// and, with client_auth_type RequireAndVerifyClientCert, only to a client
// with a certificate of client_ca_file. /metrics used to be plain HTTP to
// every local user.
func TestServeWebConfig(t *testing.T) {
	state, ws, _ := appliedWorkspace(t, "srvweb")
	dir := t.TempDir()
	server := selfSigned(t, dir, "server", false)
	client := selfSigned(t, dir, "client", true)
	hash, err := bcrypt.GenerateFromPassword([]byte("right horse"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(server.Leaf)

	basic := filepath.Join(dir, "basic.yml")
	if err := os.WriteFile(basic, []byte(fmt.Sprintf("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  prom: %q\n", hash)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServed(t, "-state-dir", state, "-workspace", ws, "serve", "-listen", "127.0.0.1:0", "-web.config.file", basic)
	if !strings.HasPrefix(p.base, "https://") {
		t.Fatalf("serve with TLS says it serves at %s", p.base)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(user, pass string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("GET", p.base+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET /metrics as %q: %v\n%s", user, err, p.log)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, bad := range [][2]string{{"", ""}, {"prom", "wrong horse"}, {"other", "right horse"}} {
		if code, body := get(bad[0], bad[1]); code != 401 || strings.Contains(body, "probectl_") {
			t.Errorf("user %q password %q: %d, want 401\n%s", bad[0], bad[1], code, body)
		}
	}
	if code, body := get("prom", "right horse"); code != 200 || !strings.Contains(body, "\nprobectl_probe_up{probe=\"tracepoint.srvweb\"} 1\n") {
		t.Errorf("the right password: %d, want 200 with probectl_probe_up\n%s", code, body)
	}
	plain := strings.Replace(p.base, "https://", "http://", 1)
	if code, body, err := fetch(http.DefaultClient, plain, "/metrics"); err == nil && code == 200 {
		t.Errorf("plain HTTP was served metrics:\n%s", body)
	}

	mtls := filepath.Join(dir, "mtls.yml")
	if err := os.WriteFile(mtls, []byte("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: client.crt\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	q := startServed(t, "-state-dir", state, "-workspace", ws, "serve", "-listen", "127.0.0.1:0", "-web.config.file", mtls)
	if code, _, err := fetch(c, q.base, "/metrics"); err == nil {
		t.Errorf("a client without a certificate was answered %d", code)
	}
	withCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{client}}}}
	if code, body, err := fetch(withCert, q.base, "/metrics"); err != nil || code != 200 || !strings.Contains(body, "probectl_probe_up{probe=\"tracepoint.srvweb\"} 1") {
		t.Errorf("a client with its certificate: %d %v\n%s\nlog:\n%s", code, err, body, q.log)
	}

	// A web config that does not read is an error at start, naming it.
	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(bad, []byte("basic_auth_users:\n  prom: not-a-bcrypt-hash\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errs strings.Builder
	if code := run([]string{"-state-dir", state, "-workspace", ws, "serve", "-listen", "127.0.0.1:0", "-web.config.file", bad}, &out, &errs); code != 1 || !strings.Contains(errs.String(), "-web.config.file "+bad+": ") {
		t.Errorf("serve with a bad web config: exit %d\n%s%s", code, &out, &errs)
	}
}

// connectAs connects to the unix socket at path from a thread of its own
// whose effective uid and gid are uid and gid, with no supplementary
// groups, as that user would (the kernel checks write permission on the
// socket at connect). The thread is never given back to the Go runtime.
func connectAs(path string, uid, gid int) error {
	res := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread ends with the goroutine
		for _, sc := range [][4]uintptr{
			{syscall.SYS_SETGROUPS, 0, 0, 0},
			{syscall.SYS_SETRESGID, ^uintptr(0), uintptr(gid), ^uintptr(0)},
			{syscall.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)},
		} {
			if _, _, e := syscall.RawSyscall(sc[0], sc[1], sc[2], sc[3]); e != 0 {
				res <- fmt.Errorf("syscall %d: %w", sc[0], e)
				return
			}
		}
		fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			res <- err
			return
		}
		defer syscall.Close(fd)
		res <- syscall.Connect(fd, &syscall.SockaddrUnix{Name: path})
	}()
	return <-res
}

// unixClient is an HTTP client whose every request goes to the socket.
func unixClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}}
}

// /metrics carries comm, paths and str() data, and any local user could
// read it from the TCP port. -listen unix:PATH serves on a unix socket
// with -listen-mode and -listen-group set before anyone can connect: here
// a scrape over it works, the socket is root's with mode 0660, and the
// user nobody cannot connect, while with mode 0666 it can (so the check
// is real). A symlink planted at the path, a path that is not a socket, a
// directory others may write, and a socket another server listens on are
// refused; a stale socket is replaced; the socket is removed at exit.
func TestServeUnixSocket(t *testing.T) {
	state, ws, _ := appliedWorkspace(t, "srvunix")
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} { // the test's own, 0700: nobody may reach the socket, its mode decides
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "metrics.sock")
	const nobody = 65534
	for _, tc := range []struct {
		mode      string
		nobodyMay bool
	}{{"0660", false}, {"0666", true}} {
		p := startServed(t, "-state-dir", state, "-workspace", ws, "serve", "-listen", "unix:"+sock, "-listen-mode", tc.mode, "-listen-group", "0")
		if p.base != "unix:"+sock {
			t.Fatalf("serve says it serves at %s", p.base)
		}
		st, err := os.Lstat(sock)
		if err != nil {
			t.Fatal(err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		if st.Mode().Type() != os.ModeSocket || fmt.Sprintf("%04o", st.Mode().Perm()) != tc.mode || sys.Uid != 0 || sys.Gid != 0 {
			t.Errorf("the socket is %v uid %d gid %d, want a socket %s of root", st.Mode(), sys.Uid, sys.Gid, tc.mode)
		}
		code, body, err := fetch(unixClient(sock), "http://probectl", "/metrics")
		if err != nil || code != 200 || !strings.Contains(body, "\nprobectl_probe_up{probe=\"tracepoint.srvunix\"} 1\n") {
			t.Errorf("a scrape over the socket: %d %v\n%s\nlog:\n%s", code, err, body, p.log)
		}
		err = connectAs(sock, nobody, nobody)
		if tc.nobodyMay && err != nil {
			t.Errorf("mode %s: nobody cannot connect: %v", tc.mode, err)
		}
		if !tc.nobodyMay && !errors.Is(err, syscall.EACCES) {
			t.Errorf("mode %s: nobody connecting: %v, want permission denied", tc.mode, err)
		}
		// A second server on the same path is refused.
		var out, errs strings.Builder
		if code := run([]string{"-state-dir", state, "-workspace", ws, "serve", "-listen", "unix:" + sock}, &out, &errs); code != 1 || !strings.Contains(errs.String(), "another server listens on it") {
			t.Errorf("a second serve on %s: exit %d\n%s%s", sock, code, &out, &errs)
		}
		p.stop()
		if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the socket after serve stopped: %v", err)
		}
	}

	refused := func(path, why string) {
		t.Helper()
		var out, errs strings.Builder
		if code := run([]string{"-state-dir", state, "-workspace", ws, "serve", "-listen", "unix:" + path}, &out, &errs); code != 1 || !strings.Contains(errs.String(), why) {
			t.Errorf("serve on %s: exit %d, want %q\n%s%s", path, code, why, &out, &errs)
		}
	}
	// A symlink planted at the path: neither followed nor removed.
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.sock")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	refused(link, "exists and is not a socket")
	if b, err := os.ReadFile(target); err != nil || string(b) != "keep" {
		t.Errorf("the symlink's target: %q %v", b, err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode().Type() != os.ModeSymlink {
		t.Errorf("the symlink: %v %v", st, err)
	}
	refused(target, "exists and is not a socket")
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o1777); err != nil {
		t.Fatal(err)
	}
	refused(filepath.Join(open, "m.sock"), "writable by its group or by anyone")
	refused("rel.sock", "must be absolute")
	var out, errs strings.Builder
	if code := run([]string{"-state-dir", state, "-workspace", ws, "serve", "-listen", "127.0.0.1:0", "-listen-mode", "0600"}, &out, &errs); code != 1 || !strings.Contains(errs.String(), "-listen-mode is for a unix socket") {
		t.Errorf("-listen-mode with TCP: exit %d\n%s%s", code, &out, &errs)
	}

	// A stale socket (its server gone) is replaced.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	p := startServed(t, "-state-dir", state, "-workspace", ws, "serve", "-listen", "unix:"+sock)
	if code, _, err := fetch(unixClient(sock), "http://probectl", "/metrics"); err != nil || code != 200 {
		t.Errorf("serve over a stale socket: %d %v\n%s", code, err, p.log)
	}
}

// A scrape being rendered is the last connection closed for a new one:
// with a limit of 8 and a request held in its handler, 60 connections
// held open (kept alive, slow headers, bodies that never come: the last
// in a request too, outside the handler) close one another, and the
// request in the handler is answered in full when it ends.
func TestConnLimitSparesHandlers(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := limitConns(inner, 8)
	entered, release := make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(rw http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		fmt.Fprint(rw, "rendered in full\n")
	})
	mux.HandleFunc("/", func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(rw, r)
			return
		}
		fmt.Fprint(rw, "root\n")
	})
	srv, served := (&serveFlags{}).serve(ln, mux, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer func() {
		srv.Close()
		<-served
	}()
	base := "http://" + inner.Addr().String()
	type result struct {
		code int
		body string
		err  error
	}
	slow := make(chan result, 1)
	go func() {
		code, body, err := fetch(&http.Client{}, base, "/slow")
		slow <- result{code, body, err}
	}()
	select {
	case <-entered:
	case r := <-slow:
		t.Fatalf("/slow answered before its handler ran: %+v", r)
	}
	holdConnections(t, inner.Addr().String(), 20)
	// Once all 8 are in a request (the last bodies read their headers), a
	// new connection must close one of them: not the one in its handler.
	// On a busy machine a connection can go idle after the evictions that
	// would have closed it: another pending body, every second the 8 are
	// not all in a request, closes the one waiting longest.
	l := ln.(*connLimit)
	more := time.Now().Add(time.Second)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(more) {
			more = time.Now().Add(time.Second)
			c, err := net.DialTimeout("tcp", inner.Addr().String(), 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
		}
		l.mu.Lock()
		held, active := len(l.conns), 0
		for c := range l.conns {
			if c.active {
				active++
			}
		}
		l.mu.Unlock()
		if held > 8 {
			t.Fatalf("%d connections held with a limit of 8", held)
		}
		if held == 8 && active == 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections held, %d in a request", held, active)
		}
	}
	if code, body, err := fetch(&http.Client{}, base, "/"); err != nil || code != 200 || body != "root\n" {
		t.Errorf("GET / with 8 in a request: %d %q %v", code, body, err)
	}
	close(release)
	if r := <-slow; r.err != nil || r.code != 200 || r.body != "rendered in full\n" {
		t.Errorf("the request in its handler: %d %q %v, want 200 \"rendered in full\"", r.code, r.body, r.err)
	}
}
