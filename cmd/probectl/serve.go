package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/probectl/probectl/internal/buildinfo"
	"github.com/probectl/probectl/internal/engine"
	"github.com/probectl/probectl/internal/eventfile"
	"github.com/probectl/probectl/metrics"
	"github.com/probectl/probectl/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v2"
)

// defaultListen is serve's address: loopback only, on a port of its own.
const defaultListen = "127.0.0.1:9479"

// serveOptions are serve's flags.
type serveOptions struct {
	sf        *serveFlags
	maxSeries int
	events    *eventsOutFlags
}

// check refuses bad flags and a bad workspace name now, not at the first
// scrape.
func (o *serveOptions) check(g *globals) error {
	if o.maxSeries < 1 {
		return fmt.Errorf("-max-series %d: it must be at least 1", o.maxSeries)
	}
	if _, err := o.events.check(); err != nil {
		return err
	}
	w, err := runtime.Open(g.stateDir, g.workspace)
	if err != nil {
		return err
	}
	w.Close()
	return nil
}

func newServeCmd(g *globals) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve [-listen ADDR|unix:PATH] [-web.config.file FILE] [-max-series N] [-events-out PATH|-]",
		Short: "Serve what the applied probes measure as Prometheus metrics",
		Long: `Serve answers GET /metrics with every probe applied in the workspace, read
from the pinned maps at each scrape (README, "Serve: Prometheus metrics"),
and GET /debug/pprof/probectl/ADDRESS with the pprof profile of the probe's
aggregation keyed by stacks (?aggregation=NAME picks one), cumulative since
it was applied (README, "pprof").
It runs until SIGINT or SIGTERM; the probes stay applied. With
-events-out it also writes the workspace's events as NDJSON, following the
event buffer through applies and destroys.

` + serveFlagsHelp + `  -max-series N      the most aggregation series one scrape returns; the
                     rest are counted in probectl_scrape_series_cut
` + eventsOutHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(g); err != nil {
				return err
			}
			if err := requireBPF("serve"); err != nil {
				return err
			}
			return serveWorkspace(cmd, g, o)
		},
	}
	o.sf = addServeFlags(cmd.Flags())
	cmd.Flags().IntVar(&o.maxSeries, "max-series", metrics.DefaultMaxSeries, "the most aggregation series one scrape returns")
	o.events = addEventsOutFlags(cmd)
	return cmd
}

// serveWorkspace serves the workspace's metrics (and, with -events-out, writes its
// events) until SIGINT or SIGTERM, the server or the event sink ends.
func serveWorkspace(cmd *cobra.Command, g *globals, o *serveOptions) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler(g.stateDir, g.workspace, o.maxSeries))
	mux.Handle(pprofPath, pprofHandler(g.stateDir, g.workspace))
	mux.HandleFunc("/", func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(rw, r)
			return
		}
		fmt.Fprintf(rw, "probectl serve: workspace %q; metrics at /metrics, profiles at %sADDRESS\n", g.workspace, pprofPath)
	})
	ln, err := o.sf.open()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	sink, err := startEventSink(ctx, g, o.events, cmd.OutOrStdout(), cmd.ErrOrStderr())
	if err != nil {
		ln.Close()
		return err
	}
	srv, done := o.sf.serve(ln, mux, slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)))
	// With the events on stdout, stdout carries nothing else.
	say := cmd.OutOrStdout()
	if o.events.out == "-" {
		say = cmd.ErrOrStderr()
	}
	fmt.Fprintf(say, "Serving workspace %q at %s/metrics\n", g.workspace, o.sf.base(ln))
	var serr error
	select {
	case serr = <-done:
	case <-sink.Done():
	case <-ctx.Done():
	}
	return shutdown(srv, sink, serr)
}

// shutdown stops the server (waiting up to 5s for its requests) and the
// event sink; serr is what ended serving.
func shutdown(srv *http.Server, sink *eventfile.Sink, serr error) error {
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, context.DeadlineExceeded) && serr == nil {
		serr = err
	}
	if err := sink.Stop(); err != nil && serr == nil {
		serr = err
	}
	if errors.Is(serr, http.ErrServerClosed) {
		serr = nil
	}
	return serr
}

