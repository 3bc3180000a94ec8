package runtime_test

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probectl/probectl/internal/testenv"
)

// postgresExample is the example spec TestUSDTPostgres applies, as it is.
const postgresExample = "../examples/usdt/postgres.hcl"

// TestUSDTPostgres applies examples/usdt/postgres.hcl (PostgreSQL's
// query__start and query__done: a latency histogram and the queries by
// their text) to a private PostgreSQL 15 instance of its own (initdb in a
// temporary directory, its socket there, no TCP, run as the postgres
// user), already running when the probes are applied, runs exactly n
// queries through psql, and reads them back: n queries of that text, and
// one latency observation per query, none negative.
func TestUSDTPostgres(t *testing.T) {
	requireRoot(t)
	const bin = "/usr/lib/postgresql/15/bin"
	if _, err := os.Stat(filepath.Join(bin, "postgres")); err != nil {
		testenv.Absent(t, "no PostgreSQL 15 (postgresql-15): %v", err)
	}
	pg := startPostgres(t, bin)
	src, err := os.ReadFile(postgresExample)
	if err != nil {
		t.Fatal(err)
	}
	w := namedWorkspace(t, "usdtpg")
	s, _ := apply(t, w, string(src))

	const n = 57
	const query = "SELECT 1 AS probectl_usdt_query;"
	script := filepath.Join(pg.dir, "queries.sql")
	if err := os.WriteFile(script, []byte(strings.Repeat(query+"\n", n)), 0o644); err != nil {
		t.Fatal(err)
	}
	pg.run(t, filepath.Join(bin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", pg.dir, "-p", pg.port,
		"-U", "postgres", "-d", "postgres", "-f", script)

	queries := values(aggregation(t, w, s, "user.pg_query_done", "queries"))
	var mine, all int64
	for text, c := range queries {
		all += c
		if strings.Contains(text, "probectl_usdt_query") {
			mine += c
		}
	}
	if mine != n {
		t.Errorf("%d queries counted with the script's text, want %d: %v", mine, n, queries)
	}
	hist := aggregation(t, w, s, "user.pg_query_done", "latency_us")
	var observed int64
	for _, e := range hist.Entries {
		for _, b := range e.Buckets {
			observed += int64(b.Count)
			if b.Count > 0 && b.High <= 0 {
				t.Errorf("%d latencies below %d µs", b.Count, b.High)
			}
		}
	}
	// Every query done had its start stored: one observation each.
	if observed != all {
		t.Errorf("%d latencies observed for %d queries done: %v", observed, all, queries)
	}
	t.Logf("queries by text: %v; latency buckets: %+v", queries, hist.Entries)
}

// postgresInstance is a PostgreSQL server of a test's own.
type postgresInstance struct {
	dir, port string
	cred      *syscall.Credential
}

// startPostgres initialises a database cluster in a temporary directory
// and starts its server there as the postgres user (PostgreSQL refuses
// to run as root), listening on a socket in that directory only; the
// server is shut down when the test ends.
func startPostgres(t *testing.T, bin string) *postgresInstance {
	t.Helper()
	u, err := user.Lookup("postgres")
	if err != nil {
		testenv.Absent(t, "no postgres user (the postgresql-15 package makes it): %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// Not t.TempDir: the postgres user must reach it, and a socket's
	// path is at most 107 bytes.
	dir, err := os.MkdirTemp("", "probectl-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	pg := &postgresInstance{dir: dir, port: "5432", cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	data := filepath.Join(pg.dir, "data")
	pg.run(t, filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "--no-instructions")
	server := pg.command(filepath.Join(bin, "postgres"), "-D", data, "-k", pg.dir, "-p", pg.port,
		"-c", "listen_addresses=", "-c", "fsync=off")
	logPath := filepath.Join(pg.dir, "server.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	server.Stdout, server.Stderr = log, log
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = server.Process.Signal(syscall.SIGINT) // fast shutdown
		_ = server.Wait()
	})
	// Ready once pg_isready says so; the server's log tells why not.
	for i := 0; ; i++ {
		if exec.Command(filepath.Join(bin, "pg_isready"), "-q", "-h", pg.dir, "-p", pg.port).Run() == nil {
			return pg
		}
		if i == 1200 { // two minutes, at a load of 20
			out, _ := os.ReadFile(logPath)
			t.Fatalf("PostgreSQL did not accept connections:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// command runs name as the postgres user, in the C locale.
func (pg *postgresInstance) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = pg.dir
	cmd.Env = []string{"LC_ALL=C", "PATH=/usr/bin:/bin", "HOME=" + pg.dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	return cmd
}

// run runs name as the postgres user and fails the test when it fails.
func (pg *postgresInstance) run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := pg.command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", fmt.Sprint(append([]string{filepath.Base(name)}, args...)), err, out)
	}
}