// metricsHandler serves the workspace's metrics, probectl's own process
// and Go runtime metrics, and extra (the agent's).
func metricsHandler(stateDir, workspace string, maxSeries int, extra ...prometheus.Collector) http.Handler {
	return registryHandler(append(extra, &metrics.Collector{StateDir: stateDir, Workspace: workspace, MaxSeries: maxSeries})...)
}

// registryHandler serves cs and probectl's own process and Go runtime
// metrics and probectl_build_info (the node agent's collectors are its
// ProbeSets').
func registryHandler(cs ...prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
		buildinfo.Read().Collector(),
	)
	reg.MustRegister(cs...)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
	})
}

// maxConns bounds the HTTP connections serve and the agents hold open at
// once: each is a file descriptor of a root process that needs its own to
// apply (state files, pins, BPF objects).
const maxConns = 64

// newHTTPServer is serve's and the agents' server. Every phase of a
// connection has a deadline: a keep-alive connection left idle is closed
// after IdleTimeout (without one, Go's server waits for the next request
// for ever), and one that sends its headers slowly after
// ReadHeaderTimeout.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute, // past it a handler's context ends: as long as WriteTimeout
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
}

// serveFlags say where and how serve and both agents serve HTTP: a TCP
// address or a unix socket, and the Prometheus exporter-toolkit's web
// config (TLS, client certificates, basic auth).
type serveFlags struct {
	fs        *pflag.FlagSet
	listen    string
	mode      string
	group     string
	webConfig string
}

// addServeFlags registers -listen, -listen-mode, -listen-group and
// -web.config.file on f.
func addServeFlags(f *pflag.FlagSet) *serveFlags {
	s := &serveFlags{fs: f}
	f.StringVar(&s.listen, "listen", defaultListen, "the address to listen on: HOST:PORT, or unix:PATH")
	f.StringVar(&s.mode, "listen-mode", "0660", "the file mode of the -listen unix:PATH socket")
	f.StringVar(&s.group, "listen-group", "", "the group of the -listen unix:PATH socket, a name or a gid (default the process's)")
	f.StringVar(&s.webConfig, "web.config.file", "", "the web config of TLS, client certificates and basic auth (Prometheus exporter-toolkit)")
	return s
}

// serveFlagsHelp documents the flags in a command's long help.
const serveFlagsHelp = `  -listen ADDR       where to listen: HOST:PORT (default ` + defaultListen + `:
                     loopback only; port 0 picks one, printed at start), or
                     unix:PATH, a unix socket only its mode lets connect
  -listen-mode MODE  the unix socket's mode (default 0660)
  -listen-group G    the unix socket's group, a name or a gid (default the
                     process's)
  -web.config.file F TLS, client certificates and basic auth, in the web
                     config of the Prometheus exporter-toolkit (README,
                     "Serve"); it is read again at each connection
`

// open checks the flags and listens: on TCP, or on a unix socket made with
// its mode and group before anyone can connect (listenUnix). The listener
// holds at most maxConns connections (limitConns).
func (s *serveFlags) open() (net.Listener, error) {
	if s.webConfig != "" {
		if err := web.Validate(s.webConfig); err != nil {
			return nil, fmt.Errorf("-web.config.file %s: %w", s.webConfig, err)
		}
	}
	path, isUnix := strings.CutPrefix(s.listen, "unix:")
	if !isUnix {
		for _, name := range []string{"listen-mode", "listen-group"} {
			if s.fs.Changed(name) {
				return nil, fmt.Errorf("-%s is for a unix socket: -listen unix:PATH", name)
			}
		}
		ln, err := net.Listen("tcp", s.listen)
		if err != nil {
			return nil, fmt.Errorf("-listen %s: %w", s.listen, err)
		}
		return limitConns(ln, maxConns), nil
	}
	mode, err := strconv.ParseUint(s.mode, 8, 32)
	if err != nil || mode > 0o777 {
		return nil, fmt.Errorf("-listen-mode %q: write the permission bits in octal, such as 0660", s.mode)
	}
	gid := -1
	if s.group != "" {
		if gid, err = lookupGroup(s.group); err != nil {
			return nil, fmt.Errorf("-listen-group %s: %w", s.group, err)
		}
	}
	ln, err := listenUnix(path, os.FileMode(mode), gid)
	if err != nil {
		return nil, fmt.Errorf("-listen %s: %w", s.listen, err)
	}
	return limitConns(ln, maxConns), nil
}

// lookupGroup reads a group's name or gid.
func lookupGroup(g string) (int, error) {
	if n, err := strconv.Atoi(g); err == nil && n >= 0 {
		return n, nil
	}
	grp, err := user.LookupGroup(g)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(grp.Gid)
}

// base is where ln serves, as a URL's scheme and host (http://ADDR or
// https://ADDR), or unix:PATH.
func (s *serveFlags) base(ln net.Listener) string {
	if ln.Addr().Network() == "unix" {
		return "unix:" + ln.Addr().String()
	}
	if s.tls() {
		return "https://" + ln.Addr().String()
	}
	return "http://" + ln.Addr().String()
}

// tls says whether the web config turns TLS on (open validated it).
func (s *serveFlags) tls() bool {
	if s.webConfig == "" {
		return false
	}
	b, err := os.ReadFile(s.webConfig)
	if err != nil {
		return false
	}
	var c web.Config
	return yaml.Unmarshal(b, &c) == nil && c.TLSConfig.IsEnabled()
}

// serve serves h on ln (from open) with the web config's TLS and
// authentication until the server is shut down; served receives Serve's
// error. log gets the exporter-toolkit's warnings and errors (a web config
// that no longer reads).
func (s *serveFlags) serve(ln net.Listener, h http.Handler, log *slog.Logger) (srv *http.Server, served <-chan error) {
	srv = newHTTPServer(h)
	if l, ok := ln.(*connLimit); ok {
		l.install(srv)
	}
	done := make(chan error, 1)
	flags := &web.FlagConfig{WebConfigFile: &s.webConfig}
	quiet := slog.New(warnings{log.Handler()})
	go func() {
		err := web.Serve(ln, srv, flags, quiet)
		ln.Close() // when the web config failed before serving
		done <- err
	}()
	return srv, done
}

// warnings passes on the records of a handler from slog.LevelWarn up.
type warnings struct{ slog.Handler }

func (w warnings) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}
func (w warnings) WithAttrs(as []slog.Attr) slog.Handler { return warnings{w.Handler.WithAttrs(as)} }
func (w warnings) WithGroup(g string) slog.Handler       { return warnings{w.Handler.WithGroup(g)} }

// listenUnix listens on a unix socket at path with mode and group (gid -1:
// the process's). Connecting needs write permission on the socket, so its
// mode decides which local users may scrape. The socket is bound in a
// directory of its own (0700), given its mode and group there, and renamed
// into place: nobody can connect to it before, whatever the umask, and no
// symlink at path is followed. path's directory must be one that only root
// may write (engine.TrustedDir), or someone else could replace the socket with
// theirs; what is at path is replaced only when it is a socket nobody
// listens on (one left by a process that died).
func listenUnix(path string, mode os.FileMode, gid int) (net.Listener, error) {
	if !filepath.IsAbs(path) {
		return nil, errors.New("the socket's path must be absolute")
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(filepath.Clean(path)))
	if err != nil {
		return nil, err
	}
	if err := engine.TrustedDir(dir); err != nil {
		return nil, fmt.Errorf("the socket's directory: %w (whoever may write it could replace the socket)", err)
	}
	path = filepath.Join(dir, filepath.Base(path))
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket: remove it, or listen on another path", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another server listens on it", path)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	tmp, err := os.MkdirTemp(dir, ".probectl-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bound := filepath.Join(tmp, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: bound, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false) // its name moves: Close removes it
	err = os.Chown(bound, -1, gid)
	if err == nil {
		err = os.Chmod(bound, mode)
	}
	if err == nil {
		err = os.Rename(bound, path)
	}
	var st os.FileInfo
	if err == nil {
		st, err = os.Lstat(path)
	}
	if err != nil {
		ln.Close()
		return nil, err
	}
	return &unixListener{UnixListener: ln, path: path, st: st}, nil
}

// unixListener is listenUnix's socket: Close removes it, unless another
// file took its name since.
type unixListener struct {
	*net.UnixListener
	path string
	st   os.FileInfo
}

func (l *unixListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	if st, serr := os.Lstat(l.path); serr == nil && os.SameFile(st, l.st) {
		os.Remove(l.path)
	}
	return err
}

// limitConns makes ln hold at most n connections open at once. The one
// past the limit is accepted all the same, and another is closed to make
// room for it: the one that has waited longest for a request (idle
// between keep-alive requests, or new and not sent one yet); else the one
// longest in a request outside its handler (a body that never comes, a
// response the client does not read); else the one longest in its
// handler. Connections held open by a local user thus never keep a scrape
// or /healthz waiting (they used to: 64 of them, each kept alive by a 404,
// and every scrape waited in the accept queue), and cut a scrape being
// rendered only when every connection is. install must set up the
// server.
func limitConns(ln net.Listener, n int) net.Listener {
	return &connLimit{Listener: ln, n: n, conns: map[*limitedConn]struct{}{}}
}

type connLimit struct {
	net.Listener
	n     int
	mu    sync.Mutex
	conns map[*limitedConn]struct{}
}

type limitedConn struct {
	net.Conn
	l        *connLimit
	once     sync.Once
	active   bool      // in a request (l.mu)
	handlers int       // requests in the handler: HTTP/2 has several (l.mu)
	since    time.Time // when it last went in or out of one (l.mu)
}

// connKey is the context key of a request's *limitedConn.
type connKey struct{}

// install makes srv tell l where each connection is: in a request or
// not (ConnState), and in the handler or not.
func (l *connLimit) install(srv *http.Server) {
	srv.ConnState = l.track
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if lc := l.conn(c); lc != nil {
			ctx = context.WithValue(ctx, connKey{}, lc)
		}
		return ctx
	}
	h := srv.Handler
	srv.Handler = http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if lc, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
			l.mu.Lock()
			lc.handlers++
			l.mu.Unlock()
			defer func() {
				l.mu.Lock()
				lc.handlers--
				l.mu.Unlock()
			}()
		}
		h.ServeHTTP(rw, r)
	})
}

// conn is the *limitedConn of l that c is or wraps (TLS), or nil.
func (l *connLimit) conn(c net.Conn) *limitedConn {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = tc.NetConn()
	}
	if lc, ok := c.(*limitedConn); ok && lc.l == l {
		return lc
	}
	return nil
}

func (l *connLimit) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	lc := &limitedConn{Conn: c, l: l, since: time.Now()}
	var evict *limitedConn
	l.mu.Lock()
	if len(l.conns) >= l.n {
		evict = l.victim()
		delete(l.conns, evict)
	}
	l.conns[lc] = struct{}{}
	l.mu.Unlock()
	if evict != nil {
		evict.Close()
	}
	return lc, nil
}

// victim is the connection to close for a new one (l.mu held): of the
// first kind there is, waiting for a request, in one outside the
// handler, in the handler, the one there the longest.
func (l *connLimit) victim() *limitedConn {
	var oldest [3]*limitedConn
	for c := range l.conns {
		k := 0
		if c.handlers > 0 {
			k = 2
		} else if c.active {
			k = 1
		}
		if oldest[k] == nil || c.since.Before(oldest[k].since) {
			oldest[k] = c
		}
	}
	for _, c := range oldest {
		if c != nil {
			return c
		}
	}
	return nil
}

// track is the server's ConnState: it follows each connection in and out
// of its requests (an HTTP/2 connection is active while it has a stream).
func (l *connLimit) track(c net.Conn, st http.ConnState) {
	lc := l.conn(c)
	if lc == nil {
		return
	}
	l.mu.Lock()
	lc.active = st == http.StateActive
	lc.since = time.Now()
	l.mu.Unlock()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return err
}
